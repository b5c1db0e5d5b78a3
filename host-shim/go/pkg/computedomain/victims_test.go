package computedomain

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The plugin's own check of a plan, on the objects it would delete: each rule refuses what it
// names, and a plan as the shipped policy makes it (a whole lower-priority domain and a plain
// pod on the freed clique) passes.
func TestTheVictimsOfAPlanAreCheckedBeforeAnyIsDeleted(t *testing.T) {
	pod := func(name, node string, prio int32) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.PodSpec{NodeName: node, Priority: ptr.To(prio)}}
	}
	domains := map[string]string{"high-0": "uid-high", "low-0": "uid-low", "low-1": "uid-low", "mid-0": "uid-mid"}
	cliques := map[string]string{"a-00": "c.1", "a-01": "c.1", "a-02": "c.1", "b-00": "c.2"}
	check := victimCheck{
		domainOf: func(p *v1.Pod) (string, bool) { d, ok := domains[p.Name]; return d, ok },
		cliqueOf: func(n string) string { return cliques[n] },
	}
	preemptor := pod("high-0", "", 100)
	plan := func(pods ...*v1.Pod) (*cdplace.PreemptionPlan, []*v1.Pod) {
		return &cdplace.PreemptionPlan{Clique: "c.1", Node: "a-00", Domains: []string{"uid-low"}}, pods
	}
	for _, tc := range []struct {
		name     string
		victims  []*v1.Pod
		mutate   func(*cdplace.PreemptionPlan)
		wantRule string
		want     string
	}{
		{name: "a whole lower-priority domain and a plain pod of the clique", victims: []*v1.Pod{pod("low-0", "a-00", 1), pod("low-1", "a-01", 1), pod("plain", "a-02", 0)}},
		{name: "a victim of the preemptor's priority", victims: []*v1.Pod{pod("low-0", "a-00", 1), pod("plain", "a-02", 100)},
			wantRule: "victim-lower-priority", want: "names pod ns/plain (priority 100) as a victim"},
		{name: "a victim of higher priority", victims: []*v1.Pod{pod("plain", "a-02", 1000)},
			wantRule: "victim-lower-priority", want: "(priority 1000)"},
		{name: "a plain victim on another clique", victims: []*v1.Pod{pod("plain", "b-00", 0)},
			wantRule: "victim-on-preemptor-trays", want: `names pod ns/plain on node "b-00" (clique "c.2")`},
		{name: "a plain victim on no node", victims: []*v1.Pod{pod("plain", "", 0)},
			wantRule: "victim-on-preemptor-trays", want: `on node ""`},
		{name: "a pod of a domain the plan does not evict whole", victims: []*v1.Pod{pod("mid-0", "a-02", 5)},
			wantRule: "victim-whole-domain", want: "evicts pod ns/mid-0 of ComputeDomain uid-mid but not the domain whole"},
		{name: "a pod of the preemptor's own domain", victims: []*v1.Pod{pod("high-0", "a-02", 1)},
			wantRule: "victim-whole-domain", want: "of its own ComputeDomain"},
		{name: "a nomination outside the clique", victims: []*v1.Pod{pod("low-0", "a-00", 1)}, mutate: func(p *cdplace.PreemptionPlan) { p.Node = "b-00" },
			wantRule: "victim-on-preemptor-trays", want: `nominates node b-00 (clique "c.2")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, victims := plan(tc.victims...)
			if tc.mutate != nil {
				tc.mutate(p)
			}
			v := check.checkVictims(preemptor, p, victims)
			if tc.wantRule == "" {
				if v != nil {
					t.Fatalf("refused: %v", v)
				}
				return
			}
			if v == nil {
				t.Fatalf("passed; want rule %s", tc.wantRule)
			}
			if v.rule != tc.wantRule || !strings.Contains(v.Error(), tc.want) || !strings.HasPrefix(v.Error(), "policy violation: rule "+tc.wantRule+": gang preemption for pod ns/high-0 ") {
				t.Errorf("got %q (rule %s); want rule %s saying %q", v.Error(), v.rule, tc.wantRule, tc.want)
			}
			if got := cdplace.PolicyViolationRule(&cdplace.Error{Kind: cdplace.ErrPolicyViolation, Message: v.Error()}); got != tc.wantRule {
				t.Errorf("PolicyViolationRule reads %q", got)
			}
		})
	}
}
