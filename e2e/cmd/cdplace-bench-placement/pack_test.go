package main

import (
	"math/rand/v2"
	"testing"
)

// bruteForce tries every assignment of items to bins (or none).
func bruteForce(items, caps []int) int {
	free := append([]int(nil), caps...)
	best := 0
	var rec func(k, cur int)
	rec = func(k, cur int) {
		if k == len(items) {
			best = max(best, cur)
			return
		}
		rec(k+1, cur)
		for b := range free {
			if free[b] >= items[k] {
				free[b] -= items[k]
				rec(k+1, cur+items[k])
				free[b] += items[k]
			}
		}
	}
	rec(0, 0)
	return best
}

func TestPackCliquesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for n := 0; n < 400; n++ {
		items := make([]int, rng.IntN(9))
		for i := range items {
			items[i] = 1 + rng.IntN(18)
		}
		caps := make([]int, 1+rng.IntN(3))
		for i := range caps {
			caps[i] = 10 + rng.IntN(9)
		}
		want := bruteForce(items, caps)
		got := PackCliques(items, caps)
		if got.Trays != want || !got.Proven || got.UpperBound < want {
			t.Fatalf("items %v caps %v: got %+v; want %d (proven)", items, caps, got, want)
		}
	}
}

func TestPackCliquesKnown(t *testing.T) {
	cases := []struct {
		items, caps []int
		want        int
	}{
		{nil, []int{18, 18}, 0},
		{[]int{18, 18, 18}, []int{18, 17}, 18},           // one clique lost a tray
		{[]int{10, 9, 9, 8}, []int{18, 18}, 36},          // 10+8, 9+9
		{[]int{12, 12, 6, 6, 6}, []int{18, 18}, 36},      // 12+6, 12+6, one 6 waits
		{[]int{16, 4, 4, 4, 4, 2, 2}, []int{18, 18}, 36}, // 16+2, 4+4+4+4+2
		{[]int{20}, []int{18}, 0},
	}
	for _, c := range cases {
		if got := PackCliques(c.items, c.caps); got.Trays != c.want || !got.Proven {
			t.Errorf("items %v caps %v: %+v; want %d", c.items, c.caps, got, c.want)
		}
	}
	if got := FillPlain(30, 10, 36); got != 36 {
		t.Errorf("FillPlain = %d; want 36", got)
	}
}

// A realistic saturated instance (8 cliques, 40 waiting and running domains) stays fast.
func TestPackCliquesLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	tr := GenerateTrace(spec(5))
	for n := 0; n < 20; n++ {
		var items []int
		for i := 0; i < 40; i++ {
			items = append(items, tr.CDs[rng.IntN(len(tr.CDs))].Size)
		}
		caps := []int{18, 18, 17, 18, 18, 16, 18, 18}
		p := PackCliques(items, caps)
		if p.Trays > p.UpperBound || p.Trays < 130 {
			t.Errorf("items %v: %+v", items, p)
		}
	}
}
