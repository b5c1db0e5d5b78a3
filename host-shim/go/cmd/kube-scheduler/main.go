// Command kube-scheduler is the upstream kube-scheduler with the ComputeDomainPlacement plugin
// registered. Nothing else lives here.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(computedomain.Name, computedomain.New))))
}
