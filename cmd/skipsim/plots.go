package main

import (
	"fmt"
	"path/filepath"

	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/sim"
)

// seriesTable holds the metric series of runs, one row per run and sample.
func seriesTable(runs []*sim.BalanceResult) *report.Table {
	t := &report.Table{Header: []string{"algorithm", "seed", "t_s", "gini", "overloaded", "max_load", "mean_load", "messages_per_s", "keys_per_s"}}
	for _, r := range runs {
		for _, s := range r.Series {
			t.AddRow(r.Algorithm, r.Seed, s.T, s.Gini, s.Overloaded, s.MaxLoad, s.MeanLoad, s.MsgsPerSec, s.KeysPerSec)
		}
	}
	return t
}

// ringTable lays out a run's ring records, one row per node and instant.
func ringTable(r *sim.BalanceResult) *report.Table {
	t := &report.Table{Header: []string{"t_s", "index", "key_position", "load"}}
	for _, sn := range r.Ring {
		for i := range sn.Load {
			t.AddRow(sn.T, i, sn.Start[i], sn.Load[i])
		}
	}
	return t
}

// ringRoomShare: RingMap marks the nodes under this share of thres, which on the pulses are the
// nodes with room for one more hot key (a node of the 3% pulse one key short carries 33 of 60).
const ringRoomShare = 0.7

// plotRing draws a run's ring records (RingMap).
func plotRing(path, title string, p sim.BalanceParams, r *sim.BalanceResult) error {
	recs := make([]report.RingRecord, len(r.Ring))
	for i, sn := range r.Ring {
		recs[i] = report.RingRecord{T: sn.T, Load: sn.Load, Thres: sn.Thres}
	}
	opt := report.PlotOptions{Title: title, XLabel: "node (index in ring order)", YLabel: "time (s)"}
	return report.RingMap(path, opt, recs, p.Net.Node.Balance.Thres, ringRoomShare)
}

// plotSeries draws the metric series of runs of the same setting, one line per run, into
// dir/gini.svg, dir/overloaded.svg and dir/traffic.svg.
func plotSeries(dir, title string, p sim.BalanceParams, runs []*sim.BalanceResult) error {
	title = fmt.Sprintf("%s (balancing from %.0f s)", title, p.Warmup.Seconds())
	label := func(r *sim.BalanceResult, what string) string {
		if len(runs) == 1 {
			return what
		}
		return fmt.Sprintf("seed %d %s", r.Seed, what)
	}
	curve := func(r *sim.BalanceResult, what string, y func(sim.Sample) float64) report.Series {
		s := report.Series{Name: label(r, what)}
		for _, smp := range r.Series {
			s.X, s.Y = append(s.X, smp.T), append(s.Y, y(smp))
		}
		return s
	}
	var gini, over, traffic []report.Series
	for _, r := range runs {
		gini = append(gini, curve(r, "Gini", func(s sim.Sample) float64 { return s.Gini }))
		over = append(over, curve(r, "overloaded", func(s sim.Sample) float64 { return float64(s.Overloaded) }))
		traffic = append(traffic,
			curve(r, "messages/s", func(s sim.Sample) float64 { return s.MsgsPerSec }),
			curve(r, "keys moved/s", func(s sim.Sample) float64 { return s.KeysPerSec }))
	}
	plots := []struct {
		file, ylabel string
		series       []report.Series
	}{
		{"gini.svg", "Gini coefficient of node loads", gini},
		{"overloaded.svg", "overloaded nodes", over},
		{"traffic.svg", "balancing messages/s, keys moved/s", traffic},
	}
	for _, pl := range plots {
		opt := report.PlotOptions{Title: title, XLabel: "time (s)", YLabel: pl.ylabel}
		if err := report.LinePlot(filepath.Join(dir, pl.file), opt, pl.series...); err != nil {
			return err
		}
	}
	return nil
}

// plotSnapshots draws the node loads over the key space at every snapshot of r.
func plotSnapshots(path, title string, p sim.BalanceParams, r *sim.BalanceResult) error {
	keys := float64(p.Keys)
	if p.Words != nil {
		keys = float64(p.Words.Len())
	}
	var snaps []report.Snapshot
	for i, s := range r.Snapshots {
		label := fmt.Sprintf("t = %.0f s", s.T)
		switch {
		case s.T == p.Warmup.Seconds():
			label += " (balancing starts)"
		case i == len(r.Snapshots)-1:
			label += " (end)"
		}
		snaps = append(snaps, report.Snapshot{Label: label, KeyStart: s.Start, Load: s.Load, KeyEnd: keys, Thres: s.Thres})
	}
	opt := report.PlotOptions{Title: title, XLabel: "key (position in key order)", YLabel: "load (keys served/s)"}
	return report.LoadSnapshots(path, opt, snaps, p.Net.Node.Balance.Thres)
}
