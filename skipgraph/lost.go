package skipgraph

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// lostSet holds the parts of a node's range whose items were lost with a failed node: a key
// there that the node does not hold may have existed, so reads answer STATUS_LOST rather than
// "not found". The parts travel with handoffs and go back with re-admissions.
type lostSet []lostPart

// lostPart is one lost part, with the time it was taken over, by this node's clock (a part
// handed on by a NIX or a leave comes with its age; a snapshot keeps the time); zero where that
// time is not known (a giver or a snapshot that did not say). Every value the node holds there
// arrived after it, which an overlap with the node that held the items weighs against when
// that node's store last took a value (claim.go).
type lostPart struct {
	overlay.Range
	since time.Time
}

func (l lostSet) contains(k overlay.Key) bool {
	for _, p := range l {
		if p.Contains(k) {
			return true
		}
	}
	return false
}

// in returns the lost parts that lie in r, with their times.
func (l lostSet) in(r overlay.Range) lostSet {
	var out lostSet
	for _, p := range l {
		for _, q := range p.Intersect(r) {
			out = append(out, lostPart{q, p.since})
		}
	}
	return out
}

// within returns the lost parts that lie in r.
func (l lostSet) within(r overlay.Range) []overlay.Range { return l.in(r).ranges() }

// takenOverAfter returns the lost parts in r that this node is known to have taken over after t.
func (l lostSet) takenOverAfter(r overlay.Range, t time.Time) []overlay.Range {
	var out []overlay.Range
	for _, p := range l.in(r) {
		if p.since.After(t) {
			out = append(out, p.Range)
		}
	}
	return out
}

// deletedAfterTakeOver reports whether a delete of k made at at came after this node took over
// the lost part that holds k (a part of unknown time says no).
func (l lostSet) deletedAfterTakeOver(k overlay.Key, at time.Time) bool {
	for _, p := range l {
		if p.Contains(k) && !p.since.IsZero() && !at.Before(p.since) {
			return true
		}
	}
	return false
}

// ranges returns the lost parts without their times.
func (l lostSet) ranges() []overlay.Range {
	out := make([]overlay.Range, len(l))
	for i, p := range l {
		out[i] = p.Range
	}
	return out
}

// copyArrived forgets when the parts holding k were taken over: a copy written there by another
// node (a write that leaves what this node holds) may be older than the take-over, so the
// values there are no longer all known to have arrived after it.
func (l lostSet) copyArrived(k overlay.Key) {
	for i := range l {
		if l[i].Contains(k) {
			l[i].since = time.Time{}
		}
	}
}

// add records r as lost, taken over at since (zero when not known).
func (l *lostSet) add(r overlay.Range, since time.Time) { *l = append(*l, lostPart{r, since}) }

// remove takes r out of every lost part.
func (l *lostSet) remove(r overlay.Range) {
	var out lostSet
	for _, p := range *l {
		for _, rest := range p.Subtract(r) {
			out = append(out, lostPart{rest, p.since})
		}
	}
	*l = out
}

// maxCopiesWholeHops bounds how often a CopiesWhole is passed on to a successor: more than the
// pieces one outage leaves a node's former range in.
const maxCopiesWholeHops = 16

// sendCopiesWhole tells the owners of r, routed to the owner of its start, that every item this
// node held in r is written to them and stored, and that it held them all but in holes
// (pb.CopiesWhole); covered says that its batches said which parts of r they accounted for, so
// that each owner drops marks only where the copies came to it. Too many holes to send, and the
// owners keep their marks.
func (n *Node) sendCopiesWhole(r overlay.Range, holes []overlay.Range, covered bool) {
	if len(holes) > n.cfg.MaxItemsPerMessage {
		return
	}
	c := &pb.CopiesWhole{Range: r.ToPB(), Route: &pb.Route{Key: []byte(r.Start)}}
	if covered {
		c.Origin = n.selfRef
	}
	for _, h := range holes {
		c.Holes = append(c.Holes, h.ToPB())
	}
	// Routed from here as a repair's message; the step that called this goes on as before.
	defer func(was pb.Cause) { n.handling = was }(n.handling)
	n.handling = pb.Cause_CAUSE_REPAIR
	n.onCopiesWhole(c)
}

// onCopiesWhole routes c on towards the owner of its range's start; there, it drops the lost
// marks in the part of the range this node owns, but in c's holes: the items there were all held
// either here or by the sender, which has written its own here. A mark kept where nothing is
// missing only makes a read of an absent key answer "may have existed"; one dropped where
// something is missing answers "not found" for a lost key, so only the sender's word drops one.
// The rest of the range, past this node's end, goes on to its successor.
func (n *Node) onCopiesWhole(c *pb.CopiesWhole) {
	if !n.route(&pb.Envelope{Body: &pb.Envelope_CopiesWhole{CopiesWhole: c}}, c.Route, func(pb.Status) {}) {
		return
	}
	r, mine := overlay.RangeFromPB(c.Range), n.Range()
	whole := mine.Intersect(r)
	if c.Origin != nil {
		// Only where the origin's batches came to this node: a part of r that another node
		// owned when they were stored, and this one took over after, holds none of them (a
		// waiting node took its dead successor's range over while the copies of a part of it
		// went to the node before, which held that part then: the dropped mark made a read
		// there answer "not found"; skipsim balance --pause 0.1 --clients 20, small runs).
		whole = n.covered.within(overlay.NodeID(c.Origin.Id), whole)
	}
	for _, h := range c.Holes {
		var rest []overlay.Range
		for _, w := range whole {
			rest = append(rest, w.Subtract(overlay.RangeFromPB(h))...)
		}
		whole = rest
	}
	for _, w := range whole {
		if len(n.lost.in(w)) > 0 {
			n.lost.remove(w)
			n.debug("lost marks dropped: the items are back", func() []zap.Field {
				return []zap.Field{zap.Stringer("part", w), zap.Int("lost_parts_left", len(n.lost))}
			})
		}
	}
	end, succ := n.end(), n.levels[0].succ
	if mine.IsFull() || end == r.Start || !r.Contains(end) || succ.ID == n.self.ID || c.Hops >= maxCopiesWholeHops {
		return
	}
	// The origin goes on with it: each owner along r drops marks only where the origin's copies
	// came to it (TestCopiesWholePassedOnKeepsItsOrigin).
	n.send(succ.ID, &pb.Envelope{Body: &pb.Envelope_CopiesWhole{CopiesWhole: &pb.CopiesWhole{
		Range: overlay.Range{Start: end, End: r.End}.ToPB(), Holes: c.Holes, Hops: c.Hops + 1,
		Route: &pb.Route{Key: []byte(end)}, Origin: c.Origin}}}, pb.Cause_CAUSE_REPAIR)
}

// markedLost reports whether key lies in a part of this node's range lost with a failed node:
// one of its own lost parts, or one of a piece coming in that it serves already (acknowledged,
// the commit on its way), whose lost parts become its own only at the commit. Unmarked there, a
// read answered "not found" for a key the failed node may have held (skipsim balance --pause
// 0.1 --clients 20, small runs: a NIX's piece read between its acknowledgement and commit).
func (n *Node) markedLost(key overlay.Key) bool {
	return n.lost.contains(key) || n.in != nil && n.in.acked && n.in.lost.contains(key)
}

// readsLost reports whether a read of key, which this node does not hold, answers LOST: the key
// is marked lost and no delete of it is known here.
func (n *Node) readsLost(key overlay.Key) bool {
	if !n.markedLost(key) || n.tombs.has(key) {
		return false
	}
	return !n.in.hasTombstone(key)
}

// lostWithin reports whether any part of r is marked lost (markedLost).
func (n *Node) lostWithin(r overlay.Range) bool {
	return len(n.lost.within(r)) > 0 || n.in != nil && n.in.acked && len(n.in.lost.within(r)) > 0
}

// coveredParts records, per node that sent copies with covers (BatchPut.covers), the parts of
// this node's range its batches accounted for, and when: a CopiesWhole of that node drops lost
// marks only there. Kept for coveredFor, bounded by maxCovered parts per sender.
type coveredParts map[overlay.NodeID][]lostPart

// coveredFor is how long a part covered by copies counts for a CopiesWhole: the sender's last
// batch can take as long as a request's attempts, and its CopiesWhole follows at once.
const coveredFor = 10 * time.Minute

// maxCovered bounds the parts recorded per sender.
const maxCovered = 1024

// add records part, covered by copies of from, at now.
func (c *coveredParts) add(from overlay.NodeID, part overlay.Range, now time.Time) {
	if *c == nil {
		*c = coveredParts{}
	}
	parts := append((*c)[from], lostPart{part, now})
	if len(parts) > maxCovered {
		parts = parts[len(parts)-maxCovered:]
	}
	(*c)[from] = parts
}

// within returns the parts of rs that copies of from covered.
func (c coveredParts) within(from overlay.NodeID, rs []overlay.Range) []overlay.Range {
	var out []overlay.Range
	for _, r := range rs {
		for _, p := range c[from] {
			out = append(out, r.Intersect(p.Range)...)
		}
	}
	return out
}

// expire drops the parts recorded before cutoff.
func (c coveredParts) expire(cutoff time.Time) {
	for from, parts := range c {
		parts = slices.DeleteFunc(parts, func(p lostPart) bool { return p.since.Before(cutoff) })
		if len(parts) == 0 {
			delete(c, from)
		} else {
			c[from] = parts
		}
	}
}
