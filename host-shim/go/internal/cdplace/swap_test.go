package cdplace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The header and the library agree on the ABI version (the header's is the one owner).
func TestABIVersionsAgree(t *testing.T) {
	if got := LibraryABIVersion(); got != ABIVersion {
		t.Fatalf("libcdplace_host.a says ABI %d, cdplace.h %d", got, ABIVersion)
	}
}

// A swap through the wrapper: the report, the generation on later decisions, and a refused
// component's error wrapping ErrRefused with its check.
func TestSwapThroughTheWrapper(t *testing.T) {
	c := newTestCluster(t, "")
	if err := c.ApplyFacts(twoRacks().Bytes()); err != nil {
		t.Fatal(err)
	}
	if d, err := c.PreFilter("ns", "p1", nil); err != nil || d.Generation != 1 {
		t.Fatalf("before a swap: generation %v (%v)", d, err)
	}
	rt, err := NewRuntime(GuestWasm)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Swap(rt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Generation != 2 || r.PendingDomains != 1 || r.PlacedPods != 1 || r.Calls < 3 || r.SlowestCall == "" {
		t.Fatalf("report %+v", r)
	}
	if g := c.PolicyGeneration(); g != 2 {
		t.Fatalf("generation %d", g)
	}
	if d, err := c.PreFilter("ns", "p1", nil); err != nil || d.Generation != 2 || d.Status.Code != CodeSuccess {
		t.Fatalf("after the swap: %+v (%v)", d, err)
	}
	if d, err := c.Steer(true); err != nil || d.Generation != 2 {
		t.Fatalf("steering after the swap: %+v (%v)", d, err)
	}

	faultyPath, err := filepath.Abs("../../../../target/wasm32-wasip2/guest/cdplace_faulty_guest.wasm")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(faultyPath)
	if err != nil {
		t.Fatalf("the faulty component is built by `make guest`: %v", err)
	}
	faulty, err := NewRuntime(wasm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Swap(faulty)
	if !errors.Is(err, ErrRefused) || RefusedCheck(err) != "settings" || !strings.Contains(err.Error(), "plainPodSteering") {
		t.Fatalf("the faulty component's settings: %v (check %q)", err, RefusedCheck(err))
	}
	if g := c.PolicyGeneration(); g != 2 {
		t.Fatalf("a refusal changed the generation to %d", g)
	}
	_, err = NewRuntime([]byte("\x00asm\x0d\x00\x01\x00"))
	if !errors.Is(err, ErrWorld) || RefusedCheck(err) != "world" || !strings.Contains(err.Error(), "does not match the cdplace:policy/policy@0.3.0 world") {
		t.Fatalf("an empty component: %v", err)
	}
	if _, err = NewRuntime([]byte("not wasm")); !errors.Is(err, ErrLoad) || RefusedCheck(err) != "compile" {
		t.Fatalf("not a component: %v", err)
	}
}
