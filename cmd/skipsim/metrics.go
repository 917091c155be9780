package main

import (
	"fmt"
	"math"

	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/sim"
)

// point is one setting of an experiment, run once per seed.
type point struct {
	name   string
	params sim.BalanceParams
	res    []*sim.BalanceResult // res[i] is the run with seed i+1
}

// metric gives a value per run of a point, NaN where the run does not define it.
type metric func(pt *point) []float64

func perRun(f func(r *sim.BalanceResult) float64) metric {
	return func(pt *point) []float64 {
		vs := make([]float64, len(pt.res))
		for i, r := range pt.res {
			vs[i] = f(r)
		}
		return vs
	}
}

// weightedMoveItems is the Weighted-Move reference's items (0 when the run has none).
func weightedMoveItems(r *sim.BalanceResult) int {
	if r.WeightedMove == nil {
		return 0
	}
	return r.WeightedMove.Items
}

// ratio is a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

var (
	// timeOf is the completion time after the warm-up; a run that never got every node under
	// thres counts the whole time it balanced (a lower bound).
	timeOf metric = func(pt *point) []float64 {
		vs := make([]float64, len(pt.res))
		for i, r := range pt.res {
			vs[i] = (pt.params.Duration - pt.params.Warmup).Seconds()
			if r.Completed {
				vs[i] = r.CompletionTime
			}
		}
		return vs
	}
	messagesOf = perRun(func(r *sim.BalanceResult) float64 { return float64(r.Messages) })
	itemsOf    = perRun(func(r *sim.BalanceResult) float64 { return float64(r.Items) })
	// migrantItemsOf: the items migrants took from their targets (what SmartRNP minimizes).
	migrantItemsOf = perRun(func(r *sim.BalanceResult) float64 { return float64(r.MigrantItems) })
	lbRatioOf      = perRun(func(r *sim.BalanceResult) float64 { return ratio(float64(r.Items), float64(r.LowerBound)) })
	placementOf    = perRun(func(r *sim.BalanceResult) float64 { return ratio(float64(r.Items), float64(r.PlacementBound)) })
	// weightedMoveOf: items ÷ the Weighted-Move reference's, where the reference balanced.
	weightedMoveOf = perRun(func(r *sim.BalanceResult) float64 {
		if r.WeightedMove == nil || !r.WeightedMove.Balanced {
			return math.NaN()
		}
		return ratio(float64(r.Items), float64(r.WeightedMove.Items))
	})
	migNixOf  = perRun(func(r *sim.BalanceResult) float64 { return ratio(float64(r.MIG), float64(r.NIX)) })
	probesOf  = perRun(func(r *sim.BalanceResult) float64 { return float64(r.Probes) })
	successOf = perRun(func(r *sim.BalanceResult) float64 { return ratio(float64(r.RemoteOK), float64(r.RemoteTries)) })
)

// defined drops the NaN values.
func defined(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// cell is "mean ± spread" over the runs that define the value.
func cell(vs []float64) string { return report.MeanSpread(defined(vs)) }

// unfinished counts the runs of pt that never got every node under thres.
func unfinished(pt *point) int {
	n := 0
	for _, r := range pt.res {
		if !r.Completed {
			n++
		}
	}
	return n
}

// timeCell is the completion time, marked "*" when some run never finished.
func timeCell(pt *point) string {
	if unfinished(pt) > 0 {
		return cell(timeOf(pt)) + "*"
	}
	return cell(timeOf(pt))
}

// ratioCell is m of a divided by m of b, seed by seed, as "mean ± spread".
func ratioCell(a, b *point, m metric) string {
	va, vb := m(a), m(b)
	vs := make([]float64, len(va))
	for i := range va {
		vs[i] = ratio(va[i], vb[i])
	}
	return cell(vs)
}

// meanSD is the mean and sample standard deviation of the defined values (0, 0 when none).
func meanSD(vs []float64) (mean, sd float64) {
	vs = defined(vs)
	if len(vs) == 0 {
		return 0, 0
	}
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	if len(vs) > 1 {
		for _, v := range vs {
			sd += (v - mean) * (v - mean)
		}
		sd = math.Sqrt(sd / float64(len(vs)-1))
	}
	return mean, sd
}

// kilo writes a count as the thesis's tables do: 70K for 70,000, plain below 1000.
func kilo(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fK", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}
