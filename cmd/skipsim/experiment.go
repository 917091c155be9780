package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skiprange/skiprange/nixmig"
)

// experimentDef is one named experiment of 'skipsim experiment'.
type experimentDef struct {
	name, about string
	// points says what --points holds, full and quick are its lists without --points and with
	// --quick; points is "" for an experiment that takes no --points.
	points      string
	full, quick []float64
	// extra names the flags beyond the common ones it accepts ("full", "words", "algorithms").
	extra []string
	// algorithms: the balancers a sweep runs unless --algorithms names others.
	algorithms []nixmig.Algorithm
	run        func(e *expEnv) error
}

var experiments = []experimentDef{
	{name: "sweep-pulse", run: sweepPulse, points: "pulse widths in %",
		full: []float64{3, 5, 10, 20, 30, 50}, quick: []float64{10, 30}, extra: []string{"algorithms"},
		algorithms: []nixmig.Algorithm{nixmig.NIXMIG, nixmig.NIXOnly, nixmig.MIGOnly, nixmig.ItemBalancing, nixmig.Threshold},
		about: "NIXMIG, NIX, MIG, Item Balancing and Ganesan et al.'s threshold algorithm on pulses of several\n" +
			"widths: completion time, messages, items and their ratio to the lower bound, ratios to IB,\n" +
			"NIXMIG's speed-up over NIX (figs. 4.14–4.15)."},
	{name: "sweep-zipf", run: sweepZipf, points: "zipf θ values",
		full: []float64{1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}, quick: []float64{1, 3}, extra: []string{"algorithms"},
		algorithms: []nixmig.Algorithm{nixmig.NIXMIG, nixmig.ItemBalancing, nixmig.Threshold},
		about: "NIXMIG, Item Balancing and the threshold algorithm on zipf(θ, 10 buckets): the same metrics\n" +
			"and ratios, and whether each θ can be balanced at all (feasibility)."},
	{name: "grid", run: grid,
		about: "NIXMIG with overThres {160,280,400,500} × ttl {1,3,5,10} ({160,400} × {1,5} with --quick)\n" +
			"under a 10% pulse: items/messages/time laid out as the thesis's Table 4.2, its numbers beside."},
	{name: "scale", run: scale, points: "node counts (--full adds 25000 and 50000)", extra: []string{"full"},
		full: []float64{500, 5000}, quick: []float64{25, 250},
		about: "NIXMIG on a 10% pulse over growing networks, keys and queries/s growing with the nodes (the\n" +
			"--keys and --rate of --nodes nodes): messages, time, items, ratios to the first size (Table 4.3).\n" +
			"Unless --join-interval is given, joins come closer together on large networks, so that no build\n" +
			"takes more than 250 s of virtual time (10 ms between joins at 25,000 nodes, 5 ms at 50,000)."},
	{name: "dynamic", run: dynamic,
		about: "NIXMIG under the dynamic workload (a 12% pulse moving 150 s after the warm-up) for the whole\n" +
			"--duration: Gini, overloaded nodes, messages/s, keys/s over time, load snapshots around the move."},
	{name: "unl", run: unl, points: "pulse widths in %",
		full: []float64{5, 10, 15, 20, 25}, quick: []float64{10, 20},
		about: "NIXMIG with SmartUNL against random probing on pulses: probe messages, success ratio of the\n" +
			"remote tries, completion time (Table 4.5)."},
	{name: "rnp", run: rnp, points: "hot-range percentages",
		full: []float64{10, 20, 30, 40, 50}, quick: []float64{10, 30},
		about: "NIXMIG with SmartRNP's placement against random and adversarial placement on hot ranges:\n" +
			"items moved and their ratios (Table 4.6)."},
	{name: "words", run: wordsExperiment, points: "prefix lengths in bytes", extra: []string{"words"},
		full: []float64{4, 5, 10}, quick: []float64{4, 10},
		about: "NIXMIG on prefix queries over a word list (--words FILE, e.g. ../shared/data/en_50k.txt;\n" +
			"--keys limits the words read): time, messages, MIG:NIX, feasibility (Table 4.7)."},
	{name: "faults", run: faults,
		about: "NIXMIG on a 10% pulse without faults, with 1% message loss, and with 5% of the nodes crashing\n" +
			"20 s after the warm-up: completion, items, messages, failed queries, invariant checks."},
}

const experimentUsage = `Usage: skipsim experiment NAME [flags]

Runs a named series of balancing runs, every setting once per seed 1..--seeds, up to --parallel
at a time, and prints a Markdown table (mean ± sample standard deviation over the seeds, the
exact command line and settings in its notes, the thesis's numbers beside ours where SPEC §13
gives them). Into --out (default out/NAME) it writes runs.csv (one row per run), NAME.csv and
NAME.md (the table) and SVG plots. Exit status 1 when a run broke an invariant.

Defaults are the thesis's setting: 500 nodes, 100 keys per node, 250 queries/s of 100-key
ranges, warm-up 700 s (also the load window), 4000 s, thres 60, overThres 400, a 0.5, ttl 5.
--quick scales it down for smoke tests: 50 nodes, 100 keys per node, 25 queries/s, warm-up 100 s,
1200 s, stop 50 s after completion, 1 seed, fewer points; flags given explicitly still win.

Experiments:
`

func experimentList() string {
	var b strings.Builder
	for _, d := range experiments {
		fmt.Fprintf(&b, "  %-12s %s\n", d.name, strings.ReplaceAll(d.about, "\n", "\n               "))
	}
	return b.String()
}

const experimentExamples = `
Examples:
  skipsim experiment sweep-pulse --quick
  skipsim experiment grid --seeds 5 --parallel 8 --out out/grid
  skipsim experiment words --words ../shared/data/en_50k.txt --quick
  skipsim experiment NAME --help     (the flags)
`

// expEnv is one experiment being run: its settings, its points and where its output goes.
type expEnv struct {
	def experimentDef
	runFlags
	seeds, parallel int
	out, words      string
	algorithmList   string             // --algorithms as given
	algorithms      []nixmig.Algorithm // the sweep's balancers
	quick, full     bool
	joinGiven       bool      // --join-interval was given: scale keeps it at every size
	pointList       string    // --points as given
	points          []float64 // --points parsed; nil: the experiment's own
	command         string
	stdout, stderr  io.Writer
	pts             []*point
}

func runExperiment(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badUsage("which experiment? One of:\n%s", experimentList())
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, experimentUsage+experimentList()+experimentExamples)
		return flag.ErrHelp
	}
	var def *experimentDef
	for i := range experiments {
		if experiments[i].name == args[0] {
			def = &experiments[i]
		}
	}
	if def == nil {
		return badUsage("unknown experiment %q; one of:\n%s", args[0], experimentList())
	}
	e := &expEnv{def: *def, command: commandLine("experiment", args), stdout: stdout, stderr: stderr, seeds: 3, parallel: runtime.NumCPU(),
		runFlags: defaultRunFlags(0)}
	fs, held := newFlagSet("experiment " + def.name)
	e.register(fs)
	startHugePages := hugePagesFlag(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: skipsim experiment %s [flags]\n\n%s\n", def.name, def.about)
		if def.points != "" {
			fmt.Fprintf(fs.Output(), "--points: %s; default %s, with --quick %s.\n", def.points, floats(def.full), floats(def.quick))
		}
		fmt.Fprintf(fs.Output(), "\nExample:\n  skipsim experiment %s --quick --out /tmp/%s\n\nFlags:\n", def.name, def.name)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, held, args[1:], stdout); err != nil {
		return err
	}
	if err := e.settle(fs); err != nil {
		return err
	}
	defer startHugePages()()
	if err := def.run(e); err != nil {
		return err
	}
	return e.failures()
}

func (e *expEnv) register(fs *flag.FlagSet) {
	e.runFlags.register(fs, "number of integer `keys` (default 100 per node)")
	fs.IntVar(&e.seeds, "seeds", e.seeds, "run every setting with the seeds 1..`N`")
	fs.IntVar(&e.parallel, "parallel", e.parallel, "run up to `P` runs at once")
	fs.StringVar(&e.out, "out", "", "output `directory` (default out/NAME)")
	fs.BoolVar(&e.quick, "quick", false, "the scaled-down setting for smoke tests (see 'skipsim experiment --help')")
	fs.BoolVar(&e.full, "full", false, "scale: also 25000 and 50000 nodes")
	fs.StringVar(&e.words, "words", "", "words: `file` of \"word count\" lines (e.g. ../shared/data/en_50k.txt)")
	fs.StringVar(&e.pointList, "points", "", "comma-separated `list` replacing the experiment's points (see above)")
	fs.StringVar(&e.algorithmList, "algorithms", "", "sweeps: comma-separated `list` of the balancers to run (nixmig, nix, mig, ib, threshold) instead of the sweep's own (see above)")
}

// settle applies --quick to the flags not given, fills the defaults that depend on others and
// checks everything.
func (e *expEnv) settle(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"full", "words", "algorithms"} {
		if given[name] && !slices.Contains(e.def.extra, name) {
			return badUsage("--%s does not apply to %s", name, e.def.name)
		}
	}
	if e.quick {
		quick := []struct {
			flag string
			set  func()
		}{
			{"nodes", func() { e.nodes = 50 }}, {"rate", func() { e.rate = 25 }},
			{"warmup", func() { e.warmup = 100 * time.Second }}, {"duration", func() { e.duration = 1200 * time.Second }},
			{"stop-after", func() { e.stopAfter = 50 * time.Second }}, {"seeds", func() { e.seeds = 1 }},
		}
		for _, q := range quick {
			if !given[q.flag] {
				q.set()
			}
		}
	}
	if !given["keys"] {
		e.keys = 100 * e.nodes
	}
	e.joinGiven = given["join-interval"]
	if e.out == "" {
		e.out = filepath.Join("out", e.def.name)
	}
	if e.pointList != "" {
		if e.def.points == "" {
			return badUsage("%s takes no --points", e.def.name)
		}
		for _, s := range strings.Split(e.pointList, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return badUsage("--points: %q is not a number", s)
			}
			e.points = append(e.points, v)
		}
	}
	e.algorithms = e.def.algorithms
	if e.algorithmList != "" {
		e.algorithms = nil
		for _, s := range strings.Split(e.algorithmList, ",") {
			alg, err := nixmig.ParseAlgorithm(strings.TrimSpace(s))
			if err != nil || alg == nixmig.None {
				return badUsage("--algorithms: %q is not a balancer (want nixmig, nix, mig, ib or threshold)", s)
			}
			if slices.Contains(e.algorithms, alg) {
				return badUsage("--algorithms names %s twice", alg)
			}
			e.algorithms = append(e.algorithms, alg)
		}
	}
	if err := e.runFlags.validate(); err != nil {
		return err
	}
	switch {
	case e.warmup == 0:
		return badUsage("--warmup must be positive: it is also the load window")
	case e.keys < e.nodes:
		return badUsage("--keys must be at least --nodes (got %d keys for %d nodes)", e.keys, e.nodes)
	case e.seeds < 1:
		return badUsage("--seeds must be at least 1 (got %d)", e.seeds)
	case e.parallel < 1:
		return badUsage("--parallel must be at least 1 (got %d)", e.parallel)
	}
	return nil
}

// choose returns --points when given, else the experiment's quick or full list.
func (e *expEnv) choose(full, quick []float64) []float64 {
	switch {
	case e.points != nil:
		return e.points
	case e.quick:
		return quick
	}
	return full
}

// floats writes a list as --points takes it.
func floats(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
