package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/testnet/workload"
)

// benchFlags are the settings of 'skipctl bench'.
type benchFlags struct {
	work        string
	keys        int
	rangeKeys   int
	width       float64
	theta       float64
	buckets     int
	percent     float64
	words       string
	prefix      int
	rate        float64
	duration    time.Duration
	concurrency int
	load        bool
	batch       int
	reads       float64
	scan        float64
	scanMax     int
	valueSize   int
	seed        uint64
	quiet       bool
}

func defaultBenchFlags() benchFlags {
	return benchFlags{
		work: "pulse", keys: 10_000, rangeKeys: workload.DefaultRangeKeys, width: 0.10, theta: 2,
		buckets: workload.DefaultBuckets, percent: 10, prefix: 5, rate: 100, duration: 10 * time.Second,
		concurrency: 8, batch: 256, reads: 0.9, valueSize: 16, seed: 1,
	}
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.work, "workload", f.work, "key `workload`: pulse, zipf, uniform, hot, dynamic or words")
	fs.IntVar(&f.keys, "keys", f.keys, "integer key space 0..`N`-1 (words: the N most frequent words; 0 all)")
	fs.IntVar(&f.rangeKeys, "range-keys", f.rangeKeys, "`keys` per scan (integer workloads)")
	fs.Float64Var(&f.width, "width", f.width, "pulse: width as a `fraction` of the keys, in (0,1]")
	fs.Float64Var(&f.theta, "theta", f.theta, "zipf: skew `θ` >= 0")
	fs.IntVar(&f.buckets, "buckets", f.buckets, "zipf: number of `buckets`")
	fs.Float64Var(&f.percent, "percent", f.percent, "hot: `percent` of the keys that is hot, in (0,100]")
	fs.StringVar(&f.words, "words", f.words, "words: `file` of \"word count\" lines, most frequent first")
	fs.IntVar(&f.prefix, "prefix", f.prefix, "words: scans read the keys sharing a prefix of this many `bytes`")
	fs.Float64Var(&f.rate, "rate", f.rate, "offered load in `ops/s` (Poisson arrivals); 0: as fast as the workers go")
	fs.DurationVar(&f.duration, "duration", f.duration, "how long to offer load")
	fs.IntVar(&f.concurrency, "concurrency", f.concurrency, "`workers`: requests in flight at most")
	fs.BoolVar(&f.load, "load", f.load, "first write every key of the key space with batched puts")
	fs.IntVar(&f.batch, "batch", f.batch, "`items` per batch of --load (halved while the node refuses it as too large)")
	fs.Float64Var(&f.reads, "reads", f.reads, "`fraction` of the non-scan operations that are gets; the rest are puts")
	fs.Float64Var(&f.scan, "scan", f.scan, "`fraction` of all operations that are scans")
	fs.IntVar(&f.scanMax, "scan-max", f.scanMax, "most `items` one scan asks for; 0: the node's maximum per answer")
	fs.IntVar(&f.valueSize, "value-size", f.valueSize, "`bytes` per value written")
	fs.Uint64Var(&f.seed, "seed", f.seed, "random `seed` of the operation mix, keys and arrivals")
	fs.BoolVar(&f.quiet, "quiet", f.quiet, "no progress lines on stderr")
}

func (f *benchFlags) validate() error {
	switch {
	case f.keys < 0 || (f.keys == 0 && f.work != "words"):
		return badUsage("--keys must be >= 1, got %d", f.keys)
	case !(f.rate >= 0) || math.IsInf(f.rate, 1):
		return badUsage("--rate must be a finite number >= 0, got %g", f.rate)
	case f.duration <= 0:
		return badUsage("--duration must be positive, got %v", f.duration)
	case f.concurrency < 1 || f.concurrency > 10_000:
		return badUsage("--concurrency must be in [1, 10000], got %d", f.concurrency)
	case !(f.reads >= 0 && f.reads <= 1):
		return badUsage("--reads must be a fraction in [0, 1], got %g", f.reads)
	case !(f.scan >= 0 && f.scan <= 1):
		return badUsage("--scan must be a fraction in [0, 1], got %g", f.scan)
	case f.batch < 1 || f.batch > 100_000:
		return badUsage("--batch must be in [1, 100000], got %d", f.batch)
	case f.scanMax < 0:
		return badUsage("--scan-max must be >= 0, got %d", f.scanMax)
	case f.valueSize < 0 || f.valueSize > client.MaxValueLen:
		return badUsage("--value-size must be in [0, %d], got %d", client.MaxValueLen, f.valueSize)
	case f.words != "" && f.work != "words":
		return badUsage("--words needs --workload words")
	}
	return nil
}

// keySpace is a workload seen by the benchmark: range queries for scans, single keys for gets
// and puts (the start of a query, so that point operations follow the workload's skew), and the
// keys to load.
type keySpace struct {
	name  string
	query func(r *rand.Rand, now float64) workload.Query
	point func(r *rand.Rand, now float64) []byte
	n     int
	key   func(i int) []byte // key i of n, in key order
}

func (f *benchFlags) keySpace() (*keySpace, error) {
	var w workload.Workload
	switch f.work {
	case "pulse":
		w = workload.Pulse{K: f.keys, RangeKeys: f.rangeKeys, Width: f.width, Offset: workload.Centre}
	case "zipf":
		w = workload.Zipf{K: f.keys, RangeKeys: f.rangeKeys, Buckets: f.buckets, Theta: f.theta}
	case "uniform":
		w = workload.Uniform{K: f.keys, RangeKeys: f.rangeKeys}
	case "hot":
		w = workload.HotRanges{K: f.keys, RangeKeys: f.rangeKeys, Percent: f.percent}
	case "dynamic":
		d := workload.DefaultDynamic(f.keys)
		d.RangeKeys, d.MoveAt = f.rangeKeys, f.duration.Seconds()/2 // the pulse moves half-way
		w = d
	case "words":
		return f.wordSpace()
	default:
		return nil, badUsage("--workload must be pulse, zipf, uniform, hot, dynamic or words (got %q)", f.work)
	}
	if err := w.Validate(); err != nil {
		return nil, badUsage("--workload %s: %v", f.work, err)
	}
	return &keySpace{
		name:  w.Name(),
		query: w.Next,
		point: func(r *rand.Rand, now float64) []byte { return []byte(w.Next(r, now).Start) },
		n:     f.keys,
		key:   func(i int) []byte { return []byte(overlay.Uint64Key(uint64(i))) },
	}, nil
}

func (f *benchFlags) wordSpace() (*keySpace, error) {
	const hint = "a file of \"word count\" lines, e.g. ../shared/data/en_50k.txt"
	if f.words == "" {
		return nil, badUsage("the words workload needs --words FILE (%s)", hint)
	}
	file, err := os.Open(f.words)
	if err != nil {
		return nil, badUsage("--words: %v (%s)", err, hint)
	}
	defer file.Close()
	words, err := workload.LoadWords(file, f.keys)
	if err != nil {
		return nil, badUsage("--words %s: %v", f.words, err)
	}
	if f.prefix < 1 {
		return nil, badUsage("--prefix must be >= 1, got %d", f.prefix)
	}
	keys := words.Keys()
	prefix := f.prefix
	return &keySpace{
		name:  fmt.Sprintf("words(%d, prefix %d)", words.Len(), prefix),
		query: func(r *rand.Rand, _ float64) workload.Query { return words.Query(r, prefix) },
		// A prefix as long as any word is the word itself: a word drawn by frequency.
		point: func(r *rand.Rand, _ float64) []byte { return []byte(words.Query(r, math.MaxInt).Start) },
		n:     len(keys),
		key:   func(i int) []byte { return []byte(keys[i]) },
	}, nil
}

func benchCmd() *command {
	return &command{
		name: "bench", nargs: 0,
		summary: "drive a workload against the entry node and measure it",
		help: `Offers a stream of operations to the entry node — Poisson arrivals at --rate per second for
--duration, at most --concurrency in flight — and reports the throughput, the latency
percentiles (p50, p90, p99, max) and the hops of every kind of operation, and the errors by
class. A line of progress goes to stderr every second (--quiet: none).

The keys come from a workload of the simulator (testnet/workload):
  pulse     gets, puts and scans start uniformly inside a --width fraction of the keys
  zipf      the keys are cut into --buckets buckets; bucket r is chosen with weight r^-θ
  uniform   every key alike
  hot       about twenty hot ranges covering --percent % of the keys
  dynamic   a 12% pulse that moves to another part of the key space half-way through
  words     the keys are the words of --words, drawn by frequency; scans read a prefix
Integer workloads use the keys 0..--keys-1 as 8-byte big-endian strings; a scan covers
--range-keys keys from the drawn start. --load first writes every key (batches of --batch),
so that gets find something.

Of all operations a --scan fraction are scans; of the rest a --reads fraction are gets and the
others puts. A get of an absent key counts as a miss, not an error. Latency is measured from an
operation's scheduled arrival, so it includes waiting for a free worker; arrivals that find every
worker busy and the queue full are shed and counted. With --rate 0 every worker issues its next
operation as soon as the last one returns.

Exit status 0 when the benchmark ran, even with errors; when every operation failed, the status
of their most common class (3 unreachable or timeout, 4 overlay errors).

Examples:
  skipctl bench --load --keys 10000 --rate 200 --duration 30s
  skipctl bench --workload zipf --theta 1.2 --reads 0.5 --concurrency 32 --rate 0
  skipctl bench --workload words --words en_50k.txt --keys 20000 --load --scan 0.1 --json
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			f := defaultBenchFlags()
			f.register(fs)
			return func(ctx context.Context, _ []string) error {
				if err := f.validate(); err != nil {
					return err
				}
				ks, err := f.keySpace()
				if err != nil {
					return err
				}
				c, entry, err := a.connect(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				// Probe the entry node first: an unreachable node is one clear error, not
				// thousands of failed operations.
				if _, err := c.Status(ctx, entry); err != nil {
					return err
				}
				b := &bench{a: a, f: f, ks: ks, c: c, entry: entry}
				return b.run(ctx)
			}
		},
	}
}

// bench is one run of 'skipctl bench'.
type bench struct {
	a     *app
	f     benchFlags
	ks    *keySpace
	c     *client.Client
	entry peer.AddrInfo

	loadRep *loadReport
	st      benchStats
}

type loadReport struct {
	Items      int     `json:"items"`
	Batches    int     `json:"batches"`
	Seconds    float64 `json:"seconds"`
	ItemsPerS  float64 `json:"items_per_s"`
	FirstError string  `json:"first_error,omitempty"`
}

func (b *bench) progress(format string, args ...any) {
	if !b.f.quiet {
		fmt.Fprintf(b.a.stderr, format+"\n", args...)
	}
}

func (b *bench) run(ctx context.Context) error {
	if b.f.load {
		if err := b.bulkLoad(ctx); err != nil {
			return err
		}
	}
	b.st.init()
	elapsed := b.offer(ctx)
	rep := b.report(elapsed)
	if b.a.g.json {
		b.a.writeJSON(rep)
	} else {
		renderBench(b.a.stdout, rep)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(b.a.stderr, "skipctl bench: interrupted; the report covers the operations completed until then")
		return nil
	}
	if rep.Ops > 0 && rep.Errors == rep.Ops {
		// Everything failed: exit with the status of the most common class.
		var top string
		for class, n := range rep.ErrorsByClass {
			if top == "" || n > rep.ErrorsByClass[top] || (n == rep.ErrorsByClass[top] && class < top) {
				top = class
			}
		}
		return exitError{classExit(top), fmt.Sprintf("every operation failed (mostly %s)", top)}
	}
	return nil
}

// classExit maps a client.Class name to an exit status.
func classExit(class string) int {
	switch class {
	case "unreachable", "timeout", "protocol", "canceled":
		return exitUnreachable
	case "not_found", "lost":
		return exitNotFound
	case "too_large", "bad_address":
		return exitUsage
	}
	return exitOverlay
}

// value returns a printable random value of the configured size.
func (b *bench) value(r *rand.Rand) []byte {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	v := make([]byte, b.f.valueSize)
	for i := range v {
		v[i] = chars[r.IntN(len(chars))]
	}
	return v
}

// bulkLoad writes every key with PutBatch, --concurrency batches in flight.
func (b *bench) bulkLoad(ctx context.Context) error {
	n := b.ks.n
	batches := (n + b.f.batch - 1) / b.f.batch
	start := time.Now()
	var done atomic.Int64
	var size atomic.Int64 // items per request: --batch, halved while the node refuses it
	size.Store(int64(b.f.batch))
	var firstErr error
	var once sync.Once
	next := make(chan int)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < min(b.f.concurrency, batches); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(b.f.seed, uint64(w)+1<<32))
			for i := range next {
				lo, hi := i*b.f.batch, min((i+1)*b.f.batch, n)
				items := make([]*pb.Item, 0, hi-lo)
				for k := lo; k < hi; k++ {
					items = append(items, &pb.Item{Key: b.ks.key(k), Value: b.value(r)})
				}
				if err := b.putBatch(lctx, items, &size, &done); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	go func() {
		defer close(next)
		for i := 0; i < batches; i++ {
			select {
			case next <- i:
			case <-lctx.Done():
				return
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	b.progress("load: %d keys of %s in %d batch%s", n, b.ks.name, batches, pluralES(batches))
loop:
	for {
		select {
		case <-finished:
			break loop
		case <-ticker.C:
			d := done.Load()
			b.progress("load: %d/%d items (%.0f%%) %.0f items/s", d, n, 100*float64(d)/float64(max(n, 1)), float64(d)/time.Since(start).Seconds())
		}
	}
	secs := time.Since(start).Seconds()
	b.loadRep = &loadReport{Items: int(done.Load()), Batches: batches, Seconds: secs, ItemsPerS: float64(done.Load()) / math.Max(secs, 1e-9)}
	if firstErr != nil {
		if ctx.Err() != nil {
			return exitError{exitUnreachable, "interrupted while loading"}
		}
		return fmt.Errorf("load: after %d of %d items: %w", done.Load(), n, firstErr)
	}
	b.progress("load: %d items in %.2fs (%.0f items/s)", n, secs, b.loadRep.ItemsPerS)
	return nil
}

// putBatch writes items in requests of at most *size items; when the node refuses a request as
// invalid (a batch above its maximum), it halves *size for every worker and tries again.
func (b *bench) putBatch(ctx context.Context, items []*pb.Item, size, done *atomic.Int64) error {
	for len(items) > 0 {
		sz := int(size.Load())
		part := items[:min(sz, len(items))]
		_, err := b.c.PutBatch(ctx, b.entry, part)
		if errors.Is(err, client.ErrInvalid) && len(part) > 1 {
			size.CompareAndSwap(int64(sz), int64(max(sz/2, 1)))
			continue
		}
		if err != nil {
			return err
		}
		done.Add(int64(len(part)))
		items = items[len(part):]
	}
	return nil
}

// job is one operation to run, drawn by the dispatcher.
type job struct {
	op         string // get, put, scan
	key, end   []byte
	limit      uint32
	value      []byte
	at         time.Time // scheduled arrival
	workloadAt float64   // workload time (s) of the draw
}

// draw picks the next operation.
func (b *bench) draw(r *rand.Rand, now float64) job {
	u := r.Float64()
	switch {
	case u < b.f.scan:
		// The range itself bounds the answer; --scan-max caps it further, 0 leaves the cap to
		// the node.
		q := b.ks.query(r, now)
		return job{op: "scan", key: []byte(q.Start), end: []byte(q.End), limit: uint32(b.f.scanMax)}
	case r.Float64() < b.f.reads:
		return job{op: "get", key: b.ks.point(r, now)}
	default:
		return job{op: "put", key: b.ks.point(r, now), value: b.value(r)}
	}
}

// exec runs one job and records it.
func (b *bench) exec(ctx context.Context, j job) {
	var rep *pb.ClientReply
	var err error
	switch j.op {
	case "get":
		rep, err = b.c.Get(ctx, b.entry, j.key)
	case "put":
		rep, err = b.c.Put(ctx, b.entry, j.key, j.value)
	case "scan":
		rep, err = b.c.Scan(ctx, b.entry, j.key, j.end, j.limit)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // interrupted: not a result
	}
	b.st.record(j.op, time.Since(j.at), rep, err)
}

// offer runs the measured phase and returns its length (until the last operation returned).
func (b *bench) offer(ctx context.Context) time.Duration {
	start := time.Now()
	end := start.Add(b.f.duration)
	dctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	if b.f.rate > 0 {
		jobs := make(chan job, b.f.concurrency)
		for w := 0; w < b.f.concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range jobs {
					b.exec(ctx, j)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(jobs)
			b.dispatch(dctx, start, end, jobs)
		}()
	} else {
		for w := 0; w < b.f.concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(b.f.seed, uint64(w)))
				for dctx.Err() == nil {
					now := time.Now()
					j := b.draw(r, now.Sub(start).Seconds())
					j.at = now
					b.exec(ctx, j)
				}
			}()
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-finished:
			return time.Since(start)
		case <-ticker.C:
			if !b.f.quiet {
				b.progress("%s", b.st.tick(time.Since(start), b.f.duration))
			}
		}
	}
}

// dispatch draws Poisson arrivals until end and hands them to the workers; an arrival that finds
// the queue full is shed.
func (b *bench) dispatch(ctx context.Context, start, end time.Time, jobs chan<- job) {
	r := rand.New(rand.NewPCG(b.f.seed, 0x5eed))
	arr, err := workload.NewArrivals(b.f.rate)
	if err != nil {
		return // validated before
	}
	t := 0.0
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		t += arr.Next(r)
		at := start.Add(time.Duration(t * float64(time.Second)))
		if !at.Before(end) {
			return
		}
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		j := b.draw(r, t)
		j.at = at
		select {
		case jobs <- j:
		default:
			b.st.shed.Add(1)
		}
	}
}

// ---- statistics ----

type opStats struct {
	count, ok, miss, items int
	errs                   map[string]int
	lat                    []time.Duration
	hops                   uint64
	hopsN                  int
	maxHops                uint32
}

type benchStats struct {
	mu     sync.Mutex
	ops    map[string]*opStats
	window []time.Duration
	wOps   int
	wErrs  int
	total  int
	errs   int
	shed   atomic.Int64
}

func (s *benchStats) init() {
	s.ops = make(map[string]*opStats)
	for _, op := range []string{"get", "put", "scan"} {
		s.ops[op] = &opStats{errs: make(map[string]int)}
	}
}

func (s *benchStats) record(op string, lat time.Duration, rep *pb.ClientReply, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[op]
	o.count++
	s.total++
	s.wOps++
	switch {
	case err == nil:
		o.ok++
	case op == "get" && errors.Is(err, client.ErrNotFound):
		o.miss++
	default:
		o.errs[client.Class(err)]++
		s.errs++
		s.wErrs++
	}
	if err == nil || errors.Is(err, client.ErrNotFound) {
		o.lat = append(o.lat, lat)
		s.window = append(s.window, lat)
	}
	if rep != nil {
		o.hops += uint64(rep.GetHops())
		o.hopsN++
		o.maxHops = max(o.maxHops, rep.GetHops())
		o.items += len(rep.GetItems())
	}
}

// tick returns a progress line about the last interval and starts a new one.
func (s *benchStats) tick(elapsed, total time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.window
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	line := fmt.Sprintf("bench: %3.0fs/%.0fs  ops %d  (+%d)  errors %d  shed %d", elapsed.Seconds(), total.Seconds(),
		s.total, s.wOps, s.errs, s.shed.Load())
	if len(w) > 0 {
		line += fmt.Sprintf("  p50 %s  p99 %s", fmtLatency(percentile(w, 0.50)), fmtLatency(percentile(w, 0.99)))
	}
	s.window, s.wOps, s.wErrs = s.window[:0], 0, 0
	return line
}

// percentile is the nearest-rank q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func fmtLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// ---- report ----

type opReport struct {
	Count         int            `json:"count"`
	OK            int            `json:"ok"`
	Miss          int            `json:"miss"`
	Errors        int            `json:"errors"`
	ErrorsByClass map[string]int `json:"errors_by_class"`
	P50ms         float64        `json:"p50_ms"`
	P90ms         float64        `json:"p90_ms"`
	P99ms         float64        `json:"p99_ms"`
	Maxms         float64        `json:"max_ms"`
	MeanHops      float64        `json:"mean_hops"`
	MaxHops       uint32         `json:"max_hops"`
	Items         int            `json:"items,omitempty"` // scans: items returned
}

type benchReport struct {
	OK            bool                `json:"ok"`
	Command       string              `json:"command"`
	Entry         string              `json:"entry"`
	Workload      string              `json:"workload"`
	Rate          float64             `json:"rate"`
	Duration      float64             `json:"duration_s"`
	Concurrency   int                 `json:"concurrency"`
	Reads         float64             `json:"reads"`
	Scan          float64             `json:"scan"`
	Seed          uint64              `json:"seed"`
	Load          *loadReport         `json:"load,omitempty"`
	Elapsed       float64             `json:"elapsed_s"`
	Ops           int                 `json:"ops"`
	Throughput    float64             `json:"throughput"`
	Shed          int64               `json:"shed"`
	Errors        int                 `json:"errors"`
	ErrorsByClass map[string]int      `json:"errors_by_class"`
	PerOp         map[string]opReport `json:"per_op"`
	All           opReport            `json:"all"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func summarize(count, ok, miss int, errs map[string]int, lat []time.Duration, hops uint64, hopsN int, maxHops uint32, items int) opReport {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := opReport{Count: count, OK: ok, Miss: miss, ErrorsByClass: map[string]int{}, MaxHops: maxHops, Items: items}
	for c, n := range errs {
		r.ErrorsByClass[c] = n
		r.Errors += n
	}
	if len(lat) > 0 {
		r.P50ms, r.P90ms, r.P99ms = ms(percentile(lat, .5)), ms(percentile(lat, .9)), ms(percentile(lat, .99))
		r.Maxms = ms(lat[len(lat)-1])
	}
	if hopsN > 0 {
		r.MeanHops = float64(hops) / float64(hopsN)
	}
	return r
}

func (b *bench) report(elapsed time.Duration) benchReport {
	s := &b.st
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := benchReport{
		OK: true, Command: "bench", Entry: client.PeerString(b.entry), Workload: b.ks.name, Rate: b.f.rate,
		Duration: b.f.duration.Seconds(), Concurrency: b.f.concurrency, Reads: b.f.reads, Scan: b.f.scan,
		Seed: b.f.seed, Load: b.loadRep, Elapsed: elapsed.Seconds(), Ops: s.total, Shed: s.shed.Load(),
		Errors: s.errs, ErrorsByClass: map[string]int{}, PerOp: map[string]opReport{},
	}
	if elapsed > 0 {
		rep.Throughput = float64(s.total) / elapsed.Seconds()
	}
	var all opStats
	all.errs = map[string]int{}
	for name, o := range s.ops {
		if o.count == 0 {
			continue
		}
		rep.PerOp[name] = summarize(o.count, o.ok, o.miss, o.errs, o.lat, o.hops, o.hopsN, o.maxHops, o.items)
		all.count += o.count
		all.ok += o.ok
		all.miss += o.miss
		all.lat = append(all.lat, o.lat...)
		all.hops += o.hops
		all.hopsN += o.hopsN
		all.maxHops = max(all.maxHops, o.maxHops)
		for c, n := range o.errs {
			all.errs[c] += n
			rep.ErrorsByClass[c] += n
		}
	}
	rep.All = summarize(all.count, all.ok, all.miss, all.errs, all.lat, all.hops, all.hopsN, all.maxHops, 0)
	rep.OK = rep.Ops == 0 || rep.Errors < rep.Ops
	return rep
}

func renderBench(w io.Writer, r benchReport) {
	offered := "as fast as possible (closed loop)"
	if r.Rate > 0 {
		offered = fmt.Sprintf("%g ops/s offered (Poisson)", r.Rate)
	}
	fmt.Fprintf(w, "workload   %s via %s\n", r.Workload, r.Entry)
	fmt.Fprintf(w, "offered    %s for %s, %d workers; %.0f%% scans, then %.0f%% gets / %.0f%% puts\n",
		offered, time.Duration(r.Duration*float64(time.Second)), r.Concurrency, 100*r.Scan, 100*r.Reads, 100*(1-r.Reads))
	if r.Load != nil {
		fmt.Fprintf(w, "loaded     %d items in %d batch%s in %.2fs (%.0f items/s)\n", r.Load.Items, r.Load.Batches, pluralES(r.Load.Batches), r.Load.Seconds, r.Load.ItemsPerS)
	}
	errPct := 0.0
	if r.Ops > 0 {
		errPct = 100 * float64(r.Errors) / float64(r.Ops)
	}
	fmt.Fprintf(w, "completed  %d ops in %.2fs: %.1f ops/s   errors %d (%.1f%%)   shed %d\n\n",
		r.Ops, r.Elapsed, r.Throughput, r.Errors, errPct, r.Shed)
	t := &table{
		header: []string{"op", "count", "ok", "miss", "errors", "p50", "p90", "p99", "max", "hops avg", "hops max"},
		right:  []bool{false, true, true, true, true, true, true, true, true, true, true},
	}
	msd := func(x float64) string { return fmtLatency(time.Duration(x * float64(time.Millisecond))) }
	row := func(name string, o opReport) {
		t.add(name, fmt.Sprint(o.Count), fmt.Sprint(o.OK), fmt.Sprint(o.Miss), fmt.Sprint(o.Errors),
			msd(o.P50ms), msd(o.P90ms), msd(o.P99ms), msd(o.Maxms), fmt.Sprintf("%.2f", o.MeanHops), fmt.Sprint(o.MaxHops))
	}
	for _, name := range []string{"get", "put", "scan"} {
		if o, ok := r.PerOp[name]; ok {
			row(name, o)
		}
	}
	row("all", r.All)
	t.render(w, "")
	if len(r.ErrorsByClass) > 0 {
		classes := make([]string, 0, len(r.ErrorsByClass))
		for c := range r.ErrorsByClass {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		parts := make([]string, len(classes))
		for i, c := range classes {
			parts[i] = fmt.Sprintf("%s %d", c, r.ErrorsByClass[c])
		}
		fmt.Fprintf(w, "\nerrors by class: %s\n", strings.Join(parts, ", "))
	}
	if sc, ok := r.PerOp["scan"]; ok && sc.Count > 0 {
		fmt.Fprintf(w, "scans returned %d items (%.1f per scan)\n", sc.Items, float64(sc.Items)/float64(sc.Count))
	}
	fmt.Fprintln(w, "\nlatency from each operation's scheduled arrival (queueing included); misses are gets of absent keys")
}

func pluralES(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}
