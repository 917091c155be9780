package sim

import (
	"fmt"
	"sort"

	"github.com/skiprange/skiprange/overlay"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant int // SPEC §8 number
	Detail    string
}

func (v Violation) String() string { return fmt.Sprintf("invariant %d: %s", v.Invariant, v.Detail) }

// Report is the outcome of an invariant check.
type Report struct {
	Nodes      int
	Violations []Violation
	// Counted, not listed beyond the first few of each invariant.
	Omitted int
}

// OK reports whether every checked invariant holds.
func (r Report) OK() bool { return len(r.Violations) == 0 && r.Omitted == 0 }

func (r Report) String() string {
	if r.OK() {
		return fmt.Sprintf("%d nodes: all invariants hold", r.Nodes)
	}
	s := fmt.Sprintf("%d nodes: %d violations", r.Nodes, len(r.Violations)+r.Omitted)
	for _, v := range r.Violations {
		s += "\n  " + v.String()
	}
	if r.Omitted > 0 {
		s += fmt.Sprintf("\n  (+%d more)", r.Omitted)
	}
	return s
}

const maxListed = 5

func (r *Report) add(inv int, format string, args ...any) {
	listed := 0
	for _, v := range r.Violations {
		if v.Invariant == inv {
			listed++
		}
	}
	if listed >= maxListed {
		r.Omitted++
		return
	}
	r.Violations = append(r.Violations, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
}

// Check verifies, with global knowledge, the structural invariants of SPEC §8 that hold at
// quiescence: (1) ranges partition the circle and level 0 is the ring of range starts;
// (2) every level is the exact ring of the nodes sharing that many membership bits; (3) every
// stored item lies in its holder's range (no key held by two owners, no stray copies);
// (5) no node is locked by a handoff. Item conservation against what clients wrote and search
// from every node (invariants 3 and 4) are checked by the callers that know the workload, with
// CheckItems and lookups.
func (nw *Network) Check() Report {
	var rep Report
	owners := nw.owners()
	rep.Nodes = len(owners)
	for _, s := range nw.order {
		if s.alive && !s.node.Owns() {
			rep.add(1, "node %s is running but %s", s.id, s.node.State())
		}
	}
	if len(owners) == 0 {
		rep.add(1, "no node owns a range")
		return rep
	}
	// (1) Partition: each range ends where the next start is, and level 0 links follow that order.
	for i, s := range owners {
		next, prev := owners[(i+1)%len(owners)], owners[(i-1+len(owners))%len(owners)]
		r := s.node.Range()
		if len(owners) == 1 {
			if !r.IsFull() {
				rep.add(1, "single node %s owns %s, not the whole circle", s.id, r)
			}
			continue
		}
		if r.End != next.node.Self().Start {
			rep.add(1, "%s owns %s but the next start is %s's %q", s.id, r, next.id, next.node.Self().Start)
		}
		pred, succ := s.node.Neighbors(0)
		if succ.ID != next.id || pred.ID != prev.id {
			rep.add(1, "%s level 0 links pred=%s succ=%s, want %s and %s", s.id, pred.ID, succ.ID, prev.id, next.id)
		}
	}
	// (2) Rings: at level l the nodes sharing their first l bits form a ring in start order; a node
	// alone at level l has height <= l.
	for l := 1; l < overlay.MaxLevel; l++ {
		groups := map[uint64][]*simNode{}
		var prefixes []uint64
		for _, s := range owners {
			p := uint64(s.node.Self().MVec) >> (64 - l)
			if _, ok := groups[p]; !ok {
				prefixes = append(prefixes, p)
			}
			groups[p] = append(groups[p], s)
		}
		sort.Slice(prefixes, func(i, j int) bool { return prefixes[i] < prefixes[j] })
		company := false
		for _, p := range prefixes {
			g := groups[p] // already in start order
			if len(g) == 1 {
				if h := g[0].node.Height(); h > l {
					rep.add(2, "%s is alone at level %d but has height %d", g[0].id, l, h)
				}
				continue
			}
			company = true
			for i, s := range g {
				next, prev := g[(i+1)%len(g)], g[(i-1+len(g))%len(g)]
				pred, succ := s.node.Neighbors(l)
				if succ.ID != next.id || pred.ID != prev.id {
					rep.add(2, "%s level %d links pred=%s succ=%s, want %s and %s", s.id, l, pred.ID, succ.ID, prev.id, next.id)
				}
			}
		}
		if !company {
			break
		}
	}
	// (3) Stored items lie in their holder's range; (5) no handoff is in progress.
	for _, s := range owners {
		r := s.node.Range()
		stray := 0
		_ = s.store.Ascend(overlay.FullRange, func(k overlay.Key, _ []byte) bool {
			if !r.Contains(k) {
				stray++
			}
			return true
		})
		if stray > 0 {
			rep.add(3, "%s holds %d items outside its range %s", s.id, stray, r)
		}
		if s.node.Busy() {
			rep.add(5, "%s is still in a handoff", s.id)
		}
	}
	return rep
}

// CheckItems verifies item conservation (invariant 3) against what clients wrote: every expected
// key not in lost is held by its owner with the expected value, and nothing unexpected is stored.
func (nw *Network) CheckItems(expected map[overlay.Key]string, lost map[overlay.Key]bool) (missing, extra, wrong int) {
	owners := nw.owners()
	for _, s := range owners {
		_ = s.store.Ascend(overlay.FullRange, func(k overlay.Key, v []byte) bool {
			want, ok := expected[k]
			switch {
			case !ok:
				extra++
			case want != string(v):
				wrong++
			}
			return true
		})
	}
	for k := range expected {
		if lost[k] {
			continue
		}
		if _, found, _ := ownerIn(owners, k).node.Store().Get(k); !found {
			missing++
		}
	}
	return missing, extra, wrong
}
