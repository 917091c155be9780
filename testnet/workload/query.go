package workload

import (
	"math/rand/v2"
	"sort"

	"github.com/skiprange/skiprange/overlay"
)

// Query is a range query over the keys [Start, End), half-open as every range in the system.
// For integer workloads Start and End are overlay.Uint64Key encodings and Keys is the number of
// integer keys covered; a query near the top of the key space is clipped at K (End = Uint64Key(K)),
// it never wraps. An exact-match query has Keys = 1. For the words workload End may be the empty
// key, which means "up to the end of the key space" (see PrefixEnd).
type Query struct {
	Start, End overlay.Key
	Keys       int
}

// Workload is an integer workload over the keys 0..K-1.
type Workload interface {
	// Name is a short label for reports, e.g. "pulse(10%)".
	Name() string
	// Validate reports bad parameters. An invalid workload draws empty queries and has nil loads.
	Validate() error
	// Next draws the next query at simulated time now.
	Next(r *rand.Rand, now float64) Query
	// KeyLoads returns the expected load (requests/s) of every key 0..K-1 when queries arrive at
	// rate per second at time now: a range query touching n keys adds 1 to each of them (SPEC §1).
	KeyLoads(rate float64, now float64) []float64
}

// DefaultRangeKeys is the thesis's range length: every query covers 100 keys.
const DefaultRangeKeys = 100

// segment is a piece [lo, hi) of the integer key space over which query starts are uniform; it
// receives a share weight/Σweights of all starts. Every integer workload here is a set of such
// pieces, so drawing and the expected loads are written once, in startDist.
type segment struct {
	lo, hi int
	weight float64
}

// startDist is the distribution of query start points of an integer workload plus the range
// length, everything needed to draw queries and to compute the expected key loads.
type startDist struct {
	k, rangeKeys int
	segs         []segment
	cum          []float64 // cum[i] = Σ weights of segs[0..i]
}

func newStartDist(k, rangeKeys int, segs []segment) startDist {
	d := startDist{k: k, rangeKeys: rangeKeys}
	total := 0.0
	for _, s := range segs {
		// Validation makes empty or weightless pieces impossible; skipping them keeps draw simple.
		if s.hi <= s.lo || !(s.weight > 0) {
			continue
		}
		total += s.weight
		d.segs = append(d.segs, s)
		d.cum = append(d.cum, total)
	}
	return d
}

// draw picks a piece by weight (binary search on the cumulative weights), a start uniform inside
// it, and clips the range at K.
func (d startDist) draw(r *rand.Rand) Query {
	if r == nil || len(d.segs) == 0 {
		return Query{}
	}
	total := d.cum[len(d.cum)-1]
	x := r.Float64() * total
	i := sort.Search(len(d.cum), func(i int) bool { return d.cum[i] > x })
	if i == len(d.segs) { // x rounded up to total; belongs to the last piece
		i--
	}
	s := d.segs[i]
	start := s.lo + r.IntN(s.hi-s.lo)
	end := min(start+d.rangeKeys, d.k)
	return Query{Start: overlay.Uint64Key(uint64(start)), End: overlay.Uint64Key(uint64(end)), Keys: end - start}
}

// loads computes the expected per-key load exactly in O(K + pieces): key k is covered by every
// query whose start s satisfies k-R < s ≤ k, so its load is rate times the start probability
// mass on that window, read off prefix sums of the start probabilities. Keys outside every window
// get exactly 0, because the prefix sums do not change over zero-probability starts.
func (d startDist) loads(rate float64) []float64 {
	if len(d.segs) == 0 {
		return nil
	}
	total := d.cum[len(d.cum)-1]
	p := make([]float64, d.k) // probability that a query starts at s
	for _, s := range d.segs {
		dens := s.weight / total / float64(s.hi-s.lo)
		for i := s.lo; i < s.hi; i++ {
			p[i] += dens
		}
	}
	prefix := make([]float64, d.k+1) // prefix[i] = Σ p[0..i-1]
	for i, v := range p {
		prefix[i+1] = prefix[i] + v
	}
	out := make([]float64, d.k)
	for k := range out {
		lo := max(0, k-d.rangeKeys+1)
		v := rate * (prefix[k+1] - prefix[lo])
		if v < 0 { // rounding only; loads are never negative
			v = 0
		}
		out[k] = v
	}
	return out
}
