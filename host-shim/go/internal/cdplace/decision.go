package cdplace

import (
	"encoding/binary"
	"fmt"
)

// Verdict is a status code with its reason.
type Verdict struct {
	Code   Code
	Reason string
}

// CliqueVerdict is the verdict for the nodes of one clique, with their score.
type CliqueVerdict struct {
	Verdict
	Score uint32
	// Stable (plain-pod steering only): a pod without a ComputeDomain placed on a tray of this
	// clique leaves the decision's verdicts as they are and changes no score but this clique's
	// own, which can only rise; the decision may serve the next plain pods.
	Stable bool
}

// Decision is what PreFilter decided for a pod; Filter and Score are lookups in it (Node). It is
// never changed once decoded, so cycle states may share it.
type Decision struct {
	Status Verdict
	// Domain is the UID of the pod's ComputeDomain, "" when it has none.
	Domain string
	// Exclusive: only the successful cliques are allowed.
	Exclusive bool
	// Cliques by clique label value.
	Cliques map[string]CliqueVerdict
	// Other is the verdict for nodes whose clique is not listed.
	Other Verdict
	// OtherScore is their score when Other is Success (plain-pod steering).
	OtherScore uint32
	// Nodes lists the nodes whose verdict differs from their clique's.
	Nodes map[string]Verdict
	// NodeSet is the PreFilterResult: the only nodes the pod may go to; nil for all nodes.
	NodeSet []string
	// Generation is the policy generation that decided (Cluster.PolicyGeneration; set by
	// Cluster.PreFilter and Cluster.Steer, 0 in a decision decoded alone).
	Generation uint64
	// passesAll: Filter would pass every node (set when decoded).
	passesAll bool
}

// PassesEveryNode reports whether Filter would pass every node: the status, Other and every
// listed clique and node are Success and nothing restricts the node set. Plain-pod steering
// then skips Filter (5,000 lookups a pod at 5,000 trays) and only scores.
func (d *Decision) PassesEveryNode() bool { return d.passesAll }

func (d *Decision) computePassesAll() bool {
	if d.Status.Code != CodeSuccess || d.Other.Code != CodeSuccess || d.Exclusive || d.NodeSet != nil {
		return false
	}
	for _, c := range d.Cliques {
		if c.Code != CodeSuccess {
			return false
		}
	}
	for _, v := range d.Nodes {
		if v.Code != CodeSuccess {
			return false
		}
	}
	return true
}

// Node is Filter's verdict for a node with this name and clique label value ("" when the node
// has none), and Score's score when the node passes Filter (scored is false when it has none):
// the status when it is not Success, else the node's own verdict, else its clique's, else
// Other; the score is its clique's, or OtherScore.
func (d *Decision) Node(name, clique string) (v Verdict, score int64, scored bool) {
	c, listed := d.Cliques[clique]
	return d.NodeAt(name, Slot{CliqueVerdict: c, Listed: listed})
}

// Slot is a clique's entry in the decision, looked up ahead of Filter and Score (Slots):
// Listed is false when the decision does not list the clique.
type Slot struct {
	CliqueVerdict
	Listed bool
}

// Slots returns the decision's entries for n clique label values numbered by ordinal (which
// gives the number of a label, false for a label it does not know): the decision's cliques are
// looked up once per decision instead of once per node.
func (d *Decision) Slots(n int, ordinal func(label string) (int, bool)) []Slot {
	slots := make([]Slot, n)
	for label, c := range d.Cliques {
		if i, ok := ordinal(label); ok && i >= 0 && i < n {
			slots[i] = Slot{CliqueVerdict: c, Listed: true}
		}
	}
	return slots
}

// NodeAt is Node for a node whose clique's entry was looked up ahead (Slots).
func (d *Decision) NodeAt(name string, c Slot) (v Verdict, score int64, scored bool) {
	if d.Status.Code != CodeSuccess {
		return d.Status, 0, false
	}
	if len(d.Nodes) > 0 {
		if nv, ok := d.Nodes[name]; ok {
			if nv.Code == CodeSuccess && c.Listed {
				return nv, int64(c.Score), true
			}
			return nv, 0, false
		}
	}
	if c.Listed {
		return c.Verdict, int64(c.Score), c.Code == CodeSuccess
	}
	return d.Other, int64(d.OtherScore), d.Other.Code == CodeSuccess
}

// OverlayOp is what an overlay entry does.
type OverlayOp uint8

// Overlay operations of the packed overlay (include/cdplace.h).
const (
	OverlayRemove OverlayOp = 1
	OverlayAdd    OverlayOp = 2
)

// Overlay is a hypothetical change for one PreFilter evaluation (preemption's AddPod/RemovePod):
// the pod treated as absent (OverlayRemove) or as nominated to Node (OverlayAdd).
type Overlay struct {
	Op        OverlayOp
	Namespace string
	Name      string
	Node      string
}

// packOverlay writes the packed overlay: u32 n x (u8 op, str namespace, str name, str node).
func packOverlay(ov []Overlay) []byte {
	if len(ov) == 0 {
		return nil
	}
	size := 4
	for _, o := range ov {
		size += 13 + len(o.Namespace) + len(o.Name) + len(o.Node)
	}
	b := make([]byte, 0, size)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ov)))
	for _, o := range ov {
		node := o.Node
		if o.Op == OverlayRemove {
			node = ""
		}
		b = append(b, byte(o.Op))
		b = appendStr(b, o.Namespace)
		b = appendStr(b, o.Name)
		b = appendStr(b, node)
	}
	return b
}

// reader decodes the packed decision.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("cdplace: malformed packed decision: %s at byte %d", what, r.off)
	}
	r.b = nil
}

func (r *reader) u8(what string) byte {
	if len(r.b) < 1 {
		r.fail(what + " truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	r.off++
	return v
}

func (r *reader) u32(what string) uint32 {
	if len(r.b) < 4 {
		r.fail(what + " truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	r.off += 4
	return v
}

func (r *reader) str(what string) string {
	n := r.u32(what)
	if uint32(len(r.b)) < n {
		r.fail(what + " truncated")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	r.off += int(n)
	return s
}

func (r *reader) verdict(what string, reasons []string) Verdict {
	code, reason := Code(r.u8(what+" code")), r.u32(what+" reason")
	if _, ok := codeNames[code]; !ok {
		r.fail(fmt.Sprintf("%s code %d is not a cdplace_code_t", what, code))
		return Verdict{Code: CodeError}
	}
	if int(reason) >= len(reasons) {
		r.fail(fmt.Sprintf("%s reason %d of %d", what, reason, len(reasons)))
		return Verdict{Code: CodeError}
	}
	return Verdict{Code: code, Reason: reasons[reason]}
}

// count reads a count of entries, each at least min bytes long, and rejects a count the bytes
// left cannot hold (so a corrupt count allocates nothing).
func (r *reader) count(what string, min int) int {
	n := r.u32(what)
	if uint64(n)*uint64(min) > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("%s %d does not fit the %d bytes left", what, n, len(r.b)))
		return 0
	}
	return int(n)
}

// decisionMagic opens a packed decision.
const decisionMagic = "CDP4"

// cliqueStable is bit 0 of a clique's flags: CliqueVerdict.Stable.
const cliqueStable = 1

// DecodeDecision reads a packed decision (include/cdplace.h, "CDP4").
func DecodeDecision(b []byte) (*Decision, error) {
	if len(b) < 4 || string(b[:4]) != decisionMagic {
		return nil, fmt.Errorf("cdplace: packed decision does not start with %q", decisionMagic)
	}
	r := &reader{b: b[4:], off: 4}
	reasons := make([]string, r.count("nreasons", 4))
	for i := range reasons {
		reasons[i] = r.str("reason")
	}
	d := &Decision{Status: r.verdict("status", reasons)}
	if r.u8("has_domain") == 1 {
		d.Domain = r.str("domain")
	}
	d.Exclusive = r.u8("exclusive") == 1
	d.Other = r.verdict("other", reasons)
	d.OtherScore = r.u32("other score")
	n := r.count("ncliques", 14)
	d.Cliques = make(map[string]CliqueVerdict, n)
	for i := 0; i < n && r.err == nil; i++ {
		label := r.str("clique label")
		v := r.verdict("clique", reasons)
		score := r.u32("clique score")
		flags := r.u8("clique flags")
		if flags&^cliqueStable != 0 {
			r.fail(fmt.Sprintf("clique flags %#x: only bit 0 is defined", flags))
		}
		d.Cliques[label] = CliqueVerdict{Verdict: v, Score: score, Stable: flags&cliqueStable != 0}
	}
	n = r.count("nnodes", 9)
	d.Nodes = make(map[string]Verdict, n)
	for i := 0; i < n && r.err == nil; i++ {
		name := r.str("node")
		d.Nodes[name] = r.verdict("node", reasons)
	}
	if r.u8("has_node_set") == 1 {
		n = r.count("node set size", 4)
		d.NodeSet = make([]string, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			d.NodeSet = append(d.NodeSet, r.str("node set node"))
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d bytes after the decision", len(r.b)))
	}
	if r.err != nil {
		return nil, r.err
	}
	d.passesAll = d.computePassesAll()
	return d, nil
}
