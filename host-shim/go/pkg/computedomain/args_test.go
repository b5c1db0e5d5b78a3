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

// Bad args fail the factory (and so scheduler start-up) with an exact error.
func TestNewRejectsBadArgs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cases := []struct{ args, want string }{
		{`{"wholeTrays":"Off"}`, `decoding ComputeDomainPlacementArgs: json: unknown field "wholeTrays"`},
		{`{"wholeTray":"Sometimes"}`, "invalid plugin args: unknown variant `Sometimes`, expected one of `Require`, `Prefer`, `Off`"},
		{`{"reserveTraysPerClique":18}`, `invalid plugin args: reserveTraysPerClique: Invalid value: "18": must be less than maxTraysPerClique (18)`},
		{`{"cliqueLabel":"nvidia.com/"}`, `invalid plugin args: cliqueLabel: Invalid value: "nvidia.com/": name part must be 1-63 characters`},
		{`{"guestCallTimeout":"forever"}`, `pluginConfig[ComputeDomainPlacement].args.guestCallTimeout: Invalid value: "forever": must be a duration such as 2s`},
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
