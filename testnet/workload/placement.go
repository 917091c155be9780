package workload

import "sort"

// PlacementLowerBound is a lower bound on the items any balancer must move to bring every node
// under thres, stronger than LowerBoundMoves (SPEC §10) because it also counts the nodes a loaded
// stretch of the ring needs. SPEC §10 lets every node outside the hot keys keep all it has; but
// nodes are few, and a hot stretch that needs h nodes takes them from somewhere.
//
// owned lists the nodes in ring order, each a half-open interval [lo, hi) of key indexes into
// loads, together partitioning [0, len(loads)) (the harness lists owners from the one at key 0,
// so no interval wraps). The argument, for any arc R made of the ranges of consecutive nodes
// (fewer than all of them):
//   - in the end every node owns a contiguous arc with load < thres, and those arcs partition the
//     ring; cut to R, they split R into contiguous light pieces, at least MinNodes(R) of them —
//     and one end arc can cover both ends of R (it then yields two pieces), so at least
//     MinNodes(R) − 2 end arcs lie wholly inside R;
//   - a node whose end arc lies inside R keeps only keys of its own range that are in R: a node from
//     outside R keeps none (it moves all of its keys), a node from inside keeps at most its
//     longest light piece, which is what LowerBoundMoves already charges it;
//   - so beyond LowerBoundMoves at least j = MinNodes(R) − 2 − |R's nodes| outside nodes move
//     all their keys, each costing its longest light piece more than LowerBoundMoves charged it;
//     the cheapest j of them give a bound.
//
// The result is LowerBoundMoves plus the largest such extra over the arcs tried. Any arc gives a
// valid bound, so trying only some is safe: arcs start and end at nodes with load (an arc with an
// unloaded end node is never better than the arc without it), and when that would be more than
// 10^8 key steps, only as many starts are tried, those where the load rises first. Cost
// O(starts · keys).
func PlacementLowerBound(loads []float64, owned [][2]int, thres float64) int {
	n := len(owned)
	base := 0               // LowerBoundMoves: what each node must shed of its own range
	light := make([]int, n) // longest light piece of each node's range: its extra cost
	load := make([]float64, n)
	var starts []int
	for i, iv := range owned {
		light[i] = longestLight(loads[iv[0]:iv[1]], thres)
		base += iv[1] - iv[0] - light[i]
		for _, l := range loads[iv[0]:iv[1]] {
			load[i] += l
		}
		if load[i] > 0 {
			starts = append(starts, i)
		}
	}
	if n < 3 {
		return base
	}
	if steps := len(starts) * len(loads); steps > maxPlacementSteps {
		// Arcs that start where the load rises are tried first: a hot stretch starts there.
		sort.SliceStable(starts, func(x, y int) bool {
			return rises(load, starts[x]) && !rises(load, starts[y])
		})
		starts = starts[:max(1, maxPlacementSteps/len(loads))]
	}
	cheapest := newCheapestSet(light)
	extra := 0
	for _, a := range starts {
		cheapest.reset()
		pieces, cur := 0, 0.0 // greedy packing of R into light pieces (as MinNodes)
		for size := 1; size < n; size++ {
			i := (a + size - 1) % n
			cheapest.remove(i)
			iv := owned[i]
			for _, l := range loads[iv[0]:iv[1]] {
				if pieces == 0 || !(cur+l < thres) {
					pieces++
					cur = 0
				}
				cur += l
			}
			if load[i] == 0 {
				continue
			}
			if j := min(pieces-2-size, n-size); j > 0 {
				extra = max(extra, cheapest.sum(j))
			}
		}
	}
	return base + extra
}

// maxPlacementSteps bounds the work of PlacementLowerBound (key steps over all arcs).
const maxPlacementSteps = 100_000_000

// rises reports whether node i carries more load than its predecessor on the ring.
func rises(load []float64, i int) bool {
	return load[i] > load[(i+len(load)-1)%len(load)]
}

// longestLight is the length of the longest contiguous piece of loads whose sum is < thres, by a
// two-pointer sliding window (loads must be non-negative).
func longestLight(loads []float64, thres float64) int {
	best, left, sum := 0, 0, 0.0
	for right, l := range loads {
		sum += l
		for left <= right && !(sum < thres) {
			sum -= loads[left]
			left++
		}
		if left > right {
			sum = 0 // empty window: drop accumulated rounding
		}
		best = max(best, right-left+1)
	}
	return best
}

// cheapestSet holds a set of nodes with non-negative costs and answers "the total cost of the j
// cheapest still in the set" in O(log n), by a Fenwick tree over the nodes ranked by cost.
type cheapestSet struct {
	rank             []int // node → 1-based rank by cost
	costAt           []int // rank → cost
	allCnt, allTotal []int // the Fenwick arrays with every node present
	cnt, total       []int
	top              int // highest power of two ≤ n
}

func newCheapestSet(cost []int) *cheapestSet {
	n := len(cost)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return cost[order[x]] < cost[order[y]] })
	c := &cheapestSet{rank: make([]int, n), costAt: make([]int, n+1), allCnt: make([]int, n+1),
		allTotal: make([]int, n+1), cnt: make([]int, n+1), total: make([]int, n+1), top: 1}
	for c.top*2 <= n {
		c.top *= 2
	}
	for r, i := range order {
		c.rank[i], c.costAt[r+1] = r+1, cost[i]
		for p := r + 1; p <= n; p += p & -p {
			c.allCnt[p]++
			c.allTotal[p] += cost[i]
		}
	}
	return c
}

// reset puts every node back.
func (c *cheapestSet) reset() {
	copy(c.cnt, c.allCnt)
	copy(c.total, c.allTotal)
}

// remove takes node i out; it must be in.
func (c *cheapestSet) remove(i int) {
	r := c.rank[i]
	for p := r; p < len(c.cnt); p += p & -p {
		c.cnt[p]--
		c.total[p] -= c.costAt[r]
	}
}

// sum returns the total cost of the j cheapest nodes in the set (of all of them if fewer).
func (c *cheapestSet) sum(j int) int {
	pos, got, total := 0, 0, 0
	for step := c.top; step > 0; step >>= 1 {
		if next := pos + step; next < len(c.cnt) && got+c.cnt[next] <= j {
			pos = next
			got += c.cnt[next]
			total += c.total[next]
		}
	}
	return total
}
