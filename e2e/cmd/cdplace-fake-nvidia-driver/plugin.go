package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/e2e/nvnode"
)

// gpuPlugin plays the gpu.nvidia.com kubelet plugin: the GPUs are simulated, so Prepare hands the
// kubelet the allocated devices with no CDI device (the container runtime then adds nothing).
type gpuPlugin struct{ stats *stats }

func (p *gpuPlugin) PrepareResourceClaims(_ context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		p.stats.prepared(nvnode.GPUDriver, "")
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devicesOf(c, nvnode.GPUDriver)}
	}
	return out, nil
}

func (p *gpuPlugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = nil
	}
	return out, nil
}

func (p *gpuPlugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg, "driver", nvnode.GPUDriver)
}

// cdPlugin plays the compute-domain.nvidia.com kubelet plugin: Prepare and Unprepare apply the
// driver's node rules (e2e/nvnode, shared with the process-level emulator) and write the node's
// ComputeDomain label as the driver does.
type cdPlugin struct {
	client   kubernetes.Interface
	nodeName string
	lag      time.Duration // how long the label outlives the domain's last claim (daemon teardown)
	stats    *stats

	mu       sync.Mutex
	rules    *nvnode.Node
	claims   map[types.UID]nvnode.Claim // prepared here, for Unprepare (which gets only names)
	removals map[string]*time.Timer
}

func newCDPlugin(client kubernetes.Interface, node string, hostManaged bool, lag time.Duration, st *stats) *cdPlugin {
	return &cdPlugin{client: client, nodeName: node, lag: lag, stats: st,
		rules: nvnode.NewNode("", hostManaged), claims: map[types.UID]nvnode.Claim{}, removals: map[string]*time.Timer{}}
}

func (p *cdPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	// The driver reads the label from the Node object on every Prepare; so does this plugin, so a
	// label left behind by an earlier plugin (or put there by hand) refuses as it would.
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", p.nodeName, err)
	}
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		cl := nvnode.ClaimOf(c)
		p.mu.Lock()
		if len(p.claims) == 0 || p.rules.Label == "" {
			p.rules.Label = node.Labels[nvnode.DomainNodeLabel]
		}
		setLabel, refused := p.rules.Prepare([]nvnode.Claim{cl})
		if refused == nil {
			p.claims[c.UID] = cl
			if t := p.removals[cl.Domain]; t != nil {
				t.Stop()
				delete(p.removals, cl.Domain)
			}
		}
		p.mu.Unlock()
		if refused != nil {
			p.stats.refused(cl, refused.Message)
			out[c.UID] = kubeletplugin.PrepareResult{Err: refused}
			continue
		}
		if setLabel != "" {
			if err := p.patchLabel(ctx, &setLabel); err != nil {
				p.mu.Lock()
				p.rules.Unprepare([]nvnode.Claim{cl})
				p.rules.RemoveLabel(setLabel)
				delete(p.claims, c.UID)
				p.mu.Unlock()
				out[c.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("error adding Node label for ComputeDomain: %w", err)}
				continue
			}
		}
		p.stats.prepared(nvnode.ComputeDomainDriver, cl.Domain)
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devicesOf(c, nvnode.ComputeDomainDriver)}
	}
	p.stats.setLabel(p.label())
	return out, nil
}

func (p *cdPlugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range claims {
		out[c.UID] = nil
		cl, ok := p.claims[c.UID]
		if !ok {
			continue
		}
		delete(p.claims, c.UID)
		p.stats.unprepared()
		for _, domain := range p.rules.Unprepare([]nvnode.Claim{cl}) {
			if t := p.removals[domain]; t != nil {
				t.Stop()
			}
			p.removals[domain] = time.AfterFunc(p.lag, func() { p.removeLabel(context.WithoutCancel(ctx), domain) })
		}
	}
	return out, nil
}

func (p *cdPlugin) removeLabel(ctx context.Context, domain string) {
	p.mu.Lock()
	due := p.rules.RemoveLabel(domain)
	delete(p.removals, domain)
	p.mu.Unlock()
	if !due {
		return
	}
	if err := p.patchLabel(ctx, nil); err != nil {
		klog.FromContext(ctx).Error(err, "remove ComputeDomain label", "node", p.nodeName, "domain", domain)
	}
	p.stats.setLabel(p.label())
}

func (p *cdPlugin) label() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rules.Label
}

func (p *cdPlugin) patchLabel(ctx context.Context, value *string) error {
	v := "null"
	if value != nil {
		v = strconv.Quote(*value)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, nvnode.DomainNodeLabel, v)
	_, err := p.client.CoreV1().Nodes().Patch(ctx, p.nodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (p *cdPlugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg, "driver", nvnode.ComputeDomainDriver)
}

// devicesOf lists the claim's allocated devices of one driver, for the kubelet.
func devicesOf(c *resourcev1.ResourceClaim, driver string) []kubeletplugin.Device {
	var out []kubeletplugin.Device
	if c.Status.Allocation == nil {
		return nil
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == driver {
			out = append(out, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
		}
	}
	return out
}

// stats counts what the kubelet asked and what the rules refused, and writes it to the ConfigMap
// nvnode-<node> in the plugin's namespace, which tests read.
type stats struct {
	client          kubernetes.Interface
	namespace, node string

	mu          sync.Mutex
	gpuPrepares int
	cdPrepares  int
	unprepares  int
	refusals    int
	lastRefusal string
	label       string
	kick        chan struct{}
}

func newStats(c kubernetes.Interface, namespace, node string) *stats {
	return &stats{client: c, namespace: namespace, node: node, kick: make(chan struct{}, 1)}
}

func (s *stats) prepared(driver, _ string) {
	s.mu.Lock()
	if driver == nvnode.GPUDriver {
		s.gpuPrepares++
	} else {
		s.cdPrepares++
	}
	s.mu.Unlock()
	s.poke()
}

func (s *stats) unprepared() {
	s.mu.Lock()
	s.unprepares++
	s.mu.Unlock()
	s.poke()
}

func (s *stats) refused(cl nvnode.Claim, msg string) {
	s.mu.Lock()
	s.refusals++
	s.lastRefusal = cl.Name + ": " + msg
	s.mu.Unlock()
	s.poke()
}

func (s *stats) setLabel(l string) {
	s.mu.Lock()
	s.label = l
	s.mu.Unlock()
	s.poke()
}

func (s *stats) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *stats) data() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]string{
		"node":                  s.node,
		"gpuPrepares":           strconv.Itoa(s.gpuPrepares),
		"computeDomainPrepares": strconv.Itoa(s.cdPrepares),
		"unprepares":            strconv.Itoa(s.unprepares),
		"refusals":              strconv.Itoa(s.refusals),
		"lastRefusal":           s.lastRefusal,
		"label":                 s.label,
	}
}

// run writes the ConfigMap whenever the counts change, until ctx ends.
func (s *stats) run(ctx context.Context) {
	s.poke()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		if err := s.write(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "write status ConfigMap")
			time.Sleep(time.Second)
			s.poke()
		}
	}
}

func (s *stats) write(ctx context.Context) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "nvnode-" + s.node, Namespace: s.namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "cdplace-fake-nvidia-driver"}},
		Data: s.data(),
	}
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	return err
}

// The simulated devices have no health to report; the kubelet then treats them as healthy.
func (p *gpuPlugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func (p *cdPlugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
