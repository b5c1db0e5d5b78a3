package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// replayReport is the part of `cdplace replay --json` the test reads.
type replayReport struct {
	Trace struct {
		Decisions   int     `json:"decisions"`
		ViewChanges int     `json:"viewChanges"`
		Torn        *string `json:"torn"`
		HeadMissing bool    `json:"headMissing"`
	} `json:"trace"`
	Policies []struct {
		Policy         string `json:"policy"`
		SameAsRecorded bool   `json:"sameAsRecorded"`
		Error          *string
		Decisions      int `json:"decisions"`
		Compared       int `json:"compared"`
		Agreed         int `json:"agreed"`
		NotComparable  int `json:"notComparable"`
		Differing      []struct {
			Domain   string `json:"domain"`
			Change   string `json:"change"`
			Recorded struct{ Code, Reason, Placement string }
			Replayed struct{ Code, Reason, Placement string }
		} `json:"differing"`
	} `json:"policies"`
}

// TestRecordAndReplay (issue 37): the scheduler records (plugin arg recordPath) a scenario of
// ComputeDomain Jobs written as users write them (no annotation: the Job sets the size) on its
// own control plane, is stopped, and `cdplace replay` asks every recorded decision again: the
// policy that ran (the component embedded in the CLI, the one embedded in the scheduler) reproduces
// all of them; the faulty component (which skips most pods) side by side differs, and the report
// lists each differing domain with the recorded and the replayed reason.
func TestRecordAndReplay(t *testing.T) {
	bin := filepath.Join(repoRoot, "target", "release", "cdplace")
	faulty := filepath.Join(repoRoot, "target", "wasm32-wasip2", "guest", "cdplace_faulty_guest.wasm")
	guest := filepath.Join(repoRoot, "target", "wasm32-wasip2", "guest", "cdplace_guest.wasm")
	for _, f := range []string{bin, faulty, guest} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is built by `make build`: %v", f, err)
		}
	}
	dir := filepath.Join(runDir, "record")
	trace := filepath.Join(dir, "trace")
	args := fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    imexMode: DriverManaged
    wholeTray: Require
    reserveTraysPerClique: 0
    cliqueLabel: nvidia.com/gpu.clique
    recordPath: %q
    recordMaxBytes: 1048576
    recordMaxFiles: 1000
`, trace)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := harness.Up(ctx, repoRoot, dir, harness.EnvOptions{PluginConfig: []byte(args)})
	if err != nil {
		t.Fatalf("the control plane: %v", err)
	}
	t.Cleanup(e.Down)
	s := newScenarioOn(t, e, "record", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	// 32 of the 36 trays of two 18-tray cliques. Not every order of arrival fits (2, 4 and 6 in
	// one clique and 8 in the other leave 12 nowhere), so the 12-tray domain runs first; the
	// other four then fit in any order (best fit puts at most 6 trays beside the 12).
	s.domain("twelve", 12, 4)
	s.waitFor("twelve running", 120*time.Second, all("twelve", 12))
	sizes := map[string]int{"two": 2, "four": 4, "six": 6, "eight": 8}
	for name, n := range sizes {
		s.domain(name, n, 4)
	}
	for name, n := range sizes {
		s.waitFor(name+" running", 120*time.Second, all(name, n))
	}
	s.assertNoRefusals()
	e.Cdplace.Stop()

	replay := func(out string, policies ...string) (replayReport, string) {
		t.Helper()
		cmdArgs := []string{"replay", trace, "--json", out}
		for _, p := range policies {
			cmdArgs = append(cmdArgs, "--policy", p)
		}
		cmd := exec.Command(bin, cmdArgs...)
		text, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cdplace %s: %v\n%s", strings.Join(cmdArgs, " "), err, text)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var r replayReport
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		t.Logf("cdplace %s:\n%s", strings.Join(cmdArgs, " "), text)
		return r, string(text)
	}

	same, _ := replay(filepath.Join(dir, "same.json"))
	if same.Trace.HeadMissing || same.Trace.Decisions == 0 || same.Trace.ViewChanges == 0 {
		t.Fatalf("trace: %+v", same.Trace)
	}
	p := same.Policies[0]
	if !p.SameAsRecorded {
		t.Errorf("the component embedded in the CLI is not the one the scheduler embeds (digest differs)")
	}
	// Every decision up to the last record read: a tear can only cut the tail.
	if p.Compared == 0 || p.Agreed != p.Compared || p.NotComparable != 0 || len(p.Differing) != 0 {
		t.Fatalf("the policy that ran reproduced %d of %d compared decisions (%d recorded, %d not comparable): %+v",
			p.Agreed, p.Compared, p.Decisions, p.NotComparable, p.Differing)
	}
	t.Logf("RECORD: %d decisions on %d view changes, 100%% reproduced", p.Compared, same.Trace.ViewChanges)

	both, text := replay(filepath.Join(dir, "both.json"), guest, faulty)
	if len(both.Policies) != 2 || both.Policies[0].Agreed != both.Policies[0].Compared {
		t.Fatalf("side by side, the recorded policy: %+v", both.Policies)
	}
	f := both.Policies[1]
	if f.SameAsRecorded || len(f.Differing) == 0 || f.Agreed == f.Compared {
		t.Fatalf("the faulty component should differ: %+v", f)
	}
	cds, err := e.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, cd := range cds.Items {
		uids[string(cd.GetUID())] = true
	}
	for _, d := range f.Differing {
		if d.Recorded.Code == d.Replayed.Code && d.Recorded.Reason == d.Replayed.Reason && d.Recorded.Placement == d.Replayed.Placement {
			t.Errorf("%s listed as differing with the same answer: %+v", d.Domain, d)
		}
		// A Skip carries no reason (the faulty component skips most pods): its code says it.
		if d.Replayed.Code == "" || (d.Replayed.Code != "Skip" && d.Replayed.Reason == "" && d.Replayed.Placement == "") {
			t.Errorf("%s: no replayed answer: %+v", d.Domain, d)
		}
		if !uids[d.Domain] && !strings.HasPrefix(d.Domain, "plain") {
			t.Errorf("differing domain %q is none of the scenario's %v", d.Domain, uids)
		}
		if !strings.Contains(text, d.Domain) {
			t.Errorf("the text report does not name %s", d.Domain)
		}
	}
	if !strings.Contains(text, "recorded: ") || !strings.Contains(text, "replayed: ") {
		t.Errorf("the text report lacks both reasons:\n%s", text)
	}
}
