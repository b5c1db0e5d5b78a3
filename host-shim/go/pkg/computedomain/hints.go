package computedomain

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// DomainLabel is the node label the NVIDIA driver sets at Prepare and removes at Unprepare.
const DomainLabel = facts.DomainLabel

// Custom resources are named resource.version.group for the scheduler's dynamic informers.
const (
	computeDomainResource fwk.EventResource = "computedomains.v1beta1.resource.nvidia.com"
	claimTemplateResource fwk.EventResource = "resourceclaimtemplates.v1.resource.k8s.io"
)

// EventsToRegister implements fwk.EnqueueExtensions: a rejected ComputeDomain pod is retried
// only when something that could help happens, and then on a view that has it (caughtUp,
// feed_catchup.go); events that only add capacity retry a waiting domain through its scout
// (scouted, scout.go). PodGroups reach the feed through an informer of its own, which wakes the
// group's pods itself when their record changes.
//
// The events are registered under the keys the in-tree plugins of the default profile use
// wherever one covers them (inTreeEventKeys in hints_test.go lists them): the scheduling queue
// walks every key of its hint map for every waiting pod at every cluster event, so a key of our
// own costs every pod of the cluster, ComputeDomain pod or not. Where one of our hints sits under
// a key that also carries actions it does not care about (an assigned pod's label change), it
// skips them; where two keys overlap (a Node added), it answers the same under both.
func (p *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	podDeleted := p.scouted(p.caughtUp(cdplace.KindPod, p.isSchedulableAfterPodDeleted), nil)
	podBound := p.caughtUp(cdplace.KindPod, p.isSchedulableAfterPodBound)
	node := p.scouted(p.caughtUp(cdplace.KindNode, p.isSchedulableAfterNodeEvent), nil)
	events := []fwk.ClusterEventWithHint{
		// InterPodAffinity's and PodTopologySpread's key.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add | fwk.UpdatePodLabel | fwk.Delete}, QueueingHintFn: func(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
			switch {
			case newObj == nil:
				return podDeleted(logger, pod, oldObj, newObj)
			case oldObj == nil:
				return podBound(logger, pod, oldObj, newObj)
			default:
				changed, _ := newObj.(*v1.Pod)
				return hint(logger, fwk.QueueSkip, "an assigned pod's labels changed: no fact of ours", pod, changed)
			}
		}},
		// PodTopologySpread's key, and NodeResourcesFit's for allocatable.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Delete | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: node},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: node},
		// DynamicResources' key.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.scouted(p.caughtUp(cdplace.KindResourceClaim, p.isSchedulableAfterClaimChange), claimCreatedFor)},
		// Our own keys: no in-tree plugin watches slices being deleted (a stale slice of a GPU
		// pool going completes the pool), nor claim templates.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.scouted(p.caughtUp(cdplace.KindResourceSlice, p.isSchedulableAfterSliceChange), nil)},
		{Event: fwk.ClusterEvent{Resource: claimTemplateResource, ActionType: fwk.Add}, QueueingHintFn: p.caughtUp(cdplace.KindResourceClaimTemplate, p.isSchedulableAfterTemplateAdded)},
	}
	// Only when the Workload API was served at start (the scheduler registers PodGroup handlers
	// itself then): a key for events that never come would still be walked at every event.
	if p.podGroupEvents {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.PodGroup, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.isSchedulableAfterPodGroupChange})
	}
	// Only when the API was served at start: the scheduler waits for the informer of every
	// registered resource to sync before it schedules anything, and one for a resource that is
	// not served never does.
	if p.domainEvents {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: computeDomainResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.scouted(p.caughtUp(cdplace.KindComputeDomain, p.isSchedulableAfterComputeDomainChange), domainNotDeleted)})
	}
	return events, nil
}

// hint returns h and logs why at V(5) when the event queues the pod, at V(6) when it skips it,
// as the in-tree DynamicResources hints do. The check keeps the hints, which run for every
// waiting pod at every event, from building a line that is not written.
func hint(logger klog.Logger, h fwk.QueueingHint, why string, pod *v1.Pod, obj klog.KMetadata) (fwk.QueueingHint, error) {
	level := 5
	if h == fwk.QueueSkip {
		level = 6
	}
	if v := logger.V(level); v.Enabled() {
		v.Info("ComputeDomainPlacement: "+why, "pod", klog.KObj(pod), "object", klog.KObj(obj), "hint", h.String())
	}
	return h, nil
}

// isSchedulableAfterNodeEvent: a Node deleted, or added or changed (see the two below).
func (p *Plugin) isSchedulableAfterNodeEvent(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if newObj == nil {
		return p.isSchedulableAfterNodeDeleted(logger, pod, oldObj, newObj)
	}
	return p.isSchedulableAfterNodeChange(logger, pod, oldObj, newObj)
}

// isSchedulableAfterPodDeleted: a placed pod that held GPUs or claims freed its tray.
func (p *Plugin) isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, nil)
	if err != nil {
		return fwk.Queue, err
	}
	// A pod whose GPU sum does not fit counted as holding GPUs: queueing is the safe side.
	if gpus, err := facts.PodGPUs(deleted, p.keys); len(deleted.Spec.ResourceClaims) > 0 || gpus > 0 || err != nil {
		return hint(logger, fwk.Queue, "a pod holding accelerators was deleted", pod, deleted)
	}
	return hint(logger, fwk.QueueSkip, "a pod holding no accelerators was deleted", pod, deleted)
}

// isSchedulableAfterPodBound: a pod of the same ComputeDomain (same namespace, same channel
// template or claim) was bound: the domain now has a clique.
func (p *Plugin) isSchedulableAfterPodBound(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	_, bound, err := util.As[*v1.Pod](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if bound.Namespace == pod.Namespace && sharesClaimSource(pod, bound) {
		return hint(logger, fwk.Queue, "a pod of the same domain was bound", pod, bound)
	}
	return hint(logger, fwk.QueueSkip, "a pod of another domain was bound", pod, bound)
}

func sharesClaimSource(a, b *v1.Pod) bool {
	for _, x := range a.Spec.ResourceClaims {
		for _, y := range b.Spec.ResourceClaims {
			if x.ResourceClaimTemplateName != nil && y.ResourceClaimTemplateName != nil && *x.ResourceClaimTemplateName == *y.ResourceClaimTemplateName {
				return true
			}
			if x.ResourceClaimName != nil && y.ResourceClaimName != nil && *x.ResourceClaimName == *y.ResourceClaimName {
				return true
			}
		}
	}
	return false
}

// isSchedulableAfterNodeChange: a new NVLink tray, a clique label set or changed, the driver's
// domain label removed or changed, a tray uncordoned, or more GPUs.
func (p *Plugin) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	clique := newNode.Labels[p.keys.CliqueLabel]
	if oldNode == nil {
		if clique != "" {
			return hint(logger, fwk.Queue, "a tray of a clique was added", pod, newNode)
		}
		return hint(logger, fwk.QueueSkip, "a node without a clique label was added", pod, newNode)
	}
	gpus := v1.ResourceName(p.keys.GPUResourceName)
	oldGPUs, newGPUs := oldNode.Status.Allocatable[gpus], newNode.Status.Allocatable[gpus]
	switch {
	case clique != oldNode.Labels[p.keys.CliqueLabel] && clique != "":
	case oldNode.Labels[DomainLabel] != "" && oldNode.Labels[DomainLabel] != newNode.Labels[DomainLabel]:
	case oldNode.Spec.Unschedulable && !newNode.Spec.Unschedulable:
	case newGPUs.Cmp(oldGPUs) > 0:
	default:
		return hint(logger, fwk.QueueSkip, "a node change frees nothing (no clique, domain label, uncordon or GPUs)", pod, newNode)
	}
	return hint(logger, fwk.Queue, "a node change may help", pod, newNode)
}

// isSchedulableAfterNodeDeleted: an NVLink tray went away. That frees nothing, but what the
// policy promised in its clique changes: a head-of-queue reservation that clique can no longer
// hold moves elsewhere (and the trays it held open again), and a domain held to the clique
// only by a pod nominated to that node is released.
func (p *Plugin) isSchedulableAfterNodeDeleted(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	node, _, err := util.As[*v1.Node](oldObj, nil)
	if err != nil {
		return fwk.Queue, err
	}
	if _, ok := node.Labels[p.keys.CliqueLabel]; ok {
		return hint(logger, fwk.Queue, "a tray of a clique was deleted", pod, node)
	}
	return hint(logger, fwk.QueueSkip, "a node without a clique label was deleted", pod, node)
}

// isSchedulableAfterClaimChange: a claim was deallocated or deleted (its tray may be free), or
// a claim the pod waits for appeared.
func (p *Plugin) isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldClaim, newClaim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	switch {
	case newClaim == nil: // deleted
		if oldClaim != nil && oldClaim.Status.Allocation != nil {
			return hint(logger, fwk.Queue, "an allocated claim was deleted", pod, oldClaim)
		}
		return hint(logger, fwk.QueueSkip, "an unallocated claim was deleted", pod, oldClaim)
	case oldClaim == nil: // added
		if newClaim.Namespace == pod.Namespace && podNamesClaim(pod, newClaim.Name) {
			return hint(logger, fwk.Queue, "a claim of the pod was created", pod, newClaim)
		}
		return hint(logger, fwk.QueueSkip, "another pod's claim was created", pod, newClaim)
	case oldClaim.Status.Allocation != nil && newClaim.Status.Allocation == nil:
		return hint(logger, fwk.Queue, "a claim was deallocated", pod, newClaim)
	}
	return hint(logger, fwk.QueueSkip, "a claim changed without being deallocated", pod, newClaim)
}

func podNamesClaim(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil && *c.ResourceClaimName == name {
			return true
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil && *s.ResourceClaimName == name {
			return true
		}
	}
	return false
}

// isSchedulableAfterSliceChange: the GPU driver published, changed or withdrew devices of a
// node (a withdrawn slice can help too: a pool's superseded generation no longer counts, and a
// tray whose GPU count falls to what its pods take becomes a whole tray for them).
func (p *Plugin) isSchedulableAfterSliceChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldSlice, slice, err := util.As[*resourceapi.ResourceSlice](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if slice == nil {
		slice = oldSlice
	}
	if slice.Spec.Driver == p.keys.GPUDriver && slice.Spec.NodeName != nil {
		return hint(logger, fwk.Queue, "a node's GPU slice changed", pod, slice)
	}
	return hint(logger, fwk.QueueSkip, "a slice of another driver, or of no node, changed", pod, slice)
}

func unstructuredOf(oldObj, newObj any) (*unstructured.Unstructured, error) {
	obj := newObj
	if obj == nil {
		obj = oldObj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return u, nil
}

// isSchedulableAfterComputeDomainChange: the pod's own ComputeDomain appeared (the pod may have
// waited for it) or a domain in its namespace changed its size (the annotation or
// spec.numNodes), or any domain was deleted (its pods and promises go away). Another domain's
// creation frees nothing (it has no pods yet), and under churn every waiting pod would be
// retried for each new domain. The driver's status updates, which are most of a domain's
// updates, change neither and are skipped.
func (p *Plugin) isSchedulableAfterComputeDomainChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	u, err := unstructuredOf(oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	switch {
	case newObj == nil:
		return hint(logger, fwk.Queue, "a ComputeDomain was deleted", pod, u)
	case u.GetNamespace() != pod.Namespace:
		return hint(logger, fwk.QueueSkip, "a ComputeDomain of another namespace changed", pod, u)
	case oldObj == nil:
		if mayJoin(pod, u) {
			return hint(logger, fwk.Queue, "the pod's ComputeDomain may have appeared", pod, u)
		}
		return hint(logger, fwk.QueueSkip, "another ComputeDomain was created", pod, u)
	}
	old, err := unstructuredOf(nil, oldObj)
	if err != nil {
		return fwk.Queue, err
	}
	before, errBefore := facts.DomainOf(old, p.keys)
	after, errAfter := facts.DomainOf(u, p.keys)
	if errBefore != nil || errAfter != nil || !equalU32(before.SizeHint, after.SizeHint) || !equalU32(before.NumNodes, after.NumNodes) {
		return hint(logger, fwk.Queue, "a ComputeDomain's size changed", pod, u)
	}
	return hint(logger, fwk.QueueSkip, "a ComputeDomain changed but not its size (a status update)", pod, u)
}

// domainNotDeleted: of the ComputeDomain events, only a deletion (another domain's pods and
// promises gone) is left to a waiting domain's scout; its own domain appearing or resizing
// concerns every pod.
func domainNotDeleted(_ *v1.Pod, _, newObj any) bool { return newObj != nil }

// mayJoin is whether pod may belong to ComputeDomain u: it names u's channel template, or a
// claim by name (whose domain only the claim says), or u names no template.
func mayJoin(pod *v1.Pod, u *unstructured.Unstructured) bool {
	template := facts.ChannelTemplateOf(u)
	if template == "" {
		return true
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil || (c.ResourceClaimTemplateName != nil && *c.ResourceClaimTemplateName == template) {
			return true
		}
	}
	return false
}

func equalU32(a, b *uint32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// isSchedulableAfterPodGroupChange: the pod's PodGroup appeared, changed its spec (minCount,
// the domain's size; its priority) or went away (the size falls back to the owners).
func (p *Plugin) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPG, newPG, err := util.As[*schedulingv1beta1.PodGroup](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	pg := newPG
	if pg == nil {
		pg = oldPG
	}
	g := pod.Spec.SchedulingGroup
	if pg.Namespace != pod.Namespace || g == nil || g.PodGroupName == nil || *g.PodGroupName != pg.Name {
		return hint(logger, fwk.QueueSkip, "another PodGroup changed", pod, pg)
	}
	if oldPG != nil && newPG != nil && equality.Semantic.DeepEqual(oldPG.Spec, newPG.Spec) {
		return hint(logger, fwk.QueueSkip, "the pod's PodGroup changed but not its spec", pod, pg)
	}
	return hint(logger, fwk.Queue, "the pod's PodGroup appeared, changed its spec or went away", pod, pg)
}

// isSchedulableAfterTemplateAdded: the template the pod names was created (by the driver).
func (p *Plugin) isSchedulableAfterTemplateAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	u, err := unstructuredOf(oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if u.GetNamespace() == pod.Namespace {
		for _, c := range pod.Spec.ResourceClaims {
			if c.ResourceClaimTemplateName != nil && *c.ResourceClaimTemplateName == u.GetName() {
				return hint(logger, fwk.Queue, "the pod's claim template was created", pod, u)
			}
		}
	}
	return hint(logger, fwk.QueueSkip, "another claim template was created", pod, u)
}
