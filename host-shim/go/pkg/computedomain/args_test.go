package computedomain

import (
	"strings"
	"testing"

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
