package computedomain

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
)

func faultyGuest(t *testing.T) string {
	t.Helper()
	faulty, err := filepath.Abs("../../../../target/wasm32-wasip2/guest/cdplace_faulty_guest.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(faulty); err != nil {
		t.Fatalf("the faulty component is built by `make guest`: %v", err)
	}
	return faulty
}

// A pod whose facts trap the guest is quarantined, not a poison pill: the next pod is decided,
// the bad one gets a Warning Event (reason Quarantined), and the counter moves. The faulty
// component traps in apply on a pod whose name starts with "poison".
func TestABadObjectIsQuarantinedAndThePolicyGoesOn(t *testing.T) {
	poison := cdPod("cd", "poison-0")
	good := cdPod("cd", "p")
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), poison, good}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}
	e := newEnv(t, `{"guestPath":`+strconv.Quote(faultyGuest(t))+`}`, rack("a", 1, 2), cds, objs...)
	e.events.Verbose = true
	before, _ := testutil.GetCounterMetricValue(quarantinedObjects.WithLabelValues("Pod"))
	// The faulty component skips every pod it decides; without the quarantine the snapshot that
	// holds the bad pod traps every instance and every pod gets an Error.
	for i := 0; i < 2; i++ {
		if r := e.schedule(good); !r.skipped {
			t.Fatalf("round %d: the pod is not decided: %v", i, r.preFilter)
		}
	}
	after, _ := testutil.GetCounterMetricValue(quarantinedObjects.WithLabelValues("Pod"))
	if after-before != 1 {
		t.Errorf("cdplace_quarantined_objects_total{kind=Pod} moved by %v, want 1", after-before)
	}
	var quarantined []string
	for len(e.events.Events) > 0 {
		if ev := <-e.events.Events; strings.Contains(ev, "Quarantined") {
			quarantined = append(quarantined, ev)
		}
	}
	if len(quarantined) != 1 || !strings.HasPrefix(quarantined[0], "Warning Quarantined Scheduling ComputeDomainPlacement left this Pod out of its view until it changes") ||
		!strings.Contains(quarantined[0], "policy guest trapped") || !strings.Contains(quarantined[0], "{kind=Pod,apiVersion=v1}") {
		t.Fatalf("events %q", quarantined)
	}
	if s, err := e.plugin.Cluster().Stats(); err != nil || s.QuarantinedObjects != 1 {
		t.Fatalf("stats %+v %v", s, err)
	}
}
