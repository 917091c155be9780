package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/sim"
)

func dynamic(e *expEnv) error {
	e.stopAfter = 0 // the pulse moves after the first balancing: run the whole duration
	p := newParams(e.runFlags, newDynamic(e.keys, 0, e.warmup))
	p.SnapshotsAt = dynamicSnapshots(e.warmup)
	pt := e.add("nixmig dynamic", p)
	if err := e.runAll(); err != nil {
		return err
	}
	move := dynamicMove(e.warmup).Seconds()
	atMove := perRun(func(r *sim.BalanceResult) float64 {
		g := r.GiniStart
		for _, s := range r.Series {
			if s.T <= move {
				g = s.Gini
			}
		}
		return g
	})
	peak := func(f func(sim.Sample) float64) metric {
		return perRun(func(r *sim.BalanceResult) float64 {
			m := 0.0
			for _, s := range r.Series {
				m = max(m, f(s))
			}
			return m
		})
	}
	tab := &report.Table{Title: "Dynamic workload: a 12% pulse moving " + secs(dynamicMove(e.warmup)) + " after the start (figs. 4.20–4.22)",
		Header: []string{"measure", "ours", "thesis"}}
	rows := []struct {
		name  string
		m     metric
		extra string
	}{
		{"Gini when balancing starts", perRun(func(r *sim.BalanceResult) float64 { return r.GiniStart }), "≈0.9"},
		{"Gini just before the move", atMove, "-"},
		{"Gini at the end", perRun(func(r *sim.BalanceResult) float64 { return r.GiniEnd }), "≈0.2"},
		{"peak balancing messages/s", peak(func(s sim.Sample) float64 { return s.MsgsPerSec }), "≤ 700"},
		{"peak keys moved/s", peak(func(s sim.Sample) float64 { return s.KeysPerSec }), "≤ 1200"},
		{"balancing messages", messagesOf, "-"},
		{"items moved", itemsOf, "-"},
		{"overloaded nodes at the end", perRun(func(r *sim.BalanceResult) float64 { return float64(r.OverloadedEnd) }), "-"},
	}
	tab.AddRow("first completion (s after the warm-up)", timeCell(pt), "-")
	for _, row := range rows {
		tab.AddRow(row.name, cell(row.m(pt)), row.extra)
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Snapshots at %v s and at the end (loads.svg, seed 1); series every %s in series.csv.",
		secondsList(p.SnapshotsAt), secs(sampleEvery)))
	if err := e.publish(tab); err != nil {
		return err
	}
	if err := seriesTable(pt.res).WriteCSV(filepath.Join(e.out, "series.csv")); err != nil {
		return err
	}
	title := fmt.Sprintf("nixmig, dynamic workload, %d nodes", e.nodes)
	if err := plotSnapshots(filepath.Join(e.out, "loads.svg"), title+", seed 1", p, pt.res[0]); err != nil {
		return err
	}
	return plotSeries(e.out, title, p, pt.res)
}

func secondsList(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

func faults(e *expEnv) error {
	names := []string{"none", "1% message loss", "5% of nodes crash"}
	var pts []*point
	for i, name := range names {
		p := newParams(e.runFlags, pulse(e.keys, 10))
		switch i {
		case 1:
			p.Net.Loss = 0.01
		case 2:
			p.CrashFraction, p.CrashAfter = 0.05, 20*time.Second
		}
		pts = append(pts, e.add(name, p))
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: "Balancing a 10% pulse under faults",
		Header: []string{"fault", "time (s)", "items", "messages", "queries failed", "nodes crashed", "items lost", "checks ok"}}
	for _, pt := range pts {
		ok := 0
		for _, r := range pt.res {
			if r.Check == "ok" {
				ok++
			}
		}
		tab.AddRow(pt.name, timeCell(pt), cell(itemsOf(pt)), cell(messagesOf(pt)),
			cell(perRun(func(r *sim.BalanceResult) float64 { return float64(r.QueriesFailed) })(pt)),
			cell(perRun(func(r *sim.BalanceResult) float64 { return float64(r.Crashed) })(pt)),
			cell(perRun(func(r *sim.BalanceResult) float64 { return float64(r.ItemsLost) })(pt)),
			fmt.Sprintf("%d/%d", ok, len(pt.res)))
	}
	tab.Notes = append(tab.Notes,
		"The crash comes 20 s after the warm-up. Items lost: keys whose only holder crashed (no replication yet); the check expects exactly those to be missing and every other item at its owner.")
	return e.conclude(tab, "fault", names, []string{"nixmig"}, [][]*point{pts}, timeChart, itemsChart)
}
