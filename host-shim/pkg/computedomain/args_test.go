package computedomain

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"
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
		{`{"guestPath":"/nonexistent/policy.wasm"}`, "reading guestPath: open /nonexistent/policy.wasm: no such file or directory"},
	}
	for _, c := range cases {
		_, err := New(ctx, &runtime.Unknown{Raw: []byte(c.args)}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("args %s: got %v, want prefix %q", c.args, err, c.want)
		}
	}
}
