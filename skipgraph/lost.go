package skipgraph

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
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
