package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/nvnode"
)

// Upstream error texts of the ComputeDomain kubelet plugin (dra-driver-nvidia-gpu), which the
// emulator reports exactly as the driver words them (their owner is e2e/nvnode, whose rules the
// emulator applies, as the DRA kubelet plugin on kind does).
const (
	ErrLabelExists   = nvnode.ErrLabelExists
	ReasonPrepareErr = nvnode.ReasonPrepareErr
)

// PrepareOptions configures the kubelet-side emulator.
type PrepareOptions struct {
	// HostManaged: IMEX daemons are run by the administrator; Prepare sets no node label.
	HostManaged bool
	// UnprepareLabelLag is how long the node label outlives the last claim of its domain on
	// the node (daemon teardown in the real driver). It is what leaves stale labels behind.
	UnprepareLabelLag time.Duration
	// Fleet limits the emulator to the nodes of one fleet (all simulated nodes when empty).
	Fleet string
}

// Refusal is one failed Prepare, as the kubelet would report it.
type Refusal struct {
	Namespace, Pod, Node, Claim, Domain, Message string
	At                                           time.Time
}

// LabelEvent records when the emulator set or removed a node's ComputeDomain label.
type LabelEvent struct {
	Node, Domain string
	Set          bool
	At           time.Time
}

type preparedPod struct {
	node   string
	clique string // the node's clique label when prepared ("" without one)
	claims []nvnode.Claim
}

type nodeState struct {
	rules    *nvnode.Node // the driver's checkpoint and label, and its rules
	uid      types.UID    // the Node object this state is for
	removals map[string]*time.Timer
	// write serializes the label writes to this node name, across incarnations (see syncLabel).
	write *sync.Mutex
}

// PrepareEmulator plays the kubelet and the ComputeDomain kubelet plugin for pods bound to
// simulated nodes: Prepare (node label, channel checkpoint), Running status, Unprepare with the
// label lag, and the final deletion of terminating pods.
type PrepareEmulator struct {
	opts   PrepareOptions
	client kubernetes.Interface
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	claims resourcelisters.ResourceClaimLister

	mu        sync.Mutex
	state     map[string]*nodeState
	prepared  map[types.UID]*preparedPod
	refusals  []Refusal
	reported  map[string]bool // pod UID + message: one Event per distinct refusal
	labelLog  []LabelEvent
	preparedN int
	// imex is each ComputeDomain's IMEX membership as the driver shards it, one IMEX domain per
	// clique (its ComputeDomainClique objects): domain -> clique -> nodes with a prepared channel.
	imex map[string]map[string]map[string]bool
	kick chan struct{}
}

// StartPrepareEmulator runs the emulator until ctx ends.
func StartPrepareEmulator(ctx context.Context, c kubernetes.Interface, opts PrepareOptions) (*PrepareEmulator, error) {
	factory := informers.NewSharedInformerFactory(c, 0)
	e := &PrepareEmulator{
		opts:     opts,
		client:   c,
		pods:     factory.Core().V1().Pods().Lister(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		claims:   factory.Resource().V1().ResourceClaims().Lister(),
		state:    map[string]*nodeState{},
		prepared: map[types.UID]*preparedPod{},
		reported: map[string]bool{},
		imex:     map[string]map[string]map[string]bool{},
		kick:     make(chan struct{}, 1),
	}
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.poke() },
		UpdateFunc: func(any, any) { e.poke() },
		DeleteFunc: func(any) { e.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().Pods().Informer(), factory.Core().V1().Nodes().Informer(),
		factory.Resource().V1().ResourceClaims().Informer(),
	} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("prepare emulator: %v informer did not sync", typ)
		}
	}
	go e.run(ctx)
	return e, nil
}

func (e *PrepareEmulator) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *PrepareEmulator) run(ctx context.Context) {
	// The kubelet retries a failed Prepare; a short period keeps the emulator close to it.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			for _, st := range e.state {
				for _, t := range st.removals {
					t.Stop()
				}
			}
			e.mu.Unlock()
			return
		case <-e.kick:
		case <-tick.C:
		}
		e.reconcile(ctx)
	}
}

func (e *PrepareEmulator) reconcile(ctx context.Context) {
	pods, err := e.pods.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			continue
		}
		node, err := e.nodes.Get(pod.Spec.NodeName)
		if err != nil || node.Labels[FleetLabel] == "" || (e.opts.Fleet != "" && node.Labels[FleetLabel] != e.opts.Fleet) {
			if pod.DeletionTimestamp != nil && apierrors.IsNotFound(err) {
				e.finishDeletion(ctx, pod)
			}
			continue
		}
		seen[pod.UID] = true
		switch {
		case pod.DeletionTimestamp != nil:
			e.unprepare(ctx, pod.UID)
			e.finishDeletion(ctx, pod)
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			e.unprepare(ctx, pod.UID)
		default:
			e.mu.Lock()
			_, done := e.prepared[pod.UID]
			e.mu.Unlock()
			if !done {
				e.prepare(ctx, pod, node)
			}
		}
	}
	// Pods deleted outright (grace period 0) or whose node went away: unprepare what they held.
	e.mu.Lock()
	var gone []types.UID
	for uid := range e.prepared {
		if !seen[uid] {
			gone = append(gone, uid)
		}
	}
	e.mu.Unlock()
	for _, uid := range gone {
		e.unprepare(ctx, uid)
	}
}

func (e *PrepareEmulator) prepare(ctx context.Context, pod *corev1.Pod, node *corev1.Node) {
	claims, ready := e.podClaims(pod)
	if !ready {
		return // the claim controller or the scheduler has not finished with the claims yet
	}
	e.mu.Lock()
	st := e.nodeState(node)
	setLabel, refused := st.rules.Prepare(claims)
	if refused != nil {
		refusal := Refusal{Namespace: pod.Namespace, Pod: pod.Name, Node: node.Name, Claim: refused.Claim.Name,
			Domain: refused.Claim.Domain, Message: refused.Message, At: time.Now()}
		e.refusals = append(e.refusals, refusal)
		key := string(pod.UID) + refusal.Message
		first := !e.reported[key]
		e.reported[key] = true
		e.mu.Unlock()
		if first {
			e.event(ctx, pod, corev1.EventTypeWarning, ReasonPrepareErr,
				fmt.Sprintf("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim %s: %s",
					refusal.Claim, refusal.Message))
		}
		return
	}
	clique := node.Labels[CliqueLabel]
	for _, cl := range claims {
		if cl.Domain != "" {
			e.joinIMEX(cl.Domain, clique, node.Name)
		}
		if t := st.removals[cl.Domain]; cl.Domain != "" && t != nil {
			t.Stop()
			delete(st.removals, cl.Domain)
		}
	}
	if setLabel != "" {
		e.labelLog = append(e.labelLog, LabelEvent{Node: node.Name, Domain: setLabel, Set: true, At: time.Now()})
	}
	e.prepared[pod.UID] = &preparedPod{node: node.Name, clique: clique, claims: claims}
	e.preparedN++
	e.mu.Unlock()
	if setLabel != "" {
		e.syncLabel(ctx, node.Name)
	}
	e.markRunning(ctx, pod)
}

// podClaims resolves the pod's claims; ready is false until every claim exists and is allocated.
func (e *PrepareEmulator) podClaims(pod *corev1.Pod) (out []nvnode.Claim, ready bool) {
	for _, pc := range pod.Spec.ResourceClaims {
		name := ptr.Deref(pc.ResourceClaimName, "")
		if name == "" {
			for _, s := range pod.Status.ResourceClaimStatuses {
				if s.Name == pc.Name {
					name = ptr.Deref(s.ResourceClaimName, "")
				}
			}
		}
		if name == "" {
			return nil, false
		}
		claim, err := e.claims.ResourceClaims(pod.Namespace).Get(name)
		if err != nil || claim.Status.Allocation == nil {
			return nil, false
		}
		out = append(out, nvnode.ClaimOf(claim))
	}
	return out, true
}

// nodeState is the driver's state on a node (e.mu held), initialised from the Node object. A
// Node deleted and created again (a failed tray repaired or replaced) starts afresh: the driver
// reads the label from the Node object, which comes back without it, and the kubelet does not
// keep the old incarnation's prepared claims. Keeping the old state would refuse a domain for
// a label that no longer exists anywhere a scheduler can see it.
func (e *PrepareEmulator) nodeState(node *corev1.Node) *nodeState {
	st := e.state[node.Name]
	if st != nil && st.uid == node.UID {
		return st
	}
	fresh := &nodeState{rules: nvnode.NewNode(node.Labels[DomainNodeLabel], e.opts.HostManaged),
		removals: map[string]*time.Timer{}, uid: node.UID, write: &sync.Mutex{}}
	if st != nil {
		fresh.write = st.write
		for _, t := range st.removals {
			t.Stop()
		}
		for uid, p := range e.prepared {
			if p.node == node.Name {
				delete(e.prepared, uid)
			}
		}
	}
	e.state[node.Name] = fresh
	return fresh
}

func (e *PrepareEmulator) unprepare(ctx context.Context, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.prepared[uid]
	if p == nil {
		return
	}
	delete(e.prepared, uid)
	st := e.state[p.node]
	if st == nil {
		return
	}
	due := st.rules.Unprepare(p.claims)
	for _, cl := range p.claims {
		if cl.Domain != "" && !st.rules.Prepared(cl.Domain) {
			e.leaveIMEX(cl.Domain, p.clique, p.node)
		}
	}
	for _, domain := range due {
		node := p.node
		remove := func() {
			e.mu.Lock()
			s := e.state[node]
			if s == nil || !s.rules.RemoveLabel(domain) {
				e.mu.Unlock()
				return
			}
			delete(s.removals, domain)
			e.labelLog = append(e.labelLog, LabelEvent{Node: node, Domain: domain, At: time.Now()})
			e.mu.Unlock()
			e.syncLabel(ctx, node)
		}
		if t := st.removals[domain]; t != nil {
			t.Stop()
		}
		st.removals[domain] = time.AfterFunc(e.opts.UnprepareLabelLag, remove)
	}
}

// syncLabel writes the node's ComputeDomain label as the emulator's state has it now. Writes to
// one node are serialized and each writes the state current when it starts, so the API ends at
// the state's last value. The driver's Prepare and Unprepare never interleave their label writes
// on one node; two unordered patches (a lagging removal of domain A landing after the set of
// domain B) would leave the API without the label the emulator still holds, and a later domain
// placed there would be refused for a label no scheduler could see.
func (e *PrepareEmulator) syncLabel(ctx context.Context, node string) {
	e.mu.Lock()
	st := e.state[node]
	e.mu.Unlock()
	if st == nil {
		return
	}
	st.write.Lock()
	defer st.write.Unlock()
	e.mu.Lock()
	label := e.state[node].rules.Label // the current incarnation's
	e.mu.Unlock()
	var value *string
	if label != "" {
		value = &label
	}
	e.patchLabel(ctx, node, value)
}

func (e *PrepareEmulator) patchLabel(ctx context.Context, node string, value *string) {
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, DomainNodeLabel, v)
	// Retried while the API server is away (the fault drills restart it), as the driver retries.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := e.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			klog.FromContext(ctx).Error(err, "patch node label", "node", node)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (e *PrepareEmulator) markRunning(ctx context.Context, pod *corev1.Pod) {
	p := pod.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.HostIP = "127.0.0.1"
	setCond := func(t corev1.PodConditionType) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status = corev1.ConditionTrue
				p.Status.Conditions[i].LastTransitionTime = now
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setCond(t)
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := e.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		// Retried: forget the preparation so the next pass prepares and reports again.
		if !apierrors.IsNotFound(err) {
			e.unprepare(ctx, pod.UID)
		}
	}
}

func (e *PrepareEmulator) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	err := e.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "delete terminating pod", "pod", klog.KObj(pod))
	}
}

func (e *PrepareEmulator) event(ctx context.Context, pod *corev1.Pod, typ, reason, msg string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, APIVersion: "v1"},
		Reason: reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet", Host: pod.Spec.NodeName},
	}
	if _, err := e.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "record event", "pod", klog.KObj(pod))
	}
}

// joinIMEX adds a node to its domain's IMEX domain for the node's clique (e.mu held).
func (e *PrepareEmulator) joinIMEX(domain, clique, node string) {
	if e.imex[domain] == nil {
		e.imex[domain] = map[string]map[string]bool{}
	}
	if e.imex[domain][clique] == nil {
		e.imex[domain][clique] = map[string]bool{}
	}
	e.imex[domain][clique][node] = true
}

// leaveIMEX removes a node from its domain's IMEX domain for the clique (e.mu held).
func (e *PrepareEmulator) leaveIMEX(domain, clique, node string) {
	delete(e.imex[domain][clique], node)
	if len(e.imex[domain][clique]) == 0 {
		delete(e.imex[domain], clique)
	}
	if len(e.imex[domain]) == 0 {
		delete(e.imex, domain)
	}
}

// IMEXDomains returns a ComputeDomain's IMEX membership now, as the driver shards it: for each
// clique label value, the nodes of that clique with a prepared channel of the domain (sorted).
// A domain larger than one clique has one IMEX domain per clique it runs in.
func (e *PrepareEmulator) IMEXDomains(domainUID string) map[string][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][]string{}
	for clique, nodes := range e.imex[domainUID] {
		for n := range nodes {
			out[clique] = append(out[clique], n)
		}
		sort.Strings(out[clique])
	}
	return out
}

// Refusals returns every failed Prepare so far, oldest first.
func (e *PrepareEmulator) Refusals() []Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Refusal(nil), e.refusals...)
}

// RefusedPods counts the distinct pods that had at least one Prepare refused.
func (e *PrepareEmulator) RefusedPods() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	pods := map[string]bool{}
	for _, r := range e.refusals {
		pods[r.Namespace+"/"+r.Pod] = true
	}
	return len(pods)
}

// LabelLog returns the label sets and removals so far, oldest first.
func (e *PrepareEmulator) LabelLog() []LabelEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]LabelEvent(nil), e.labelLog...)
}

// Labels returns the ComputeDomain label of every node that has one, as the emulator wrote it.
func (e *PrepareEmulator) Labels() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for n, st := range e.state {
		if st.rules.Label != "" {
			out[n] = st.rules.Label
		}
	}
	return out
}

// ChannelHolders lists, per node, the channel claims prepared there (at most one, when the
// driver's rules hold).
func (e *PrepareEmulator) ChannelHolders() map[string][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][]string{}
	for uid, p := range e.prepared {
		for _, cl := range p.claims {
			if cl.Domain != "" {
				out[p.node] = append(out[p.node], cl.Name+"@"+string(uid))
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}
