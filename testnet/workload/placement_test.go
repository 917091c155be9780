package workload

import (
	"math/rand/v2"
	"testing"
)

func TestPlacementLowerBoundCountsTheNodesAHotStretchNeeds(t *testing.T) {
	// Ten nodes of ten keys; the first node's keys carry 1/s each and thres is 2, so every node
	// can hold one of them only. All ten nodes end up each holding one of the first ten keys: at
	// most two of them reach outside that stretch, so eight end inside it, seven of them nodes
	// that move all their ten keys, and the first node keeps one of its own: 9 + 70.
	loads := make([]float64, 100)
	owned := make([][2]int, 10)
	for i := range owned {
		owned[i] = [2]int{10 * i, 10*i + 10}
	}
	for k := range 10 {
		loads[k] = 1
	}
	if got := LowerBoundMoves(loads, owned, 2); got != 9 {
		t.Fatalf("LowerBoundMoves = %d, want 9", got)
	}
	if got := PlacementLowerBound(loads, owned, 2); got != 79 {
		t.Fatalf("PlacementLowerBound = %d, want 79", got)
	}
	// Spread over the whole ring, the same load needs no node to come from elsewhere.
	for k := range loads {
		loads[k] = 0
	}
	for i := range owned {
		loads[10*i] = 1
	}
	if got := PlacementLowerBound(loads, owned, 2); got != 0 {
		t.Fatalf("PlacementLowerBound, one hot key per node = %d, want 0", got)
	}
}

// TestPlacementLowerBoundNeverExceedsTheOptimum compares the bound with the true fewest moves,
// found by trying every end state: every rotation, every split of the ring into one arc per
// node (empty arcs allowed) and every order of the nodes over the arcs.
func TestPlacementLowerBoundNeverExceedsTheOptimum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	stronger := 0
	for trial := range 400 {
		n := 3 + r.IntN(2)
		k := n + r.IntN(9-n)
		loads := make([]float64, k)
		for i := range loads {
			loads[i] = float64(r.IntN(4))
		}
		owned := randomPartition(r, k, n)
		thres := 2 + float64(r.IntN(4))
		if trial%2 == 1 { // a hot first node with most of the keys, the others one key each
			n, k = 4, 6+r.IntN(3)
			loads = make([]float64, k)
			for i := range loads {
				loads[i] = float64(r.IntN(2))
				if i < k-3 {
					loads[i] = float64(1 + r.IntN(2))
				}
			}
			owned = [][2]int{{0, k - 3}, {k - 3, k - 2}, {k - 2, k - 1}, {k - 1, k}}
			thres = 2 + float64(r.IntN(2))
		}
		opt, feasible := fewestMoves(loads, owned, thres)
		if !feasible {
			continue
		}
		got := PlacementLowerBound(loads, owned, thres)
		if got > opt {
			t.Fatalf("trial %d: bound %d > optimum %d (loads %v, owned %v, thres %g)", trial, got, opt, loads, owned, thres)
		}
		if got > LowerBoundMoves(loads, owned, thres) {
			stronger++
		}
	}
	if stronger == 0 {
		t.Fatal("the placement bound was never stronger than SPEC §10's: the test checks nothing")
	}
	t.Logf("stronger than SPEC §10's bound in %d trials", stronger)
}

// randomPartition cuts [0, k) into n non-empty consecutive intervals.
func randomPartition(r *rand.Rand, k, n int) [][2]int {
	cuts := r.Perm(k - 1)[:n-1] // cut after key c
	marks := make([]bool, k)
	for _, c := range cuts {
		marks[c+1] = true
	}
	var out [][2]int
	lo := 0
	for i := 1; i < k; i++ {
		if marks[i] {
			out = append(out, [2]int{lo, i})
			lo = i
		}
	}
	return append(out, [2]int{lo, k})
}

// fewestMoves is the exact minimum of moved keys over all end states with every arc's load
// below thres; feasible is false when there is none.
func fewestMoves(loads []float64, owned [][2]int, thres float64) (int, bool) {
	k, n := len(loads), len(owned)
	initial := make([]int, k) // key → node
	for i, iv := range owned {
		for x := iv[0]; x < iv[1]; x++ {
			initial[x] = i
		}
	}
	best, feasible := k+1, false
	sizes := make([]int, n)
	var split func(at, left int)
	try := func() {
		for offset := range k {
			for _, perm := range permutations(n) {
				stays, ok, x := 0, true, offset
				for arc, size := range sizes {
					sum := 0.0
					for range size {
						sum += loads[x%k]
						if initial[x%k] == perm[arc] {
							stays++
						}
						x++
					}
					if !(sum < thres) {
						ok = false
						break
					}
				}
				if ok {
					feasible = true
					best = min(best, k-stays)
				}
			}
		}
	}
	split = func(at, left int) {
		if at == n-1 {
			sizes[at] = left
			try()
			return
		}
		for s := 0; s <= left; s++ {
			sizes[at] = s
			split(at+1, left-s)
		}
	}
	split(0, k)
	return best, feasible
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
