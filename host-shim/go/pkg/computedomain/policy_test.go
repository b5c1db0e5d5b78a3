package computedomain

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The policy source is the host's to validate, with the field paths of the in-tree plugins'
// args; the policy never sees it.
func TestPolicyArgsAreValidatedByTheHost(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const at = "pluginConfig[ComputeDomainPlacement].args."
	cases := []struct{ args, want string }{
		{`{"policy":{"source":"git"}}`, at + `policy.source: Unsupported value: "git": supported values: "embedded", "file", "configMap", "secret"`},
		{`{"policy":{}}`, at + `policy.source: Required value: one of embedded, file, configMap, secret`},
		{`{"policy":"file"}`, at + `policy: Invalid value: "\"file\"": must be an object: {source: embedded|file|configMap|secret, ...}`},
		{`{"policy":{"source":"file"}}`, at + `policy.path: Required value: the component file to load`},
		{`{"policy":{"source":"file","path":"policy.wasm"}}`, at + `policy.path: Invalid value: "policy.wasm": must be an absolute path`},
		{`{"policy":{"source":"embedded","path":"/x.wasm"}}`, at + `policy.path: Forbidden: not used with source embedded`},
		{`{"policy":{"source":"file","path":"/x.wasm","url":"http://x"}}`, at + `policy: Unsupported value: "url": supported values: "source", "path", "namespace", "name", "key"`},
		{`{"policy":{"source":"configMap","namespace":"kube-system","key":"policy.wasm"}}`, at + `policy.name: Required value`},
		{`{"policy":{"source":"configMap","namespace":"Kube_System","name":"p","key":"policy.wasm"}}`, at + `policy.namespace: Invalid value: "Kube_System": a lowercase RFC 1123 label`},
		{`{"policy":{"source":"configMap","namespace":"kube-system","name":"p","key":"a/b"}}`, at + `policy.key: Invalid value: "a/b": a valid config key must consist of`},
		{`{"policy":{"source":"configMap","namespace":"kube-system","name":"p","key":"k","path":"/x"}}`, at + `policy.path: Forbidden: not used with source configMap`},
		{`{"policy":{"source":"file","path":"/x.wasm"},"guestPath":"/y.wasm"}`, at + `guestPath: Forbidden: set policy or guestPath, not both (guestPath is short for policy {source: file, path: ...})`},
		{`{"guestPath":"relative.wasm"}`, at + `guestPath: Invalid value: "relative.wasm": must be an absolute path`},
		{`{"policy":{"source":"file","path":"/nonexistent/policy.wasm"}}`, at + `policy.path: reading the policy component: open /nonexistent/policy.wasm: no such file or directory`},
	}
	for _, c := range cases {
		_, err := New(ctx, &runtime.Unknown{Raw: []byte(c.args)}, handle(t))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("args %s:\n got %v\nwant prefix %q", c.args, err, c.want)
		}
	}
	// Two mistakes at once: both named.
	_, err := New(ctx, &runtime.Unknown{Raw: []byte(`{"policy":{"source":"configMap"}}`)}, handle(t))
	for _, f := range []string{"policy.namespace: Required value", "policy.name: Required value", "policy.key: Required value"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("missing %q in %v", f, err)
		}
	}
}

// The policy's args go without the host's fields; guestPath is the file source's shorthand.
func TestParsePolicy(t *testing.T) {
	src, rest, errs := parsePolicy([]byte(`{"guestPath":"/etc/p.wasm","wholeTray":"Off"}`))
	if len(errs) != 0 || src.Source != policyFile || src.Path != "/etc/p.wasm" || string(rest) != `{"wholeTray":"Off"}` {
		t.Fatalf("guestPath: %+v %s %v", src, rest, errs)
	}
	src, rest, errs = parsePolicy([]byte(`{"policy":{"source":"configMap","namespace":"kube-system","name":"cdplace-policy","key":"policy.wasm"}}`))
	if len(errs) != 0 || src.String() != "ConfigMap kube-system/cdplace-policy key policy.wasm" || string(rest) != `{}` {
		t.Fatalf("configMap: %+v %s %v", src, rest, errs)
	}
	src, _, errs = parsePolicy([]byte(`{}`))
	if len(errs) != 0 || src.Source != policyEmbedded {
		t.Fatalf("default: %+v %v", src, errs)
	}
}

// testComponent is a component `make guest` builds into target/wasm32-wasip2/guest.
func testComponent(t *testing.T, name string) []byte {
	t.Helper()
	p, err := filepath.Abs("../../../../target/wasm32-wasip2/guest/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s is built by `make guest`: %v", name, err)
	}
	return b
}

// replaceFile writes b to path as kubelet updates a mounted file: a new file renamed over it.
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// preferred is the clique whose nodes score highest for the pod, and the cycle's generation.
func preferred(t *testing.T, e *env, pod *v1.Pod) (string, uint64) {
	t.Helper()
	r := e.schedule(pod)
	wantCode(t, "PreFilter", r.preFilter, 0, "")
	s, err := getState(r.state)
	if err != nil {
		t.Fatal(err)
	}
	best, top := "", int64(-1)
	for node, score := range r.score {
		if score > top {
			best, top = node, score
		}
	}
	if best == "" {
		t.Fatalf("no node scored: %+v", r)
	}
	return best[:1], s.decision.Generation
}

// A file source is watched: new content is checked and swapped in while the plugin schedules
// (the cycle's decision says which generation made it), and content that fails a check is
// refused with the check's reason and the metric, the live policy deciding on.
func TestAFilePolicyIsSwappedInAndABadOneRefused(t *testing.T) {
	old := policyPollInterval
	policyPollInterval = 20 * time.Millisecond
	t.Cleanup(func() { policyPollInterval = old })
	worst := testComponent(t, "cdplace_guest_worstfit.wasm")
	faulty := testComponent(t, "cdplace_faulty_guest.wasm")
	path := filepath.Join(t.TempDir(), "policy.wasm")
	replaceFile(t, path, cdplace.GuestWasm)

	// Clique a has 2 trays, b has 4: a domain of 2 fits both; best fit prefers a, worst fit b.
	pod := cdPod("cd", "p0")
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), pod}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}
	nodes := append(rack("a", 1, 2), rack("b", 2, 4)...)
	e := newEnv(t, `{"policy":{"source":"file","path":`+strconv.Quote(path)+`}}`, nodes, cds, objs...)
	var woken struct {
		sync.Mutex
		keys []nsName
	}
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(k []nsName) { woken.Lock(); woken.keys = append(woken.keys, k...); woken.Unlock() }
	e.plugin.feed.mu.Unlock()
	if c, g := preferred(t, e, pod); c != "a" || g != 1 {
		t.Fatalf("the embedded best fit, generation 1: clique %s, generation %d", c, g)
	}
	digest0, _ := e.plugin.Policy()
	if digest0 != digestOf(cdplace.GuestWasm) {
		t.Fatalf("live digest %s", digest0)
	}
	applied, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("applied", "passed"))

	replaceFile(t, path, worst)
	waitFor(t, func() bool { _, g := e.plugin.Policy(); return g == 2 })
	if c, g := preferred(t, e, pod); c != "b" || g != 2 {
		t.Fatalf("after the swap, worst fit decides as generation 2: clique %s, generation %d", c, g)
	}
	if v, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("applied", "passed")); v != applied+1 {
		t.Fatalf("applied swaps %v, want %v", v, applied+1)
	}
	if v, _ := testutil.GetGaugeMetricValue(policyInfo.WithLabelValues(digestOf(worst), policyFile, "2")); v != 1 {
		t.Fatalf("cdplace_policy_info of generation 2: %v", v)
	}
	if policyInfo.DeleteLabelValues(digest0, policyFile, "1") {
		t.Fatal("the old policy's cdplace_policy_info series was left behind")
	}

	// The swap moved the waiting pod back to the active queue (issue 45: a swap left pods the
	// old policy refused in their backoff for up to 5 minutes).
	woken.Lock()
	if !slices.Contains(woken.keys, (nsName{ns, "p0"})) {
		t.Errorf("after the swap the waiting pod was not requeued: %v", woken.keys)
	}
	woken.Unlock()

	// The faulty component answers other host settings: refused, generation 2 keeps deciding.
	refused, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("refused", "settings"))
	handled := e.plugin.policy.handled()
	replaceFile(t, path, faulty)
	waitFor(t, func() bool { return e.plugin.policy.handled() > handled })
	if v, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("refused", "settings")); v != refused+1 {
		t.Fatalf("refused swaps (settings) %v, want %v", v, refused+1)
	}
	if c, g := preferred(t, e, pod); c != "b" || g != 2 {
		t.Fatalf("after a refusal generation 2 decides: clique %s, generation %d", c, g)
	}

	// Not a component at all: refused when compiled.
	compile, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("refused", "compile"))
	handled = e.plugin.policy.handled()
	replaceFile(t, path, []byte("not wasm"))
	waitFor(t, func() bool { return e.plugin.policy.handled() > handled })
	if v, _ := testutil.GetCounterMetricValue(policySwaps.WithLabelValues("refused", "compile")); v != compile+1 {
		t.Fatalf("refused swaps (compile) %v, want %v", v, compile+1)
	}
	// And back to the shipped policy: generation 3, best fit again.
	replaceFile(t, path, cdplace.GuestWasm)
	waitFor(t, func() bool { _, g := e.plugin.Policy(); return g == 3 })
	if c, g := preferred(t, e, pod); c != "a" || g != 3 {
		t.Fatalf("generation 3 is best fit again: clique %s, generation %d", c, g)
	}
}

// A Secret source: the component in data[key] of that Secret is checked and swapped in as a
// ConfigMap's is; a Secret without the key refuses nothing and changes nothing.
func TestASecretPolicyIsSwappedIn(t *testing.T) {
	worst := testComponent(t, "cdplace_guest_worstfit.wasm")
	pod := cdPod("cd", "p0")
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cdplace-policy"},
		Data: map[string][]byte{"policy.wasm": worst}}
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), pod, secret}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}
	nodes := append(rack("a", 1, 2), rack("b", 2, 4)...)
	e := newEnv(t, `{"policy":{"source":"secret","namespace":"kube-system","name":"cdplace-policy","key":"policy.wasm"}}`, nodes, cds, objs...)
	waitFor(t, func() bool { _, g := e.plugin.Policy(); return g == 2 })
	if d, _ := e.plugin.Policy(); d != digestOf(worst) {
		t.Fatalf("live digest %s, want the Secret's %s", d, digestOf(worst))
	}
	if c, g := preferred(t, e, pod); c != "b" || g != 2 {
		t.Fatalf("the Secret's worst fit decides as generation 2: clique %s, generation %d", c, g)
	}
	src, _, errs := parsePolicy([]byte(`{"policy":{"source":"secret","namespace":"kube-system","name":"p","key":"k"}}`))
	if len(errs) != 0 || src.String() != "Secret kube-system/p key k" {
		t.Fatalf("%+v %v", src, errs)
	}
}
