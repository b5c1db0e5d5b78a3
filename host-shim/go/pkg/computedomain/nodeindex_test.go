package computedomain

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// agree checks that Filter's and Score's answer for every node, through the table, is the
// decision's answer from the node's labels, and counts the nodes the table answered.
func agree(t *testing.T, p *Plugin, s *state, nodes []*v1.Node) (hits int) {
	t.Helper()
	for _, n := range nodes {
		v, score, scored := p.nodeVerdict(s, n)
		wv, wscore, wscored := s.decision.Node(n.Name, n.Labels[p.keys.CliqueLabel])
		if v != wv || score != wscore || scored != wscored {
			t.Errorf("%s: through the table %v %d %v, from its labels %v %d %v", n.Name, v, score, scored, wv, wscore, wscored)
		}
		if s.table != nil {
			if _, ok := s.table.snap.byNode.get(n); ok {
				hits++
			}
		}
	}
	return hits
}

// Filter and Score answer from the node object's entry in the index when the snapshot has the
// object, and from its labels otherwise (a node updated since the snapshot): the two agree on
// every node, for a steered plain pod and for a ComputeDomain pod, and an updated node is
// answered by its new label before the snapshot is rebuilt.
func TestTheNodeIndexAnswersAsTheLabels(t *testing.T) {
	now := time.Unix(1_000, 0)
	setTimeNow(func() time.Time { return now })
	t.Cleanup(func() { setTimeNow(nil) })

	nodes := append(append(rack("a", 1, 4), rack("b", 2, 4)...), makeNode("cpu-0", 0, 4))
	cd0, cd1 := boundTo(cdPod("cd", "w0"), "b-00"), cdPod("cd", "w1")
	plain := makePod("plain", "", 4)
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)},
		channelTemplate("cd", "uid-cd"), cd0, cd1, plain)
	// The feed takes the objects the scheduler's NodeInfos hold (as from one shared informer).
	for _, n := range nodes {
		e.apply(n)
	}

	r := e.schedule(plain)
	wantCode(t, "plain prefilter", r.preFilter, fwk.Success, "")
	s, err := getState(r.state)
	if err != nil || s.table == nil {
		t.Fatalf("a steered pod's state has no table: %v", err)
	}
	if hits := agree(t, e.plugin, s, nodes); hits != len(nodes) {
		t.Fatalf("the table answered %d of %d nodes; the snapshot has every node object", hits, len(nodes))
	}
	if !(r.score["cpu-0"] > r.score["b-01"] && r.score["b-01"] > r.score["a-00"]) {
		t.Fatalf("want cpu-0 > b (broken) > a (intact), got %v", r.score)
	}

	r = e.schedule(cd1)
	wantCode(t, "domain prefilter", r.preFilter, fwk.Success, "")
	if s, err = getState(r.state); err != nil || s.table == nil {
		t.Fatalf("a ComputeDomain pod's state has no table: %v", err)
	}
	agree(t, e.plugin, s, nodes)
	// The next pod's reused decision on the same snapshot keeps its table.
	if again, _ := getState(e.schedule(cd1).state); again.decision != s.decision || again.table != s.table {
		t.Fatal("a reused decision on an unchanged snapshot got its table built again")
	}
	if !r.filter["b-01"].IsSuccess() || r.filter["a-00"].IsSuccess() || r.filter["cpu-0"].IsSuccess() {
		t.Fatalf("the domain homed in b passes only b's trays: %v", r.filter)
	}

	// a-01 moves to clique b: a new object the snapshot does not have yet.
	moved := makeNode("a-01", 2, 4)
	e.apply(moved)
	r = e.schedule(cd1)
	s, _ = getState(r.state)
	if _, ok := s.table.snap.byNode.get(moved); ok {
		t.Fatal("the snapshot was rebuilt within indexRebuildEvery")
	}
	if v, _, _ := e.plugin.nodeVerdict(s, moved); v.Code != cdplace.CodeSuccess {
		t.Fatalf("a-01, now in clique b, is answered by its old label: %v", v)
	}
	agree(t, e.plugin, s, append(nodes, moved))

	now = now.Add(indexRebuildEvery)
	r = e.schedule(cd1)
	s, _ = getState(r.state)
	if _, ok := s.table.snap.byNode.get(moved); !ok {
		t.Fatal("a changed node is in the snapshot once indexRebuildEvery passed")
	}
	if _, ok := s.table.snap.byNode.get(nodes[1]); ok {
		t.Fatal("the object a-01 replaced is still in the rebuilt snapshot")
	}
	agree(t, e.plugin, s, append(nodes, moved))

	// A deleted node leaves the next build.
	e.plugin.feed.deleteNode("cpu-0", "")
	now = now.Add(indexRebuildEvery)
	if snap := e.plugin.feed.index.snapshot(now); snap.byNode.len() != len(nodes)-1 {
		t.Fatalf("after a deletion the snapshot has %d nodes, want %d", snap.byNode.len(), len(nodes)-1)
	}
}

// BenchmarkScoreLookup: Score's answer for one node at 5,004 trays (278 cliques), through the
// table (a node object in the snapshot) and from the node's labels.
func BenchmarkScoreLookup(b *testing.B) {
	p := &Plugin{feed: &feed{index: newCliqueIndex()}}
	p.keys.CliqueLabel = "nvidia.com/gpu.clique"
	d := &cdplace.Decision{Status: cdplace.Verdict{Code: cdplace.CodeSuccess}, Cliques: map[string]cdplace.CliqueVerdict{}, Other: cdplace.Verdict{Code: cdplace.CodeSuccess}, OtherScore: 100}
	var nodes []*v1.Node
	for c := 0; c < 278; c++ {
		d.Cliques[clique(c+1)] = cdplace.CliqueVerdict{Score: uint32(c % 90)}
		for i := 0; i < 18; i++ {
			n := makeNode(fmt.Sprintf("gb300-rack-%03d-tray-%02d", c, i), c+1, 4)
			for k := 0; k < 8; k++ {
				n.Labels[fmt.Sprintf("example.com/label-%d", k)] = "value"
			}
			nodes = append(nodes, n)
			p.feed.index.put(n, n.Labels[p.keys.CliqueLabel])
		}
	}
	table := tableOn(d, p.feed.index.snapshot(time.Now()))
	if table == nil {
		b.Fatal("no table for a decision that passes every node")
	}
	for _, c := range []struct {
		name string
		s    *state
	}{{"table", &state{decision: d, table: table}}, {"labels", &state{decision: d}}} {
		b.Run(c.name, func(b *testing.B) {
			var sum int64
			for i := 0; b.Loop(); i++ {
				_, score, _ := p.nodeVerdict(c.s, nodes[(i*7919)%len(nodes)])
				sum += score
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}
