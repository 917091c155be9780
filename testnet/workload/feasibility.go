package workload

import "fmt"

// MinNodes returns the fewest nodes able to carry the keys in key order — each node a contiguous
// piece, as node ranges are — with every node's load strictly below thres (SPEC §1's goal state).
// Loads are per key and must be non-negative. Greedy packing from key 0 (extend the current piece
// while its load stays below thres, else start a new one) is optimal for contiguous pieces: by
// induction, after any prefix of keys no partition uses fewer pieces, and among those with the
// fewest pieces the greedy one has the lightest last piece. The ring could let one node own a
// piece that wraps past the seam, which saves at most one node; this count ignores that.
//
// feasible is false when some single key's load is ≥ thres: no partition can then balance it. The
// count still gives every such key a node of its own. An empty key space needs 1 node (some node
// always owns the whole circle).
//
// A piece counts as under thres only below thres·(1 − 10⁻⁹): key loads such as the thesis's
// 5/s per hot key come out of float arithmetic a hair off, so twelve of them may sum to
// 59.99999999999 or to 60.00000000002, and an exact comparison would pack twelve per node in one
// workload and eleven in another. Twelve make 60, which is not under thres (and a measured load
// would sit on the line, over it half the time).
func MinNodes(loads []float64, thres float64) (nodes int, feasible bool) {
	nodes, feasible = 1, true
	cur := 0.0
	under := thres * (1 - 1e-9)
	for i, l := range loads {
		if !(l < thres) { // also catches NaN
			feasible = false
		}
		if i > 0 && !(cur+l < under) {
			nodes++
			cur = 0
		}
		cur += l
	}
	return nodes, feasible
}

// Feasibility is a workload's feasibility report (SPEC §12): whether the per-key loads can be
// balanced under thres at all, and with how many nodes.
type Feasibility struct {
	MinNodes   int     // fewest nodes carrying the keys with every node below Thres (see MinNodes)
	Nodes      int     // nodes available; ≤ 0 means not compared
	MaxKeyLoad float64 // heaviest single key
	MaxKey     int     // its index
	TotalLoad  float64 // Σ loads
	Thres      float64
	// Feasible: every key is below Thres and, when Nodes > 0, MinNodes ≤ Nodes.
	Feasible bool
}

// CheckFeasibility reports whether the per-key loads can be balanced under thres with the given
// number of nodes (nodes ≤ 0: only the per-key condition is checked).
func CheckFeasibility(loads []float64, thres float64, nodes int) Feasibility {
	f := Feasibility{Nodes: nodes, Thres: thres}
	var keysOK bool
	f.MinNodes, keysOK = MinNodes(loads, thres)
	for i, l := range loads {
		f.TotalLoad += l
		if i == 0 || l > f.MaxKeyLoad {
			f.MaxKeyLoad, f.MaxKey = l, i
		}
	}
	f.Feasible = keysOK && (nodes <= 0 || f.MinNodes <= nodes)
	return f
}

// String reads e.g. "feasible: 417 nodes needed of 500 (max key load 5.0/s < thres 60)".
func (f Feasibility) String() string {
	of := ""
	if f.Nodes > 0 {
		of = fmt.Sprintf(" of %d", f.Nodes)
	}
	if !(f.MaxKeyLoad < f.Thres) {
		return fmt.Sprintf("infeasible: key %d has load %.1f/s ≥ thres %g (%d nodes needed%s otherwise)",
			f.MaxKey, f.MaxKeyLoad, f.Thres, f.MinNodes, of)
	}
	verdict := "feasible"
	if !f.Feasible {
		verdict = "infeasible"
	}
	return fmt.Sprintf("%s: %d nodes needed%s (max key load %.1f/s < thres %g)", verdict, f.MinNodes, of, f.MaxKeyLoad, f.Thres)
}

// LowerBoundMoves is SPEC §10's lower bound on moved items: for each node, the fewest keys it must
// shed to get below thres = its key count minus the longest contiguous piece of its range whose
// load is < thres. A node already below thres sheds 0, so every node can be passed; a node at
// exactly thres is counted too, as the goal (SPEC §1) is L < thres. Each owned interval [lo, hi)
// indexes loads; lo > hi is the seam owner's wrapping range [lo, K) ∪ [0, hi); lo == hi is empty
// (give a lone node [0, K)). Bounds outside [0, K] are clamped. Cost O(keys) by a two-pointer
// sliding window (loads must be non-negative).
func LowerBoundMoves(loads []float64, owned [][2]int, thres float64) int {
	k := len(loads)
	clamp := func(x int) int { return min(max(x, 0), k) }
	total := 0
	for _, iv := range owned {
		lo, hi := clamp(iv[0]), clamp(iv[1])
		var mine []float64
		if lo <= hi {
			mine = loads[lo:hi]
		} else { // the seam owner's range [lo, K) ∪ [0, hi)
			mine = append(append(mine, loads[lo:]...), loads[:hi]...)
		}
		total += len(mine) - longestLight(mine, thres)
	}
	return total
}
