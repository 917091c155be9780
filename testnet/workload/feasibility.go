package workload

import (
	"fmt"
	"slices"
)

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
	return pack(loads, func(int) float64 { return thres })
}

// pack cuts the keys in order into contiguous pieces, the p-th (from 1) extended while its load
// stays below capOf(p)·(1 − 10⁻⁹) (see MinNodes), and returns how many pieces it took and
// whether every key alone is below the cap of its piece.
func pack(loads []float64, capOf func(piece int) float64) (pieces int, keysFit bool) {
	pieces, keysFit = 1, true
	cur := 0.0
	for i, l := range loads {
		if i > 0 && !(cur+l < capOf(pieces)*(1-1e-9)) {
			pieces++
			cur = 0
		}
		if !(l < capOf(pieces)) { // also catches NaN
			keysFit = false
		}
		cur += l
	}
	return pieces, keysFit
}

// Feasibility is a workload's feasibility report (SPEC §12): whether the per-key loads can be
// balanced with every node under its own thres, and with how many nodes.
type Feasibility struct {
	// MinNodes is how many nodes carry the keys in contiguous pieces, each below its node's
	// thres, the nodes taken from the highest thres down (see CheckFeasibility); Nodes is how
	// many there are.
	MinNodes, Nodes    int
	MinThres, MaxThres float64
	SumThres           float64 // Σ of every node's thres
	MaxKeyLoad         float64 // heaviest single key
	MaxKey             int     // its index
	TotalLoad          float64 // Σ loads
	// Feasible: the pieces fit on the nodes. Decided: Feasible, or no assignment can exist —
	// always so when the nodes share one thres; with mixed thresholds, when a key is at or over
	// every thres or the total at or over Σ thres. A mixed workload may be neither.
	Feasible, Decided bool
}

// CheckFeasibility reports whether the per-key loads can be balanced with each node below its
// own threshold (thresholds holds one per node). Nodes can migrate anywhere, so what matters is
// how many nodes have each threshold, not where they sit. The keys are packed in order, each
// piece extended while its load stays below the thres of the node it is given, the nodes taken
// from the highest thres down. With one shared thres this is MinNodes, exact; with mixed
// thresholds it is a sufficient test — whenever the nodes of thres ≥ c alone could carry the keys
// under c, so can it, since a piece given a higher thres reaches at least as far — and the report
// says when it is undecided.
func CheckFeasibility(loads, thresholds []float64) Feasibility {
	f := Feasibility{Nodes: len(thresholds)}
	for i, l := range loads {
		f.TotalLoad += l
		if i == 0 || l > f.MaxKeyLoad {
			f.MaxKeyLoad, f.MaxKey = l, i
		}
	}
	if len(thresholds) == 0 {
		f.Decided = true
		return f
	}
	caps := slices.Clone(thresholds)
	slices.Sort(caps)
	slices.Reverse(caps)
	f.MaxThres, f.MinThres = caps[0], caps[len(caps)-1]
	for _, t := range caps {
		f.SumThres += t
	}
	// Pieces beyond the last node are counted at the lowest thres: how many more would be needed.
	var keysFit bool
	f.MinNodes, keysFit = pack(loads, func(piece int) float64 { return caps[min(piece, len(caps))-1] })
	f.Feasible = keysFit && f.MinNodes <= len(caps)
	f.Decided = f.Feasible || f.MinThres == f.MaxThres || !(f.MaxKeyLoad < f.MaxThres) || !(f.TotalLoad < f.SumThres)
	return f
}

// String reads e.g. "feasible: 417 nodes needed of 500 (max key load 5.0/s < thres 60)", or with
// mixed thresholds "feasible: 390 nodes needed of 500, the highest thres first (thres 30–120; max
// key load 5.0/s)".
func (f Feasibility) String() string {
	verdict := "feasible"
	switch {
	case !f.Decided:
		verdict = "not shown feasible"
	case !f.Feasible:
		verdict = "infeasible"
	}
	if f.MinThres == f.MaxThres {
		if !(f.MaxKeyLoad < f.MaxThres) {
			return fmt.Sprintf("infeasible: key %d has load %.1f/s ≥ thres %g (%d nodes needed of %d otherwise)",
				f.MaxKey, f.MaxKeyLoad, f.MaxThres, f.MinNodes, f.Nodes)
		}
		return fmt.Sprintf("%s: %d nodes needed of %d (max key load %.1f/s < thres %g)", verdict, f.MinNodes, f.Nodes, f.MaxKeyLoad, f.MaxThres)
	}
	switch {
	case !(f.MaxKeyLoad < f.MaxThres):
		return fmt.Sprintf("infeasible: key %d has load %.1f/s ≥ the highest thres %g", f.MaxKey, f.MaxKeyLoad, f.MaxThres)
	case !(f.TotalLoad < f.SumThres):
		return fmt.Sprintf("infeasible: the keys' total load %.0f/s ≥ %.0f, the sum of the nodes' thresholds", f.TotalLoad, f.SumThres)
	}
	return fmt.Sprintf("%s: %d nodes needed of %d, the highest thres first (thres %g–%g; max key load %.1f/s)",
		verdict, f.MinNodes, f.Nodes, f.MinThres, f.MaxThres, f.MaxKeyLoad)
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
