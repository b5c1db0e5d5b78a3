package computedomain

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// The ComputeDomain API may not be served (the NVIDIA driver is not installed yet, or was
// removed). Then no ComputeDomain informer runs, ComputeDomain pods are rejected at once with
// noCRDReason, and every other pod is scheduled as without the plugin. Discovery is asked
// again at most every crdRecheck, on demand from PreFilter and from a ticker, and the informer
// starts once the API appears.

// noCRDReason is the rejection of ComputeDomain pods while the API is not served.
var noCRDReason = fmt.Sprintf("the ComputeDomain API (%s.%s/%s) is not served by the API server; install the NVIDIA DRA driver's CRDs",
	ComputeDomainGVR.Resource, ComputeDomainGVR.Group, ComputeDomainGVR.Version)

// crdRecheck is the shortest time between two discovery requests; discoveryTimeout bounds one.
var (
	crdRecheck       = 30 * time.Second
	discoveryTimeout = 5 * time.Second
)

// crdWatch knows whether the ComputeDomain API is served and starts its informer when it is.
type crdWatch struct {
	logger klog.Logger
	client discovery.DiscoveryInterface
	start  func() error
	now    func() time.Time

	mu     sync.Mutex
	served bool
	last   time.Time
}

// served asks discovery whether the API server serves computedomains in the ComputeDomain
// group version. Any failure but "not found" is logged and counts as not served.
func computeDomainsServed(logger klog.Logger, client discovery.DiscoveryInterface) bool {
	type answer struct {
		ok  bool
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		list, err := client.ServerResourcesForGroupVersion(ComputeDomainGVR.GroupVersion().String())
		if err != nil {
			ch <- answer{err: err}
			return
		}
		for _, r := range list.APIResources {
			if r.Name == ComputeDomainGVR.Resource {
				ch <- answer{ok: true}
				return
			}
		}
		ch <- answer{}
	}()
	select {
	case a := <-ch:
		if a.err != nil && !apierrors.IsNotFound(a.err) {
			logger.V(2).Info("ComputeDomainPlacement: discovery of the ComputeDomain API failed", "err", a.err)
		}
		return a.ok
	case <-time.After(discoveryTimeout):
		logger.V(2).Info("ComputeDomainPlacement: discovery of the ComputeDomain API timed out", "timeout", discoveryTimeout)
		return false
	}
}

// Served reports what discovery last said, asking again first when it said "not served" at
// least crdRecheck ago.
func (w *crdWatch) Served() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served || w.now().Sub(w.last) < crdRecheck {
		return w.served
	}
	w.checkLocked()
	return w.served
}

// check asks discovery now.
func (w *crdWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.served {
		w.checkLocked()
	}
}

func (w *crdWatch) checkLocked() {
	w.last = w.now()
	if !computeDomainsServed(w.logger, w.client) {
		return
	}
	if err := w.start(); err != nil {
		w.logger.Error(err, "ComputeDomainPlacement: cannot start the ComputeDomain informer")
		return
	}
	w.served = true
	w.logger.Info("ComputeDomainPlacement: the ComputeDomain API is served; watching ComputeDomains")
}

// tick asks again every crdRecheck until the API is served or ctx ends.
func (w *crdWatch) tick(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, crdRecheck, false, func(context.Context) (bool, error) {
		return w.Served(), nil
	})
}
