package computedomain

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// channelClaim is a claim with the driver's channel config for domain uid.
func channelClaim(name, uid string) *resourceapi.ResourceClaim {
	t := channelTemplate("x", uid)
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: t.Spec.Spec}
}

func gpuTemplate(name string) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: gpuClaim("x").Spec}}
}

func daemonTemplate(name, uid string) *resourceapi.ResourceClaimTemplate {
	t := channelTemplate("d", uid)
	t.Name = name
	t.Labels["resource.nvidia.com/computeDomainTarget"] = "Daemon"
	return t
}

func podWithClaim(name string, c v1.PodResourceClaim, generated string) *v1.Pod {
	p := makePod(name, "", 4)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{c}
	if generated != "" {
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: c.Name, ResourceClaimName: ptr.To(generated)}}
	}
	return p
}

// Which pods are ComputeDomain pods is decided in Go: every other pod is skipped without a call
// into the policy; a ComputeDomain pod gets its decision.
func TestClassification(t *testing.T) {
	fromTemplate := func(tpl string) v1.PodResourceClaim {
		return v1.PodResourceClaim{Name: "c", ResourceClaimTemplateName: ptr.To(tpl)}
	}
	shared := v1.PodResourceClaim{Name: "c", ResourceClaimName: ptr.To("shared-channel")}
	cases := []struct {
		name string
		pod  *v1.Pod
		cd   bool
	}{
		{"plain GPU pod", makePod("plain", "", 4), false},
		{"DRA GPU pod", podWithClaim("dra", fromTemplate("one-gpu"), ""), false},
		{"DRA GPU pod, claim generated", podWithClaim("dra-gen", fromTemplate("one-gpu"), "dra-gen-gpus"), false},
		{"ComputeDomain pod from the driver's template", podWithClaim("cd-tpl", fromTemplate("cd-channel"), ""), true},
		{"ComputeDomain pod by its generated claim", podWithClaim("cd-gen", fromTemplate("not-seen-yet"), "cd-gen-channel"), true},
		{"ComputeDomain pod by a shared claim", podWithClaim("cd-shared", shared, ""), true},
		{"IMEX daemon pod", podWithClaim("daemon", fromTemplate("cd-daemon"), ""), false},
		{"claim of a template that does not exist", podWithClaim("ghost", fromTemplate("ghost"), ""), false},
	}
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), gpuTemplate("one-gpu"), daemonTemplate("cd-daemon", "uid-cd"),
		channelClaim("shared-channel", "uid-cd"), channelClaim("cd-gen-channel", "uid-cd"), gpuClaim("dra-gen-gpus")}
	for _, c := range cases {
		objs = append(objs, c.pod)
	}
	// Steering off: this is about which pods the policy decides as ComputeDomain pods
	// (TestPlainPodsAreSteered covers what steering adds).
	e := newEnv(t, `{"plainPodSteering": false}`, rack("a", 1, 4), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 4)}, objs...)
	e.apply()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			crossed := e.plugin.Cluster().Crossings()
			r := e.schedule(c.pod)
			calls := e.plugin.Cluster().Crossings() - crossed
			if !c.cd {
				if !r.skipped || calls != 0 {
					t.Fatalf("want Skip without a call: %v skipped=%v, %d calls", r.preFilter, r.skipped, calls)
				}
				if _, st := e.plugin.SignPod(context.Background(), c.pod); st != nil {
					t.Fatalf("SignPod must sign a pod it skips: %v", st)
				}
				return
			}
			if r.skipped || calls == 0 {
				t.Fatalf("a ComputeDomain pod is decided by the policy: %v skipped=%v, %d calls", r.preFilter, r.skipped, calls)
			}
			wantCode(t, "prefilter", r.preFilter, fwk.Success, "")
			if _, st := e.plugin.SignPod(context.Background(), c.pod); st.Code() != fwk.Unschedulable {
				t.Fatalf("SignPod must refuse a ComputeDomain pod: %v", st)
			}
		})
	}

	// Handler lag: the feed has not seen the template yet, the scheduler's cache has; the pod is
	// still a ComputeDomain pod.
	e.plugin.feed.deleteClaimLike(cdplace.KindResourceClaimTemplate, ns, "cd-channel", "")
	if _, cd := e.plugin.feed.isComputeDomainPod(cases[3].pod); !cd {
		t.Fatal("a template only the listers have must still classify the pod")
	}
}

// With no ComputeDomain API served, a pod with a claim of no domain is skipped at once with no
// call, and a ComputeDomain pod is rejected at once with the reason; once the API appears (seen
// at the next discovery after crdRecheck) the informer starts and the pod is decided.
func TestWithoutTheComputeDomainAPI(t *testing.T) {
	now := timeNow()
	setTimeNow(func() time.Time { return now })
	t.Cleanup(func() { setTimeNow(nil) })
	dra := podWithClaim("dra", v1.PodResourceClaim{Name: "c", ResourceClaimTemplateName: ptr.To("one-gpu")}, "")
	p := cdPod("cd", "p")
	e := newEnvWith(t, false, `{"plainPodSteering": false}`, rack("a", 1, 4), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1)},
		channelTemplate("cd", "uid-cd"), gpuTemplate("one-gpu"), dra, p)
	if e.plugin.HasSynced() != true {
		t.Fatal("the feed syncs without the ComputeDomain informer")
	}
	events, _ := e.plugin.EventsToRegister(context.Background())
	for _, ev := range events {
		if ev.Event.Resource == computeDomainResource {
			t.Fatal("ComputeDomain events must not be registered when the API is not served (the scheduler would wait for their informer)")
		}
	}
	crossed := e.plugin.Cluster().Crossings()
	start := time.Now()
	r := e.schedule(dra)
	if !r.skipped || e.plugin.Cluster().Crossings() != crossed {
		t.Fatalf("a DRA pod is skipped without a call: %v skipped=%v", r.preFilter, r.skipped)
	}
	wantCode(t, "ComputeDomain pod", e.schedule(p).preFilter, fwk.Unschedulable, noCRDReason)
	if took := time.Since(start); took > 5*time.Second || e.plugin.Cluster().Crossings() != crossed {
		t.Fatalf("no wait and no call: took %v, %d calls", took, e.plugin.Cluster().Crossings()-crossed)
	}

	servesComputeDomains(e.client)
	wantCode(t, "before the recheck", e.schedule(p).preFilter, fwk.Unschedulable, noCRDReason)
	now = now.Add(crdRecheck)
	waitFor(t, func() bool { return e.schedule(p).preFilter.IsSuccess() })
	if !e.plugin.feed.podInView(ns, "p") {
		t.Fatal("the decided pod is in the view")
	}
}

// The next pod of a domain reuses the decision while nothing crossed into the view since.
func TestDecisionsAreReusedWhileTheViewIsUnchanged(t *testing.T) {
	pods := make([]runtime.Object, 0, 4)
	for i := 0; i < 4; i++ {
		pods = append(pods, cdPod("cd", fmt.Sprintf("p%d", i)))
	}
	// Five trays, two held by GPU pods: three free for a domain of four.
	pods = append(pods, channelTemplate("cd", "uid-cd"), boundTo(makePod("g0", "", 4), "a-00"), boundTo(makePod("g1", "", 4), "a-01"))
	e := newEnv(t, "", rack("a", 1, 5), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 4)}, pods...)
	e.apply()
	c := e.plugin.Cluster()
	first := e.schedule(pods[0].(*v1.Pod))
	wantCode(t, "p0", first.preFilter, fwk.Unschedulable, "needs 4 free trays")
	crossed := c.Crossings()
	wantCode(t, "p1", e.schedule(pods[1].(*v1.Pod)).preFilter, fwk.Unschedulable, "needs 4 free trays")
	if c.Crossings() != crossed {
		t.Fatalf("p1 asks the same question of the same view: %d calls", c.Crossings()-crossed)
	}
	// A tray freed: the view changed, the next pod is decided again.
	e.plugin.feed.deletePod(ns, "g0", "uid-g0")
	crossed = c.Crossings()
	wantCode(t, "p2", e.schedule(pods[2].(*v1.Pod)).preFilter, fwk.Success, "")
	if c.Crossings() == crossed {
		t.Fatal("after a change the policy must be asked again")
	}
}

// A plain GPU pod reserved onto a tray counts at once, like a ComputeDomain pod.
func TestReservingAPlainGPUPodCountsAtOnce(t *testing.T) {
	y0 := cdPod("y", "y0")
	gpu := makePod("gpu", "", 4)
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("y", "uid-y", 2)},
		channelTemplate("y", "uid-y"), y0, gpu)
	wantCode(t, "y0 before", e.schedule(y0).preFilter, fwk.Success, "")
	state := framework.NewCycleState()
	if st := e.fh.RunReservePluginsReserve(e.ctx, state, gpu, "a-00"); !st.IsSuccess() {
		t.Fatalf("reserve: %v", st)
	}
	wantCode(t, "y0 after the GPU pod's reserve", e.schedule(y0).preFilter, fwk.Unschedulable, "needs 2 free trays")
	e.fh.RunReservePluginsUnreserve(e.ctx, state, gpu, "a-00")
	wantCode(t, "y0 after unreserve", e.schedule(y0).preFilter, fwk.Success, "")
	if e.plugin.feed.podInView(ns, "gpu") {
		t.Fatal("an unreserved pending GPU pod leaves the view")
	}
	// Reserving it on a node of no clique costs nothing.
	crossed := e.plugin.Cluster().Crossings()
	e.fh.RunReservePluginsReserve(e.ctx, state, gpu, "cpu-0")
	if e.plugin.Cluster().Crossings() != crossed {
		t.Fatal("a reserve on a node of no clique must not cross")
	}
}
