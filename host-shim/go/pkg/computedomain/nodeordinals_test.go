package computedomain

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The packed table answers every object it was given with its ordinal and no other object, at
// every size up to the fleet's (so through collisions and wrap-around at the end of the
// slots), and the map fallback (an ordinal too large to pack, or more objects than sized for)
// answers exactly the same, the entries packed before it included.
func TestNodeOrdinalsFindEveryObjectAndNoOther(t *testing.T) {
	check := func(t *testing.T, tab *nodeOrdinals, in []*v1.Node, ord func(i int) int32, out []*v1.Node) {
		t.Helper()
		if tab.len() != len(in) {
			t.Fatalf("len %d, want %d", tab.len(), len(in))
		}
		for i, n := range in {
			if got, ok := tab.get(n); !ok || got != ord(i) {
				t.Fatalf("object %d (%s): %d %v, want %d", i, n.Name, got, ok, ord(i))
			}
		}
		for _, n := range out {
			if got, ok := tab.get(n); ok {
				t.Fatalf("an object never put (%s) found with ordinal %d", n.Name, got)
			}
		}
		// A copy of an object is another object, even with the same name.
		if len(in) > 0 {
			c := *in[0]
			if _, ok := tab.get(&c); ok {
				t.Fatal("a copy of a put object was found")
			}
		}
	}
	nodes := make([]*v1.Node, 6000)
	for i := range nodes {
		nodes[i] = makeNode(fmt.Sprintf("n-%d", i), 1+i/18, 4)
	}
	others := nodes[5004:]
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1000, 5004} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			tab := newNodeOrdinals(n)
			ord := func(i int) int32 { return int32(i / 18) }
			for i, node := range nodes[:n] {
				tab.put(node, ord(i))
			}
			if tab.fallback != nil {
				t.Fatal("fell back to a map with nothing that needs it")
			}
			check(t, tab, nodes[:n], ord, others)
		})
	}
	t.Run("ordinal too large to pack", func(t *testing.T) {
		tab := newNodeOrdinals(100)
		ord := func(i int) int32 {
			if i == 60 {
				return maxOrdinal + 1
			}
			return int32(i)
		}
		for i, node := range nodes[:100] {
			tab.put(node, ord(i))
		}
		if tab.fallback == nil {
			t.Fatal("an ordinal past the 16 bits was packed")
		}
		check(t, tab, nodes[:100], ord, others)
	})
	t.Run("more objects than sized for", func(t *testing.T) {
		tab := newNodeOrdinals(10)
		ord := func(i int) int32 { return int32(i % 7) }
		for i, node := range nodes[:300] {
			tab.put(node, ord(i))
		}
		if tab.fallback == nil {
			t.Fatal("the table filled past two thirds without falling back")
		}
		check(t, tab, nodes[:300], ord, others)
	})
}

// BenchmarkNodeOrdinals500Lookups: 500 consecutive nodes of 5,004 (a scored window) looked up in
// the packed table and in the Go map it replaced, with the cache warm and after an 8 MiB sweep
// (what the rest of a scheduling cycle leaves of it): ns per 500 lookups.
func BenchmarkNodeOrdinals500Lookups(b *testing.B) {
	var nodes []*v1.Node
	for i := 0; i < 5004; i++ {
		nodes = append(nodes, makeNode(fmt.Sprintf("gb300-rack-%03d-tray-%02d", i/18, i%18), 1+i/18, 4))
	}
	m := make(map[*v1.Node]int32, len(nodes))
	tab := newNodeOrdinals(len(nodes))
	for i, n := range nodes {
		m[n] = int32(i / 18)
		tab.put(n, int32(i/18))
	}
	sweep := make([]byte, 8<<20)
	for _, cold := range []bool{false, true} {
		for _, kind := range []string{"go-map", "packed"} {
			b.Run(fmt.Sprintf("%s/cold=%v", kind, cold), func(b *testing.B) {
				var sum int64
				start := 0
				for b.Loop() {
					if cold {
						b.StopTimer()
						for i := 0; i < len(sweep); i += 64 {
							sweep[i]++
						}
						b.StartTimer()
					}
					for _, n := range nodes[start : start+500] {
						if kind == "go-map" {
							sum += int64(m[n])
						} else {
							o, _ := tab.get(n)
							sum += int64(o)
						}
					}
					start = (start + 500) % 4500
				}
				if sum < 0 {
					b.Fatal("negative ordinal")
				}
			})
		}
	}
}
