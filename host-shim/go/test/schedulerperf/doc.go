// Package schedulerperf runs upstream kube-scheduler's own benchmark suite, scheduler_perf
// (k8s.io/kubernetes/test/integration/scheduler_perf at v1.37.2), with ComputeDomainPlacement in
// its out-of-tree registry: an in-process kube-apiserver on an etcd from PATH, the real
// scheduler, and upstream's throughput collector, which writes its data items as JSON.
//
// BenchmarkPerfScheduling (schedulerperf_test.go) takes a scheduler_perf config through
// -cdplace-config: "upstream-dra" (the default) is upstream's dra/performance-config.yaml from
// the module cache, each test case beside a twin named <name>WithComputeDomainPlacement that runs
// the same workloads under the cdplace profile (config/scheduler-config-cdplace.yaml); a path
// names a config of our own, such as config/computedomain-config.yaml (ComputeDomains on NVL72
// racks, cdplace against the stock profile with the clique pod-affinity baseline).
//
// The package owns deriving the config that is run (Derive: paths made absolute,
// upstream's throughput thresholds dropped, twins and the ComputeDomain CRD added) and the
// placement summary of ComputeDomain pods (SummarizePlacement); NVIDIA's ComputeDomain
// controller is emulated in every workload by test/nvdriver, as in the e2e suite. make bench-upstream
// (e2e/cmd/cdplace-bench-upstream) builds the test binary once and alternates the variants.
package schedulerperf
