package computedomain

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

const stateKey fwk.StateKey = Name

// state is what PreFilter computed for one pod in one cycle.
type state struct {
	// decision is never mutated after it is stored; AddPod/RemovePod replace it.
	decision *cdplace.Decision
	// overlay lists preemption's hypothetical changes applied to produce decision.
	overlay []cdplace.Overlay
	// table is decision's clique entries by node object (nodeindex.go); nil: the labels are read.
	table *nodeTable
	// plain: decision is the steering answer shared by every plain pod (steer.go).
	plain bool
}

// Clone implements fwk.StateData. Sharing decision and table is safe because they are immutable; the overlay
// is copied because AddPod/RemovePod on the clone extend it.
func (s *state) Clone() fwk.StateData {
	return &state{decision: s.decision, table: s.table, overlay: append([]cdplace.Overlay(nil), s.overlay...), plain: s.plain}
}

func getState(cs fwk.CycleState) (*state, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", stateKey, err)
	}
	s, ok := d.(*state)
	if !ok {
		return nil, fmt.Errorf("%+v convert to computedomain.state error", d)
	}
	return s, nil
}

// cycleMemo is one cycle state with the state PreFilter wrote there (or PreScore read). The
// scheduler makes a new cycle state for every pod and every clone; while the memo holds one,
// no other can be allocated at its address.
type cycleMemo struct {
	cs fwk.CycleState
	s  *state
}

// writeState is PreFilter's write of the pod's state, remembered for Filter and Score.
func (p *Plugin) writeState(cs fwk.CycleState, s *state) {
	cs.Write(stateKey, s)
	p.remember(cs, s)
}

func (p *Plugin) remember(cs fwk.CycleState, s *state) { p.current.Store(&cycleMemo{cs: cs, s: s}) }

// stateOf is getState for Filter and Score: the remembered state when cs is the cycle state
// last written or read, else a read of cs (another cycle's, or a clone preemption or the
// nominated pods made, whose state AddPod and RemovePod may have changed). Reading the cycle
// state costs about 45 ns a node, a third of Score's whole lookup.
func (p *Plugin) stateOf(cs fwk.CycleState) (*state, error) {
	if m := p.current.Load(); m != nil && m.cs == cs {
		return m.s, nil
	}
	return getState(cs)
}
