package cdplace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// The fleet status through the library: a domain running in u.1, one waiting for 3 trays that
// u.2 offers 2 of, free trays per clique and the largest domain that could start now.
func TestStatusThroughTheLibrary(t *testing.T) {
	c := newTestCluster(t, "")
	var b Batch
	for i := 0; i < 4; i++ {
		b.Add(AppendNode(nil, &facts.Node{Name: fmt.Sprintf("a-%d", i), CliqueLabel: some("u.1"), GPUs: 4}))
		b.Add(AppendNode(nil, &facts.Node{Name: fmt.Sprintf("b-%d", i), CliqueLabel: some("u.2"), GPUs: 4}))
	}
	for _, cd := range []struct {
		name string
		size uint32
	}{{"run", 2}, {"wait", 3}} {
		uid := "uid-" + cd.name
		b.Add(AppendDomain(nil, &facts.Domain{Namespace: "ns", Name: cd.name, UID: uid, SizeHint: some(cd.size)}))
		b.Add(AppendTemplate(nil, &facts.Template{Namespace: "ns", Name: cd.name + "-channel", Domain: some(uid)}))
	}
	claims := func(cd string) []facts.PodClaim {
		return []facts.PodClaim{{Name: "channel", Template: some(cd + "-channel")}}
	}
	for i := 0; i < 2; i++ {
		b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: fmt.Sprintf("run-%d", i), NodeName: some(fmt.Sprintf("a-%d", i)), Claims: claims("run"), GPUs: 4}))
	}
	// Plain GPU pods take two trays of u.2 and one of u.1.
	for i, node := range []string{"b-0", "b-1", "a-2"} {
		b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: fmt.Sprintf("web-%d", i), NodeName: some(node), GPUs: 4}))
	}
	for i := 0; i < 3; i++ {
		b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: fmt.Sprintf("wait-%d", i), Claims: claims("wait"), GPUs: 4}))
	}
	if err := c.ApplyFacts(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	before := c.Crossings()
	f, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if c.Crossings() != before+1 {
		t.Fatalf("one call: %d crossings", c.Crossings()-before)
	}
	want := []FleetClique{{Clique: "u.1", Usable: 4, Free: 1}, {Clique: "u.2", Usable: 4, Free: 2}}
	if fmt.Sprint(f.Cliques) != fmt.Sprint(want) {
		t.Fatalf("cliques %+v, want %+v", f.Cliques, want)
	}
	if f.LargestPlaceable != 2 || f.ReservedTrays != 0 {
		t.Fatalf("largest %d reserved %d", f.LargestPlaceable, f.ReservedTrays)
	}
	if len(f.Domains) != 2 {
		t.Fatalf("domains %+v", f.Domains)
	}
	run, wait := f.Domains[0], f.Domains[1]
	if run.UID != "uid-run" || run.Phase != PhaseRunning || run.Clique != "u.1" || run.Placed != 2 || !strings.Contains(run.Note, "placed in NVLink clique u.1: 2 tray(s)") {
		t.Fatalf("run %+v", run)
	}
	if wait.Name != "wait" || wait.Phase != PhasePending || wait.Pending != "waiting_for_trays" || wait.Needed != 3 || wait.Offer != 2 || wait.Clique != "u.2" {
		t.Fatalf("wait %+v", wait)
	}
	if !strings.Contains(wait.Note, "needs 3 trays in one NVLink clique (size 3 from annotation cdplace.nvidia.com/size on ComputeDomain ns/wait); the best clique, u.2, offers 2") {
		t.Fatalf("wait note %q", wait.Note)
	}
}
