package e2e

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// runCdplace runs target/release/cdplace (built by `make build`) and returns its stdout; it fails
// the test unless the command exits 0 with nothing on stderr.
func runCdplace(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(repoRoot, "target", "release", "cdplace")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make build` first", bin)
	}
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("cdplace %s: %v\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, stderr.String(), out)
	}
	return string(out)
}

// TestCLIStatusAndExplainLive runs `cdplace status` and `cdplace explain` against the live
// control plane through its kubeconfig: an unannotated Job-backed ComputeDomain of 6 trays
// runs, and the map shows its 6 trays in one clique; a 20-pod Job-backed domain on 18-tray
// cliques waits, and both commands give the size the Job sets and the scheduler's own reason.
func TestCLIStatusAndExplainLive(t *testing.T) {
	s := newScenario(t, "cli", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.domain("six", 6, 4)
	d := s.waitFor("six running", 60*time.Second, all("six", 6))
	if len(d["six"].Cliques) != 1 {
		t.Fatalf("six should run in one clique: %s", d["six"])
	}
	home := d["six"].Cliques[0]
	s.domain("big", 20, 4)

	// Wait until the scheduler has tried every pod of big, so the map and explain see them all.
	var pending corev1.Pod
	deadline := time.Now().Add(60 * time.Second)
	for {
		pods, err := env.CP.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "job-name=big"})
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for _, p := range pods.Items {
			if harness.PendingReason(&p) != "" {
				tried++
				pending = p
			}
		}
		if len(pods.Items) == 20 && tried == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("big: %d pods, %d tried by the scheduler", len(pods.Items), tried)
		}
		time.Sleep(250 * time.Millisecond)
	}
	kubeconfig := env.CP.AdminKubeconfig
	wantSize := "size 20 from Job " + s.ns + "/big spec.parallelism"

	// The text map: six's letter appears 6 times, all in the row of its clique.
	text := runCdplace(t, "status", "--kubeconfig", kubeconfig)
	t.Logf("cdplace status:\n%s", text)
	for i, line := range strings.Split(text, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns wide (at most 100): %q", i+1, n, line)
		}
	}
	legend := regexp.MustCompile(`(?m)^  (\S)  ` + regexp.QuoteMeta(s.ns+"/six") + ` `).FindStringSubmatch(text)
	if legend == nil {
		t.Fatalf("no legend line for %s/six", s.ns)
	}
	letter := legend[1]
	rows := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasSuffix(line, " free") {
			continue
		}
		fields := strings.Fields(line)
		for _, cell := range fields[1:] {
			if strings.HasPrefix(cell, letter) && len(cell) <= 2 {
				rows[fields[0]]++
			}
		}
	}
	if len(rows) != 1 {
		t.Errorf("six's trays should be in one clique row of the map, got %v", rows)
	}
	for _, n := range rows {
		if n != 6 {
			t.Errorf("six should hold 6 trays on the map, got %d", n)
		}
	}
	if !strings.Contains(text, s.ns+"/big: 20 of 20 pod(s) pending, "+wantSize) {
		t.Errorf("the map should list big as pending with %q", wantSize)
	}

	// The SVG map: one rect per tray, and six's are exactly its 6 nodes, in its clique.
	svg := runCdplace(t, "status", "--kubeconfig", kubeconfig, "--output", "svg")
	var doc struct {
		Rects []struct {
			Class string `xml:"class,attr"`
			Title string `xml:"title"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("the SVG map does not parse: %v", err)
	}
	trays, sixNodes := 0, map[string]bool{}
	for _, r := range doc.Rects {
		if r.Class != "tray" {
			continue
		}
		trays++
		node, holder, _ := strings.Cut(r.Title, ": ")
		if strings.HasPrefix(holder, s.ns+"/six") {
			sixNodes[node] = true
		}
	}
	if trays < len(s.fleet.CliqueOf) {
		t.Errorf("the SVG map has %d trays, the fleet alone %d", trays, len(s.fleet.CliqueOf))
	}
	if len(sixNodes) != 6 {
		t.Errorf("six should hold 6 trays in the SVG, got %v", sixNodes)
	}
	for n := range sixNodes {
		if s.fleet.CliqueOf[n] != home {
			t.Errorf("tray %s of six is in clique %s, six runs in %s", n, s.fleet.CliqueOf[n], home)
		}
	}

	// explain for a pod of the pending domain: the size from its Job, and the reason the
	// scheduler gave the pod.
	report := runCdplace(t, "explain", "--kubeconfig", kubeconfig, "--context", "e2e", "--pod", s.ns+"/"+pending.Name)
	t.Logf("cdplace explain:\n%s", report)
	m := regexp.MustCompile(`(?m)^PreFilter: +(\w+): (.*)$`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("explain gives no PreFilter reason")
	}
	if m[1] != "UnschedulableAndUnresolvable" || !strings.Contains(m[2], "needs 20 trays in one NVLink clique ("+wantSize+")") {
		t.Errorf("explain should say big needs 20 trays (%s), got %s: %s", wantSize, m[1], m[2])
	}
	if scheduler := harness.PendingReason(&pending); !strings.Contains(scheduler, m[2]) {
		t.Errorf("explain's reason is not the scheduler's:\n explain:   %s\n scheduler: %s", m[2], scheduler)
	}
}
