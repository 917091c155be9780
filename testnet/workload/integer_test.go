package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/overlay"
)

// span decodes an integer query back to [lo, hi).
func span(q Query) (lo, hi int) {
	return int(overlay.KeyUint64(q.Start)), int(overlay.KeyUint64(q.End))
}

// clipLoss is the mean, over starts uniform in [lo, hi), of the keys a query of rangeKeys loses
// to clipping at k — computed by brute force, independently of the package's prefix sums.
func clipLoss(lo, hi, k, rangeKeys int) float64 {
	sum := 0
	for s := lo; s < hi; s++ {
		sum += max(0, s+rangeKeys-k)
	}
	return float64(sum) / float64(hi-lo)
}

type intCase struct {
	name string
	w    Workload
	now  float64
	// wantSum is Σ KeyLoads at rate 1: the mean keys per query, computed independently.
	wantSum float64
}

func intCases(t *testing.T) []intCase {
	t.Helper()
	const k = 2000
	zipf := Zipf{K: k, RangeKeys: 50, Buckets: 8, Theta: 1.2}
	zp, err := zipf.BucketProbs()
	if err != nil {
		t.Fatal(err)
	}
	return []intCase{
		{"uniform", Uniform{K: k}, 0, 100 - clipLoss(0, k, k, 100)},
		{"pulse centred", Pulse{K: k, Width: 0.1, Offset: Centre}, 0, 100},
		{"pulse at top", Pulse{K: k, RangeKeys: 30, Width: 0.05, Offset: k - 100}, 0, 30 - clipLoss(k-100, k, k, 30)},
		{"pulse at 0", Pulse{K: k, RangeKeys: 7, Width: 0.01}, 0, 7},
		{"zipf", zipf, 0, 50 - zp[7]*clipLoss(7*k/8, k, k, 50)},
		{"zipf theta 0", Zipf{K: k, Theta: 0}, 0, 100 - 0.1*clipLoss(9*k/10, k, k, 100)},
		{"dynamic before", DefaultDynamic(k), 849.99, 100},
		{"dynamic after", DefaultDynamic(k), 850, 100},
		// 20 ranges of 10 keys, each centred in its 100-key segment: the last is [1945,1955).
		{"hot ranges", HotRanges{K: k, Percent: 10}, 0, 100 - clipLoss(1945, 1955, k, 100)/20},
		{"hot ranges 100%", HotRanges{K: k, RangeKeys: 20, Percent: 100, Count: 4}, 0, 20 - 0.25*clipLoss(3*k/4, k, k, 20)},
		{"exact queries", Uniform{K: k, RangeKeys: 1}, 0, 1},
	}
}

func TestKeyLoadsSum(t *testing.T) {
	for _, c := range intCases(t) {
		t.Run(c.name, func(t *testing.T) {
			if err := c.w.Validate(); err != nil {
				t.Fatal(err)
			}
			const rate = 250
			loads := c.w.KeyLoads(rate, c.now)
			if len(loads) != 2000 {
				t.Fatalf("len = %d, want 2000", len(loads))
			}
			sum := 0.0
			for i, l := range loads {
				if l < 0 {
					t.Fatalf("key %d: negative load %g", i, l)
				}
				sum += l
			}
			if want := rate * c.wantSum; math.Abs(sum-want) > 1e-9*want {
				t.Fatalf("Σ loads = %.9g, want %.9g", sum, want)
			}
		})
	}
}

// TestEmpiricalMatchesKeyLoads draws many queries and compares the per-key hit counts with the
// analytic expected loads.
func TestEmpiricalMatchesKeyLoads(t *testing.T) {
	const draws = 200_000
	for i, c := range intCases(t) {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, uint64(i)))
			k := len(c.w.KeyLoads(1, c.now))
			diff := make([]float64, k+1)
			for range draws {
				q := c.w.Next(r, c.now)
				lo, hi := span(q)
				if lo < 0 || hi > k || hi <= lo || q.Keys != hi-lo {
					t.Fatalf("bad query [%d,%d) keys %d", lo, hi, q.Keys)
				}
				diff[lo]++
				diff[hi]--
			}
			want := c.w.KeyLoads(draws, c.now) // expected hits over `draws` queries
			got := 0.0
			for key := range k {
				got += diff[key]
				// A key's hits count the starts in its window: binomial, variance ≤ mean, so
				// 5 standard deviations is at most 5·√want.
				if math.Abs(got-want[key]) > 5*math.Sqrt(want[key])+1e-9 {
					t.Fatalf("key %d: %g hits, want %.1f ± %.1f", key, got, want[key], 5*math.Sqrt(want[key]))
				}
			}
		})
	}
}

// TestKeyLoadsExact checks KeyLoads against a hand-computed case and against the naive
// O(K·RangeKeys) sum over starts for many small pulses.
func TestKeyLoadsExact(t *testing.T) {
	// Starts 2 and 3 with probability 1/2 each, 3 keys per query: [2,5) and [3,6).
	got := Pulse{K: 10, RangeKeys: 3, Width: 0.2, Offset: 2}.KeyLoads(2, 0)
	want := []float64{0, 0, 1, 2, 2, 1, 0, 0, 0, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("loads = %v, want %v", got, want)
		}
	}
	r := rand.New(rand.NewPCG(9, 9))
	for range 300 {
		k := 1 + r.IntN(60)
		w := Pulse{K: k, RangeKeys: 1 + r.IntN(20), Width: (1 + float64(r.IntN(k))) / float64(k)}
		n := int(math.Round(w.Width * float64(k)))
		w.Offset = r.IntN(k - n + 1)
		got := w.KeyLoads(3, 0)
		for key := range k {
			naive := 0.0
			for s := w.Offset; s < w.Offset+n; s++ {
				if s <= key && key < s+w.RangeKeys {
					naive += 3.0 / float64(n)
				}
			}
			if math.Abs(got[key]-naive) > 1e-9 {
				t.Fatalf("%+v key %d: load %g, naive %g", w, key, got[key], naive)
			}
		}
	}
}

func TestClipAtTop(t *testing.T) {
	w := Pulse{K: 1000, RangeKeys: 100, Width: 0.001, Offset: 995} // one key, 995
	q := w.Next(rand.New(rand.NewPCG(1, 1)), 0)
	if lo, hi := span(q); lo != 995 || hi != 1000 || q.Keys != 5 {
		t.Fatalf("query [%d,%d) keys %d, want [995,1000) keys 5", lo, hi, q.Keys)
	}
	loads := w.KeyLoads(2, 0)
	for k, l := range loads {
		want := 0.0
		if k >= 995 {
			want = 2
		}
		if l != want {
			t.Fatalf("key %d load %g, want %g", k, l, want)
		}
	}
}

func TestZipfBuckets(t *testing.T) {
	w := Zipf{K: 1000, RangeKeys: 1, Buckets: 4, Theta: 1}
	p, err := w.BucketProbs()
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{12.0 / 25, 6.0 / 25, 4.0 / 25, 3.0 / 25} // 1, 1/2, 1/3, 1/4 over 25/12
	for i := range want {
		if math.Abs(p[i]-want[i]) > 1e-12 {
			t.Fatalf("bucket %d: p = %g, want %g", i+1, p[i], want[i])
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	const draws = 200_000
	var hits [4]int
	for range draws {
		lo, _ := span(w.Next(r, 0))
		hits[lo/250]++
	}
	for i := range want {
		if got := float64(hits[i]) / draws; math.Abs(got-want[i]) > 0.01 {
			t.Fatalf("bucket %d: frequency %.4f, want %.4f", i+1, got, want[i])
		}
	}
	// Key load inside a bucket is flat (exact queries): p_r / bucket size.
	loads := w.KeyLoads(1, 0)
	if math.Abs(loads[10]-want[0]/250) > 1e-12 || math.Abs(loads[999]-want[3]/250) > 1e-12 {
		t.Fatalf("loads %g, %g; want %g, %g", loads[10], loads[999], want[0]/250, want[3]/250)
	}
	if u, _ := (Zipf{K: 100, Theta: 0}).BucketProbs(); len(u) != DefaultBuckets || u[0] != u[9] {
		t.Fatalf("theta 0, default buckets: %v", u)
	}
}

func TestDynamicMoves(t *testing.T) {
	d := DefaultDynamic(50_000)
	if d.From != [2]int{10_000, 16_000} || d.To != [2]int{34_000, 40_000} || d.MoveAt != 850 {
		t.Fatalf("DefaultDynamic(50000) = %+v", d)
	}
	if d2 := DefaultDynamic(100_000); d2.From != [2]int{20_000, 32_000} || d2.To != [2]int{68_000, 80_000} {
		t.Fatalf("DefaultDynamic(100000) = %+v", d2)
	}
	r := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		now    float64
		lo, hi int
	}{{0, 10_000, 16_000}, {849.999, 10_000, 16_000}, {850, 34_000, 40_000}, {3000, 34_000, 40_000}} {
		for range 1000 {
			if lo, _ := span(d.Next(r, tc.now)); lo < tc.lo || lo >= tc.hi {
				t.Fatalf("t=%g: start %d outside [%d,%d)", tc.now, lo, tc.lo, tc.hi)
			}
		}
		loads := d.KeyLoads(250, tc.now)
		inside, other := 13_000, 37_000
		if tc.lo != 10_000 {
			inside, other = other, inside
		}
		if !(loads[inside] > 0) || loads[other] != 0 {
			t.Fatalf("t=%g: load %g at %d (want > 0), %g at %d (want 0)", tc.now, loads[inside], inside, loads[other], other)
		}
	}
}

func TestHotRangesCover(t *testing.T) {
	for _, tc := range []struct {
		k       int
		percent float64
		count   int
	}{{50_000, 10, 0}, {50_000, 5, 20}, {50_000, 33.3, 20}, {10_007, 12.5, 13}, {1000, 100, 20}, {1000, 0.01, 20}} {
		w := HotRanges{K: tc.k, Percent: tc.percent, Count: tc.count}
		rs, err := w.Ranges()
		if err != nil {
			t.Fatal(err)
		}
		c := w.count()
		if len(rs) != c {
			t.Fatalf("%+v: %d ranges, want %d", w, len(rs), c)
		}
		covered, size := 0, rs[0][1]-rs[0][0]
		for i, iv := range rs {
			if iv[1]-iv[0] != size {
				t.Fatalf("%+v: ranges not equal: %v", w, rs)
			}
			// Evenly spread: range i lies in the i-th of c equal segments.
			if iv[0] < i*tc.k/c || iv[1] > (i+1)*tc.k/c {
				t.Fatalf("%+v: range %d %v outside its segment", w, i, iv)
			}
			covered += size
		}
		want := tc.percent / 100 * float64(tc.k)
		// Each range is rounded to whole keys (and at least one key).
		if math.Abs(float64(covered)-want) > float64(c)/2+1e-9 && !(size == 1 && want < float64(c)) {
			t.Fatalf("%+v: %d hot keys, want %.1f", w, covered, want)
		}
	}
	// Starts fall on hot keys only.
	w := HotRanges{K: 5000, RangeKeys: 1, Percent: 10}
	rs, _ := w.Ranges()
	hot := make([]bool, w.K)
	for _, iv := range rs {
		for k := iv[0]; k < iv[1]; k++ {
			hot[k] = true
		}
	}
	r := rand.New(rand.NewPCG(5, 5))
	for range 10_000 {
		if lo, _ := span(w.Next(r, 0)); !hot[lo] {
			t.Fatalf("start %d is not hot", lo)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		w    Workload
		want string
	}{
		{Uniform{K: 0}, "K = 0"},
		{Uniform{K: 10, RangeKeys: -1}, "RangeKeys = -1"},
		{Pulse{K: 100, Width: 0}, "Width = 0"},
		{Pulse{K: 100, Width: 1.5}, "Width = 1.5"},
		{Pulse{K: 100, Width: math.NaN()}, "Width = NaN"},
		{Pulse{K: 100, Width: 0.5, Offset: 60}, "[60,110)"},
		{Zipf{K: 100, Theta: -1}, "Theta = -1"},
		{Zipf{K: 100, Theta: math.Inf(1)}, "Theta = +Inf"},
		{Zipf{K: 5, Theta: 1}, "10 buckets over 5 keys"},
		{Zipf{K: 100, Buckets: -2}, "Buckets = -2"},
		{Dynamic{K: 100, From: [2]int{10, 5}, To: [2]int{0, 1}}, "From [10,5)"},
		{Dynamic{K: 100, From: [2]int{0, 5}, To: [2]int{90, 101}}, "To [90,101)"},
		{Dynamic{K: 100, From: [2]int{0, 5}, To: [2]int{6, 7}, MoveAt: math.NaN()}, "MoveAt is NaN"},
		{HotRanges{K: 100, Percent: 0}, "Percent = 0"},
		{HotRanges{K: 100, Percent: 101}, "Percent = 101"},
		{HotRanges{K: 10, Percent: 50}, "20 ranges do not fit in 10 keys"},
		{HotRanges{K: 100, Percent: 5, Count: -1}, "Count = -1"},
		{DefaultDynamic(0), "K = 0"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range bad {
		err := b.w.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%#v: Validate() = %v, want an error containing %q", b.w, err, b.want)
		}
		// An invalid workload neither panics nor produces anything.
		if q := b.w.Next(r, 0); q != (Query{}) {
			t.Errorf("%#v: Next = %+v, want the zero query", b.w, q)
		}
		if l := b.w.KeyLoads(1, 0); l != nil {
			t.Errorf("%#v: KeyLoads = %d loads, want nil", b.w, len(l))
		}
	}
	if _, err := NewPulse(1000, 0, 0.1); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPulse(1000, 0, 2); err == nil {
		t.Fatal("NewPulse(width 2) accepted")
	}
	if iv, _ := (Pulse{K: 1000, Width: 0.1, Offset: Centre}).Interval(); iv != [2]int{450, 550} {
		t.Fatalf("centred pulse = %v, want [450,550)", iv)
	}
	if got := (Pulse{K: 10, Width: 0.1}).Name(); got != "pulse(10%)" {
		t.Fatalf("Name = %q", got)
	}
	for _, w := range []Workload{DefaultDynamic(1), DefaultDynamic(7), Pulse{K: 1, Width: 0.01, Offset: Centre}, HotRanges{K: 20, Percent: 1}} {
		if err := w.Validate(); err != nil {
			t.Errorf("%#v: %v", w, err)
		}
	}
}
