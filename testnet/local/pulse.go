package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/p2p"
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
	// OnTick, when set, is called about every 250 ms while balancing, with the running nodes.
	OnTick func(elapsed time.Duration, nodes []*p2p.Runtime)
}

// PulseResult is what a live balancing run measured.
type PulseResult struct {
	PulseParams
	Balanced                    bool
	TimeToBalance               time.Duration // from the start of balancing to every node under thres
	MaxLoadBefore, MaxLoadAfter float64
	Loads                       []float64
	ItemsMoved                  uint64 // items handed over by balancing (NIX and migrations)
	Reads, FailedReads          int64
	WrongAnswers                int64
}

// RunPulse starts a network, loads Keys integer keys, and reads a pulse over them at Rate. Once
// a whole load window has passed it starts balancing and runs until every node is under thres
// or Limit.
func RunPulse(ctx context.Context, p PulseParams) (PulseResult, error) {
	res := PulseResult{PulseParams: p}
	cfg := FastConfig()
	cfg.Balance.Thres = p.Thres
	cfg.Balance.OverThres = 4 * p.Thres
	// Nodes join before any key exists, so each starts where it joins: evenly over the keys, as
	// skipsim places them.
	nw, err := Start(ctx, p.Nodes, Options{Node: &cfg, HoldBalancing: true,
		JoinAt: func(i int) overlay.Key { return overlay.Uint64Key(uint64(i * p.Keys / p.Nodes)) }})
	if err != nil {
		return res, err
	}
	defer nw.Close()
	rts := nw.Running()
	ctx, cancel := context.WithTimeout(ctx, p.Limit+time.Minute)
	defer cancel()
	value := func(k overlay.Key) []byte { return append([]byte("v"), k...) }
	for lo := 0; lo < p.Keys; lo += 200 {
		var items []overlay.Item
		for i := lo; i < min(lo+200, p.Keys); i++ {
			k := overlay.Uint64Key(uint64(i))
			items = append(items, overlay.Item{Key: k, Value: value(k)})
		}
		r, err := rts[0].Request(ctx, func(n *node.Node) uint64 { return n.PutBatch(items) })
		if err != nil || r.Status != pb.Status_STATUS_OK || r.Stored != len(items) {
			return res, fmt.Errorf("load keys: %v (%s)", err, r.Err)
		}
	}
	pulse, err := workload.NewPulse(p.Keys, 1, p.Width)
	if err != nil {
		return res, err
	}
	loads := func() []float64 {
		out := make([]float64, len(rts))
		for i, r := range rts {
			_ = r.Do(ctx, func(n *node.Node) { out[i] = n.Balancer.Load() })
		}
		return out
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sem := make(chan struct{}, 64)
	begin := time.Now()
	wg.Add(1)
	go func() { // open-loop reads at Rate, from random nodes
		defer wg.Done()
		qrng := rand.New(rand.NewPCG(5, 6))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		debt := 0.0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			debt += p.Rate / 100
			for ; debt >= 1; debt-- {
				k := pulse.Next(qrng, 0).Start
				from := rts[qrng.IntN(len(rts))]
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					r, err := from.Request(ctx, func(n *node.Node) uint64 { return n.Get(k) })
					atomic.AddInt64(&res.Reads, 1)
					switch {
					case err != nil || r.Status != pb.Status_STATUS_OK:
						atomic.AddInt64(&res.FailedReads, 1)
					case string(r.Value) != string(value(k)):
						atomic.AddInt64(&res.WrongAnswers, 1)
					}
				}()
			}
		}
	}()
	// Let the skew build up over a whole load window, then balance.
	window := cfg.Balance.Window
	time.Sleep(window + window/4)
	res.Loads = loads()
	res.MaxLoadBefore = maxOf(res.Loads)
	for _, r := range rts {
		if err := r.StartBalancing(ctx); err != nil {
			return res, err
		}
	}
	begin = time.Now()
	for time.Since(begin) < p.Limit {
		time.Sleep(250 * time.Millisecond)
		res.Loads = loads()
		res.MaxLoadAfter = maxOf(res.Loads)
		if p.OnTick != nil {
			p.OnTick(time.Since(begin), rts)
		}
		if res.MaxLoadAfter <= p.Thres {
			res.Balanced, res.TimeToBalance = true, time.Since(begin)
			break
		}
	}
	close(stop)
	wg.Wait()
	for _, r := range rts {
		_ = r.Do(ctx, func(n *node.Node) { res.ItemsMoved += uint64(n.Stats.ItemsOut[pb.Cause_CAUSE_BALANCE]) })
	}
	return res, nil
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
