package computedomain

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	p := &Plugin{keys: facts.DefaultKeys, domainEvents: true, podGroupEvents: true}
	target := cdPod("cd", "p1")
	target.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "channel", ResourceClaimName: ptr.To("p1-channel-abcde")}}

	tray := makeNode("a-00", 1, 4)
	relabelled := tray.DeepCopy()
	relabelled.Labels["nvidia.com/gpu.clique"] = clique(2)
	held := tray.DeepCopy()
	held.Labels[DomainLabel] = "uid-old"
	cordoned := tray.DeepCopy()
	cordoned.Spec.Unschedulable = true
	annotated := tray.DeepCopy()
	annotated.Annotations = map[string]string{"x": "y"}
	moreGPUs := tray.DeepCopy()
	moreGPUs.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")

	allocated := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	deallocated := allocated.DeepCopy()
	deallocated.Status.Allocation = nil
	mine := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "p1-channel-abcde", Namespace: ns}}
	someoneElses := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}

	cd := func(namespace string) *unstructured.Unstructured {
		u := computeDomain("cd", "uid", 0)
		u.SetNamespace(namespace)
		return u
	}
	tpl := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(name)
		u.SetNamespace(ns)
		return u
	}
	resized := cd(ns)
	resized.SetAnnotations(map[string]string{"cdplace.nvidia.com/size": "4"})
	fewerNodes := cd(ns)
	_ = unstructured.SetNestedField(fewerNodes.Object, int64(6), "spec", "numNodes")
	statusOnly := cd(ns)
	_ = unstructured.SetNestedField(statusOnly.Object, "Ready", "status", "status")
	resizedElsewhere := cd("team-b")
	resizedElsewhere.SetAnnotations(map[string]string{"cdplace.nvidia.com/size": "4"})

	inGroup := target.DeepCopy()
	inGroup.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("trainers")}
	group := func(name string, minCount int32) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	}
	groupStatus := group("trainers", 8)
	groupStatus.Status.Conditions = []metav1.Condition{{Type: "PodGroupScheduled", Status: metav1.ConditionTrue}}

	gpuSlice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To("a-00")}}
	otherSlice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("a-00")}}

	type hint = fwk.QueueingHintFn
	cases := []struct {
		name     string
		fn       hint
		old, new any
		want     fwk.QueueingHint
	}{
		{"GPU pod deleted", p.isSchedulableAfterPodDeleted, boundTo(makePod("g", "", 1), "a-00"), nil, fwk.Queue},
		{"CD pod deleted", p.isSchedulableAfterPodDeleted, boundTo(cdPod("other", "o"), "a-00"), nil, fwk.Queue},
		{"CPU pod deleted", p.isSchedulableAfterPodDeleted, boundTo(makePod("web", "", 0), "a-00"), nil, fwk.QueueSkip},
		{"pod of the same domain bound", p.isSchedulableAfterPodBound, nil, boundTo(cdPod("cd", "p0"), "a-00"), fwk.Queue},
		{"pod of another domain bound", p.isSchedulableAfterPodBound, nil, boundTo(cdPod("other", "o"), "a-00"), fwk.QueueSkip},
		{"tray added", p.isSchedulableAfterNodeChange, nil, tray, fwk.Queue},
		{"CPU node added", p.isSchedulableAfterNodeChange, nil, makeNode("cpu", 0, 0), fwk.QueueSkip},
		{"clique label changed", p.isSchedulableAfterNodeChange, tray, relabelled, fwk.Queue},
		{"stale domain label removed", p.isSchedulableAfterNodeChange, held, tray, fwk.Queue},
		{"domain label added", p.isSchedulableAfterNodeChange, tray, held, fwk.QueueSkip},
		{"uncordoned", p.isSchedulableAfterNodeChange, cordoned, tray, fwk.Queue},
		{"cordoned", p.isSchedulableAfterNodeChange, tray, cordoned, fwk.QueueSkip},
		{"annotation only", p.isSchedulableAfterNodeChange, tray, annotated, fwk.QueueSkip},
		{"more GPUs", p.isSchedulableAfterNodeChange, tray, moreGPUs, fwk.Queue},
		{"claim deallocated", p.isSchedulableAfterClaimChange, allocated, deallocated, fwk.Queue},
		{"claim allocated", p.isSchedulableAfterClaimChange, deallocated, allocated, fwk.QueueSkip},
		{"allocated claim deleted", p.isSchedulableAfterClaimChange, allocated, nil, fwk.Queue},
		{"the pod's claim created", p.isSchedulableAfterClaimChange, nil, mine, fwk.Queue},
		{"another claim created", p.isSchedulableAfterClaimChange, nil, someoneElses, fwk.QueueSkip},
		{"GPU slice published", p.isSchedulableAfterSliceChange, nil, gpuSlice, fwk.Queue},
		{"other driver's slice", p.isSchedulableAfterSliceChange, nil, otherSlice, fwk.QueueSkip},
		{"the pod's domain created", p.isSchedulableAfterComputeDomainChange, nil, cd(ns), fwk.Queue},
		{"another domain created in the namespace", p.isSchedulableAfterComputeDomainChange, nil, computeDomain("other", "uid-other", 0), fwk.QueueSkip},
		{"domain created elsewhere", p.isSchedulableAfterComputeDomainChange, nil, cd("team-b"), fwk.QueueSkip},
		{"domain deleted", p.isSchedulableAfterComputeDomainChange, cd("team-b"), nil, fwk.Queue},
		{"domain's size annotation changed", p.isSchedulableAfterComputeDomainChange, cd(ns), resized, fwk.Queue},
		{"domain's numNodes changed", p.isSchedulableAfterComputeDomainChange, cd(ns), fewerNodes, fwk.Queue},
		{"domain's status changed", p.isSchedulableAfterComputeDomainChange, cd(ns), statusOnly, fwk.QueueSkip},
		{"domain elsewhere resized", p.isSchedulableAfterComputeDomainChange, cd("team-b"), resizedElsewhere, fwk.QueueSkip},
		{"GPU slice withdrawn", p.isSchedulableAfterSliceChange, gpuSlice, nil, fwk.Queue},
		{"other driver's slice withdrawn", p.isSchedulableAfterSliceChange, otherSlice, nil, fwk.QueueSkip},
		{"tray deleted", p.isSchedulableAfterNodeDeleted, tray, nil, fwk.Queue},
		{"CPU node deleted", p.isSchedulableAfterNodeDeleted, makeNode("cpu", 0, 0), nil, fwk.QueueSkip},
		{"the pod's template created", p.isSchedulableAfterTemplateAdded, nil, tpl("cd-channel"), fwk.Queue},
		{"another template created", p.isSchedulableAfterTemplateAdded, nil, tpl("x-channel"), fwk.QueueSkip},
	}
	// The PodGroup hints ask about a pod of the group "trainers".
	groupCases := []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"the pod's PodGroup created", nil, group("trainers", 8), fwk.Queue},
		{"another PodGroup created", nil, group("others", 8), fwk.QueueSkip},
		{"the pod's PodGroup minCount changed", group("trainers", 8), group("trainers", 4), fwk.Queue},
		{"the pod's PodGroup status changed", group("trainers", 8), groupStatus, fwk.QueueSkip},
		{"the pod's PodGroup deleted", group("trainers", 8), nil, fwk.Queue},
	}
	for _, c := range groupCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.isSchedulableAfterPodGroupChange(logger, inGroup, c.old, c.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	if got, _ := p.isSchedulableAfterPodGroupChange(logger, target, nil, group("trainers", 8)); got != fwk.QueueSkip {
		t.Errorf("a pod outside any group: %v", got)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.fn(logger, target, c.old, c.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	// A pod that names a shared claim says its domain only through the claim: any domain
	// created in its namespace may be its own.
	shared := target.DeepCopy()
	shared.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("shared-channel")}}
	if got, _ := p.isSchedulableAfterComputeDomainChange(logger, shared, nil, computeDomain("other", "uid-other", 0)); got != fwk.Queue {
		t.Errorf("a domain created beside a pod with a shared claim: got %v, want Queue", got)
	}

	events, err := p.EventsToRegister(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	registered := map[fwk.EventResource]fwk.ActionType{}
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("event %v has no hint", e.Event)
		}
		registered[e.Event.Resource] |= e.Event.ActionType
	}
	// Every event that can make a waiting domain placeable is registered.
	for r, want := range map[fwk.EventResource]fwk.ActionType{
		fwk.AssignedPod:       fwk.Add | fwk.Delete,
		fwk.Node:              fwk.Add | fwk.Delete | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeAllocatable,
		fwk.ResourceClaim:     fwk.Add | fwk.Update | fwk.Delete,
		fwk.ResourceSlice:     fwk.Add | fwk.Update | fwk.Delete,
		claimTemplateResource: fwk.Add,
		computeDomainResource: fwk.Add | fwk.Update | fwk.Delete,
		fwk.PodGroup:          fwk.Add | fwk.Update | fwk.Delete,
	} {
		if got := registered[r]; got&want != want {
			t.Errorf("%s: registered %v, want at least %v", r, got, want)
		}
	}
}

// inTreeEventKeys are the hint-map keys the in-tree plugins of the default profile register in
// k8s.io/kubernetes v1.37.2 (InterPodAffinity and PodTopologySpread for assigned pods;
// PodTopologySpread, NodeResourcesFit, DynamicResources, TaintToleration, NodeAffinity,
// VolumeBinding and others for nodes; DynamicResources for claims and slices). Re-read them when
// the pinned version moves.
var inTreeEventKeys = []fwk.ClusterEvent{
	{Resource: fwk.AssignedPod, ActionType: fwk.Delete},
	{Resource: fwk.AssignedPod, ActionType: fwk.Add | fwk.UpdatePodLabel | fwk.Delete},
	{Resource: fwk.Node, ActionType: fwk.Add},
	{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable},
	{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel},
	{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeTaint},
	{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable},
	{Resource: fwk.Node, ActionType: fwk.Add | fwk.Delete | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint},
	{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete},
	{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update},
}

// The scheduling queue walks every key of its hint map for every waiting pod at every event, so
// the plugin registers under the in-tree plugins' keys and adds only the keys no in-tree plugin
// has: slice deletions, claim templates, and PodGroups and ComputeDomains when they are served.
func TestEventsReuseTheInTreeKeys(t *testing.T) {
	own := map[fwk.ClusterEvent]bool{
		{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update | fwk.Delete}:     true,
		{Resource: claimTemplateResource, ActionType: fwk.Add}:                           true,
		{Resource: fwk.PodGroup, ActionType: fwk.Add | fwk.Update | fwk.Delete}:          true,
		{Resource: computeDomainResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}: true,
	}
	for _, served := range []bool{false, true} {
		p := &Plugin{keys: facts.DefaultKeys, domainEvents: served, podGroupEvents: served}
		events, err := p.EventsToRegister(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var added []fwk.ClusterEvent
		for _, e := range events {
			if !slices.Contains(inTreeEventKeys, e.Event) {
				if !own[e.Event] {
					t.Errorf("served=%v: %v is a hint-map key no in-tree plugin has", served, e.Event)
				}
				added = append(added, e.Event)
			}
			if !served && (e.Event.Resource == fwk.PodGroup || e.Event.Resource == computeDomainResource) {
				t.Errorf("%v registered while its API is not served", e.Event)
			}
		}
		if want := map[bool]int{false: 2, true: 4}[served]; len(added) != want {
			t.Errorf("served=%v: %d keys of our own (%v), want %d", served, len(added), added, want)
		}
	}
}

// Under the in-tree assigned-pod key the hint tells the actions apart: a bound pod of the same
// domain and a deleted pod that held accelerators queue, a label change does not.
func TestTheAssignedPodHintTellsTheActionsApart(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	p := &Plugin{keys: facts.DefaultKeys}
	hint := hintOf(t, p, fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add | fwk.UpdatePodLabel | fwk.Delete})
	waiting := cdPod("cd", "p1")
	sibling := cdPod("cd", "p2")
	sibling.Spec.NodeName = "a-00"
	relabelled := sibling.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	for _, c := range []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"a pod of the same domain bound", nil, sibling, fwk.Queue},
		{"a pod holding a claim deleted", sibling, nil, fwk.Queue},
		{"a bound pod's labels changed", sibling, relabelled, fwk.QueueSkip},
	} {
		got, err := hint(logger, waiting, c.old, c.new)
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// hintOf is the hint registered under exactly key.
func hintOf(t *testing.T, p *Plugin, key fwk.ClusterEvent) fwk.QueueingHintFn {
	t.Helper()
	events, err := p.EventsToRegister(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Event == key {
			return e.QueueingHintFn
		}
	}
	t.Fatalf("nothing registered under %v", key)
	return nil
}

// Every branch of a hint says which it took, as the in-tree hints do: a queued pod at V(5), a
// skip at V(6) and not at V(5) (hints run for every waiting pod at every event).
func TestHintsLogTheBranchTheyTake(t *testing.T) {
	p := &Plugin{keys: facts.DefaultKeys}
	target := cdPod("cd", "p1")
	gpuSlice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "a-00-gpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: facts.DefaultKeys.GPUDriver, NodeName: ptr.To("a-00")}}
	otherSlice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("a-00")}}
	for _, tc := range []struct {
		slice      *resourceapi.ResourceSlice
		level      int
		want       fwk.QueueingHint
		wantLogged string // "" for nothing
	}{
		{gpuSlice, 5, fwk.Queue, "a node's GPU slice changed"},
		{otherSlice, 5, fwk.QueueSkip, ""},
		{otherSlice, 6, fwk.QueueSkip, "a slice of another driver, or of no node, changed"},
	} {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(tc.level), ktesting.BufferLogs(true)))
		buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
		h, err := p.isSchedulableAfterSliceChange(logger, target, nil, tc.slice)
		if err != nil || h != tc.want {
			t.Fatalf("slice %s at V(%d): %v, %v; want %v", tc.slice.Name, tc.level, h, err, tc.want)
		}
		out := buf.String()
		if tc.wantLogged == "" {
			if out != "" {
				t.Errorf("slice %s at V(%d) logged %q; want nothing", tc.slice.Name, tc.level, out)
			}
			continue
		}
		for _, want := range []string{tc.wantLogged, `pod="` + ns + `/p1"`, `object="` + tc.slice.Name + `"`, `hint="` + tc.want.String() + `"`} {
			if !strings.Contains(out, want) {
				t.Errorf("slice %s at V(%d) logged %q; want it to contain %s", tc.slice.Name, tc.level, out, want)
			}
		}
	}
}

// A hint whose line is not written allocates nothing for it: hints run for every waiting pod at
// every cluster event.
func TestAHintThatLogsNothingAllocatesNothing(t *testing.T) {
	p := &Plugin{keys: facts.DefaultKeys}
	target := cdPod("cd", "p1")
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("a-00")}}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4)))
	if allocs := testing.AllocsPerRun(100, func() {
		_, _ = p.isSchedulableAfterSliceChange(logger, target, slice, slice)
	}); allocs != 0 {
		t.Errorf("a skipping slice hint at V(4) allocated %.0f times per call; want 0", allocs)
	}
}
