package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestArrivals(t *testing.T) {
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := NewArrivals(bad); err == nil {
			t.Errorf("NewArrivals(%g) accepted", bad)
		}
	}
	a, err := NewArrivals(250)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	const n = 200_000
	sum, sq := 0.0, 0.0
	for range n {
		g := a.Next(r)
		if g < 0 {
			t.Fatalf("negative gap %g", g)
		}
		sum += g
		sq += g * g
	}
	mean := sum / n
	if math.Abs(mean-1.0/250) > 0.01/250 {
		t.Fatalf("mean gap %g, want %g", mean, 1.0/250)
	}
	// Exponential: the standard deviation equals the mean.
	if sd := math.Sqrt(sq/n - mean*mean); math.Abs(sd-mean) > 0.02*mean {
		t.Fatalf("gap standard deviation %g, want ≈ mean %g", sd, mean)
	}
	if !math.IsInf((*Arrivals)(nil).Next(r), 1) {
		t.Fatal("nil Arrivals produced an arrival")
	}
}

// minNodesDP is the exact optimum by dynamic programming, O(n²), to check the greedy.
func minNodesDP(loads []float64, thres float64) int {
	n := len(loads)
	best := make([]int, n+1) // best[i]: fewest pieces for keys [0, i)
	for i := 1; i <= n; i++ {
		best[i] = math.MaxInt
		sum := 0.0
		for j := i - 1; j >= 0; j-- {
			sum += loads[j]
			if !(sum < thres) {
				break
			}
			if best[j] != math.MaxInt {
				best[i] = min(best[i], best[j]+1)
			}
		}
	}
	return max(best[n], 1)
}

func TestMinNodes(t *testing.T) {
	for _, tc := range []struct {
		loads    []float64
		thres    float64
		nodes    int
		feasible bool
	}{
		{[]float64{1, 1, 1, 1}, 2.5, 2, true},
		{[]float64{1, 1, 1, 1}, 2, 4, true}, // strictly below: 1+1 is not < 2
		{[]float64{5, 1, 1, 5}, 7, 2, true},
		{[]float64{3, 10, 3}, 10, 3, false},
		{[]float64{3, 11, 3}, 10, 3, false},
		{[]float64{0, 0, 0}, 1, 1, true},
		{nil, 1, 1, true},
		{[]float64{1}, 0, 1, false},
		{[]float64{1, math.NaN()}, 5, 2, false},
	} {
		n, ok := MinNodes(tc.loads, tc.thres)
		if n != tc.nodes || ok != tc.feasible {
			t.Errorf("MinNodes(%v, %g) = %d, %v; want %d, %v", tc.loads, tc.thres, n, ok, tc.nodes, tc.feasible)
		}
	}
	r := rand.New(rand.NewPCG(8, 8))
	for range 500 {
		loads := make([]float64, 1+r.IntN(30))
		for i := range loads {
			loads[i] = float64(r.IntN(5)) // integers: no rounding in the sums
		}
		thres := float64(5 + r.IntN(10))
		n, ok := MinNodes(loads, thres)
		if !ok {
			t.Fatalf("%v < %g reported infeasible", loads, thres)
		}
		if want := minNodesDP(loads, thres); n != want {
			t.Fatalf("MinNodes(%v, %g) = %d, optimum %d", loads, thres, n, want)
		}
	}
}

func TestFeasibility(t *testing.T) {
	// Thesis setting: uniform queries at 250/s, 100 keys each, 50,000 keys: 0.5/s per key.
	loads := Uniform{K: 50_000}.KeyLoads(250, 0)
	f := CheckFeasibility(loads, uniformThres(60, 500))
	// The top 99 starts are clipped by 1..99 keys.
	if !f.Feasible || math.Abs(f.MaxKeyLoad-0.5) > 1e-9 || math.Abs(f.TotalLoad-250*(100-4950.0/50_000)) > 1e-6 {
		t.Fatalf("feasible %v, max key load %g, total %g", f.Feasible, f.MaxKeyLoad, f.TotalLoad)
	}
	if f.MinNodes < int(f.TotalLoad/60) || f.MinNodes > int(f.TotalLoad/59)+1 {
		t.Fatalf("MinNodes = %d for total %g at thres 60", f.MinNodes, f.TotalLoad)
	}
	if s := f.String(); !strings.HasPrefix(s, "feasible: ") || !strings.Contains(s, " of 500 (max key load 0.5/s < thres 60)") {
		t.Fatalf("String = %q", s)
	}
	if s := CheckFeasibility(loads, uniformThres(60, 100)).String(); !strings.HasPrefix(s, "infeasible: ") || !strings.Contains(s, "needed of 100") {
		t.Fatalf("too few nodes: %q", s)
	}
	g := CheckFeasibility([]float64{1, 70, 2}, uniformThres(60, 3))
	if g.Feasible || g.MaxKey != 1 || g.MaxKeyLoad != 70 || g.TotalLoad != 73 {
		t.Fatalf("feasible %v, max key %d load %g, total %g", g.Feasible, g.MaxKey, g.MaxKeyLoad, g.TotalLoad)
	}
	if s := g.String(); !strings.Contains(s, "infeasible: key 1 has load 70.0/s ≥ thres 60") {
		t.Fatalf("String = %q", s)
	}
}

// uniformThres is n nodes' thresholds, all thres.
func uniformThres(thres float64, n int) []float64 {
	ts := make([]float64, n)
	for i := range ts {
		ts[i] = thres
	}
	return ts
}

// TestFeasibilityMixedThresholds: with nodes of several thresholds the keys are packed on the
// highest thresholds first; a key over every thres, or a total over Σ thres, proves them
// infeasible; anything else the packing cannot place is reported undecided, never feasible.
func TestFeasibilityMixedThresholds(t *testing.T) {
	mixed := append(uniformThres(30, 4), uniformThres(120, 2)...) // Σ 360
	cases := []struct {
		name              string
		loads             []float64
		feasible, decided bool
		nodes             int
		want              string
	}{
		{"one large node carries it", []float64{20, 20, 20, 20}, true, true, 1, "feasible: 1 nodes needed of 6, the highest thres first (thres 30–120; max key load 20.0/s)"},
		// Neither class alone: under 120 the pieces {100}, {100}, {20, 20} need three large
		// nodes (there are two), and no small node takes a key of 100; the two classes together
		// do: {100}, {100} on the large ones, {20}, {20} on small ones.
		{"both classes together", []float64{100, 100, 20, 20}, true, true, 4, "feasible: 4 nodes needed of 6"},
		{"a key over every thres", []float64{10, 130, 10}, false, true, 3, "infeasible: key 1 has load 130.0/s ≥ the highest thres 120"},
		{"total over the sum", uniformThres(40, 9), false, true, 7, "infeasible: the keys' total load 360/s ≥ 360"},
		// Three keys of 100 need three large nodes (there are two): infeasible in truth, but
		// neither bound shows it, so it is reported undecided.
		{"undecided", []float64{100, 100, 100, 1}, false, false, 4, "not shown feasible: 4 nodes needed of 6"},
	}
	for _, tc := range cases {
		f := CheckFeasibility(tc.loads, mixed)
		if f.Feasible != tc.feasible || f.Decided != tc.decided || f.MinNodes != tc.nodes {
			t.Errorf("%s: feasible %v decided %v nodes %d; want %v %v %d", tc.name, f.Feasible, f.Decided, f.MinNodes, tc.feasible, tc.decided, tc.nodes)
		}
		if s := f.String(); !strings.HasPrefix(s, tc.want) {
			t.Errorf("%s: String = %q, want it to start %q", tc.name, s, tc.want)
		}
	}
	// One shared threshold gives the homogeneous report, decided either way.
	if f := CheckFeasibility([]float64{50, 50, 50}, uniformThres(60, 2)); f.Feasible || !f.Decided || f.MinNodes != 3 {
		t.Errorf("three keys of 50 on two nodes of 60: %+v", f)
	}
	// With one class the packing is MinNodes.
	r := rand.New(rand.NewPCG(5, 5))
	for range 300 {
		loads := make([]float64, 1+r.IntN(30))
		for i := range loads {
			loads[i] = float64(r.IntN(8))
		}
		thres, n := float64(5+r.IntN(10)), 1+r.IntN(20)
		want, keysFit := MinNodes(loads, thres)
		f := CheckFeasibility(loads, uniformThres(thres, n))
		if f.MinNodes != want || f.Feasible != (keysFit && want <= n) || !f.Decided {
			t.Fatalf("%v on %d nodes of %g: %+v; MinNodes %d, %v", loads, n, thres, f, want, keysFit)
		}
	}
}

// longestBelow is the brute-force longest contiguous piece with load < thres.
func longestBelow(seq []float64, thres float64) int {
	best := 0
	for i := range seq {
		sum := 0.0
		for j := i; j < len(seq); j++ {
			sum += seq[j]
			if !(sum < thres) {
				break
			}
			best = max(best, j-i+1)
		}
	}
	return best
}

func TestLowerBoundMoves(t *testing.T) {
	six := []float64{1, 1, 1, 1, 1, 1}
	for _, tc := range []struct {
		name  string
		loads []float64
		owned [][2]int
		thres float64
		want  int
	}{
		{"one node sheds half", six, [][2]int{{0, 6}}, 3.5, 3},
		{"two nodes below thres", six, [][2]int{{0, 3}, {3, 6}}, 3.5, 0},
		{"heavy first key", []float64{5, 0, 0, 1, 1}, [][2]int{{0, 5}}, 2, 2},
		{"wrapping seam owner", []float64{1, 0, 0, 0, 2}, [][2]int{{4, 1}, {1, 4}}, 2.5, 1},
		{"single key over thres", []float64{10}, [][2]int{{0, 1}}, 5, 1},
		{"exactly at thres counts", []float64{1, 1}, [][2]int{{0, 2}}, 2, 1},
		{"empty range", six, [][2]int{{2, 2}}, 0.5, 0},
		{"clamped bounds", six, [][2]int{{-3, 9}}, 3.5, 3},
		{"no keys", nil, [][2]int{{0, 0}}, 1, 0},
	} {
		if got := LowerBoundMoves(tc.loads, tc.owned, tc.thres); got != tc.want {
			t.Errorf("%s: LowerBoundMoves = %d, want %d", tc.name, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(6, 6))
	for range 500 {
		k := 1 + r.IntN(40)
		loads := make([]float64, k)
		for i := range loads {
			loads[i] = float64(r.IntN(6))
		}
		lo, hi := r.IntN(k), r.IntN(k)
		thres := float64(1 + r.IntN(15))
		var seq []float64 // the node's keys in ring order
		for i := lo; i != hi; i = (i + 1) % k {
			seq = append(seq, loads[i])
		}
		if want := len(seq) - longestBelow(seq, thres); LowerBoundMoves(loads, [][2]int{{lo, hi}}, thres) != want {
			t.Fatalf("loads %v, [%d,%d), thres %g: got %d, want %d", loads, lo, hi, thres,
				LowerBoundMoves(loads, [][2]int{{lo, hi}}, thres), want)
		}
	}
}

func giniBrute(x []float64) float64 {
	n, sum, abs := float64(len(x)), 0.0, 0.0
	for _, a := range x {
		sum += a
		for _, b := range x {
			abs += math.Abs(a - b)
		}
	}
	if sum == 0 {
		return 0
	}
	return abs / (2 * n * n * (sum / n))
}

func TestGini(t *testing.T) {
	for _, tc := range []struct {
		x    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{0, 0, 0}, 0},
		{[]float64{4, 4, 4, 4}, 0},
		{[]float64{7}, 0},
		{[]float64{0, 0, 0, 5}, 0.75},
		{[]float64{0, 9, 0, 0, 0, 0, 0, 0, 0, 0}, 0.9},
		{[]float64{3, 1, 2}, 2.0 / 9},
	} {
		if got := Gini(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Gini(%v) = %g, want %g", tc.x, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(10, 10))
	for range 200 {
		x := make([]float64, 1+r.IntN(50))
		for i := range x {
			x[i] = r.Float64() * 100
		}
		if got, want := Gini(x), giniBrute(x); math.Abs(got-want) > 1e-9 {
			t.Fatalf("Gini(%v) = %g, brute force %g", x, got, want)
		}
	}
}

// TestMinNodesOnThePulse: on the thesis's 10% pulse a hot key carries 5/s, so a node holds at
// most eleven hot keys under thres 60 (twelve make 60). The float sums of the keys' loads land
// a hair above or below 60; the count must not depend on which.
func TestMinNodesOnThePulse(t *testing.T) {
	for _, tc := range []struct {
		width float64
		want  int
	}{{0.1, 454}, {0.05, 498}, {0.03, 498}} {
		p, err := NewPulse(50_000, 100, tc.width)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := MinNodes(p.KeyLoads(250, 0), 60); got != tc.want {
			t.Errorf("pulse %g%%: MinNodes = %d, want %d", tc.width*100, got, tc.want)
		}
	}
}
