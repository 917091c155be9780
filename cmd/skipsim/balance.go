package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/testnet/sim"
	"github.com/skiprange/skiprange/testnet/workload"
)

const balanceHelp = `Usage: skipsim balance [flags]

Runs one load-balancing experiment (SPEC §11–§12): N nodes placed evenly over the keys, range
queries of --range-keys keys arriving as a Poisson process at --rate per second from the chosen
workload, and the balancers (NIXMIG or a baseline) starting when the --warmup ends. The run stops
--stop-after after every node got under thres, or at --duration. It prints the completion time,
the balancing messages, the items moved beside their lower bounds and beside a centralized
reference (Google Slicer's Weighted-Move on the same loads), MIG:NIX, the Gini coefficient
and the overloaded nodes before and after, whether the workload can be balanced at all (and,
after --crash, by the survivors with the lost keys gone), and the outcome of the invariant checks
(exit status 1 when they failed).

Workloads: pulse (all queries start in a contiguous --width of the keys), zipf (--buckets buckets
with weights r^-θ), dynamic (a 12% pulse that moves 150 s after the warm-up), hot (about twenty
hot ranges covering --percent % of the keys), uniform, words (keys are the words of --words,
queries the ranges of their --prefix-byte prefixes; --keys then limits the words read, most
frequent first).

Heterogeneous nodes: --thresholds 30,60,120 gives the nodes these thresholds in equal shares,
at places drawn from --seed (each node's overThres scales with its thres: --over-thres times its
thres over --thres); every node must end under its own. loads.svg draws each node's thres, and
the ring map (--ring-every) marks each node's load against its own. A
workload that no assignment of its keys to the nodes can balance (a key at or over every thres,
more nodes needed than there are when they share one thres, or a total load at or over the sum
of the thresholds) ends at once with exit status 2.

Queries are client range scans sent from random nodes and routed hop by hop, so a run costs
about queries x hops x keys read. --queries direct counts each query's reads at its keys'
owners at once and only traces its route (from a minute before the balancers start) so that
SmartUNL's hints travel as before: at 500 nodes the results are those of routed queries within
the seeds' spread, in a fifth of the wall time or less, and 50,000 nodes can be run at all (in
about 50 minutes: docs/JOURNAL.md, "Direct queries" and "Routes that went round in circles").

Checked clients (--clients RATE): reads, puts and deletes of random loaded keys at RATE
operations per second through random running nodes, from the first query to the end, each
answer checked against the writes acknowledged before it was sent — a stale value, a value
never written or an acknowledged key not found is a violation and fails the check; STATUS_LOST
is allowed once a crash or a pause has come (a frozen node's range answers so until it is
re-admitted). A write that gets no answer may yet happen: its key is left alone and checked
once at the end. E.g. --pause 0.1 --pause-for 120s --clients 50.

Progress goes to stderr (--quiet silences it); while the balancers run it shows how many nodes
are still over thres.

Ctrl-C (or SIGTERM) ends a long run at the next simulated second: the run is checked and its
result printed (and written) as at a normal end, marked interrupted, and the exit status is 1.
A second Ctrl-C quits at once.

With --out DIR it writes DIR/result.json (as --json), DIR/series.csv (the metrics every --sample),
DIR/loads.svg (node loads over the key space when balancing starts and at the end) and
DIR/gini.svg, DIR/overloaded.svg, DIR/traffic.svg (metrics over time). With --ring-every T it
also records every node's load in ring order every T from the warm-up on, into DIR/ring.csv
(t_s, index, key position of the node's start, load) and DIR/ring.png (the nodes over thres and
those under 70% of it, by ring index over time): where the lumps of a pulse's tail travel and
where the nodes with room are.

Examples:
  skipsim balance --workload pulse --width 0.05 --seed 2
  skipsim balance --nodes 50 --keys 5000 --rate 25 --warmup 100s --duration 1200s --algorithm ib --out out/ib
  skipsim balance --workload words --words ../shared/data/en_50k.txt --prefix 4

Flags:
`

// balanceFlags are the settings of 'skipsim balance'.
type balanceFlags struct {
	runFlags
	seed                             uint64
	algorithm, work, unl, rnp        string
	width, theta, percent            float64
	buckets, rangeKeys, prefix       int
	words, out, thresholds           string
	window, sample, crashAfter       time.Duration
	pauseFor                         time.Duration
	ringEvery                        time.Duration
	thres, overThres, a, loss, crash float64
	pause, clients                   float64
	headroom, delta                  float64
	ttl, ttlMax, samples             int
	faithful, asJSON, refuse         bool
}

func defaultBalanceFlags() balanceFlags {
	c := nixmig.DefaultConfig()
	return balanceFlags{
		runFlags: defaultRunFlags(50_000),
		seed:     1, algorithm: "nixmig", work: "pulse", unl: "smart", rnp: "smart",
		width: 0.10, theta: 2, percent: 10, buckets: workload.DefaultBuckets,
		rangeKeys: workload.DefaultRangeKeys, prefix: 5, sample: sampleEvery, crashAfter: 20 * time.Second,
		thres: c.Thres, overThres: c.OverThres, a: c.A, ttl: c.TTL, ttlMax: c.TTLMax, headroom: c.Headroom,
		delta: c.ThresholdDelta, samples: c.ThresholdSamples,
	}
}

func (f *balanceFlags) register(fs *flag.FlagSet) {
	f.runFlags.register(fs, "number of integer `keys` 0..M-1 (words workload: the most frequent words read)")
	fs.Uint64Var(&f.seed, "seed", f.seed, "random `seed`: the same seed gives the same run")
	fs.StringVar(&f.algorithm, "algorithm", f.algorithm, "balancer: nixmig, nix (NIX only), mig (MIG only), ib (Item Balancing), threshold (Ganesan et al.'s threshold algorithm; Fibbing with the default --delta) or none")
	fs.StringVar(&f.work, "workload", f.work, "query workload: pulse, zipf, dynamic, hot, uniform or words")
	fs.Float64Var(&f.width, "width", f.width, "pulse width as a `fraction` of the keys, in (0,1]")
	fs.Float64Var(&f.theta, "theta", f.theta, "zipf skew `θ` > 0")
	fs.IntVar(&f.buckets, "buckets", f.buckets, "zipf `buckets`")
	fs.Float64Var(&f.percent, "percent", f.percent, "hot ranges: `percent` of the keys that is hot, in (0,100]")
	fs.StringVar(&f.words, "words", "", "words workload: `file` of \"word count\" lines (e.g. ../shared/data/en_50k.txt)")
	fs.IntVar(&f.prefix, "prefix", f.prefix, "words workload: prefix length in `bytes`")
	fs.IntVar(&f.rangeKeys, "range-keys", f.rangeKeys, "`keys` per range query (integer workloads)")
	durationVar(fs, &f.window, "window", "load window `time` (default: as long as --warmup)")
	durationVar(fs, &f.sample, "sample", "period of the metric series, whole seconds")
	durationVar(fs, &f.ringEvery, "ring-every", "record every node's load in ring order this often from the warm-up on, whole seconds (DIR/ring.csv and DIR/ring.png with --out, \"ring\" in --json; default none)")
	fs.Float64Var(&f.thres, "thres", f.thres, "overload threshold in keys served per second")
	fs.StringVar(&f.thresholds, "thresholds", "", "heterogeneous nodes: comma-separated thresholds the nodes get in equal shares at random places, e.g. 30,60,120 (default: every node --thres)")
	fs.Float64Var(&f.overThres, "over-thres", f.overThres, "above this load only the share --a of the excess moves in one NIX")
	fs.Float64Var(&f.a, "a", f.a, "share of the excess moved above --over-thres, in (0,1]")
	fs.IntVar(&f.ttl, "ttl", f.ttl, "most nodes one local wave reserves, 1 to 63 (a wave whose members can all give first may reserve 4·ttl, at most 63)")
	fs.IntVar(&f.ttlMax, "ttl-max", f.ttlMax, "the largest ttl a node's waves grow to, doubling from --ttl with each wave that way that ran out of reach (its last node still over keep) and halving with each that did not; 0 to 63, at or under --ttl a fixed ttl (the thesis's rule: it ran --ttl 5 --ttl-max 0)")
	fs.Float64Var(&f.delta, "delta", f.delta, "--algorithm threshold: ratio of successive load thresholds thres·δ^j, in (1,16] (the default, the golden ratio, is the Fibbing algorithm)")
	fs.IntVar(&f.samples, "samples", f.samples, "--algorithm threshold: random routing-table entries a node probes, besides its two neighbours, for the least loaded node, 0 to 64")
	fs.StringVar(&f.unl, "unl", f.unl, "underloaded-node location: smart (SmartUNL hint cache, then probes) or random (probes only)")
	fs.StringVar(&f.rnp, "rnp", f.rnp, "side a migrant joins: smart (SmartRNP), random or adversarial")
	fs.Float64Var(&f.headroom, "headroom", f.headroom, "share of thres the nodes of a wave try to keep free, in [0,1) (0: the thesis's rule); a node whose loaded keys carry over twice that each keeps none")
	fs.BoolVar(&f.faithful, "faithful", false, "the thesis's literal rules: no headroom, waves planned with bare excesses, its exNodes and migrant-share formulas, an exam that ends at the first candidate that accepts, a sequential NIX chain after the exam within ttl that carries a lump whole, any light node a migrant whatever it stores, every migrant's whole range left to M, waves that never grow past --ttl (the thesis ran --ttl 5)")
	fs.Float64Var(&f.loss, "loss", 0, "`probability` that a message is lost, in [0,1)")
	fs.Float64Var(&f.crash, "crash", 0, "`fraction` of the nodes that crash at once, in [0,1)")
	fs.BoolVar(&f.refuse, "refuse", false, "a message to a crashed node is refused, its sender told so a round trip later, as a dial to a process that died on a live host is under libp2p: a lookup or range query then goes on at once by another link (default: lost without a word, as to a host that vanished)")
	fs.Float64Var(&f.pause, "pause", 0, "`fraction` of the nodes frozen at once, as by a SIGSTOP (others than those crashing), in [0,1)")
	durationVar(fs, &f.pauseFor, "pause-for", "how long the paused nodes stay frozen (needed with --pause)")
	fs.Float64Var(&f.clients, "clients", 0, "checked client reads and writes per second (`rate`; see above), 0 for none")
	durationVar(fs, &f.crashAfter, "crash-after", "the crash and the pause come this `time` after the warm-up")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fs.StringVar(&f.out, "out", "", "write result.json, series.csv and SVG plots into this `directory`")
}

func runBalance(args []string, stdout, stderr io.Writer) error {
	f := defaultBalanceFlags()
	fs, held := newFlagSet("balance")
	f.register(fs)
	startProfile := processFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), balanceHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, held, args, stdout); err != nil {
		return err
	}
	p, err := f.params()
	if err != nil {
		return err
	}
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	stopSignals := interruptible(&p, stderr)
	bar := newProgress(stderr, f.quiet)
	p.Overloaded = func(nodes int) { bar.setDetail(overThres(nodes)) }
	res, err := sim.RunBalance(p, bar.update)
	bar.finish()
	stopSignals()
	if perr := stopProfile(); err == nil && perr != nil {
		err = fmt.Errorf("profile: %w", perr)
	}
	if err != nil {
		return err
	}
	doc := balanceDoc{Command: commandLine("balance", args), Workload: workloadName(p), Settings: settings(fs), Result: res}
	if f.out != "" {
		if err := writeBalance(f.out, doc, p); err != nil {
			return err
		}
	}
	if f.asJSON {
		if err := writeJSON(stdout, doc); err != nil {
			return err
		}
	} else {
		printBalance(stdout, doc, p)
	}
	if res.Check != "ok" {
		return errFailed
	}
	if res.InterruptedAt > 0 {
		return errInterrupted
	}
	return nil
}

// errInterrupted ends a run that Ctrl-C cut short after its result was printed.
var errInterrupted = errors.New("interrupted: the result above is of the run up to then")

// interruptible lets the first Ctrl-C (or SIGTERM) end the run at the next simulated second,
// with its result, checks and plots as at a normal end; a second one quits at once. It returns
// the function that stops listening.
func interruptible(p *sim.BalanceParams, stderr io.Writer) (stop func()) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		cancel() // from now on a signal does what it does by default: the process ends
	}()
	var once sync.Once
	p.Interrupted = func() bool {
		if ctx.Err() == nil {
			return false
		}
		once.Do(func() {
			fmt.Fprintln(stderr, "\nskipsim balance: interrupted; ending the run at this second and checking it (Ctrl-C again to quit at once)")
		})
		return true
	}
	return cancel
}

// params checks the flags and turns them into the run's parameters.
func (f *balanceFlags) params() (sim.BalanceParams, error) {
	var p sim.BalanceParams
	if err := f.validate(); err != nil {
		return p, err
	}
	alg, err := nixmig.ParseAlgorithm(f.algorithm)
	if err != nil {
		return p, badUsage("--algorithm: %v", err)
	}
	smartUNL, err := oneOf("unl", f.unl, map[string]bool{"smart": true, "random": false})
	if err != nil {
		return p, err
	}
	place, err := oneOf("rnp", f.rnp, map[string]nixmig.Placement{
		"smart": nixmig.PlaceSmart, "random": nixmig.PlaceRandom, "adversarial": nixmig.PlaceAdversarial})
	if err != nil {
		return p, err
	}
	w, words, err := f.workload()
	if err != nil {
		return p, err
	}
	p = newParams(f.runFlags, w)
	p.Seed, p.Words, p.PrefixLen, p.Sample, p.RingEvery = f.seed, words, f.prefix, f.sample, f.ringEvery
	p.SnapshotsAt = []time.Duration{f.warmup}
	if f.work == "dynamic" {
		p.SnapshotsAt = append(p.SnapshotsAt, dynamicSnapshots(f.warmup)...)
	}
	p.CrashFraction, p.CrashAfter = f.crash, f.crashAfter
	p.PauseFraction, p.PauseFor = f.pause, f.pauseFor
	p.Clients = f.clients
	p.Net.Loss, p.Net.Refuse = f.loss, f.refuse
	b := &p.Net.Node.Balance
	b.Algorithm, b.SmartUNL, b.Placement = alg, smartUNL, place
	b.Thres, b.OverThres, b.A, b.TTL, b.TTLMax = f.thres, f.overThres, f.a, f.ttl, f.ttlMax
	b.Headroom = f.headroom
	b.ThresholdDelta, b.ThresholdSamples = f.delta, f.samples
	if f.faithful {
		*b = b.Faithful()
	}
	if f.window > 0 {
		b.Window = f.window
	}
	if p.Thresholds, err = parseThresholds(f.thresholds); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		return p, badUsage("%v", err)
	}
	return p, checkFeasible(p)
}

// parseThresholds reads --thresholds: empty, or positive numbers separated by commas.
func parseThresholds(list string) ([]float64, error) {
	if list == "" {
		return nil, nil
	}
	var ts []float64
	for _, s := range strings.Split(list, ",") {
		t, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(t > 0) || math.IsInf(t, 1) {
			return nil, badUsage("--thresholds must be positive numbers separated by commas (got %q in %q)", s, list)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// checkFeasible refuses a workload that no assignment of its keys to the nodes can balance
// (SPEC §12): running it would only show every balancer failing.
func checkFeasible(p sim.BalanceParams) error {
	if f := p.Feasibility(); f.Decided && !f.Feasible {
		return badUsage("the workload cannot be balanced: %s; lower --rate, spread the queries wider or add --nodes", f)
	}
	return nil
}

func (f *balanceFlags) validate() error {
	if err := f.runFlags.validate(); err != nil {
		return err
	}
	for _, c := range []struct {
		name     string
		v        float64
		interval string
	}{
		{"width", f.width, "(0,1]"}, {"percent", f.percent, "(0,100]"}, {"a", f.a, "(0,1]"},
		{"loss", f.loss, "[0,1)"}, {"crash", f.crash, "[0,1)"}, {"pause", f.pause, "[0,1)"}, {"headroom", f.headroom, "[0,1)"},
	} {
		if err := checkIn(c.name, c.v, c.interval); err != nil {
			return err
		}
	}
	if err := checkIn("theta", f.theta, "(0,inf)"); err != nil {
		return err
	}
	if err := checkPositive("thres", f.thres); err != nil {
		return err
	}
	if !(f.overThres > f.thres) {
		return badUsage("--over-thres must exceed --thres (got %g and %g)", f.overThres, f.thres)
	}
	switch {
	case f.ttl < 1 || f.ttl > nixmig.MaxTTL:
		return badUsage("--ttl must lie in [1, %d] (got %d)", nixmig.MaxTTL, f.ttl)
	case f.ttlMax < 0 || f.ttlMax > nixmig.MaxTTL:
		return badUsage("--ttl-max must lie in [0, %d] (got %d)", nixmig.MaxTTL, f.ttlMax)
	case !(f.delta > 1 && f.delta <= nixmig.MaxThresholdDelta):
		return badUsage("--delta must lie in (1, %d] (got %g)", nixmig.MaxThresholdDelta, f.delta)
	case f.samples < 0 || f.samples > nixmig.MaxThresholdSamples:
		return badUsage("--samples must lie in [0, %d] (got %d)", nixmig.MaxThresholdSamples, f.samples)
	case f.buckets < 1:
		return badUsage("--buckets must be at least 1 (got %d)", f.buckets)
	case f.rangeKeys < 1:
		return badUsage("--range-keys must be at least 1 (got %d)", f.rangeKeys)
	case f.prefix < 1:
		return badUsage("--prefix must be at least 1 (got %d)", f.prefix)
	case f.work != "words" && f.keys < f.nodes:
		return badUsage("--keys must be at least --nodes (got %d keys for %d nodes)", f.keys, f.nodes)
	case f.words != "" && f.work != "words":
		return badUsage("--words needs --workload words")
	case f.sample <= 0 || f.sample%time.Second != 0:
		return badUsage("--sample must be a positive whole number of seconds (got %s)", secs(f.sample))
	case f.ringEvery < 0 || f.ringEvery%time.Second != 0:
		return badUsage("--ring-every must be a whole number of seconds (got %s)", secs(f.ringEvery))
	case f.crash+f.pause >= 1:
		return badUsage("--crash and --pause together must stay under 1 (got %g and %g)", f.crash, f.pause)
	case f.pause > 0 && f.pauseFor <= 0:
		return badUsage("--pause needs a positive --pause-for (got %s)", secs(f.pauseFor))
	case !(f.clients >= 0) || math.IsInf(f.clients, 1):
		return badUsage("--clients must be a rate of 0 or more operations per second (got %g)", f.clients)
	case f.window == 0 && f.warmup == 0:
		return badUsage("--window must be positive (it defaults to --warmup, which is 0)")
	}
	if err := checkDuration("window", f.window, true); err != nil {
		return err
	}
	if err := checkDuration("pause-for", f.pauseFor, true); err != nil {
		return err
	}
	return checkDuration("crash-after", f.crashAfter, true)
}

// workload builds the query workload the flags name.
func (f *balanceFlags) workload() (workload.Workload, *workload.Words, error) {
	var w workload.Workload
	switch f.work {
	case "pulse":
		w = workload.Pulse{K: f.keys, RangeKeys: f.rangeKeys, Width: f.width, Offset: workload.Centre}
	case "zipf":
		w = workload.Zipf{K: f.keys, RangeKeys: f.rangeKeys, Buckets: f.buckets, Theta: f.theta}
	case "dynamic":
		w = newDynamic(f.keys, f.rangeKeys, f.warmup)
	case "hot":
		w = workload.HotRanges{K: f.keys, RangeKeys: f.rangeKeys, Percent: f.percent}
	case "uniform":
		w = workload.Uniform{K: f.keys, RangeKeys: f.rangeKeys}
	case "words":
		words, err := loadWords(f.words, f.keys, f.nodes)
		return nil, words, err
	default:
		return nil, nil, badUsage("--workload must be pulse, zipf, dynamic, hot, uniform or words (got %q)", f.work)
	}
	if err := w.Validate(); err != nil {
		return nil, nil, badUsage("--workload %s: %v", f.work, err)
	}
	return w, nil, nil
}

// loadWords reads the words workload's file, at most limit words (0: all), enough for nodes.
func loadWords(path string, limit, nodes int) (*workload.Words, error) {
	const hint = "the project's word list is ../shared/data/en_50k.txt"
	if path == "" {
		return nil, badUsage("the words workload needs --words FILE (%s)", hint)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, badUsage("--words: %v (%s)", err, hint)
	}
	defer file.Close()
	words, err := workload.LoadWords(file, limit)
	if err != nil {
		return nil, badUsage("--words %s: %v", path, err)
	}
	if words.Len() < nodes {
		return nil, badUsage("--words %s: %d words cannot be spread over %d nodes", path, words.Len(), nodes)
	}
	return words, nil
}

// oneOf maps a flag's value to its meaning, or reports the choices.
func oneOf[T any](name, v string, choices map[string]T) (T, error) {
	if c, ok := choices[v]; ok {
		return c, nil
	}
	names := make([]string, 0, len(choices))
	for n := range choices {
		names = append(names, n)
	}
	sort.Strings(names)
	var zero T
	return zero, badUsage("--%s must be one of %s (got %q)", name, strings.Join(names, ", "), v)
}

// settings lists every flag's value, defaults included.
func settings(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(fl *flag.Flag) { m[fl.Name] = fl.Value.String() })
	return m
}

func workloadName(p sim.BalanceParams) string {
	if p.Words != nil {
		return fmt.Sprintf("words(%d words, prefix %d)", p.Words.Len(), p.PrefixLen)
	}
	return p.Workload.Name()
}

// balanceDoc is the JSON form of one balancing run: how it was asked for and what it measured.
type balanceDoc struct {
	Command  string             `json:"command"`
	Workload string             `json:"workload"`
	Settings map[string]string  `json:"settings"`
	Result   *sim.BalanceResult `json:"result"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeBalance writes the files of --out.
func writeBalance(dir string, doc balanceDoc, p sim.BalanceParams) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file, err := os.Create(filepath.Join(dir, "result.json"))
	if err != nil {
		return err
	}
	if err := writeJSON(file, doc); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	runs := []*sim.BalanceResult{doc.Result}
	if err := seriesTable(runs).WriteCSV(filepath.Join(dir, "series.csv")); err != nil {
		return err
	}
	title := fmt.Sprintf("%s on %s, %d nodes, seed %d", doc.Result.Algorithm, doc.Workload, p.Nodes, p.Seed)
	if len(doc.Result.Ring) > 0 {
		if err := ringTable(doc.Result).WriteCSV(filepath.Join(dir, "ring.csv")); err != nil {
			return err
		}
		if err := plotRing(filepath.Join(dir, "ring.png"), title, p, doc.Result); err != nil {
			return err
		}
	}
	if err := plotSnapshots(filepath.Join(dir, "loads.svg"), title, p, doc.Result); err != nil {
		return err
	}
	return plotSeries(dir, title, p, runs)
}

func printBalance(w io.Writer, doc balanceDoc, p sim.BalanceParams) {
	r := doc.Result
	fmt.Fprintf(w, "skipsim balance: %s on %s, %d nodes, %.4g queries/s, seed %d\n\n", r.Algorithm, doc.Workload, p.Nodes, p.Rate, p.Seed)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(t, "workload\t%s\n", r.Feasibility)
	if r.FeasibilityAfterCrash != "" {
		fmt.Fprintf(t, "after the crash\t%s\n", r.FeasibilityAfterCrash)
	}
	if r.InterruptedAt > 0 {
		fmt.Fprintf(t, "interrupted\tat %.0f s of %.0f (Ctrl-C): what follows is of the run up to then\n", r.InterruptedAt, p.Duration.Seconds())
	}
	if r.Completed {
		fmt.Fprintf(t, "completion\t%.0f s after the warm-up\n", r.CompletionTime)
	} else if r.InterruptedAt > 0 {
		fmt.Fprintf(t, "completion\tnot reached before the interruption: %d nodes still overloaded\n", r.OverloadedEnd)
	} else {
		fmt.Fprintf(t, "completion\tnot reached: %d nodes still overloaded after %.0f s of balancing\n", r.OverloadedEnd, (p.Duration - p.Warmup).Seconds())
	}
	fmt.Fprintf(t, "messages\t%d balancing (%d more for query routing)\n", r.Messages, r.QueryMessages)
	per := func(bound int) string {
		if bound <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(r.Items)/float64(bound))
	}
	fmt.Fprintf(t, "items moved\t%d (SPEC §10 lower bound %d, ratio %s; placement bound %d, ratio %s)\n",
		r.Items, r.LowerBound, per(r.LowerBound), r.PlacementBound, per(r.PlacementBound))
	if wm := r.WeightedMove; wm != nil {
		outcome := "every node under thres"
		if !wm.Balanced {
			outcome = fmt.Sprintf("stopped with a node at %.1f", wm.MaxLoad)
		}
		fmt.Fprintf(t, "Weighted-Move\t%d items (ratio %s) in %d iterations, %s, %d slices (Slicer's algorithm run centrally on the loads at the start, many slices a node)\n",
			wm.Items, per(wm.Items), wm.Iterations, outcome, wm.Slices)
	}
	fmt.Fprintf(t, "MIG:NIX\t%d:%d = %.2f (%d split leaves)\n", r.MIG, r.NIX, r.MigNix, r.SplitLeaves)
	fmt.Fprintf(t, "remote search\t%d probes, %d UNL hits, %d of %d remote tries accepted\n", r.Probes, r.UNLHits, r.RemoteOK, r.RemoteTries)
	fmt.Fprintf(t, "waves\t%d started (%d settling), %d ok (%d out of reach), %d failed; %d times a neighbour that refused one told its initiator it went free\n",
		r.WavesStarted, r.SettlingWaves, r.WavesOK, r.WavesOutOfReach, r.WavesFailed, r.LockFrees)
	if r.Numbered > 0 {
		fmt.Fprintf(t, "acknowledged messages\t%d balancing messages numbered after a loss was seen, %d of them sent again\n", r.Numbered, r.Resent)
	}
	fmt.Fprintf(t, "Gini\t%.3f → %.3f (max/mean load %.2f → %.2f)\n", r.GiniStart, r.GiniEnd, r.MaxMeanStart, r.MaxMeanEnd)
	fmt.Fprintf(t, "overloaded\t%d → %d nodes\n", r.OverloadedStart, r.OverloadedEnd)
	fmt.Fprintf(t, "queries\t%d issued (%s), %d failed, %d sent again after a timeout\n", r.Queries, r.QueryModel, r.QueriesFailed, r.QueryRetries)
	if p.Net.Refuse {
		fmt.Fprintf(t, "refused\t%d lookups and range queries sent on at once by another link\n", r.Rerouted)
	}
	if p.CrashFraction > 0 {
		fmt.Fprintf(t, "crash\t%d nodes, %.0f s after the warm-up; %d items lost with them (no replication yet)\n", r.Crashed, p.CrashAfter.Seconds(), r.ItemsLost)
	}
	if p.PauseFraction > 0 {
		fmt.Fprintf(t, "pause\t%d nodes frozen for %.0f s, %.0f s after the warm-up\n", r.Paused, p.PauseFor.Seconds(), p.CrashAfter.Seconds())
	}
	if c := r.Clients; c != nil {
		fmt.Fprintf(t, "clients\t%d reads, %d writes checked: %d answered LOST, %d failed, %d violations\n", c.Reads, c.Writes, c.Lost, c.Failed, c.Violations)
		for _, v := range c.Examples {
			fmt.Fprintf(t, "\t%s\n", v)
		}
	}
	lk := r.LookupsAfter
	fmt.Fprintf(t, "lookups after\t%d from random nodes: %d wrong, %d failed; hops mean %.2f, p99 %d (log2 N %.2f)\n",
		lk.Count, lk.Wrong, lk.Failed, lk.Mean, lk.P99, math.Log2(float64(p.Nodes)))
	fmt.Fprintf(t, "check\t%s (structure quiet %.0f s after balancing and every lease ended)\n", r.Check, r.SettleTime)
	fmt.Fprintf(t, "wall time\t%.1f s\n", r.Wall)
	t.Flush()
}
