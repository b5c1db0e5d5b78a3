// Package computedomain is the ComputeDomainPlacement scheduler plugin: a thin framework adapter
// over the cdplace policy component. Which pods are ComputeDomain pods is decided in Go from
// informer facts; only facts the policy uses cross into it, batched. A ComputeDomain pod costs at
// most one policy call; a plain pod on a cluster with cliques shares one steering call per view
// version with every other plain pod (steer.go); any other pod is skipped without a call.
//
// File map (TestTheFileMapNamesEveryFile keeps it whole):
//   - plugin.go: the factory and the extension points.
//   - decide.go: one policy decision per pod (reuse, preemption's overlay), statuses, the one
//     place a rejection is made and logged.
//   - preempt.go: PostFilter, gang preemption (the policy's victims carried out).
//   - victims.go: the plugin's own check of a plan's victims before it deletes any (priority,
//     the preemptor's clique, whole domains), behind the library's.
//   - fleet.go: the fleet status: the fleet gauges and the Events on ComputeDomains.
//   - state.go: CycleState.
//   - hints.go: EventsToRegister and the QueueingHints.
//   - classify.go: which pods are ComputeDomain pods.
//   - feed.go: the cluster view's feed (records, change detection, the pending batch, flushing).
//   - feed_objects.go, feed_pods.go: the feed per kind; which pods the view has.
//   - feed_owners.go: a domain's size from its pods' owners (Jobs, StatefulSets, JobSets, ...).
//   - feed_catchup.go: the feed catching up on what a QueueingHint saw before its own handler.
//   - feed_versions.go: which version of an object the view may take.
//   - informers.go: the informers the feed listens to.
//   - crd.go: whether the ComputeDomain API is served.
//   - dump.go: the view's debug dump on SIGUSR1 (CDPLACE_DEBUG_DUMP_DIR).
//   - scout.go: a waiting domain retried through one pod on capacity events.
//   - workloads.go: sizes from owners and PodGroups, and the wake-ups no cluster event gives.
//   - reuse.go: decision and preemption-refusal reuse across the pods of a domain.
//   - steer.go: plain-pod steering (pods without a ComputeDomain).
//   - workload_placement.go: the 1.37 workload cycle (GeneratePlacements, ScorePlacement).
//   - nodeindex.go, nodeordinals.go: a node's clique for Filter and Score without its labels.
//   - policy.go: where the policy comes from, and swapping it while the scheduler runs.
//   - shadow.go: the shadow policy, asked beside the live one, never acting.
//   - breaker.go: the circuit breaker over guest failures.
//   - revert.go: the live policy reverted when its answers keep being refused (policyRevert).
//   - quarantine.go: Events for the objects the library quarantined.
//   - record.go: the recorder's args (what cdplace replay reads).
//   - metrics.go: the plugin's metrics.
//
// PreFilter makes at most one policy call per ComputeDomain pod and stores the decision in
// CycleState; Filter and Score read it (no call per node).
package computedomain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/apis/config"
	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Name is the plugin's name in profiles and pluginConfig.
const Name = "ComputeDomainPlacement"

// Plugin is the ComputeDomainPlacement plugin.
type Plugin struct {
	handle  fwk.Handle
	cluster *cdplace.Cluster
	keys    facts.Keys
	feed    *feed
	crd     *crdWatch
	reuse   *decisions
	// refusals are gang preemption's answers when it cannot help, reused as decisions are.
	refusals *answers[string]
	settle   settling
	// wake: rejected ComputeDomain pods, activated when a pod of their domain is reserved.
	wake waking
	// steering: plainPodSteering (steer.go); steerCache holds the shared answer.
	steering   bool
	steerCache steered
	// dyn reads ComputeDomains (the gang preemption Event goes on the preemptor's domain).
	dyn dynamic.Interface
	// pdbs lists PodDisruptionBudgets for gang preemption (nil without an informer factory).
	pdbs policylisters.PodDisruptionBudgetLister
	// pods tells whether a waiting domain's scout is still pending (nil in bare tests).
	pods corelisters.PodLister
	// preempted remembers recent gang preemptions by domain UID (preempt.go).
	preemptedMu sync.Mutex
	preempted   map[string]preemptedFor
	// fleet: the last fleet status and what was said on each ComputeDomain (fleet.go).
	fleet fleetState
	// scheduling: PreFilter has run (this replica schedules; fleet.go says Events only then).
	scheduling atomic.Bool
	// domainEvents: the ComputeDomain API was served at start, so its events are registered
	// (registering them otherwise would hold the scheduler's start on an informer that never
	// syncs).
	domainEvents bool
	// lastTable keeps the last ComputeDomain decision's node table (nodeindex.go).
	lastTable tableMemo
	// current is the cycle state PreFilter or PreScore last wrote or read, with its state
	// (state.go): Filter and Score, called for every node (500 and more a cycle at 5,000 trays),
	// find it there without reading the cycle state each time.
	current atomic.Pointer[cycleMemo]
	// podGroupEvents: the Workload API was served at start (PodGroups size domains), so its
	// events are registered.
	podGroupEvents bool
	// breaker stops calling a policy that keeps failing (breaker.go).
	breaker breaker
	// revert restores the generation before a live policy whose answers keep being refused
	// (revert.go).
	revert *reverter
	// logger is the factory's (quarantine.go logs through it outside a cycle's context).
	logger klog.Logger
	// policy swaps the policy when its source changes (policy.go); shadow sets the shadow policy
	// from its source (shadow.go), nil when none is configured.
	policy *swapper
	shadow *swapper
}

var (
	_ fwk.PreFilterPlugin          = &Plugin{}
	_ fwk.PreFilterExtensions      = &Plugin{}
	_ fwk.FilterPlugin             = &Plugin{}
	_ fwk.PreScorePlugin           = &Plugin{}
	_ fwk.ScorePlugin              = &Plugin{}
	_ fwk.ReservePlugin            = &Plugin{}
	_ fwk.EnqueueExtensions        = &Plugin{}
	_ fwk.SignPlugin               = &Plugin{}
	_ fwk.PostFilterPlugin         = &Plugin{}
	_ fwk.PodGroupPostFilterPlugin = &Plugin{}
)

// argsPath is where the args sit in the scheduler's configuration, for messages.
var argsPath = field.NewPath("pluginConfig").Key(Name).Child("args")

// runtimes caches compiled components by digest, so profiles share one.
var runtimes sync.Map // digest -> *cdplace.Runtime

func loadRuntime(wasm []byte) (*cdplace.Runtime, error) {
	digest := digestOf(wasm)
	if rt, ok := runtimes.Load(digest); ok {
		return rt.(*cdplace.Runtime), nil
	}
	rt, err := cdplace.NewRuntime(wasm)
	if err != nil {
		return nil, err
	}
	actual, _ := runtimes.LoadOrStore(digest, rt)
	return actual.(*cdplace.Runtime), nil
}

// startingPolicy is the component a cluster starts on: the file's for a file source (read now:
// the plugin does not start without it), else the embedded one (a ConfigMap's policy is swapped
// in when its informer delivers it). stamp is the file's, for its watch.
func startingPolicy(src PolicySource) ([]byte, fileStamp, error) {
	if src.Source != policyFile {
		return cdplace.GuestWasm, fileStamp{}, nil
	}
	b, err := os.ReadFile(src.Path)
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(src.Path)
	}
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("%s: reading the policy component: %w", src.at, err)
	}
	return b, stampOf(fi), nil
}

// newCluster makes the cluster view from the policy's args (without the host's policy source),
// validated by the embedded policy (its message is returned as it is, under the args' path),
// then, for a file source, made on the file's component.
func newCluster(src PolicySource, args []byte) (*cdplace.Cluster, cdplace.Settings, []byte, fileStamp, error) {
	wasm, stamp, err := startingPolicy(src)
	if err != nil {
		return nil, cdplace.Settings{}, nil, stamp, err
	}
	cluster, s, err := clusterOn(cdplace.GuestWasm, args)
	if err != nil || src.Source != policyFile {
		return cluster, s, wasm, stamp, err
	}
	cluster.Close()
	cluster, s, err = clusterOn(wasm, args)
	return cluster, s, wasm, stamp, err
}

func clusterOn(wasm []byte, args []byte) (*cdplace.Cluster, cdplace.Settings, error) {
	rt, err := loadRuntime(wasm)
	if err != nil {
		return nil, cdplace.Settings{}, err
	}
	cluster, err := cdplace.NewCluster(rt, args)
	if errors.Is(err, cdplace.ErrInvalidArgs) {
		return nil, cdplace.Settings{}, fmt.Errorf("%s: %w", argsPath, err)
	}
	if err != nil {
		return nil, cdplace.Settings{}, err
	}
	s, err := cluster.Settings()
	return cluster, s, err
}

// New is the plugin factory: it passes the args to the policy (their only validator), compiles
// the component once per process, and starts feeding the cluster view from the scheduler's
// informers.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := config.Decode(obj)
	if err != nil {
		return nil, err
	}
	RegisterMetrics()
	if h == nil {
		return nil, fmt.Errorf("%s needs a framework handle", Name)
	}
	revert, args, errs := parseRevert(args)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	src, shadowSrc, policyArgs, errs := parseSources(args)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	cluster, settings, wasm, stamp, err := newCluster(src, policyArgs)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	if _, err := startRecorder(ctx, logger, cluster, policyArgs, wasm); err != nil {
		return nil, err
	}
	f := newFeed(logger, cluster, settings.Keys)
	if rec := h.EventRecorder(); rec != nil {
		f.event = func(obj runtime.Object, note string) {
			rec.Eventf(obj, nil, v1.EventTypeWarning, invalidFactsReason, "Scheduling", "%s", note)
		}
	}
	in, err := startInformers(ctx, h, f)
	if err != nil {
		return nil, err
	}
	podGroups, err := startWorkloads(ctx, h, f, in.dyn)
	if err != nil {
		return nil, err
	}
	p := &Plugin{handle: h, cluster: cluster, keys: settings.Keys, feed: f, reuse: newDecisions(func() time.Time { return timeNow() }),
		refusals: newAnswers[string](func() time.Time { return timeNow() }),
		steering: settings.PlainPodSteering, dyn: in.dyn, logger: logger, breaker: breaker{now: func() time.Time { return timeNow() }}}
	if sif := h.SharedInformerFactory(); sif != nil {
		p.pdbs = sif.Policy().V1().PodDisruptionBudgets().Lister()
		p.pods = sif.Core().V1().Pods().Lister()
	}
	f.mu.Lock()
	f.revalidated = p.revalidated
	f.podGone = p.wake.gone
	f.mu.Unlock()
	p.crd = &crdWatch{logger: logger, start: in.startDomains, now: func() time.Time { return timeNow() }}
	if cs := h.ClientSet(); cs != nil {
		p.crd.client = cs.Discovery()
		p.crd.check()
	}
	p.domainEvents = p.crd.served
	p.podGroupEvents = podGroups
	p.revert = &reverter{settings: revert, now: func() time.Time { return timeNow() }}
	p.startPolicy(ctx, h, src, wasm, stamp)
	p.startShadow(ctx, h, shadowSrc)
	p.startFleet(ctx)
	startDebugDump(ctx, logger, f)
	if !p.crd.served {
		logger.Info("ComputeDomainPlacement: " + noCRDReason + "; ComputeDomain pods wait until it is, other pods are not affected")
		if p.crd.client != nil {
			go p.crd.tick(ctx)
		}
	}
	return p, nil
}

// startPolicy starts the policy's watch: a file polled, a ConfigMap's informer; nothing for the
// embedded policy.
func (p *Plugin) startPolicy(ctx context.Context, h fwk.Handle, src PolicySource, wasm []byte, stamp fileStamp) {
	p.policy = newSwapper(p.cluster, src, digestOf(wasm), p.logger)
	p.policy.swapped = func() {
		// Cached decisions and steering answers are the old policy's: the view's version moves on.
		p.feed.bump()
		// Pods the old policy left unschedulable are asked again at once, not after their backoff
		// or the next event that happens to queue them (up to 5 minutes; issue 45).
		p.feed.activateWaiting()
		// The breaker's failures were the old policy's.
		p.breaker.reset()
	}
	p.policy.liveWasm = wasm
	if rec := h.EventRecorder(); rec != nil {
		p.policy.revertEvent = revertEvents(rec)
	}
	if rec := h.EventRecorder(); rec != nil {
		p.policy.event = policyEvents(rec)
	}
	switch src.Source {
	case policyFile:
		go p.policy.run(ctx)
		go p.policy.watchFile(ctx, src.Path, stamp)
	case policyConfigMap, policySecret:
		cs := h.ClientSet()
		if cs == nil {
			p.logger.Info("ComputeDomainPlacement: no API client; the policy source is not watched and the embedded policy decides", "source", src.String())
			return
		}
		go p.policy.run(ctx)
		p.policy.watchObject(ctx, cs)
	}
	p.logger.Info("ComputeDomainPlacement: policy", "source", src.String(), "digest", digestOf(wasm), "generation", p.cluster.PolicyGeneration())
}

// Policy is the live policy's digest and generation.
func (p *Plugin) Policy() (digest string, generation uint64) {
	if p.policy == nil {
		return "", p.cluster.PolicyGeneration()
	}
	return p.policy.Live()
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

// Cluster exposes the policy's cluster view (tests and benchmarks).
func (p *Plugin) Cluster() *cdplace.Cluster { return p.cluster }

// HasSynced reports whether the cluster view has seen every started informer's initial list.
func (p *Plugin) HasSynced() bool { return p.feed.synced() }

// PreFilter implements fwk.PreFilterPlugin. A ComputeDomain pod gets the policy's decision (at
// most one call) in CycleState and its node set as the PreFilterResult. A plain pod gets the
// shared steering answer (steer.go), or Skip when it is not steered; an IMEX daemon pod (its
// DaemonSet picks the node) gets Skip.
func (p *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !p.scheduling.Load() {
		p.scheduling.Store(true)
	}
	if reason, domain, invalid := p.feed.invalidClaimOf(pod); invalid {
		// Its claim or template no longer parses: whether it is a ComputeDomain pod, and of
		// which domain, cannot be known.
		reason = "a claim of the pod fails closed: " + reason
		if domain != "" {
			p.wake.rejected(domain, pod)
		}
		return nil, unschedulable(klog.FromContext(ctx), fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KObj(pod))
	}
	domain, cd := p.feed.isComputeDomainPod(pod)
	if !cd {
		if domain != "" {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, p.steer(ctx, cs, pod)
	}
	logger := klog.FromContext(ctx)
	if p.crd.client == nil || !p.crd.Served() {
		return nil, unschedulable(logger, fwk.Unschedulable, noCRDReason, "pod", klog.KObj(pod))
	}
	if reason := p.breaker.blocked(); reason != "" {
		decisionsTotal.WithLabelValues(fwk.Unschedulable.String()).Inc()
		return nil, unschedulable(logger, fwk.Unschedulable, reason, "pod", klog.KObj(pod))
	}
	if st := p.waitForSync(ctx); st != nil {
		return nil, st
	}
	if reason, invalid := p.feed.invalidReason(domain); invalid {
		// An object of the domain failed to parse: no decision on a view without it.
		reason = "ComputeDomain " + domain + " fails closed: " + reason
		p.wake.rejected(domain, pod)
		return nil, unschedulable(logger, fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KObj(pod))
	}
	d, st := p.decide(pod, domain)
	if st != nil {
		decisionsTotal.WithLabelValues(st.Code().String()).Inc()
		return nil, rejected(logger, st, "pod", klog.KObj(pod))
	}
	if d.Status.Code == cdplace.CodeSkip {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	decisionsTotal.WithLabelValues(statusOf(d.Status).Code().String()).Inc()
	// Written even on rejection: preemption's RemovePod may turn it around.
	p.writeState(cs, &state{decision: d, table: p.tableFor(d)})
	if st := statusOf(d.Status); st != nil {
		p.settle.note(p, domain, pod, d.Status.Reason)
		p.wake.rejected(domain, pod)
		return nil, rejected(logger, st, "pod", klog.KObj(pod))
	}
	if d.NodeSet != nil {
		return &fwk.PreFilterResult{NodeNames: sets.New(d.NodeSet...)}, nil
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return p }

// AddPod implements fwk.PreFilterExtensions: re-decides as if podInfoToAdd were nominated to
// the node (one policy call; preemption only). A pod that would not count there changes nothing.
func (p *Plugin) AddPod(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	if steeredPod(cs) {
		return nil
	}
	added, node := podInfoToAdd.GetPod(), nodeInfo.Node().Name
	counts, err := p.feed.placeable(added, node, false)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("ComputeDomainPlacement: a pod preemption would add is not in the policy's view", "pod", klog.KObj(added), "err", err)
	}
	if !counts {
		return nil
	}
	return p.reDecide(cs, pod, cdplace.Overlay{Op: cdplace.OverlayAdd, Namespace: added.Namespace, Name: added.Name, Node: node})
}

// steeredPod: the cycle's pod is a plain pod under steering, whose answer preemption's
// hypothetical changes leave as it is (steering is advice, the promise is rechecked next cycle).
func steeredPod(cs fwk.CycleState) bool {
	s, err := getState(cs)
	return err == nil && s.plain
}

// RemovePod implements fwk.PreFilterExtensions: re-decides as if podInfoToRemove were gone. A
// pod the view does not have changes nothing.
func (p *Plugin) RemovePod(_ context.Context, cs fwk.CycleState, pod *v1.Pod, podInfoToRemove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	if steeredPod(cs) {
		return nil
	}
	removed := podInfoToRemove.GetPod()
	if !p.feed.podInView(removed.Namespace, removed.Name) {
		return nil
	}
	return p.reDecide(cs, pod, cdplace.Overlay{Op: cdplace.OverlayRemove, Namespace: removed.Namespace, Name: removed.Name})
}

// Filter implements fwk.FilterPlugin: a lookup in the PreFilter decision.
func (p *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := p.stateOf(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	v, _, _ := p.nodeVerdict(s, nodeInfo.Node())
	return statusOf(v)
}

// PreScore implements fwk.PreScorePlugin: Skip when PreFilter skipped the pod, and when Score
// would give every feasible node the same score. A score added alike to every node changes no
// node's rank (the pick is the highest total; ties stay ties), so Score is left out of the cycle
// then, and the framework does not call it 500 and more times for nothing: a window of intact
// cliques for a plain pod, one clique's nodes for a domain whose clique is chosen.
func (p *Plugin) PreScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	if p.sameScore(s, nodes) {
		scoreCycles.WithLabelValues("skipped").Inc()
		return fwk.NewStatus(fwk.Skip)
	}
	scoreCycles.WithLabelValues("scored").Inc()
	p.remember(cs, s)
	return nil
}

// sameScore tells whether Score gives every one of nodes the same score. Nodes come in the
// scheduler's node-tree order (within a zone, as they joined; usually rack by rack), so a mixed
// list tends to differ within a clique or two and the scan stops there.
func (p *Plugin) sameScore(s *state, nodes []fwk.NodeInfo) bool {
	if len(nodes) < 2 {
		return true
	}
	_, first, _ := p.nodeVerdict(s, nodes[0].Node())
	for _, ni := range nodes[1:] {
		if _, score, _ := p.nodeVerdict(s, ni.Node()); score != first {
			return false
		}
	}
	return true
}

// Score implements fwk.ScorePlugin: best fit across cliques, a lookup in the decision.
func (p *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := p.stateOf(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	_, score, _ := p.nodeVerdict(s, nodeInfo.Node())
	return score, nil
}

// ScoreExtensions implements fwk.ScorePlugin; scores are already in [0, 100].
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve implements fwk.ReservePlugin: the assumed placement counts at once for the next pods
// when the pod counts there (a ComputeDomain pod, or a pod with GPUs or claims on a tray of a
// clique); any other pod costs nothing.
func (p *Plugin) Reserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	counts, err := p.feed.placeable(pod, nodeName, true)
	if err != nil {
		// Not in the view (its object is invalid): it cannot be counted, nor be a
		// ComputeDomain pod here (PreFilter rejected those).
		klog.FromContext(ctx).V(2).Info("ComputeDomainPlacement: reserved pod not counted", "pod", klog.KObj(pod), "err", err)
		return nil
	}
	if !counts {
		return nil
	}
	if err := p.feed.flush(); err != nil {
		return fwk.AsStatus(fmt.Errorf("computedomain: reserving %s/%s on %s: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	domain, cd := p.feed.isComputeDomainPod(pod)
	err = p.cluster.Assume(pod.Namespace, pod.Name, nodeName)
	p.feed.bumpPlaced(nodeName, !cd)
	if err != nil {
		p.feed.unassume(pod.Namespace, pod.Name)
		return fwk.AsStatus(fmt.Errorf("computedomain: reserving %s/%s on %s: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	// The domain now has a pod placed: its pods rejected while it waited go straight back to the
	// active queue, past their backoff.
	if cd {
		if keys := p.wake.reserved(domain, pod); len(keys) > 0 {
			p.feed.mu.Lock()
			activate := p.feed.activate
			p.feed.mu.Unlock()
			if activate != nil {
				activate(keys)
			}
		}
	}
	return nil
}

// Unreserve implements fwk.ReservePlugin: undoes what Reserve counted.
func (p *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if !p.feed.unassume(pod.Namespace, pod.Name) {
		return
	}
	err := p.feed.flush()
	if err == nil {
		err = p.cluster.Forget(pod.Namespace, pod.Name)
		p.feed.bump()
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "ComputeDomainPlacement: unreserve failed", "pod", klog.KObj(pod), "node", nodeName)
	}
	p.feed.resyncPod(pod.Namespace, pod.Name)
}

// SignPod implements fwk.SignPlugin. A ComputeDomain pod is decided against the latest cluster
// state (gang and clique rules), so it is never batched; any other pod is skipped by this
// plugin and adds nothing to the signature.
func (p *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, cd := p.feed.isComputeDomainPod(pod); cd {
		return nil, fwk.NewStatus(fwk.Unschedulable, "ComputeDomain pods are decided one at a time")
	}
	return nil, nil
}
