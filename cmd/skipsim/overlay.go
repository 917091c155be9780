package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skiprange/skiprange/testnet/sim"
)

func runOverlay(args []string, stdout, stderr io.Writer) error {
	p := sim.DefaultOverlayParams()
	fs, held := newFlagSet("overlay")
	fs.IntVar(&p.Nodes, "nodes", p.Nodes, "number of nodes `N`; the first starts the network, the rest join through random members")
	fs.IntVar(&p.Keys, "keys", p.Keys, "number of keys `M` (8-byte integers 0..M-1), at least N; join positions are drawn from them")
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "random `seed`: the same seed gives the same run")
	fs.IntVar(&p.Lookups, "lookups", p.Lookups, "exact-match `reads` from random nodes, each checked against the reference")
	fs.IntVar(&p.Scans, "scans", p.Scans, "range `scans` from random nodes, each checked against the reference")
	fs.IntVar(&p.ScanKeys, "scan-keys", p.ScanKeys, "width of each scan in `keys`")
	fs.Float64Var(&p.Leave, "leave", p.Leave, "`fraction` of nodes that leave gracefully, all at once, in [0,1)")
	fs.Float64Var(&p.Crash, "crash", p.Crash, "`fraction` of nodes that crash at once after the leaves, in [0,1)")
	fs.IntVar(&p.Batch, "batch", p.Batch, "`items` per bulk-load batch")
	fs.IntVar(&p.QueryRate, "query-rate", p.QueryRate, "client `requests` started per unit of virtual time")
	joinInterval := fs.Float64("join-interval", p.JoinInterval.Seconds(), "mean gap between join arrivals in `units` of virtual time (Poisson)")
	repairLimit := fs.Float64("repair-limit", p.RepairLimit.Seconds(), "longest wait for repair after the crash, in `units`")
	latency := fs.Float64("latency", 1, "one hop's delay in `units` (the thesis's time unit)")
	jitter := fs.Float64("jitter", 0, "extra uniform random delay per message in [0,`units`)")
	fs.Float64Var(&p.Net.Loss, "loss", 0, "`probability` that a message is lost, in [0,1)")
	probe := fs.Float64("probe-interval", p.Net.Node.SkipGraph.ProbeInterval.Seconds(), "maintenance period in `units`")
	refresh := fs.Float64("refresh-interval", p.Net.Node.SkipGraph.RefreshInterval.Seconds(), "least time between refresh passes over the higher levels, in `units`")
	fs.BoolVar(&p.Net.Marshal, "marshal", false, "encode every message with protobuf as on the wire (slower)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.Bool("quiet", false, "no progress output on stderr")
	startProfile := processFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: skipsim overlay [flags]

Builds a circular skip graph of N nodes by protocol joins (no central construction), bulk-loads M
keys through the protocol, runs lookups and range scans from random nodes checking every answer
against a reference map, optionally makes a fraction of nodes leave and another crash, lets the
overlay repair, and prints hops (mean, p50, p99) beside log2 N, messages per join and leave,
repair time and the outcome of every invariant check.

Example:
  skipsim overlay --nodes 1000 --keys 100000 --crash 0.1 --seed 7

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, held, args, stdout); err != nil {
		return err
	}
	units := func(name string, v float64, allowZero bool) (time.Duration, error) {
		switch {
		case math.IsNaN(v):
			return 0, badUsage("--%s must be a number (got NaN)", name)
		case allowZero && v < 0:
			return 0, badUsage("--%s must not be negative (got %g)", name, v)
		case !allowZero && v <= 0:
			return 0, badUsage("--%s must be positive (got %g)", name, v)
		case v*float64(time.Second) >= math.MaxInt64: // also +Inf; would overflow time.Duration
			return 0, badUsage("--%s is too large (got %g units)", name, v)
		case v > 0 && time.Duration(v*float64(time.Second)) == 0:
			return 0, badUsage("--%s is below the 1 ns resolution (got %g units)", name, v)
		}
		return time.Duration(v * float64(time.Second)), nil
	}
	var err error
	if p.JoinInterval, err = units("join-interval", *joinInterval, false); err != nil {
		return err
	}
	if p.RepairLimit, err = units("repair-limit", *repairLimit, false); err != nil {
		return err
	}
	if p.Net.Latency, err = units("latency", *latency, false); err != nil {
		return err
	}
	if p.Net.Jitter, err = units("jitter", *jitter, true); err != nil {
		return err
	}
	if p.Net.Node.SkipGraph.ProbeInterval, err = units("probe-interval", *probe, false); err != nil {
		return err
	}
	if p.Net.Node.SkipGraph.RefreshInterval, err = units("refresh-interval", *refresh, true); err != nil {
		return err
	}
	p.Net.FitTimeouts()
	if !(p.Net.Loss >= 0 && p.Net.Loss < 1) { // also NaN
		return badUsage("--loss must be a probability in [0,1) (got %g)", p.Net.Loss)
	}
	// p.Validate's range checks let NaN through (every comparison with NaN is false).
	if math.IsNaN(p.Leave) {
		return badUsage("--leave must be a fraction in [0,1) (got NaN)")
	}
	if math.IsNaN(p.Crash) {
		return badUsage("--crash must be a fraction in [0,1) (got NaN)")
	}
	if err := p.Validate(); err != nil {
		return badUsage("%v", err)
	}
	if err := p.Net.Node.SkipGraph.Validate(); err != nil {
		return badUsage("%v", err)
	}
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	bar := newProgress(stderr, *quiet)
	sum, err := sim.RunOverlay(p, bar.update)
	bar.finish()
	if perr := stopProfile(); err == nil && perr != nil {
		err = fmt.Errorf("profile: %w", perr)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printOverlay(stdout, sum)
	}
	if sum.Failed() {
		return errFailed
	}
	return nil
}

func printOverlay(w io.Writer, s *sim.OverlaySummary) {
	p := s.Params
	fmt.Fprintf(w, "skipsim overlay: %d nodes, %d keys, seed %d (log2 N = %.2f)\n\n", p.Nodes, p.Keys, p.Seed, s.Log2N)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(t, "build\t%d joins in %.0f units, all levels right %.0f units later\t%.1f messages per join (%.2f × log2 N)\n", s.Joins, s.BuildTime, s.SettleTime, s.MessagesPerJoin, s.JoinConstant)
	fmt.Fprintf(t, "load\t%d keys in %.0f units\t%d messages\n", p.Keys, s.LoadTime, s.LoadMessages)
	hops := func(name string, h sim.HopStats) {
		fmt.Fprintf(t, "%s\t%d (wrong %d, failed %d)\thops mean %.2f, p50 %d, p99 %d, max %d  (log2 N %.2f, 2·log2 N %.2f)\n",
			name, h.Count, h.Wrong, h.Failed, h.Mean, h.P50, h.P99, h.Max, s.Log2N, 2*s.Log2N)
	}
	hops("lookups", s.Lookups)
	hops("scans", s.Scans)
	if s.Leaves > 0 {
		fmt.Fprintf(t, "leave\t%d nodes in %.0f units\t%.1f messages per leave\n", s.Leaves, s.LeaveTime, s.MessagesPerLeave)
	}
	if s.Crashed > 0 {
		state := "repaired"
		if !s.Repaired {
			state = "NOT repaired"
		}
		fmt.Fprintf(t, "crash\t%d nodes, %d items lost, %d ranges reported lost\t%s in %.0f units; %d repair + %d maintenance messages\n",
			s.Crashed, s.ItemsLost, s.RangesLost, state, s.RepairTime, s.RepairMessages, s.MaintainMessages)
		hops("after crash", s.PostCrashLookups)
		fmt.Fprintf(t, "\tsurviving keys missing: %d\t\n", s.MissingAfterCrash)
	}
	t.Flush()
	fmt.Fprintln(w, "\ninvariant checks:")
	for _, c := range s.Checks {
		mark := "ok"
		if !c.OK {
			mark = "FAILED"
		}
		fmt.Fprintf(w, "  %-20s %s", c.Phase, mark)
		if c.Detail != "" {
			fmt.Fprintf(w, "  %s", strings.ReplaceAll(c.Detail, "\n", "\n    "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nwall time: build %.1f s, load %.1f s, lookups %.1f s, scans %.1f s, total %.1f s\n", s.WallBuild, s.WallLoad, s.WallLookups, s.WallScans, s.WallSeconds)
	fmt.Fprintf(w, "simulator: %.0f units simulated, %d events, %d messages delivered in %.1f s wall (%.0f messages/s), peak heap %.0f MB\n",
		s.SimTime, s.Events, s.Delivered, s.WallSeconds, s.MessagesPerSec, s.PeakHeapMB)
}
