package harness

import (
	"context"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

// ComputeDomainGVR is the ComputeDomain custom resource.
var ComputeDomainGVR = nvdriver.ComputeDomainGVR

// DriverEmulator plays the NVIDIA DRA driver's controller for ComputeDomains (host-shim's
// test/nvdriver, shared with the scheduler_perf benchmark): for each domain it creates the
// workload ResourceClaimTemplate named in spec.channel and deletes it with the domain.
type DriverEmulator = nvdriver.Emulator

// StartDriverEmulator runs the emulator until ctx ends, once it has seen every ComputeDomain.
func StartDriverEmulator(ctx context.Context, c kubernetes.Interface, dyn dynamic.Interface) (*DriverEmulator, error) {
	d := nvdriver.Start(ctx, c, dyn)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.WaitForSync(wait); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}
