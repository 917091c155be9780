package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/testnet/workload"
)

// PulseParams describe a live balancing run.
type PulseParams struct {
	Nodes, Keys int
	Width       float64 // pulse width, a fraction of the keys
	Rate        float64 // reads per second
	Thres       float64
	Limit       time.Duration
}

// PulseResult is what a live balancing run measured.
type PulseResult struct {
	PulseParams
	Balanced                    bool
	TimeToBalance               time.Duration // from the start of balancing to every node under thres
	MaxLoadBefore, MaxLoadAfter float64
	Loads                       []float64
	ItemsMoved                  uint64 // items handed over by balancing (NIX and migrations)
	NIX, MIG                    int
	Reads, FailedReads          int64
	WrongAnswers                int64
	// FirstFailure says how the first failed read failed (its error or status and detail), and
	// FirstWrong what the first wrong answer was: a count alone does not tell a time-out on an
	// overloaded machine from a node answering STATUS_LOST.
	FirstFailure, FirstWrong string
}

// RunPulse starts a network, loads Keys integer keys, and reads a pulse over them at Rate. Once
// a whole load window has passed it starts balancing and runs until every node is under thres
// or Limit.
func RunPulse(ctx context.Context, p PulseParams) (PulseResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Limit+time.Minute)
	defer cancel()
	run, err := NewPulseRun(ctx, p)
	if err != nil {
		return PulseResult{PulseParams: p}, err
	}
	defer run.Close()
	run.StartReads(ctx)
	time.Sleep(run.Window() + run.Window()/4) // let the skew build up over a whole load window
	loads := run.Loads(ctx)
	run.res.MaxLoadBefore = maxOf(loads)
	if err := run.StartBalancing(ctx); err != nil {
		return run.res, err
	}
	begin := time.Now()
	var watch BalanceWatch
	for time.Since(begin) < p.Limit {
		time.Sleep(250 * time.Millisecond)
		if at, ok := watch.Observe(time.Since(begin), run.Ring(ctx), p.Thres); ok {
			run.res.Balanced, run.res.TimeToBalance = true, at
			break
		}
	}
	return run.Finish(ctx), nil
}

// PulseRun is a live balancing run in steps, for callers that watch it (the demo): a network
// whose nodes start evenly over Keys integer keys, loaded, with balancing held until
// StartBalancing.
type PulseRun struct {
	Net   *Network
	p     PulseParams
	res   PulseResult
	pulse workload.Pulse
	stop  chan struct{}
	wg    sync.WaitGroup
	// firstMu guards res.FirstFailure and res.FirstWrong, written by the read goroutines.
	firstMu sync.Mutex
}

// noteFirst keeps what into holds if it is set already, else what.
func (run *PulseRun) noteFirst(into *string, what func() string) {
	run.firstMu.Lock()
	defer run.firstMu.Unlock()
	if *into == "" {
		*into = what()
	}
}

// NewPulseRun starts the network and loads the keys (value of key k: "v"+k).
func NewPulseRun(ctx context.Context, p PulseParams) (*PulseRun, error) {
	pulse, err := workload.NewPulse(p.Keys, 1, p.Width)
	if err != nil {
		return nil, err
	}
	cfg := FastConfig()
	cfg.Balance.Thres = p.Thres
	cfg.Balance.OverThres = 4 * p.Thres
	// Nodes join before any key exists, so each starts where it joins: evenly over the keys, as
	// skipsim places them.
	nw, err := Start(ctx, p.Nodes, Options{Node: &cfg, HoldBalancing: true,
		JoinAt: func(i int) overlay.Key { return overlay.Uint64Key(uint64(i * p.Keys / p.Nodes)) }})
	if err != nil {
		return nil, err
	}
	run := &PulseRun{Net: nw, p: p, res: PulseResult{PulseParams: p}, pulse: pulse, stop: make(chan struct{})}
	entry := nw.Running()[0]
	for lo := 0; lo < p.Keys; lo += 200 {
		var items []overlay.Item
		for i := lo; i < min(lo+200, p.Keys); i++ {
			k := overlay.Uint64Key(uint64(i))
			items = append(items, overlay.Item{Key: k, Value: pulseValue(k)})
		}
		r, err := entry.Request(ctx, func(n *node.Node) uint64 { return n.PutBatch(items) })
		if err != nil || r.Status != pb.Status_STATUS_OK || r.Stored != len(items) {
			nw.Close()
			return nil, fmt.Errorf("load keys: %v %s", err, r.Err)
		}
	}
	return run, nil
}

func pulseValue(k overlay.Key) []byte { return append([]byte("v"), k...) }

// Window returns the nodes' load window.
func (run *PulseRun) Window() time.Duration { return FastConfig().Balance.Window }

// StartReads starts open-loop exact-match reads of the pulse at Rate, each from a random node,
// each answer checked.
func (run *PulseRun) StartReads(ctx context.Context) {
	rts := run.Net.Running()
	sem := make(chan struct{}, 64)
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		debt := 0.0
		for {
			select {
			case <-run.stop:
				return
			case <-tick.C:
			}
			debt += run.p.Rate / 100
			for ; debt >= 1; debt-- {
				k := run.pulse.Next(rng, 0).Start
				from := rts[rng.IntN(len(rts))]
				sem <- struct{}{}
				run.wg.Add(1)
				go func() {
					defer run.wg.Done()
					defer func() { <-sem }()
					r, err := from.Request(ctx, func(n *node.Node) uint64 { return n.Get(k) })
					atomic.AddInt64(&run.res.Reads, 1)
					switch {
					case err != nil || r.Status != pb.Status_STATUS_OK:
						atomic.AddInt64(&run.res.FailedReads, 1)
						run.noteFirst(&run.res.FirstFailure, func() string {
							if err != nil {
								return fmt.Sprintf("get %x from %s: %v", k, from.ID(), err)
							}
							return fmt.Sprintf("get %x from %s: %s %s (owner %s, %d hops)", k, from.ID(), r.Status, r.Err, r.Owner, r.Hops)
						})
					case string(r.Value) != string(pulseValue(k)):
						atomic.AddInt64(&run.res.WrongAnswers, 1)
						run.noteFirst(&run.res.FirstWrong, func() string {
							return fmt.Sprintf("get %x from %s: %q from %s, want %q", k, from.ID(), r.Value, r.Owner, pulseValue(k))
						})
					}
				}()
			}
		}
	}()
}

// StartBalancing starts every node's balancer.
func (run *PulseRun) StartBalancing(ctx context.Context) error {
	for _, r := range run.Net.Running() {
		if err := r.StartBalancing(ctx); err != nil {
			return err
		}
	}
	return nil
}

// NodeLoad is one node's state as the demo shows it.
type NodeLoad struct {
	Start overlay.Key
	Load  float64
	Items int
	// Handing: the node is giving or taking in a piece, or a piece it gave has flipped and its
	// receiver has not confirmed taking it in. Such a piece's load statistics are counted at
	// neither node until the receiver commits, so loads read then can miss it.
	Handing bool
}

// Ring returns every node's start, load and items, in ring order. The nodes are read one after
// another while they run, so the result is not a snapshot: BalanceWatch says when it can be
// trusted to show every node under thres.
func (run *PulseRun) Ring(ctx context.Context) []NodeLoad {
	var out []NodeLoad
	for _, r := range run.Net.Running() {
		var nl NodeLoad
		ok := false
		_ = r.Do(ctx, func(n *node.Node) {
			flipped := false
			n.FlippedPieces(func(uint64, overlay.NodeID, []*pb.KeyLoad) { flipped = true })
			nl = NodeLoad{Start: n.Self().Start, Load: n.Balancer.Load(), Items: n.Store().Len(), Handing: n.Busy() || flipped}
			ok = n.Owns()
		})
		if ok {
			out = append(out, nl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// BalanceWatch decides from successive Ring reads when every node is under thres. A read counts
// only when no node is handing a piece over (a piece in flight is counted nowhere), and two such
// reads in a row are needed: a whole handoff can start and end between the reads of its two
// nodes, leaving its load out of both, but not across two reads of both.
type BalanceWatch struct {
	since time.Duration // when the current run of balanced reads began
	reads int           // balanced reads in a row
}

// Observe takes the read made at t (since balancing began) and reports whether balance is
// established, and since when.
func (w *BalanceWatch) Observe(t time.Duration, ring []NodeLoad, thres float64) (time.Duration, bool) {
	balanced := len(ring) > 0
	for _, nl := range ring {
		balanced = balanced && nl.Load <= thres && !nl.Handing
	}
	if !balanced {
		w.reads = 0
		return 0, false
	}
	if w.reads == 0 {
		w.since = t
	}
	w.reads++
	return w.since, w.reads >= 2
}

// Loads returns every node's load.
func (run *PulseRun) Loads(ctx context.Context) []float64 {
	var out []float64
	for _, nl := range run.Ring(ctx) {
		out = append(out, nl.Load)
	}
	return out
}

// Moves returns the balancing so far: items handed over by it, NIX exchanges, migrations.
func (run *PulseRun) Moves(ctx context.Context) (items uint64, nix, mig int) {
	for _, r := range run.Net.Running() {
		_ = r.Do(ctx, func(n *node.Node) {
			items += uint64(n.Stats.ItemsOut[pb.Cause_CAUSE_BALANCE])
			nix += n.Balancer.Stats.NIX
			mig += n.Balancer.Stats.MIG
		})
	}
	return items, nix, mig
}

// Finish stops the reads and returns the result so far.
func (run *PulseRun) Finish(ctx context.Context) PulseResult {
	select {
	case <-run.stop:
	default:
		close(run.stop)
	}
	run.wg.Wait()
	run.res.Loads = run.Loads(ctx)
	run.res.MaxLoadAfter = maxOf(run.res.Loads)
	run.res.ItemsMoved, run.res.NIX, run.res.MIG = run.Moves(ctx)
	return run.res
}

// Close stops the reads and the network.
func (run *PulseRun) Close() {
	run.Finish(context.Background())
	run.Net.Close()
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
