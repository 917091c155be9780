package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/sim"
)

// add registers a setting to be run once per seed.
func (e *expEnv) add(name string, p sim.BalanceParams) *point {
	pt := &point{name: name, params: p}
	e.pts = append(e.pts, pt)
	return pt
}

// runAll runs every point once per seed, --parallel at a time, and writes runs.csv.
func (e *expEnv) runAll() error {
	for _, pt := range e.pts {
		if err := pt.params.Validate(); err != nil {
			return badUsage("%s: %v", pt.name, err)
		}
		if err := checkFeasible(pt.params); err != nil {
			return fmt.Errorf("%s: %w", pt.name, err)
		}
		pt.res = make([]*sim.BalanceResult, e.seeds)
	}
	total := len(e.pts) * e.seeds
	bar := newProgress(e.stderr, e.quiet)
	var (
		mu       sync.Mutex // guards bar, done and firstErr
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, e.parallel)
jobs:
	for _, pt := range e.pts {
		for i := range pt.res {
			slots <- struct{}{}
			name := fmt.Sprintf("%s seed %d", pt.name, i+1)
			mu.Lock()
			if firstErr != nil {
				mu.Unlock()
				break jobs
			}
			bar.update("start "+name, done, total)
			mu.Unlock()
			wg.Go(func() {
				defer func() { <-slots }()
				p := pt.params
				p.Seed = uint64(i + 1)
				report := &runReport{name: name, every: runReportEvery, now: time.Now, last: time.Now(), over: -1, emit: func(line string) {
					mu.Lock()
					defer mu.Unlock()
					bar.update(line, done, total)
				}}
				p.Overloaded = func(nodes int) { report.over = nodes }
				res, err := sim.RunBalance(p, report.progress)
				mu.Lock()
				defer mu.Unlock()
				done++
				pt.res[i] = res
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", name, err)
				}
				bar.update("done "+name, done, total)
			})
		}
	}
	wg.Wait()
	bar.finish()
	if firstErr != nil {
		return firstErr
	}
	return e.runsTable().WriteCSV(filepath.Join(e.out, "runs.csv"))
}

// runReportEvery is how often a running experiment's run reports its phase.
const runReportEvery = 30 * time.Second

// runReport forwards how one run of an experiment is going to the experiment's progress, at
// most once every `every` of wall time: a short run says nothing beyond its start and its end,
// and a 50,000-node run of scale --full, which takes most of an hour, shows its phase.
type runReport struct {
	name  string
	every time.Duration
	now   func() time.Time
	last  time.Time // when the run started or last reported
	over  int       // nodes over thres at the latest second of balancing; -1 before it began
	emit  func(line string)
}

// progress is the run's sim.Progress.
func (r *runReport) progress(phase string, done, total int) {
	now := r.now()
	if now.Sub(r.last) < r.every {
		return
	}
	r.last = now
	line := fmt.Sprintf("%s: %s %d/%d", r.name, phase, done, total)
	if r.over >= 0 {
		line += ", " + overThres(r.over)
	}
	r.emit(line)
}

// runsTable has one row per run with everything it measured.
func (e *expEnv) runsTable() *report.Table {
	t := &report.Table{Header: []string{"experiment", "point", "seed", "algorithm", "workload", "nodes", "keys", "rate",
		"completed", "completion_s", "messages", "query_messages", "items", "items_to_migrants", "items_by_nix", "items_by_leaves", "lower_bound", "items_per_lower_bound",
		"placement_bound", "items_per_placement_bound", "weighted_move_items", "weighted_move_balanced",
		"nix", "mig", "mig_nix", "probes", "unl_hits", "remote_tries", "remote_accepted", "waves_started", "waves_ok",
		"waves_failed", "overloaded_start", "overloaded_end", "gini_start", "gini_end", "max_mean_start", "max_mean_end",
		"feasibility", "queries", "queries_failed", "crashed", "check", "wall_s"}}
	for _, pt := range e.pts {
		p := pt.params
		for _, r := range pt.res {
			t.AddRow(e.def.name, pt.name, r.Seed, r.Algorithm, workloadName(p), p.Nodes, p.Keys, p.Rate,
				r.Completed, r.CompletionTime, r.Messages, r.QueryMessages, r.Items, r.MigrantItems, r.NIXItems, r.LeaveItems, r.LowerBound,
				ratio(float64(r.Items), float64(r.LowerBound)), r.PlacementBound,
				ratio(float64(r.Items), float64(r.PlacementBound)), weightedMoveItems(r), r.WeightedMove != nil && r.WeightedMove.Balanced, r.NIX, r.MIG, r.MigNix, r.Probes, r.UNLHits,
				r.RemoteTries, r.RemoteOK, r.WavesStarted, r.WavesOK, r.WavesFailed, r.OverloadedStart,
				r.OverloadedEnd, r.GiniStart, r.GiniEnd, r.MaxMeanStart, r.MaxMeanEnd, r.Feasibility,
				r.Queries, r.QueriesFailed, r.Crashed, r.Check, r.Wall)
		}
	}
	return t
}

// publish adds the common notes to t, prints it as Markdown and writes NAME.csv and NAME.md.
func (e *expEnv) publish(t *report.Table) error {
	stop := "stop " + secs(e.stopAfter) + " after completion"
	if e.stopAfter == 0 {
		stop = "no early stop"
	}
	b := nixmig.DefaultConfig()
	t.Notes = append(t.Notes,
		"Command: "+e.command,
		fmt.Sprintf("Settings: %d nodes, %d keys, %.4g queries/s of 100-key ranges, warm-up and load window %s, duration %s, %s, request timeout %s, seeds 1..%d; thres %g, overThres %g, a %g, ttl %d growing to %d unless varied. Cells: mean ± sample standard deviation over the seeds.",
			e.nodes, e.keys, e.rate, secs(e.warmup), secs(e.duration), stop, secs(e.requestTimeout), e.seeds, b.Thres, b.OverThres, b.A, b.TTL, b.TTLMax))
	for _, pt := range e.pts {
		if unfinished(pt) > 0 {
			t.Notes = append(t.Notes, "* Some runs never got every node under thres; their time is the whole balancing period (a lower bound).")
			break
		}
	}
	t.Notes = append(t.Notes, e.checkNote())
	var md strings.Builder
	if err := t.Markdown(&md); err != nil {
		return err
	}
	fmt.Fprint(e.stdout, md.String())
	if err := t.WriteCSV(filepath.Join(e.out, e.def.name+".csv")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.out, e.def.name+".md"), []byte(md.String()), 0o644)
}

// broken lists the runs whose invariant check failed.
func (e *expEnv) broken() []string {
	var out []string
	for _, pt := range e.pts {
		for _, r := range pt.res {
			if r.Check != "ok" {
				out = append(out, fmt.Sprintf("%s seed %d: %s", pt.name, r.Seed, r.Check))
			}
		}
	}
	return out
}

func (e *expEnv) checkNote() string {
	total := len(e.pts) * e.seeds
	if b := e.broken(); len(b) > 0 {
		return fmt.Sprintf("Invariant checks FAILED in %d of %d runs (see runs.csv).", len(b), total)
	}
	return fmt.Sprintf("Invariant checks: ok in %d of %d runs.", total, total)
}

// failures turns broken runs into the exit status 1.
func (e *expEnv) failures() error {
	if b := e.broken(); len(b) > 0 {
		return fmt.Errorf("%w:\n  %s", errFailed, strings.Join(b, "\n  "))
	}
	return nil
}

// chart is one bar chart of a metric.
type chart struct {
	file, ylabel string
	m            metric
}

var (
	timeChart     = chart{"time.svg", "completion time (s)", timeOf}
	messagesChart = chart{"messages.svg", "balancing messages", messagesOf}
	itemsChart    = chart{"items.svg", "items moved", itemsOf}
)

// conclude publishes t and draws the charts (see bars).
func (e *expEnv) conclude(t *report.Table, xlabel string, groups, series []string, pts [][]*point, charts ...chart) error {
	if err := e.publish(t); err != nil {
		return err
	}
	return e.bars(xlabel, groups, series, pts, charts...)
}

// bars draws each chart with one group of bars per groups entry and one series per row of pts
// (pts[s][g] is series s in group g), the bars at the mean and, with several seeds, error bars
// at the spread.
func (e *expEnv) bars(xlabel string, groups, series []string, pts [][]*point, charts ...chart) error {
	for _, c := range charts {
		var bs []report.BarSeries
		for s, row := range pts {
			b := report.BarSeries{Name: series[s]}
			for _, pt := range row {
				mean, sd := meanSD(c.m(pt))
				b.Values, b.Errors = append(b.Values, mean), append(b.Errors, sd)
			}
			if e.seeds < 2 {
				b.Errors = nil // no spread to show
			}
			bs = append(bs, b)
		}
		opt := report.PlotOptions{Title: e.def.name + ": " + c.ylabel, XLabel: xlabel, YLabel: c.ylabel}
		if err := report.BarChart(filepath.Join(e.out, c.file), opt, groups, bs); err != nil {
			return err
		}
	}
	return nil
}
