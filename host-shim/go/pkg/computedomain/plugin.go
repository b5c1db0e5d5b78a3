// Package computedomain is the ComputeDomainPlacement scheduler plugin: a thin framework adapter
// over the cdplace policy component.
//
// File map: plugin.go (factory and extension points), state.go (CycleState), hints.go
// (EventsToRegister and QueueingHints), informers.go (feeding the policy's cluster view).
//
// PreFilter makes one policy call per ComputeDomain pod and stores the decision in CycleState;
// Filter and Score read it (no cgo or guest call per node). Pods without resource claims are
// skipped in Go without any call.
package computedomain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/apis/config"
	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// Name is the plugin's name in profiles and pluginConfig.
const Name = "ComputeDomainPlacement"

// Plugin is the ComputeDomainPlacement plugin.
type Plugin struct {
	handle  fwk.Handle
	args    *config.ComputeDomainPlacementArgs
	cluster *cdplace.Cluster
	keys    cdplace.Keys
	feed    *feed
}

var (
	_ fwk.PreFilterPlugin     = &Plugin{}
	_ fwk.PreFilterExtensions = &Plugin{}
	_ fwk.FilterPlugin        = &Plugin{}
	_ fwk.PreScorePlugin      = &Plugin{}
	_ fwk.ScorePlugin         = &Plugin{}
	_ fwk.ReservePlugin       = &Plugin{}
	_ fwk.EnqueueExtensions   = &Plugin{}
	_ fwk.SignPlugin          = &Plugin{}
)

// runtimes caches compiled components per source, so profiles share one.
var runtimes sync.Map // key string -> *cdplace.Runtime

func loadRuntime(args *config.ComputeDomainPlacementArgs) (*cdplace.Runtime, error) {
	key := fmt.Sprintf("%s|%d|%s", args.GuestPath, args.MemoryLimitBytes(), args.CallTimeout())
	if rt, ok := runtimes.Load(key); ok {
		return rt.(*cdplace.Runtime), nil
	}
	wasm := cdplace.GuestWasm
	if args.GuestPath != "" {
		b, err := os.ReadFile(args.GuestPath)
		if err != nil {
			return nil, fmt.Errorf("reading guestPath: %w", err)
		}
		wasm = b
	}
	rt, err := cdplace.NewRuntime(wasm, args.MemoryLimitBytes(), args.CallTimeout())
	if err != nil {
		return nil, err
	}
	actual, _ := runtimes.LoadOrStore(key, rt)
	return actual.(*cdplace.Runtime), nil
}

// New is the plugin factory: it decodes and validates the args (exact errors), compiles the
// component once per process, and starts feeding the cluster view from the scheduler's informers.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := config.Decode(obj)
	if err != nil {
		return nil, err
	}
	if err := config.Validate(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%s needs a framework handle", Name)
	}
	rt, err := loadRuntime(args)
	if err != nil {
		return nil, err
	}
	cluster, err := cdplace.NewCluster(rt, args.PolicyArgs())
	if err != nil {
		return nil, err
	}
	keys, err := cluster.Keys()
	if err != nil {
		return nil, err
	}
	p := &Plugin{handle: h, args: args, cluster: cluster, keys: keys}
	p.feed, err = startFeed(ctx, h, cluster)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

// Cluster exposes the policy's cluster view (tests and benchmarks feed it directly).
func (p *Plugin) Cluster() *cdplace.Cluster { return p.cluster }

// HasSynced reports whether the cluster view has seen every informer's initial list.
func (p *Plugin) HasSynced() bool { return p.feed.synced() }

// mayBeComputeDomainPod is the free pre-check: only a pod with resource claims can hold a
// ComputeDomain channel.
func mayBeComputeDomainPod(pod *v1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0
}

func statusOf(v cdplace.Verdict) *fwk.Status {
	switch v.Code {
	case "Success":
		return nil
	case "Skip":
		return fwk.NewStatus(fwk.Skip)
	case "Unschedulable":
		return fwk.NewStatus(fwk.Unschedulable, v.Reason)
	case "UnschedulableAndUnresolvable":
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.Reason)
	default:
		return fwk.AsStatus(fmt.Errorf("computedomain policy: %s", v.Reason))
	}
}

// decide runs the policy for a pod, adding the pod to the view first if the informer has not
// delivered it yet. A guest failure becomes an Error status: the pod fails closed and retries.
func (p *Plugin) decide(pod *v1.Pod, overlay []cdplace.Overlay) (*cdplace.Decision, *fwk.Status) {
	d, err := p.cluster.PreFilter(pod.Namespace, pod.Name, overlay)
	if errors.Is(err, cdplace.ErrUnknownPod) {
		if err = p.feed.applyPod(pod); err == nil {
			d, err = p.cluster.PreFilter(pod.Namespace, pod.Name, overlay)
		}
	}
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("computedomain policy failed for pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return d, nil
}

// PreFilter implements fwk.PreFilterPlugin.
func (p *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !mayBeComputeDomainPod(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !p.feed.synced() {
		// Only right after start-up: wait for the initial lists rather than decide on a partial
		// view; if they do not arrive, an Error status retries the pod with backoff.
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if !cache.WaitForCacheSync(waitCtx.Done(), p.feed.synced) {
			return nil, fwk.AsStatus(errors.New("ComputeDomainPlacement: the cluster view has not synced with its informers yet"))
		}
	}
	d, st := p.decide(pod, nil)
	if st != nil {
		return nil, st
	}
	if d.Status.Code == "Skip" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// Written even on rejection: preemption's RemovePod may turn it around.
	cs.Write(stateKey, &state{decision: d})
	if st := statusOf(d.Status); st != nil {
		klog.FromContext(ctx).V(5).Info("ComputeDomainPlacement rejected pod", "pod", klog.KObj(pod), "reason", d.Status.Reason)
		return nil, st
	}
	if d.Exclusive {
		return &fwk.PreFilterResult{NodeNames: sets.New(d.AllowedNodes...)}, nil
	}
	// A domain that has not started: hand the framework the nodes of the best-fitting cliques
	// only. Best fit then holds whatever percentageOfNodesToScore says (the framework filters
	// every node of a PreFilterResult this small), the other nodes are never filtered, and the
	// profile can keep the scheduler's adaptive node sampling for every other pod.
	return p.candidates(d, nodes), nil
}

// candidateCliques is how many of the best-fitting cliques a domain that has not started is
// offered. More than one, so that a clique whose trays fail another plugin's Filter (a taint,
// CPU or memory taken by other pods) does not leave the pod waiting while another clique fits.
const candidateCliques = 3

// candidates returns the nodes of the candidateCliques best-scoring fitting cliques (ties at the
// cut-off included), or nil when no clique fits (Filter gives each node its reason then).
func (p *Plugin) candidates(d *cdplace.Decision, nodes []fwk.NodeInfo) *fwk.PreFilterResult {
	scores := make([]int64, 0, len(d.Cliques))
	for _, v := range d.Cliques {
		if v.Code == "Success" {
			scores = append(scores, v.Score)
		}
	}
	if len(scores) == 0 {
		return nil
	}
	slices.Sort(scores)
	cut := scores[max(0, len(scores)-candidateCliques)]
	names := sets.New[string]()
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		if v, ok := d.Cliques[node.Labels[p.keys.CliqueLabel]]; ok && v.Code == "Success" && v.Score >= cut {
			names.Insert(node.Name)
		}
	}
	return &fwk.PreFilterResult{NodeNames: names}
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return p }

// AddPod implements fwk.PreFilterExtensions: re-decides as if podInfoToAdd were nominated to
// the node (one policy call; preemption only).
func (p *Plugin) AddPod(_ context.Context, cs fwk.CycleState, pod *v1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	added := podInfoToAdd.GetPod()
	return p.reDecide(cs, pod, cdplace.Overlay{Op: "add", Namespace: added.Namespace, Name: added.Name, Node: nodeInfo.Node().Name})
}

// RemovePod implements fwk.PreFilterExtensions: re-decides as if podInfoToRemove were gone.
func (p *Plugin) RemovePod(_ context.Context, cs fwk.CycleState, pod *v1.Pod, podInfoToRemove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	removed := podInfoToRemove.GetPod()
	return p.reDecide(cs, pod, cdplace.Overlay{Op: "remove", Namespace: removed.Namespace, Name: removed.Name})
}

func (p *Plugin) reDecide(cs fwk.CycleState, pod *v1.Pod, op cdplace.Overlay) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	overlay := append(append([]cdplace.Overlay(nil), s.overlay...), op)
	d, st := p.decide(pod, overlay)
	if st != nil {
		return st
	}
	s.decision, s.overlay = d, overlay
	return nil
}

// Filter implements fwk.FilterPlugin: a lookup in the PreFilter decision.
func (p *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	v, _ := s.decision.Node(node.Name, node.Labels[p.keys.CliqueLabel])
	return statusOf(v)
}

// PreScore implements fwk.PreScorePlugin: Skip when PreFilter skipped the pod.
func (p *Plugin) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, err := getState(cs); err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score implements fwk.ScorePlugin: best fit across cliques, a lookup in the decision.
func (p *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	v, ok := s.decision.Node(node.Name, node.Labels[p.keys.CliqueLabel])
	if !ok {
		return 0, nil
	}
	return v.Score, nil
}

// ScoreExtensions implements fwk.ScorePlugin; scores are already in [0, 100].
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// usesAccelerators tells which pods can change a tray's state: GPUs or claims.
func (p *Plugin) usesAccelerators(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	gpu := v1.ResourceName(p.keys.GPUResourceName)
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if q, ok := c.Resources.Requests[gpu]; ok && !q.IsZero() {
				return true
			}
			if q, ok := c.Resources.Limits[gpu]; ok && !q.IsZero() {
				return true
			}
		}
	}
	return false
}

// Reserve implements fwk.ReservePlugin: the assumed placement counts at once for the next pods.
func (p *Plugin) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !p.usesAccelerators(pod) {
		return nil
	}
	err := p.cluster.Assume(pod.Namespace, pod.Name, nodeName)
	if errors.Is(err, cdplace.ErrUnknownPod) {
		if err = p.feed.applyPod(pod); err == nil {
			err = p.cluster.Assume(pod.Namespace, pod.Name, nodeName)
		}
	}
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("computedomain: reserving %s/%s on %s: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}

// Unreserve implements fwk.ReservePlugin.
func (p *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if !p.usesAccelerators(pod) {
		return
	}
	if err := p.cluster.Forget(pod.Namespace, pod.Name); err != nil {
		klog.FromContext(ctx).Error(err, "ComputeDomainPlacement: unreserve failed", "pod", klog.KObj(pod), "node", nodeName)
	}
}

// SignPod implements fwk.SignPlugin. A pod with claims is decided against the latest cluster
// state (gang and clique rules), so it is never batched; any other pod is skipped by this
// plugin and adds nothing to the signature.
func (p *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if mayBeComputeDomainPod(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "ComputeDomain pods are decided one at a time")
	}
	return nil, nil
}
