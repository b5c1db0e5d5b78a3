// Package docscheck holds no code, only a test: the user docs' reference of metrics and Event
// reasons (docs/observability.md) against the plugin's source (pkg/computedomain), read with
// go/parser so a rename in code alone, or in the docs alone, fails `make test`. The plugin's
// arguments and reason texts are checked on the Rust side (guest/policy/tests/docs.rs), where
// their one owner, the policy, lives. agree_test.go holds the install story to one place
// (docs/install.md) and the docs, the chart's values and Chart.yaml to one another: the memory
// sum, when to raise the guest memory limit, kubeVersion, the stock manifest's path, what each
// mode does, what the image is, and a chart version naming one chart (chart/released.lock).
package docscheck
