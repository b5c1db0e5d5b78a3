package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// perClique counts a domain's bound pods by clique.
func (s *scenario) perClique(st *harness.DomainState) map[string]int {
	counts := map[string]int{}
	for _, n := range st.Nodes {
		counts[s.fleet.CliqueOf[n]]++
	}
	return counts
}

// Scenario 24: domains larger than one NVLink clique, written as users write them (a
// ComputeDomain and an Indexed Job of 36 or 40 pods). On four empty cliques of 18 the 36-tray
// Job binds as two whole cliques, 18 pods in each; then a 40-tray Job, with 36 trays free,
// binds no pod and says why (all segments or none), while the first keeps running.
func TestScenario24DomainsLargerThanAClique(t *testing.T) {
	s := newScenario(t, "s24", harness.Cdplace, fourRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"wide": 36, "wider": 40})
	s.domain("wide", 36, 4)
	d := s.waitFor("wide running", 120*time.Second, all("wide", 36))
	counts := s.perClique(d["wide"])
	if len(counts) != 2 {
		t.Fatalf("wide runs in %d cliques %v; want the fewest, 2", len(counts), counts)
	}
	for c, n := range counts {
		if n != 18 {
			t.Errorf("clique %s holds %d of wide's pods; want a whole segment of 18", c, n)
		}
	}
	// The driver's view: one IMEX domain per clique of the ComputeDomain, each with the 18 nodes
	// of its segment there and no node of another clique.
	cd, err := s.e.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(s.ns).Get(s.ctx, "wide", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	imex := s.prep.IMEXDomains(string(cd.GetUID()))
	if len(imex) != 2 {
		t.Errorf("wide has %d IMEX domains %v; want one per clique it runs in, 2", len(imex), imex)
	}
	for clique, nodes := range imex {
		if len(nodes) != counts[clique] {
			t.Errorf("the IMEX domain of clique %s has %d nodes; want the %d of wide's segment there", clique, len(nodes), counts[clique])
		}
		for _, n := range nodes {
			if s.fleet.CliqueOf[n] != clique {
				t.Errorf("node %s (clique %s) is in wide's IMEX domain of clique %s", n, s.fleet.CliqueOf[n], clique)
			}
		}
	}

	s.domain("wider", 40, 4)
	s.holds("no pod of wider binds", 10*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["wider"].Bound == 0 && d["wide"].Running == 36
	})
	d = s.waitFor("a reason on wider's pods", 30*time.Second, func(d map[string]*harness.DomainState) bool {
		return len(d["wider"].Reasons) > 0
	})
	want := "all segments or none: it needs 40 trays and the NVLink cliques do not have room for all of them now; no pod starts until every segment fits"
	if reasons := strings.Join(d["wider"].Reasons, "\n"); !strings.Contains(reasons, want) {
		t.Errorf("wider's reason = %q; want it to contain %q", reasons, want)
	}
	s.assertAllOrNothing(map[string]*harness.DomainState{"wide": d["wide"], "wider": d["wider"]})
	s.assertNoRefusals()
}
