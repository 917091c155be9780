package overlay

import (
	"fmt"

	"github.com/skiprange/skiprange/overlay/pb"
)

// Range is a half-open arc [Start, End) of the key circle. Start == End denotes the whole circle
// (the range of a node that is alone); there is no empty Range. A range with Start > End wraps the
// seam: it holds every key >= Start and every key < End. End == MinKey means "up to the top".
type Range struct {
	Start, End Key
}

// RangeFromPB converts a range from the wire or a snapshot.
func RangeFromPB(r *pb.KeyRange) Range { return Range{Start: Key(r.GetStart()), End: Key(r.GetEnd())} }

// ToPB converts r for the wire or a snapshot.
func (r Range) ToPB() *pb.KeyRange { return &pb.KeyRange{Start: []byte(r.Start), End: []byte(r.End)} }

// FullRange is the whole circle.
var FullRange = Range{MinKey, MinKey}

// IsFull reports whether r covers the whole circle.
func (r Range) IsFull() bool { return r.Start == r.End }

// Wraps reports whether r crosses the seam, i.e. holds both the largest and the smallest keys
// without being the full circle.
func (r Range) Wraps() bool { return r.Start > r.End && r.End != MinKey }

// Contains reports whether k lies in r.
func (r Range) Contains(k Key) bool {
	switch {
	case r.Start < r.End:
		return r.Start <= k && k < r.End
	case r.Start > r.End:
		return k >= r.Start || k < r.End
	default:
		return true
	}
}

// Split cuts r at key at into [Start, at) and [at, End). at must lie in r and differ from Start,
// so that both pieces are non-empty.
func (r Range) Split(at Key) (lower, upper Range, err error) {
	if at == r.Start || !r.Contains(at) {
		return Range{}, Range{}, fmt.Errorf("split %s at %q: key must lie strictly inside the range", r, at)
	}
	return Range{r.Start, at}, Range{at, r.End}, nil
}

// Merge joins r with the range that follows it clockwise. The two must be adjacent (r.End ==
// next.Start) and must not already cover the circle between them.
func (r Range) Merge(next Range) (Range, error) {
	if r.IsFull() || next.IsFull() || r.End != next.Start {
		return Range{}, fmt.Errorf("merge %s with %s: ranges are not adjacent", r, next)
	}
	if next.End == r.Start {
		return FullRange, nil
	}
	// The merged arc must not lap the circle: next.End may not fall inside r.
	if r.Contains(next.End) {
		return Range{}, fmt.Errorf("merge %s with %s: ranges overlap", r, next)
	}
	return Range{r.Start, next.End}, nil
}

// interval is a linear piece [lo, hi) of the key line; top means hi is beyond every key.
type interval struct {
	lo, hi Key
	top    bool
}

func (r Range) intervals() []interval {
	switch {
	case r.IsFull():
		return []interval{{lo: MinKey, top: true}}
	case r.End == MinKey:
		return []interval{{lo: r.Start, top: true}}
	case r.Start < r.End:
		return []interval{{lo: r.Start, hi: r.End}}
	default:
		return []interval{{lo: MinKey, hi: r.End}, {lo: r.Start, top: true}}
	}
}

// Intersect returns the parts of the circle that lie in both r and o, as at most two disjoint
// ranges in key order. It returns nil when they do not meet.
func (r Range) Intersect(o Range) []Range {
	var out []interval
	for _, a := range r.intervals() {
		for _, b := range o.intervals() {
			lo := max(a.lo, b.lo)
			var piece interval
			switch {
			case a.top && b.top:
				piece = interval{lo: lo, top: true}
			case a.top:
				piece = interval{lo: lo, hi: b.hi}
			case b.top:
				piece = interval{lo: lo, hi: a.hi}
			default:
				piece = interval{lo: lo, hi: min(a.hi, b.hi)}
			}
			if piece.top || piece.lo < piece.hi {
				out = append(out, piece)
			}
		}
	}
	// Pieces from different interval pairs can touch at the seam: [x, top) and [min, y) are one
	// wrapping range.
	var res []Range
	var low, high *interval
	for i := range out {
		p := &out[i]
		switch {
		case p.lo == MinKey && p.top:
			return []Range{FullRange}
		case p.lo == MinKey:
			low = p
		case p.top:
			high = p
		default:
			res = append(res, Range{p.lo, p.hi})
		}
	}
	switch {
	case low != nil && high != nil:
		res = append(res, Range{high.lo, low.hi})
	case low != nil:
		res = append([]Range{{MinKey, low.hi}}, res...)
	case high != nil:
		res = append(res, Range{high.lo, MinKey})
	}
	return res
}

func (r Range) String() string {
	if r.IsFull() {
		return "[full circle)"
	}
	return fmt.Sprintf("[%s, %s)", FormatKey(r.Start), FormatKey(r.End))
}

// FormatKey prints 8-byte keys as integers (the experiments' encoding) and others quoted, as logs
// and ranges show them.
func FormatKey(k Key) string {
	if len(k) == 8 {
		return fmt.Sprint(KeyUint64(k))
	}
	return fmt.Sprintf("%q", string(k))
}

// Subtract returns the parts of r that are not in o, as at most two ranges in key order (nil when
// o covers r).
func (r Range) Subtract(o Range) []Range {
	if o.IsFull() {
		return nil
	}
	return r.Intersect(Range{Start: o.End, End: o.Start})
}
