package main

import (
	"fmt"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/workload"
)

// sweepSpec is an experiment running algorithms over a list of workloads.
type sweepSpec struct {
	title    string
	algs     []nixmig.Algorithm
	xName    string // the varied parameter, as a column and axis label
	xs       []float64
	xLabel   func(x float64) string
	workload func(x float64) workload.Workload
}

func sweepPulse(e *expEnv) error {
	return sweep(e, sweepSpec{
		title: "Balancing a pulse: NIXMIG and the baselines (figs. 4.14–4.15)",
		algs:  e.algorithms,
		xName: "pulse", xs: e.choose(e.def.full, e.def.quick),
		xLabel:   func(x float64) string { return fmt.Sprintf("%g%%", x) },
		workload: func(x float64) workload.Workload { return pulse(e.keys, x) },
	})
}

func sweepZipf(e *expEnv) error {
	for _, theta := range e.choose(e.def.full, e.def.quick) {
		if !(theta > 0) {
			return badUsage("--points: zipf θ must be positive (got %g)", theta)
		}
	}
	return sweep(e, sweepSpec{
		title: "Balancing zipf(θ, 10 buckets): NIXMIG and the baselines",
		algs:  e.algorithms,
		xName: "θ", xs: e.choose(e.def.full, e.def.quick),
		xLabel: func(x float64) string { return fmt.Sprintf("θ=%g", x) },
		workload: func(x float64) workload.Workload {
			return workload.Zipf{K: e.keys, Buckets: workload.DefaultBuckets, Theta: x}
		},
	})
}

// pulse is a pulse over percent % of the keys 0..keys-1, in the middle.
func pulse(keys int, percent float64) workload.Workload {
	return workload.Pulse{K: keys, Width: percent / 100, Offset: workload.Centre}
}

// hotRanges is SPEC §12's twenty hot ranges covering percent % of the keys 0..keys-1.
func hotRanges(keys int, percent float64) workload.Workload {
	return workload.HotRanges{K: keys, Percent: percent}
}

func sweep(e *expEnv, s sweepSpec) error {
	pts := make([][]*point, len(s.algs)) // [algorithm][x]
	ib, nix := -1, -1
	names := make([]string, len(s.algs))
	for a, alg := range s.algs {
		names[a] = alg.String()
		switch alg {
		case nixmig.ItemBalancing:
			ib = a
		case nixmig.NIXOnly:
			nix = a
		}
		for _, x := range s.xs {
			p := newParams(e.runFlags, s.workload(x))
			p.Net.Node.Balance.Algorithm = alg
			pts[a] = append(pts[a], e.add(alg.String()+" "+s.xLabel(x), p))
		}
	}
	if err := e.runAll(); err != nil {
		return err
	}
	t := &report.Table{Title: s.title, Header: []string{"algorithm", s.xName, "time (s)", "messages", "items",
		"items ÷ lower bound", "items ÷ placement bound", "items ÷ Weighted-Move", "MIG:NIX"}}
	if ib >= 0 {
		t.Header = append(t.Header, "time ÷ IB", "messages ÷ IB", "items ÷ IB")
	}
	if nix >= 0 {
		t.Header = append(t.Header, "NIX time ÷ NIXMIG time")
	}
	for a, alg := range s.algs {
		for x, pt := range pts[a] {
			row := []any{alg.String(), s.xLabel(s.xs[x]), timeCell(pt), cell(messagesOf(pt)), cell(itemsOf(pt)),
				cell(lbRatioOf(pt)), cell(placementOf(pt)), cell(weightedMoveOf(pt)), cell(migNixOf(pt))}
			for _, m := range []metric{timeOf, messagesOf, itemsOf} {
				switch {
				case ib < 0:
				case a == ib:
					row = append(row, "-")
				default:
					row = append(row, ratioCell(pt, pts[ib][x], m))
				}
			}
			switch {
			case nix >= 0 && alg == nixmig.NIXMIG:
				row = append(row, ratioCell(pts[nix][x], pt, timeOf))
			case nix >= 0:
				row = append(row, "-")
			}
			t.AddRow(row...)
		}
	}
	groups := make([]string, len(s.xs))
	for x := range s.xs {
		groups[x] = s.xLabel(s.xs[x])
		t.Notes = append(t.Notes, fmt.Sprintf("Workload %s: %s.", groups[x], pts[0][x].res[0].Feasibility))
	}
	return e.conclude(t, s.xName, groups, names, pts, timeChart, messagesChart, itemsChart)
}
