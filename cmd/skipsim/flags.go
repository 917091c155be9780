package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/skiprange/skiprange/testnet/sim"
	"github.com/skiprange/skiprange/testnet/workload"
)

// seconds is a flag.Value for a span of virtual time (one unit = 1 s): a Go duration such as
// "700s" or "10m", or a plain number of seconds. It prints in seconds ("700s").
type seconds time.Duration

func (s *seconds) String() string { return secs(time.Duration(*s)) }

// secs writes a span of virtual time in seconds: "700s".
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) + "s" }

func (s *seconds) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) {
			return errors.New("want a duration such as 700s or 10m, or a number of seconds")
		}
		if math.Abs(f)*float64(time.Second) >= math.MaxInt64 {
			return errors.New("too large")
		}
		d = time.Duration(f * float64(time.Second))
	}
	*s = seconds(d)
	return nil
}

// durationVar registers a flag of virtual time.
func durationVar(fs *flag.FlagSet, d *time.Duration, name, usage string) {
	fs.Var((*seconds)(d), name, usage)
}

// newFlagSet returns a flag set whose own output (help, or an error followed by the whole help)
// is held back in the returned buffer: parseFlags prints help asked for on stdout and turns an
// error into one usage message.
func newFlagSet(name string) (*flag.FlagSet, *bytes.Buffer) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	return fs, &out
}

// parseFlags parses args and rejects stray arguments. Help goes to stdout and returns
// flag.ErrHelp (exit 0); a bad flag returns a usageError (exit 2).
func parseFlags(fs *flag.FlagSet, held *bytes.Buffer, args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			_, _ = stdout.Write(held.Bytes())
			return err
		}
		return badUsage("%v", err)
	}
	if fs.NArg() > 0 {
		return badUsage("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// processFlags registers --cpuprofile, --memprofile and --huge-pages. The returned start
// begins the CPU profile if one was asked for and the heap's huge pages unless refused, and
// gives the function that ends both and writes the heap profile. The simulated network is gone
// by then: the heap profile is for what the run allocated, where (go tool pprof
// -sample_index=alloc_space).
func processFlags(fs *flag.FlagSet) (start func() (stop func() error, err error)) {
	cpuPath := fs.String("cpuprofile", "", "write a Go CPU profile of the run to `file` (read it with go tool pprof)")
	memPath := fs.String("memprofile", "", "write a Go heap profile of the run's allocations to `file`")
	startHugePages := hugePagesFlag(fs)
	return func() (func() error, error) {
		var cpu *os.File
		if *cpuPath != "" {
			f, err := os.Create(*cpuPath)
			if err != nil {
				return nil, err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return nil, err
			}
			cpu = f
		}
		stopHugePages := startHugePages()
		return func() error {
			stopHugePages()
			if cpu != nil {
				pprof.StopCPUProfile()
				if err := cpu.Close(); err != nil {
					return err
				}
			}
			if *memPath == "" {
				return nil
			}
			f, err := os.Create(*memPath)
			if err != nil {
				return err
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}, nil
	}
}

// hugePagesFlag registers --huge-pages. The returned start keeps the heap on huge pages unless
// the flag says not to, until the function it returns is called.
func hugePagesFlag(fs *flag.FlagSet) (start func() (stop func())) {
	on := fs.Bool("huge-pages", true, "on Linux, ask the kernel to back the heap with transparent huge pages when its setting leaves that to each process (\"madvise\"): a large run reads other nodes' state all over gigabytes of heap, and 2 MB pages spare it most address-translation misses (a 50,000-node balancing run: 42 minutes instead of 53)")
	return func() func() {
		if !*on {
			return func() {}
		}
		stop := make(chan struct{})
		go keepHeapOnHugePages(stop)
		return func() { close(stop) }
	}
}

// commandLine renders the arguments after the subcommand as one line, for notes and JSON.
func commandLine(cmd string, args []string) string {
	return strings.TrimSpace("skipsim " + cmd + " " + strings.Join(args, " "))
}

// checkIn reports a value outside an interval written as in mathematics: "[0,1)", "(0,1]",
// "(0,100]". NaN is always outside.
func checkIn(name string, v float64, interval string) error {
	lo, _ := strconv.ParseFloat(interval[1:strings.IndexByte(interval, ',')], 64)
	hi, _ := strconv.ParseFloat(interval[strings.IndexByte(interval, ',')+1:len(interval)-1], 64)
	above := v > lo || (interval[0] == '[' && v == lo)
	below := v < hi || (interval[len(interval)-1] == ']' && v == hi)
	if !(above && below) {
		return badUsage("--%s must lie in %s (got %g)", name, interval, v)
	}
	return nil
}

// checkPositive reports a value that is not a positive finite number.
func checkPositive(name string, v float64) error {
	if !(v > 0) || math.IsInf(v, 1) {
		return badUsage("--%s must be a positive number (got %g)", name, v)
	}
	return nil
}

// checkDuration reports a negative span of time, or a zero one when zero is not allowed.
func checkDuration(name string, d time.Duration, allowZero bool) error {
	switch {
	case d < 0:
		return badUsage("--%s must not be negative (got %s)", name, secs(d))
	case d == 0 && !allowZero:
		return badUsage("--%s must be positive (got 0)", name)
	}
	return nil
}

// runFlags are the flags balance and experiment share: the size of the network, the query rate
// and the clock of a run.
type runFlags struct {
	nodes, keys                 int
	rate                        float64
	duration, warmup, stopAfter time.Duration
	// requestTimeout is how long a node waits for a query's answer before sending it again.
	requestTimeout time.Duration
	// queries is how queries reach the nodes: "routed" or "direct" (sim.QueryModel).
	queries      string
	joinInterval time.Duration
	quiet        bool
}

// defaultRunFlags are the thesis's settings (SPEC §12) with keys keys.
func defaultRunFlags(keys int) runFlags {
	return runFlags{nodes: 500, keys: keys, rate: 250, duration: 4000 * time.Second,
		warmup: 700 * time.Second, stopAfter: 100 * time.Second, requestTimeout: queryTimeout,
		queries: "routed", joinInterval: sim.DefaultJoinInterval}
}

func (r *runFlags) register(fs *flag.FlagSet, keysUsage string) {
	fs.IntVar(&r.nodes, "nodes", r.nodes, "number of `nodes`, placed evenly over the keys")
	fs.IntVar(&r.keys, "keys", r.keys, keysUsage)
	fs.Float64Var(&r.rate, "rate", r.rate, "range queries per second (Poisson arrivals)")
	durationVar(fs, &r.duration, "duration", "longest run, from the first query, in virtual `time` (e.g. 4000s)")
	durationVar(fs, &r.warmup, "warmup", "queries only, no balancing, for this `time`; the balancers start after it")
	durationVar(fs, &r.stopAfter, "stop-after", "end the run this `time` after every node got under thres (0: run the whole --duration)")
	durationVar(fs, &r.requestTimeout, "request-timeout", "a query not answered within this `time` is sent again (at most 3 attempts); every attempt's reads count in the nodes' load, so a timeout shorter than the slowest routes (one unit per hop) inflates the load")
	fs.StringVar(&r.queries, "queries", r.queries, "how queries reach the nodes: `routed` (client scans routed hop by hop; SmartUNL's hints ride on them) or direct (each query's reads counted at its keys' owners at once, without messages: for runs of tens of thousands of nodes)")
	durationVar(fs, &r.joinInterval, "join-interval", "mean virtual `time` between two joins while the overlay is built")
	fs.BoolVar(&r.quiet, "quiet", false, "no progress output on stderr")
}

// queryModel returns the --queries choice.
func (r *runFlags) queryModel() (sim.QueryModel, error) {
	switch r.queries {
	case "routed":
		return sim.QueriesRouted, nil
	case "direct":
		return sim.QueriesDirect, nil
	}
	return 0, badUsage("--queries must be routed or direct (got %q)", r.queries)
}

func (r *runFlags) validate() error {
	switch {
	case r.nodes < 2:
		return badUsage("--nodes must be at least 2 (got %d)", r.nodes)
	case r.keys < 0:
		return badUsage("--keys must not be negative (got %d)", r.keys)
	}
	if err := checkPositive("rate", r.rate); err != nil {
		return err
	}
	if err := checkDuration("duration", r.duration, false); err != nil {
		return err
	}
	if err := checkDuration("warmup", r.warmup, true); err != nil {
		return err
	}
	if err := checkDuration("stop-after", r.stopAfter, true); err != nil {
		return err
	}
	if err := checkDuration("request-timeout", r.requestTimeout, false); err != nil {
		return err
	}
	if err := checkDuration("join-interval", r.joinInterval, false); err != nil {
		return err
	}
	if _, err := r.queryModel(); err != nil {
		return err
	}
	if r.duration <= r.warmup {
		return badUsage("--duration (%s) must exceed --warmup (%s)", secs(r.duration), secs(r.warmup))
	}
	return nil
}

// queryTimeout is how long the simulated clients of a balancing run wait for an answer before
// they send a query again. Every attempt's reads count in the nodes' load, and the thesis's
// simulator counts each query once; routes through a packed, churning hot region can take more
// than 30 hops (30 s), so the overlay's 30 s default would have retried queries inflate the
// measured load above thres on the narrowest pulses (JOURNAL.md, "The request timeout").
const queryTimeout = 120 * time.Second

// sampleEvery is the period of the metric series of every run.
const sampleEvery = 10 * time.Second

// newParams returns the parameters of one run of w under r with the thesis's balancing
// parameters (SPEC §9) and a load window as long as the warm-up, as in the thesis.
func newParams(r runFlags, w workload.Workload) sim.BalanceParams {
	net := sim.DefaultConfig()
	net.Node.Balance.Window = r.warmup
	net.Node.SkipGraph.RequestTimeout = r.requestTimeout
	queries, _ := r.queryModel() // checked by validate
	return sim.BalanceParams{
		Nodes: r.nodes, Keys: r.keys, Seed: 1, Workload: w, Rate: r.rate, Queries: queries,
		JoinInterval: r.joinInterval, Duration: r.duration, Warmup: r.warmup, StopAfter: r.stopAfter,
		Sample: sampleEvery, Net: net,
	}
}

// dynamicMove is when the dynamic workload's pulse moves: 150 s after the warm-up, which is the
// thesis's 850 s with its 700 s warm-up.
func dynamicMove(warmup time.Duration) time.Duration { return warmup + 150*time.Second }

// newDynamic is SPEC §12's dynamic workload over keys 0..keys-1, moving dynamicMove(warmup).
func newDynamic(keys, rangeKeys int, warmup time.Duration) workload.Dynamic {
	w := workload.DefaultDynamic(keys)
	w.RangeKeys = rangeKeys
	w.MoveAt = dynamicMove(warmup).Seconds()
	return w
}

// dynamicSnapshots are the thesis's snapshot instants around the move (800, 860 and 1000 s
// with its 700 s warm-up); the run adds one at its end.
func dynamicSnapshots(warmup time.Duration) []time.Duration {
	m := dynamicMove(warmup)
	return []time.Duration{m - 50*time.Second, m + 10*time.Second, m + 150*time.Second}
}
