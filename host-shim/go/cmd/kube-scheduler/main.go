// Command kube-scheduler is the upstream kube-scheduler with the ComputeDomainPlacement plugin
// registered. Nothing else lives here: the imports are upstream's cmd/kube-scheduler/scheduler.go
// (k8s.io/kubernetes v1.37.2) imports, so the binary registers what upstream's does (client-go's
// rest_client_*, workqueue_* and leader_election_* metrics, kubernetes_build_info, the JSON log
// format), and e2e/parity_test.go fails if a flag or metric family of the stock binary is missing.
// `make scheduler` stamps the version (k8s.io/component-base/version) as v<kubernetes>-cdplace.<ours>.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics: rest_client_*, workqueue_*, leader_election_*
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(computedomain.Name, computedomain.New))))
}
