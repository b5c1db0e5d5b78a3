package computedomain

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clientgotesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

const (
	ns      = "team-a"
	cluster = "0f8e7d6c-5b4a-4321-9876-abcdef012345"
)

func TestMain(m *testing.M) {
	metrics.Register()
	// Tests refresh the fleet status themselves (refreshFleet), so its Events come when asked.
	fleetInterval = 0
	os.Exit(m.Run())
}

func clique(id int) string { return fmt.Sprintf("%s.%d", cluster, id) }

func makeNode(name string, cliqueID int, gpus int64) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{
				v1.ResourceCPU:   resource.MustParse("72"),
				v1.ResourcePods:  resource.MustParse("110"),
				"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI),
			},
		},
	}
	if cliqueID > 0 {
		n.Labels["nvidia.com/gpu.clique"] = clique(cliqueID)
	}
	return n
}

func rack(prefix string, cliqueID, trays int) []*v1.Node {
	var nodes []*v1.Node
	for i := 0; i < trays; i++ {
		nodes = append(nodes, makeNode(fmt.Sprintf("%s-%02d", prefix, i), cliqueID, 4))
	}
	return nodes
}

func computeDomain(name, uid string, size int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.nvidia.com/v1beta1",
		"kind":       "ComputeDomain",
		"metadata":   map[string]any{"name": name, "namespace": ns, "uid": uid},
		"spec": map[string]any{
			"numNodes": int64(0),
			"channel":  map[string]any{"resourceClaimTemplate": map[string]any{"name": name + "-channel"}},
		},
	}}
	if size > 0 {
		u.SetAnnotations(map[string]string{"cdplace.nvidia.com/size": fmt.Sprint(size)})
	}
	return u
}

func channelTemplate(cd, uid string) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: cd + "-channel", Namespace: ns, Labels: map[string]string{
			DomainLabel: uid, "resource.nvidia.com/computeDomainTarget": "Workload"}},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "compute-domain-default-channel.nvidia.com"}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"channel"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "compute-domain.nvidia.com", Parameters: runtime.RawExtension{
					Raw: []byte(fmt.Sprintf(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":%q,"allocationMode":"Single"}`, uid))}}}}},
		}}},
	}
}

func makePod(name string, template string, gpus int64) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			SchedulerName: "computedomain-scheduler",
			Containers: []v1.Container{{Name: "main", Image: "trainer", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
				Limits:   v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			}}},
		},
	}
	if template != "" {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimTemplateName: ptr.To(template)}}
	}
	return p
}

func cdPod(cd, name string) *v1.Pod { return makePod(name, cd+"-channel", 4) }

func boundTo(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	p.Status.Phase = v1.PodRunning
	return p
}

// env is a scheduling framework with the plugin registered, over a fake API with informers.
type env struct {
	t      testing.TB
	ctx    context.Context
	fh     framework.Framework
	plugin *Plugin
	client *fake.Clientset
	dyn    *dynfake.FakeDynamicClient
	nodes  []*v1.Node
	events *events.FakeRecorder
	// objects fed to the API (benchmarks replay them).
	objects []any
	// podsWatched is closed once the pod informer's watch is open. The fake clientset drops
	// events between an informer's list (which ends the cache sync) and its watch, so a test
	// that needs the informer to see a change waits for it (see waitPodsWatched).
	podsWatched chan struct{}
}

// waitPodsWatched waits until the pod informer watches, so a pod change made now reaches it.
func (e *env) waitPodsWatched() {
	e.t.Helper()
	select {
	case <-e.podsWatched:
	case <-time.After(30 * time.Second):
		e.t.Fatal("the pod informer never started its watch")
	}
}

// servesComputeDomains makes the fake API server's discovery list the ComputeDomain API.
func servesComputeDomains(client *fake.Clientset) {
	client.Resources = append(client.Resources, &metav1.APIResourceList{
		GroupVersion: ComputeDomainGVR.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: ComputeDomainGVR.Resource, Kind: "ComputeDomain", Namespaced: true}},
	})
}

func newEnv(t testing.TB, args string, nodes []*v1.Node, cds []*unstructured.Unstructured, objs ...runtime.Object) *env {
	t.Helper()
	return newEnvWith(t, true, args, nodes, cds, objs...)
}

// newEnvWith is newEnv with the ComputeDomain API served or not.
func newEnvWith(t testing.TB, crd bool, args string, nodes []*v1.Node, cds []*unstructured.Unstructured, objs ...runtime.Object) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if _, bench := t.(*testing.B); bench {
		// Benchmarks measure the plugin, not verbose test logging.
		ctx = klog.NewContext(context.Background(), klog.Background().V(0))
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	all := append([]runtime.Object{}, objs...)
	for _, n := range nodes {
		all = append(all, n)
	}
	var pods []*v1.Pod
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			pods = append(pods, p)
		}
	}
	client := fake.NewSimpleClientset(all...)
	podsWatched := make(chan struct{})
	var watchOnce sync.Once
	client.PrependWatchReactor("pods", func(a clientgotesting.Action) (bool, watch.Interface, error) {
		// Open the watch on the tracker here, then signal: no event can fall between the two.
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err == nil {
			watchOnce.Do(func() { close(podsWatched) })
		}
		return true, w, err
	})
	if crd {
		servesComputeDomains(client)
	}
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	recorder := events.NewFakeRecorder(1000)
	scheme := runtime.NewScheme()
	dynObjs := make([]runtime.Object, 0, len(cds))
	for _, cd := range cds {
		dynObjs = append(dynObjs, cd)
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{ComputeDomainGVR: "ComputeDomainList"}, dynObjs...)
	old := NewDynamicClient
	NewDynamicClient = func(fwk.Handle) (dynamic.Interface, error) { return dyn, nil }
	t.Cleanup(func() { NewDynamicClient = old })

	var pluginArgs runtime.Object
	if args != "" {
		pluginArgs = &runtime.Unknown{Raw: []byte(args), ContentType: runtime.ContentTypeJSON}
	}
	var plugin *Plugin
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, pluginArgs, h)
		if err != nil {
			return nil, err
		}
		plugin = p.(*Plugin)
		return p, nil
	}
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve"),
	}, "computedomain-scheduler",
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(recorder),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(pods, nodes)),
	)
	if err != nil {
		t.Fatalf("framework: %v", err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return plugin.HasSynced(), nil
	}); err != nil {
		t.Fatalf("plugin never synced: %v", err)
	}
	// The test framework has no scheduling queue to activate pods in (its Activate would
	// dereference nil): tests that look at activations set their own.
	plugin.feed.mu.Lock()
	plugin.feed.activate = func([]nsName) {}
	plugin.feed.mu.Unlock()
	return &env{t: t, ctx: ctx, fh: fh, plugin: plugin, client: client, dyn: dyn, nodes: nodes, events: recorder, podsWatched: podsWatched}
}

// apply feeds objects straight into the plugin's view, as the informers would, and applies
// the batch.
func (e *env) apply(objs ...any) {
	e.t.Helper()
	for _, o := range objs {
		feedObject(e.t, e.plugin.feed, o)
	}
	if err := e.plugin.feed.flush(); err != nil {
		e.t.Fatal(err)
	}
}

// feedObject hands an object to the feed's handler for its kind, as the informers would (an
// unstructured object is a ComputeDomain).
func feedObject(t testing.TB, f *feed, obj any) {
	t.Helper()
	if !f.applyObject(cdplace.KindComputeDomain, obj) {
		t.Fatalf("no handler for %T", obj)
	}
}

// result of one scheduling cycle's PreFilter, Filter and Score for a pod.
type result struct {
	preFilter *fwk.Status
	skipped   bool
	allowed   []string
	filter    map[string]*fwk.Status
	// score is the plugin's score of each feasible node (through the framework, or asked of
	// Score directly when PreScore left Score out: scoreSkipped).
	score        map[string]int64
	scoreSkipped bool
	state        fwk.CycleState
}

func (e *env) schedule(pod *v1.Pod) result {
	e.t.Helper()
	state := framework.NewCycleState()
	res, st, _ := e.fh.RunPreFilterPlugins(e.ctx, state, pod)
	r := result{preFilter: st, skipped: state.GetSkipFilterPlugins().Has(Name), filter: map[string]*fwk.Status{}, score: map[string]int64{}, state: state}
	if res != nil && res.NodeNames != nil {
		r.allowed = sets.List(res.NodeNames)
	}
	if !st.IsSuccess() {
		return r
	}
	var feasible []fwk.NodeInfo
	for _, ni := range tf.BuildNodeInfos(e.nodes) {
		fs := e.fh.RunFilterPlugins(e.ctx, state, pod, ni)
		r.filter[ni.Node().Name] = fs
		if fs.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if st := e.fh.RunPreScorePlugins(e.ctx, state, pod, feasible); !st.IsSuccess() {
		e.t.Fatalf("prescore: %v", st)
	}
	scores, st := e.fh.RunScorePlugins(e.ctx, state, pod, feasible)
	if !st.IsSuccess() {
		e.t.Fatalf("score: %v", st)
	}
	for _, s := range scores {
		r.score[s.Name] = s.TotalScore
	}
	if _, err := getState(state); err == nil && state.GetSkipScorePlugins().Has(Name) {
		r.scoreSkipped = true
		// The same score on every node: what Score would have said, for the tests that compare
		// it with the policy's.
		for _, ni := range feasible {
			score, st := e.plugin.Score(e.ctx, state, pod, ni)
			if !st.IsSuccess() {
				e.t.Fatalf("score %s: %v", ni.Node().Name, st)
			}
			r.score[ni.Node().Name] = score
		}
	}
	return r
}

func wantCode(t *testing.T, what string, st *fwk.Status, code fwk.Code, reason string) {
	t.Helper()
	if st.Code() != code {
		t.Fatalf("%s: code %v (%v), want %v", what, st.Code(), st.Reasons(), code)
	}
	if reason != "" && !strings.Contains(strings.Join(st.Reasons(), "; "), reason) {
		t.Fatalf("%s: reasons %q do not contain %q", what, st.Reasons(), reason)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
