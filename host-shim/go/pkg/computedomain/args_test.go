package computedomain

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// Bad args fail the factory (and so scheduler start-up) with the policy's message (the one
// validator) under the args' path.
func TestNewRejectsBadArgs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const at = "pluginConfig[ComputeDomainPlacement].args: "
	cases := []struct{ args, want string }{
		{`{"wholeTrays":"Off"}`, at + "invalid plugin args: unknown field `wholeTrays`, expected one of `apiVersion`, `kind`, `imexMode`, `wholeTray`"},
		{`{"wholeTray":"Sometimes"}`, at + "invalid plugin args: unknown variant `Sometimes`, expected one of `Require`, `Prefer`, `Off`"},
		{`{"reserveTraysPerClique":"two"}`, at + "invalid plugin args: invalid type: string \"two\", expected u32"},
		{`{"reserveTraysPerClique":18}`, at + `invalid plugin args: reserveTraysPerClique: Invalid value: "18": must be less than maxTraysPerClique (18)`},
		{`{"cliqueLabel":"nvidia.com/"}`, at + `invalid plugin args: cliqueLabel: Invalid value: "nvidia.com/": name part must be 1-63 characters`},
		{`{"guestCallTimeout":"forever"}`, at + `invalid plugin args: guestCallTimeout: Invalid value: "forever": must be a duration such as 2s`},
		{`{"cliqueReservationDepth":0}`, at + `invalid plugin args: cliqueReservationDepth: Invalid value: "0": must be between 1 and 64`},
		{`{"guestMemoryLimitMiB":4}`, at + `invalid plugin args: guestMemoryLimitMiB: Invalid value: "4": must be between 16 and 65536`},
		{`{"guestPath":"/nonexistent/policy.wasm"}`, "pluginConfig[ComputeDomainPlacement].args.guestPath: reading the policy component: open /nonexistent/policy.wasm: no such file or directory"},
		{`[1]`, "decoding ComputeDomainPlacementArgs: want an object of fields, got a list"},
	}
	for _, c := range cases {
		_, err := New(ctx, &runtime.Unknown{Raw: []byte(c.args)}, handle(t))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("args %s: got %v, want prefix %q", c.args, err, c.want)
		}
	}
}

// handle is a framework handle over a fake API, for factory calls.
func handle(t *testing.T) fwk.Handle {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewSimpleClientset()
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "", frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return fh
}

// guestPath loads that component: the cluster is made from it (the test-only faulty component
// skips every pod the real policy would decide).
func TestGuestPathLoadsThatComponent(t *testing.T) {
	faulty, err := filepath.Abs("../../../../target/wasm32-wasip2/guest/cdplace_faulty_guest.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(faulty); err != nil {
		t.Fatalf("the faulty component is built by `make guest`: %v", err)
	}
	pod := cdPod("cd", "p")
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), pod}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1)}
	wantCode(t, "embedded policy", newEnv(t, "", rack("a", 1, 2), cds, objs...).schedule(pod).preFilter, fwk.Success, "")
	e := newEnv(t, `{"guestPath":`+strconv.Quote(faulty)+`,"guestCallTimeout":"500ms"}`, rack("a", 1, 2), cds, objs...)
	if r := e.schedule(pod); !r.skipped {
		t.Fatalf("the component at guestPath decides: %v", r.preFilter)
	}
	s, err := e.plugin.Cluster().Settings()
	if err != nil || s.CallTimeoutMs != 500 {
		t.Fatalf("the limits come from the args: %+v %v", s, err)
	}
}
