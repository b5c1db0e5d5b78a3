package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Issue 35: the safety rules stay in the host. The cdplace scheduler runs the test-only violator
// component (guestPath: it allows every node to every pod) on one clique of two trays, with the
// driver's node label lingering 20 s after a domain's last claim is unprepared. ComputeDomain
// `first` (numNodes 0, a Job of one pod, as users write them) runs on tray X; `second` (a Job of
// two pods) is created meanwhile. While X holds `first` (its pod, then only its lingering
// label), no pod of `second` binds to X, the Prepare emulator refuses nothing, and the refused
// answers show as Warning Events PolicyViolation on `second`'s pods. Without the host's checker
// the violator's answer lets `second`'s pods onto both trays once `first`'s pod is gone, and the
// one on X is refused by Prepare (the label names `first`).
func TestSafetyRulesHoldAgainstAViolatingPolicy(t *testing.T) {
	violator := filepath.Join(repoRoot, "target", "wasm32-wasip2", "guest", "cdplace_test_violator.wasm")
	if _, err := os.Stat(violator); err != nil {
		t.Fatalf("the violator component is built by `make guest`: %v", err)
	}
	restore := swapCdplaceScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    imexMode: DriverManaged
    wholeTray: Require
    cliqueLabel: nvidia.com/gpu.clique
    guestPath: %q
`, violator)))
	defer restore()
	const lag = 20 * time.Second
	fleet := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 2, GPUsPerTray: 4}
	s := newScenario(t, "safety", harness.Cdplace, fleet, harness.PrepareOptions{UnprepareLabelLag: lag})

	s.domain("first", 1, 4)
	d := s.waitFor("first running", 90*time.Second, all("first", 1))
	x := d["first"].Nodes[0]
	t.Logf("first runs on %s", x)

	s.domain("second", 2, 4)
	violations := func() []string {
		list, err := s.e.CP.Client.EventsV1().Events(s.ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, ev := range list.Items {
			if ev.Reason == "PolicyViolation" && ev.Type == "Warning" && ev.Regarding.Kind == "Pod" && strings.HasPrefix(ev.Regarding.Name, "second-") {
				notes = append(notes, ev.Note)
			}
		}
		return notes
	}
	waitUntil(t, 60*time.Second, "a PolicyViolation Warning Event on a pod of second", func() bool { return len(violations()) > 0 })
	note := violations()[0]
	t.Logf("PolicyViolation: %s", note)
	for _, want := range []string{"policy violation: rule one-domain-per-node: ", "allowed onto node " + x, "ComputeDomain " + s.ns + "/first"} {
		if !strings.Contains(note, want) {
			t.Errorf("the Event's note lacks %q: %s", want, note)
		}
	}

	// first's Job goes; its label lingers on X for `lag`. Every answer the violator gives second
	// still allows X, so second's pods wait rather than bind next to the label.
	s.deleteDomainJob("first")
	notOnX := func(d map[string]*harness.DomainState) bool {
		return d["second"] == nil || !containsString(d["second"].Nodes, x)
	}
	s.holds("no pod of second on "+x+" while first's label lingers", lag/2, notOnX)
	s.assertNoRefusals()
}
