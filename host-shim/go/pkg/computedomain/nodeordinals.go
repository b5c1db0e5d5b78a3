package computedomain

import (
	"math/bits"
	"unsafe"

	v1 "k8s.io/api/core/v1"
)

// nodeOrdinals maps node objects to their clique ordinal for Filter and Score, which look a node
// up once per node and pod (about 500 scored nodes per plain GPU pod at 5,004 trays, every node
// for a ComputeDomain pod's Filter) in memory the rest of the cycle has pushed out of cache. A
// Go map keyed by the pointer spends 60 ns a lookup there (kube-scheduler's CPU profile of
// bench-throughput): a hash call, a directory, a group's control word, then the slot, three or
// four cache lines. This table is one []uint64 whose entries each hold the object's address
// (low 48 bits) and its ordinal+1 (high 16), probed linearly from a multiplicative hash of the
// address: one cache line for most lookups, 64 KiB for 5,004 nodes. It is immutable once built
// and holds the objects themselves (nodes), so no address in it can be reused by another object
// while the table lives. Addresses that do not fit 48 bits, or more than 65,534 ordinals, fall
// back to a Go map (no such address on amd64 or arm64 user space today; the fallback keeps the
// answer right if one appears).
type nodeOrdinals struct {
	slots []uint64
	shift uint
	mask  uint64
	nodes []*v1.Node
	// fallback replaces the table when an entry cannot be packed.
	fallback map[*v1.Node]int32
}

const (
	addrBits = 48
	addrMask = 1<<addrBits - 1
	// maxOrdinal is the largest ordinal an entry holds (ordinal+1 must fit the high 16 bits).
	maxOrdinal = 1<<(64-addrBits) - 2
)

func addrOf(n *v1.Node) uint64 { return uint64(uintptr(unsafe.Pointer(n))) }

// newNodeOrdinals builds the table; n is the number of entries put will add.
func newNodeOrdinals(n int) *nodeOrdinals {
	// At most 2/3 full: a hit takes about two probes, a miss about five, within a cache line or
	// two. At least 16 slots.
	size := max(16, 1<<bits.Len(uint(n+n/2)))
	return &nodeOrdinals{
		slots: make([]uint64, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))),
		mask:  uint64(size - 1),
		nodes: make([]*v1.Node, 0, n),
	}
}

func (t *nodeOrdinals) home(addr uint64) uint64 {
	return (addr * 0x9E3779B97F4A7C15) >> t.shift
}

// put adds a node object (each at most once) with its ordinal.
func (t *nodeOrdinals) put(n *v1.Node, ordinal int32) {
	t.nodes = append(t.nodes, n)
	addr := addrOf(n)
	if t.fallback == nil && (addr&^addrMask != 0 || ordinal < 0 || ordinal > maxOrdinal || len(t.nodes) > len(t.slots)*2/3) {
		m := make(map[*v1.Node]int32, cap(t.nodes))
		for _, old := range t.nodes[:len(t.nodes)-1] {
			o, _ := t.get(old)
			m[old] = o
		}
		t.fallback, t.slots = m, nil
	}
	if t.fallback != nil {
		t.fallback[n] = ordinal
		return
	}
	for i := t.home(addr); ; i = (i + 1) & t.mask {
		if t.slots[i] == 0 {
			t.slots[i] = addr | uint64(ordinal+1)<<addrBits
			return
		}
	}
}

// get returns the ordinal of a node object, false when the table does not have that object.
func (t *nodeOrdinals) get(n *v1.Node) (int32, bool) {
	if t.fallback != nil {
		o, ok := t.fallback[n]
		return o, ok
	}
	addr := addrOf(n)
	for i := t.home(addr); ; i = (i + 1) & t.mask {
		e := t.slots[i]
		if e == 0 {
			return 0, false
		}
		if e&addrMask == addr {
			return int32(e>>addrBits) - 1, true
		}
	}
}

// len is the number of node objects in the table.
func (t *nodeOrdinals) len() int { return len(t.nodes) }
