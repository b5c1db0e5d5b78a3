package computedomain

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// Filter and Score without reading node labels. Both run once per node and pod (about 500
// scored nodes a plain GPU pod at 5,000 trays, every node for a ComputeDomain pod's Filter); the
// answer depends only on the node's clique label value, and reading it from node.Labels and then
// the decision's clique map is two string-keyed lookups in memory the cycle has not touched
// (8% of kube-scheduler's CPU for plain GPU pods in bench-throughput). cliqueIndex numbers the
// clique label values and maps each node object to its number; a decision's cliques are looked
// up once per decision into a slice by that number (nodeTable), so a node costs one
// pointer-keyed lookup (nodeordinals.go). The node objects are the informer's, which the
// scheduler's snapshot shares. A node the index does not have (added or updated since its last snapshot) falls back
// to the label lookups, so a stale snapshot is slower, never wrong: an object's labels never
// change, only the object the scheduler holds for a node.

// indexRebuildEvery bounds how often the snapshot is rebuilt while nodes change (each rebuild
// is a pass over every node; in between, changed nodes take the label path).
const indexRebuildEvery = time.Second

// cliqueIndex is the node objects the feed last took, with their clique label values.
type cliqueIndex struct {
	mu      sync.Mutex
	nodes   map[string]indexedNode
	dirty   bool
	builtAt time.Time
	snap    *cliqueSnapshot
}

type indexedNode struct {
	node   *v1.Node
	clique string
}

// cliqueSnapshot is one immutable build of the index.
type cliqueSnapshot struct {
	// byNode numbers each node object's clique label value ("" when it has none).
	byNode *nodeOrdinals
	// ordinals numbers the label values; n is their count.
	ordinals map[string]int32
	n        int
}

func (s *cliqueSnapshot) ordinal(label string) (int, bool) {
	i, ok := s.ordinals[label]
	return int(i), ok
}

func newCliqueIndex() *cliqueIndex {
	return &cliqueIndex{nodes: map[string]indexedNode{}}
}

// put records the node object the feed took, with its clique label value.
func (x *cliqueIndex) put(n *v1.Node, clique string) {
	x.mu.Lock()
	x.nodes[n.Name] = indexedNode{node: n, clique: clique}
	x.dirty = true
	x.mu.Unlock()
}

// remove forgets a deleted node.
func (x *cliqueIndex) remove(name string) {
	x.mu.Lock()
	if _, ok := x.nodes[name]; ok {
		delete(x.nodes, name)
		x.dirty = true
	}
	x.mu.Unlock()
}

// snapshot returns the current build, rebuilt when nodes changed and the last build is at
// least indexRebuildEvery old (or there is none).
func (x *cliqueIndex) snapshot(now time.Time) *cliqueSnapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.snap != nil && (!x.dirty || now.Sub(x.builtAt) < indexRebuildEvery) {
		return x.snap
	}
	s := &cliqueSnapshot{byNode: newNodeOrdinals(len(x.nodes)), ordinals: map[string]int32{}}
	for _, e := range x.nodes {
		i, ok := s.ordinals[e.clique]
		if !ok {
			i = int32(len(s.ordinals))
			s.ordinals[e.clique] = i
		}
		s.byNode.put(e.node, i)
	}
	s.n = len(s.ordinals)
	x.snap, x.dirty, x.builtAt = s, false, now
	return s
}

// nodeTable is a decision's clique entries by the ordinals of one snapshot.
type nodeTable struct {
	snap  *cliqueSnapshot
	slots []cdplace.Slot
}

// tableOn looks a decision's cliques up on snap; nil when Filter and Score do not run (the
// decision rejects or skips the pod), or when it restricts the pod to fewer nodes than it lists
// cliques (a started domain's clique, the best-fitting cliques' nodes): looking those nodes up
// through their labels costs less than building the table.
func tableOn(d *cdplace.Decision, snap *cliqueSnapshot) *nodeTable {
	if d.Status.Code != cdplace.CodeSuccess || (d.NodeSet != nil && len(d.NodeSet) < len(d.Cliques)) {
		return nil
	}
	return &nodeTable{snap: snap, slots: d.Slots(snap.n, snap.ordinal)}
}

// nodeVerdict is Filter's verdict and Score's score for a node: through the table when the
// node object is in its snapshot, else from the node's label.
func (p *Plugin) nodeVerdict(s *state, node *v1.Node) (cdplace.Verdict, int64, bool) {
	if t := s.table; t != nil {
		if i, ok := t.snap.byNode.get(node); ok {
			return s.decision.NodeAt(node.Name, t.slots[i])
		}
	}
	return s.decision.Node(node.Name, node.Labels[p.keys.CliqueLabel])
}

// tableFor is tableOn the index's current snapshot. The last one is kept: a decision reused for
// the next pods of its domain (decide) keeps its table while the snapshot stands.
func (p *Plugin) tableFor(d *cdplace.Decision) *nodeTable {
	snap := p.feed.index.snapshot(timeNow())
	m := &p.lastTable
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.d != d || m.snap != snap {
		m.d, m.snap, m.t = d, snap, tableOn(d, snap)
	}
	return m.t
}

// tableMemo is the last decision tableFor was asked for, with its table (nil included).
type tableMemo struct {
	mu   sync.Mutex
	d    *cdplace.Decision
	snap *cliqueSnapshot
	t    *nodeTable
}
