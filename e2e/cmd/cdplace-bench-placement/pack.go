package main

import (
	"sort"
)

// Packing is the offline whole-tray packing of a set of ComputeDomains into cliques.
type Packing struct {
	// Trays is the total size of the domains packed: a feasible packing (every domain wholly in
	// one clique, no clique over its healthy trays), so a lower bound of the optimum.
	Trays int
	// UpperBound is an upper bound of the optimum (see upperBound).
	UpperBound int
	// Proven is true when Trays is the optimum: it meets UpperBound, or the exhaustive search
	// finished within its node budget.
	Proven bool
}

// packNodeBudget bounds the exhaustive search per call; beyond it the best packing found so far
// stands (still feasible, just not proven optimal).
const packNodeBudget = 200_000

// PackCliques packs items (domain sizes in trays) into bins (healthy trays per clique), each
// item wholly in one bin or left out, maximising the trays packed (multiple subset-sum). It takes
// the best of three heuristics (cliques filled one after another by an exact subset-sum over the
// remaining domains, largest clique first and smallest first; best-fit decreasing), and, unless
// that already meets the upper bound, a depth-first branch and bound over the domains (largest
// first; bins with equal free trays tried once) within packNodeBudget nodes.
func PackCliques(items, bins []int) Packing {
	its := make([]int, 0, len(items))
	for _, it := range items {
		if it > 0 {
			its = append(its, it)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(its)))
	caps := make([]int, 0, len(bins))
	for _, c := range bins {
		if c > 0 {
			caps = append(caps, c)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(caps)))

	ub := upperBound(its, caps)
	best := sequentialDP(its, caps)
	asc := append([]int(nil), caps...)
	sort.Ints(asc)
	best = max(best, sequentialDP(its, asc), bestFitDecreasing(its, caps))
	if best >= ub {
		return Packing{Trays: best, UpperBound: ub, Proven: true}
	}
	found, complete := branchAndBound(its, caps, best, ub)
	return Packing{Trays: found, UpperBound: ub, Proven: complete || found >= ub}
}

// upperBound is the least of: the trays of all bins; the total size of the items that fit the
// largest bin; and the sum over bins of what each bin alone could hold of all items (an exact
// subset-sum per bin, ignoring that an item can only be used once).
func upperBound(items, caps []int) int {
	if len(caps) == 0 {
		return 0
	}
	capSum, fitSum, perBin := 0, 0, 0
	for _, c := range caps {
		capSum += c
		perBin += subsetSum(items, nil, c)
	}
	for _, it := range items {
		if it <= caps[0] {
			fitSum += it
		}
	}
	return min(capSum, fitSum, perBin)
}

// subsetSum is the largest sum ≤ c of a subset of the items not marked used; with used non-nil
// it marks the items of one such subset as used.
func subsetSum(items []int, used []bool, c int) int {
	// from[s] is the index of the item that first reached sum s (-1 for s = 0, -2 unreached);
	// sums are built in item order, so following from[] back uses each item at most once.
	from := make([]int, c+1)
	for s := range from {
		from[s] = -2
	}
	from[0] = -1
	for i, it := range items {
		if (used != nil && used[i]) || it > c {
			continue
		}
		for s := c; s >= it; s-- {
			if from[s] == -2 && from[s-it] != -2 {
				from[s] = i
			}
		}
	}
	best := c
	for from[best] == -2 {
		best--
	}
	if used != nil {
		for s := best; s > 0; s -= items[from[s]] {
			used[from[s]] = true
		}
	}
	return best
}

// sequentialDP fills the bins in the given order, each with the fullest subset of the items
// still unpacked.
func sequentialDP(items, caps []int) int {
	used := make([]bool, len(items))
	total := 0
	for _, c := range caps {
		total += subsetSum(items, used, c)
	}
	return total
}

// bestFitDecreasing puts each item (largest first) into the bin it leaves the fewest free trays
// in.
func bestFitDecreasing(items, caps []int) int {
	free := append([]int(nil), caps...)
	total := 0
	for _, it := range items {
		bi := -1
		for b, f := range free {
			if f >= it && (bi < 0 || f < free[bi]) {
				bi = b
			}
		}
		if bi >= 0 {
			free[bi] -= it
			total += it
		}
	}
	return total
}

// branchAndBound searches all assignments of items (sorted largest first) to bins, pruning with
// cur + min(items left, free trays left) ≤ best. It returns the best total and whether the
// search finished within packNodeBudget.
func branchAndBound(items, caps []int, best, ub int) (int, bool) {
	suffix := make([]int, len(items)+1)
	for i := len(items) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + items[i]
	}
	free := append([]int(nil), caps...)
	freeSum := 0
	for _, c := range caps {
		freeSum += c
	}
	nodes, aborted := 0, false
	var rec func(k, cur int)
	rec = func(k, cur int) {
		if aborted || best >= ub {
			return
		}
		nodes++
		if nodes > packNodeBudget {
			aborted = true
			return
		}
		best = max(best, cur)
		if k == len(items) || cur+min(suffix[k], freeSum-cur) <= best {
			return
		}
		it := items[k]
		tried := make(map[int]bool, len(free))
		for b := range free {
			if free[b] < it || tried[free[b]] {
				continue
			}
			tried[free[b]] = true
			free[b] -= it
			rec(k+1, cur+it)
			free[b] += it
			if aborted || best >= ub {
				return
			}
		}
		rec(k+1, cur)
	}
	rec(0, 0)
	return best, !aborted
}

// FillPlain adds pods that take one tray each and may go anywhere: they fill trays the domains
// left free.
func FillPlain(packedTrays, plainPods, healthyTrays int) int {
	return packedTrays + max(0, min(plainPods, healthyTrays-packedTrays))
}
