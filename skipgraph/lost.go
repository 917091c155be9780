package skipgraph

import "github.com/skiprange/skiprange/overlay"

// lostSet holds the parts of a node's range whose items were lost with a failed node: a key
// there that the node does not hold may have existed, so reads answer STATUS_LOST rather than
// "not found". The parts travel with handoffs and go back with re-admissions.
type lostSet []overlay.Range

func (l lostSet) contains(k overlay.Key) bool {
	for _, r := range l {
		if r.Contains(k) {
			return true
		}
	}
	return false
}

// within returns the lost parts that lie in r.
func (l lostSet) within(r overlay.Range) []overlay.Range {
	var out []overlay.Range
	for _, x := range l {
		out = append(out, x.Intersect(r)...)
	}
	return out
}

func (l *lostSet) add(r overlay.Range) { *l = append(*l, r) }

// remove takes r out of every lost part.
func (l *lostSet) remove(r overlay.Range) {
	var out lostSet
	for _, x := range *l {
		out = append(out, x.Subtract(r)...)
	}
	*l = out
}
