package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// checkBase validates what every integer workload has: a key space of K ≥ 1 keys and a range
// length that is either 0 (the default, DefaultRangeKeys) or positive.
func checkBase(kind string, k, rangeKeys int) error {
	if k < 1 {
		return fmt.Errorf("workload: %s: key space K = %d, need K ≥ 1", kind, k)
	}
	if rangeKeys < 0 {
		return fmt.Errorf("workload: %s: RangeKeys = %d, need ≥ 1 (or 0 for the default %d)", kind, rangeKeys, DefaultRangeKeys)
	}
	return nil
}

// rangeOrDefault maps the zero value to the thesis default, so a struct literal without RangeKeys
// reproduces the thesis.
func rangeOrDefault(rangeKeys int) int {
	if rangeKeys == 0 {
		return DefaultRangeKeys
	}
	return rangeKeys
}

// checkInterval validates a key interval [lo, hi) inside 0..K.
func checkInterval(kind, what string, iv [2]int, k int) error {
	if iv[0] < 0 || iv[1] > k || iv[0] >= iv[1] {
		return fmt.Errorf("workload: %s: %s [%d,%d) is not a non-empty interval inside [0,%d)", kind, what, iv[0], iv[1], k)
	}
	return nil
}

// ---- Uniform ----

// Uniform draws query starts uniformly over the whole key space; the control workload.
type Uniform struct {
	K         int // number of integer keys, 0..K-1
	RangeKeys int // keys per query; 0 means DefaultRangeKeys
}

func (w Uniform) Name() string    { return "uniform" }
func (w Uniform) Validate() error { return checkBase("uniform", w.K, w.RangeKeys) }

func (w Uniform) dist() (startDist, error) {
	if err := w.Validate(); err != nil {
		return startDist{}, err
	}
	return newStartDist(w.K, rangeOrDefault(w.RangeKeys), []segment{{0, w.K, 1}}), nil
}

func (w Uniform) Next(r *rand.Rand, now float64) Query {
	d, _ := w.dist() // an invalid workload has no pieces and draws Query{}
	return d.draw(r)
}

func (w Uniform) KeyLoads(rate, now float64) []float64 {
	d, _ := w.dist()
	return d.loads(rate)
}

// ---- Pulse ----

// Centre as Pulse.Offset places the pulse in the middle of the key space.
const Centre = -1

// Pulse is SPEC §12's pulse(w): query starts are uniform over a contiguous Width fraction of the
// key space, [Offset, Offset+round(Width·K)), and nothing starts elsewhere.
type Pulse struct {
	K         int     // number of integer keys, 0..K-1
	RangeKeys int     // keys per query; 0 means DefaultRangeKeys
	Width     float64 // fraction of the key space, in (0, 1]; e.g. 0.10 for pulse(10%)
	// Offset is the first key of the pulse. Any negative value (use Centre) centres the pulse;
	// 0 really means key 0. NewPulse centres it.
	Offset int
}

// NewPulse returns a validated pulse of the given width fraction, centred in the key space.
func NewPulse(k, rangeKeys int, width float64) (Pulse, error) {
	w := Pulse{K: k, RangeKeys: rangeKeys, Width: width, Offset: Centre}
	return w, w.Validate()
}

// Name uses %.4g so that float noise (0.1·100 = 10.000000000000002) does not show.
func (w Pulse) Name() string { return fmt.Sprintf("pulse(%.4g%%)", w.Width*100) }

// Interval returns the pulse's keys [lo, hi).
func (w Pulse) Interval() ([2]int, error) {
	if err := checkBase("pulse", w.K, w.RangeKeys); err != nil {
		return [2]int{}, err
	}
	if !(w.Width > 0 && w.Width <= 1) {
		return [2]int{}, fmt.Errorf("workload: pulse: Width = %g, need a fraction in (0, 1]", w.Width)
	}
	n := max(1, int(math.Round(w.Width*float64(w.K)))) // at least one key, however small K·Width
	lo := w.Offset
	if lo < 0 {
		lo = (w.K - n) / 2
	}
	iv := [2]int{lo, lo + n}
	if err := checkInterval("pulse", "pulse", iv, w.K); err != nil {
		return [2]int{}, err
	}
	return iv, nil
}

func (w Pulse) Validate() error {
	_, err := w.Interval()
	return err
}

func (w Pulse) dist() startDist {
	iv, err := w.Interval()
	if err != nil {
		return startDist{}
	}
	return newStartDist(w.K, rangeOrDefault(w.RangeKeys), []segment{{iv[0], iv[1], 1}})
}

func (w Pulse) Next(r *rand.Rand, now float64) Query { return w.dist().draw(r) }
func (w Pulse) KeyLoads(rate, now float64) []float64 { return w.dist().loads(rate) }

// ---- Zipf ----

// DefaultBuckets is SPEC §12's default number of zipf buckets.
const DefaultBuckets = 10

// Zipf is SPEC §12's zipf(θ, B): the key space is cut into B equal buckets in key order (bucket b,
// 0-based, is [b·K/B, (b+1)·K/B)); bucket r = b+1 receives query starts with probability ∝ r^−θ,
// and the start is uniform inside the bucket. Bucketing keeps single keys light: the thesis's
// per-key zipf makes balance impossible at θ ≥ 1.
type Zipf struct {
	K         int     // number of integer keys, 0..K-1
	RangeKeys int     // keys per query; 0 means DefaultRangeKeys
	Buckets   int     // number of buckets B; 0 means DefaultBuckets
	Theta     float64 // skew θ ≥ 0; 0 is uniform over buckets
}

func (w Zipf) buckets() int {
	if w.Buckets == 0 {
		return DefaultBuckets
	}
	return w.Buckets
}

func (w Zipf) Name() string { return fmt.Sprintf("zipf(θ=%g,B=%d)", w.Theta, w.buckets()) }

func (w Zipf) Validate() error {
	if err := checkBase("zipf", w.K, w.RangeKeys); err != nil {
		return err
	}
	b := w.buckets()
	if b < 1 {
		return fmt.Errorf("workload: zipf: Buckets = %d, need ≥ 1 (or 0 for the default %d)", w.Buckets, DefaultBuckets)
	}
	if b > w.K {
		return fmt.Errorf("workload: zipf: %d buckets over %d keys would leave buckets empty", b, w.K)
	}
	if !(w.Theta >= 0) || math.IsInf(w.Theta, 1) {
		return fmt.Errorf("workload: zipf: Theta = %g, need a finite θ ≥ 0", w.Theta)
	}
	return nil
}

// BucketProbs returns the probability that a query starts in each bucket, first bucket first.
func (w Zipf) BucketProbs() ([]float64, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	b := w.buckets()
	p := make([]float64, b)
	sum := 0.0
	for r := 1; r <= b; r++ {
		p[r-1] = math.Pow(float64(r), -w.Theta)
		sum += p[r-1]
	}
	for i := range p {
		p[i] /= sum
	}
	return p, nil
}

func (w Zipf) dist() startDist {
	probs, err := w.BucketProbs()
	if err != nil {
		return startDist{}
	}
	b := len(probs)
	segs := make([]segment, b)
	for i := range segs {
		segs[i] = segment{i * w.K / b, (i + 1) * w.K / b, probs[i]}
	}
	return newStartDist(w.K, rangeOrDefault(w.RangeKeys), segs)
}

func (w Zipf) Next(r *rand.Rand, now float64) Query { return w.dist().draw(r) }
func (w Zipf) KeyLoads(rate, now float64) []float64 { return w.dist().loads(rate) }

// ---- Dynamic ----

// Dynamic is SPEC §12's dynamic workload: a pulse over the keys From before time MoveAt, over the
// keys To from MoveAt on (now ≥ MoveAt).
type Dynamic struct {
	K         int     // number of integer keys, 0..K-1
	RangeKeys int     // keys per query; 0 means DefaultRangeKeys
	From, To  [2]int  // key intervals [lo, hi) of the pulse before and after the move
	MoveAt    float64 // simulated time (s) of the move
}

// DefaultDynamic is the thesis's dynamic workload — a 12% pulse over [10000,16000) that moves at
// t = 850 s to [34000,40000) on K = 50,000 — with the intervals scaled proportionally to K.
func DefaultDynamic(k int) Dynamic {
	scale := func(x int) int { return int(int64(x) * int64(k) / 50_000) }
	iv := func(lo, hi int) [2]int {
		a, b := scale(lo), scale(hi)
		return [2]int{a, max(b, a+1)} // keep at least one key for tiny K
	}
	return Dynamic{K: k, From: iv(10_000, 16_000), To: iv(34_000, 40_000), MoveAt: 850}
}

func (w Dynamic) Name() string {
	return fmt.Sprintf("dynamic([%d,%d)->[%d,%d)@%gs)", w.From[0], w.From[1], w.To[0], w.To[1], w.MoveAt)
}

func (w Dynamic) Validate() error {
	if err := checkBase("dynamic", w.K, w.RangeKeys); err != nil {
		return err
	}
	if err := checkInterval("dynamic", "From", w.From, w.K); err != nil {
		return err
	}
	if err := checkInterval("dynamic", "To", w.To, w.K); err != nil {
		return err
	}
	if math.IsNaN(w.MoveAt) {
		return errors.New("workload: dynamic: MoveAt is NaN")
	}
	return nil
}

// Active returns the pulse interval in force at time now.
func (w Dynamic) Active(now float64) [2]int {
	if now >= w.MoveAt {
		return w.To
	}
	return w.From
}

func (w Dynamic) dist(now float64) startDist {
	if w.Validate() != nil {
		return startDist{}
	}
	iv := w.Active(now)
	return newStartDist(w.K, rangeOrDefault(w.RangeKeys), []segment{{iv[0], iv[1], 1}})
}

func (w Dynamic) Next(r *rand.Rand, now float64) Query { return w.dist(now).draw(r) }
func (w Dynamic) KeyLoads(rate, now float64) []float64 { return w.dist(now).loads(rate) }

// ---- HotRanges ----

// DefaultHotCount is SPEC §12's "about twenty" hot ranges.
const DefaultHotCount = 20

// HotRanges is SPEC §12's hot-ranges(p%): Count equal hot ranges, evenly spread over the key space
// and together covering about Percent% of it; query starts are uniform over all hot keys.
// The key space is cut into Count equal segments and each range is centred in its segment, so the
// ranges never touch; each range has round(Percent/100·K/Count) keys (at least 1, at most its
// segment), so the covered total is Percent% up to that rounding.
type HotRanges struct {
	K         int     // number of integer keys, 0..K-1
	RangeKeys int     // keys per query; 0 means DefaultRangeKeys
	Percent   float64 // percentage of the key space that is hot, in (0, 100]
	Count     int     // number of hot ranges; 0 means DefaultHotCount
}

func (w HotRanges) count() int {
	if w.Count == 0 {
		return DefaultHotCount
	}
	return w.Count
}

func (w HotRanges) Name() string { return fmt.Sprintf("hot-ranges(%g%%,%d)", w.Percent, w.count()) }

func (w HotRanges) Validate() error {
	_, err := w.Ranges()
	return err
}

// Ranges returns the hot key intervals [lo, hi) in key order.
func (w HotRanges) Ranges() ([][2]int, error) {
	if err := checkBase("hot-ranges", w.K, w.RangeKeys); err != nil {
		return nil, err
	}
	c := w.count()
	if c < 1 {
		return nil, fmt.Errorf("workload: hot-ranges: Count = %d, need ≥ 1 (or 0 for the default %d)", w.Count, DefaultHotCount)
	}
	if c > w.K {
		return nil, fmt.Errorf("workload: hot-ranges: %d ranges do not fit in %d keys", c, w.K)
	}
	if !(w.Percent > 0 && w.Percent <= 100) {
		return nil, fmt.Errorf("workload: hot-ranges: Percent = %g, need a percentage in (0, 100]", w.Percent)
	}
	n := int(math.Round(w.Percent / 100 * float64(w.K) / float64(c)))
	n = min(max(n, 1), w.K/c) // the smallest segment has K/c keys (floor)
	out := make([][2]int, c)
	for i := range out {
		segLo, segHi := i*w.K/c, (i+1)*w.K/c
		lo := segLo + (segHi-segLo-n)/2
		out[i] = [2]int{lo, lo + n}
	}
	return out, nil
}

func (w HotRanges) dist() startDist {
	rs, err := w.Ranges()
	if err != nil {
		return startDist{}
	}
	segs := make([]segment, len(rs))
	for i, iv := range rs {
		// Weight by size: starts are uniform over all hot keys (the ranges are equal anyway).
		segs[i] = segment{iv[0], iv[1], float64(iv[1] - iv[0])}
	}
	return newStartDist(w.K, rangeOrDefault(w.RangeKeys), segs)
}

func (w HotRanges) Next(r *rand.Rand, now float64) Query { return w.dist().draw(r) }
func (w HotRanges) KeyLoads(rate, now float64) []float64 { return w.dist().loads(rate) }

// Interface checks.
var (
	_ Workload = Uniform{}
	_ Workload = Pulse{}
	_ Workload = Zipf{}
	_ Workload = Dynamic{}
	_ Workload = HotRanges{}
)
