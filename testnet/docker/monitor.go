package docker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Live returns the nodes the workload and the monitor may use as entry points.
func (tn *Testnet) Live() []*Node {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.live
}

// SetLive replaces the live set (a node about to be faulted leaves it first).
func (tn *Testnet) SetLive(nodes []*Node) {
	cp := append([]*Node(nil), nodes...)
	sort.Slice(cp, func(a, b int) bool { return cp[a].Index < cp[b].Index })
	var names []string
	for _, n := range cp {
		names = append(names, n.Service)
	}
	tn.mu.Lock()
	tn.live = cp
	tn.mu.Unlock()
	tn.tl.Event("live", "entry points: %s", strings.Join(names, " "))
}

// Without returns nodes without x.
func Without(nodes []*Node, x ...*Node) []*Node {
	var out []*Node
	for _, n := range nodes {
		keep := true
		for _, y := range x {
			if n == y {
				keep = false
			}
		}
		if keep {
			out = append(out, n)
		}
	}
	return out
}

type lockKey struct {
	node peer.ID
	wave uint64
}

type lockSpan struct {
	first, last time.Time
	polls       int
}

type lostObs struct {
	t      time.Time
	ranges []*pb.KeyRange
}

// Monitor walks the ring from a live node every interval, writes a line per walk to the
// timeline, and remembers every lock it saw (node and wave, first and last seen) and the lost
// ranges over time.
type Monitor struct {
	tn       *Testnet
	interval time.Duration

	mu    sync.Mutex
	last  *client.Ring
	locks map[lockKey]*lockSpan
	lost  []lostObs

	stop chan struct{}
	wg   sync.WaitGroup
}

// StartMonitor starts polling.
func (tn *Testnet) StartMonitor(ctx context.Context, interval time.Duration) *Monitor {
	m := &Monitor{tn: tn, interval: interval, locks: map[lockKey]*lockSpan{}, stop: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			m.poll(ctx)
		}
	}()
	return m
}

// Stop ends the polling.
func (m *Monitor) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.wg.Wait()
}

func (m *Monitor) poll(ctx context.Context) {
	live := m.tn.Live()
	if len(live) == 0 {
		return
	}
	entry := live[rand.IntN(len(live))]
	r, err := m.tn.Ring(ctx, entry)
	now := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			m.tn.tl.Event("monitor", "ring from %s: %v", entry.Service, err)
		}
		return
	}
	m.tn.tl.Event("monitor", "%s", RingLine(m.tn, r))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = r
	var lost []*pb.KeyRange
	for _, x := range r.Nodes {
		if x.Status.GetLocked() {
			k := lockKey{x.Peer.ID, x.Status.GetLockWave()}
			s := m.locks[k]
			if s == nil {
				s = &lockSpan{first: now}
				m.locks[k] = s
			}
			s.last = now
			s.polls++
		}
		lost = append(lost, x.Status.GetLost()...)
	}
	m.lost = append(m.lost, lostObs{t: now, ranges: lost})
}

// Last returns the last ring walked.
func (m *Monitor) Last() *client.Ring {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// LongLocks lists every lock seen held by the same node for the same wave for longer than
// bound (first to last sighting), with its node, wave and span.
func (m *Monitor) LongLocks(bound time.Duration) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, s := range m.locks {
		if d := s.last.Sub(s.first); d > bound {
			name := client.ShortID(k.node)
			if n := m.tn.ByID(k.node); n != nil {
				name = n.Service
			}
			out = append(out, fmt.Sprintf("%s held wave %d's lock for at least %.1fs (seen %d times from %+.1fs to %+.1fs)",
				name, k.wave, d.Seconds(), s.polls, s.first.Sub(m.tn.tl.Start()).Seconds(), s.last.Sub(m.tn.tl.Start()).Seconds()))
		}
	}
	sort.Strings(out)
	return out
}

// LockCount returns how many distinct (node, wave) locks the monitor saw.
func (m *Monitor) LockCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.locks)
}

// LostSeen reports whether some walk within slack of t saw key inside a lost range.
func (m *Monitor) LostSeen(key []byte, t time.Time, slack time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.lost {
		if o.t.Before(t.Add(-slack)) || o.t.After(t.Add(slack)) {
			continue
		}
		for _, kr := range o.ranges {
			if Contains(kr, key) {
				return true
			}
		}
	}
	return false
}

// BalanceResult is what WaitBalanced measured.
type BalanceResult struct {
	Balanced      bool
	FirstOverload time.Duration // since the pulse started; −1 when no node was seen over thres
	Done          time.Duration // since the pulse started, when every node was under thres
	MaxRatio      float64       // highest load/thres seen
	Moved         uint64        // items moved by balancing on the nodes of the last ring (counter delta is the caller's)
}

// WaitBalanced polls the ring until every node of want is under its thres in two walks in a
// row, no earlier than settle after since (when the pulse started: a load window must have
// filled for the loads to show the pulse), or until bound after since.
func (tn *Testnet) WaitBalanced(ctx context.Context, want []*Node, since time.Time, settle, bound time.Duration, what string) BalanceResult {
	res := BalanceResult{FirstOverload: -1}
	ctx, cancel := context.WithDeadline(ctx, since.Add(bound))
	defer cancel()
	okRun := 0
	for {
		entry := want[rand.IntN(len(want))]
		r, err := tn.Ring(ctx, entry)
		now := time.Now()
		if err == nil && Whole(r, want) == "" {
			over, worst := 0, 0.0
			for _, x := range r.Nodes {
				st := x.Status
				ratio := st.GetLoad() / st.GetThres()
				worst = max(worst, ratio)
				if st.GetLoad() > st.GetThres() {
					over++
				}
			}
			res.MaxRatio = max(res.MaxRatio, worst)
			if over > 0 && res.FirstOverload < 0 {
				res.FirstOverload = now.Sub(since)
				tn.tl.Event("balance", "%s: first overload seen %.2fs after the pulse started (max load/thres %.2f)", what, res.FirstOverload.Seconds(), worst)
			}
			if over == 0 && now.Sub(since) >= settle {
				okRun++
				if okRun == 1 {
					res.Done = now.Sub(since)
				}
				if okRun >= 2 {
					res.Balanced = true
					tn.tl.Event("balance", "%s: every node under thres %.2fs after the pulse started (max load/thres now %.2f): %s", what, res.Done.Seconds(), worst, RingLine(tn, r))
					return res
				}
			} else {
				okRun = 0
			}
		}
		select {
		case <-ctx.Done():
			tn.tl.Event("balance", "%s: NOT balanced %v after the pulse started; last ring: %s", what, bound, RingLine(tn, r))
			return res
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// WaitUnlocked polls until no node of want reports a lock, or bound; it returns how long it
// took and the locks still held.
func (tn *Testnet) WaitUnlocked(ctx context.Context, want []*Node, bound time.Duration, what string) (time.Duration, []string) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var held []string
	for {
		held = held[:0]
		r, err := tn.Ring(ctx, want[rand.IntN(len(want))])
		if err == nil && r.Closed {
			for _, x := range r.Nodes {
				if x.Status.GetLocked() {
					name := client.ShortID(x.Peer.ID)
					if n := tn.ByID(x.Peer.ID); n != nil {
						name = n.Service
					}
					held = append(held, fmt.Sprintf("%s (wave %d)", name, x.Status.GetLockWave()))
				}
			}
			if len(held) == 0 {
				d := time.Since(begin)
				tn.tl.Event("locks", "%s: no node locked (%.2fs)", what, d.Seconds())
				return d, nil
			}
		}
		select {
		case <-ctx.Done():
			tn.tl.Event("locks", "%s: still locked after %v: %s", what, bound, strings.Join(held, ", "))
			return time.Since(begin), held
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Counters sums a counter over the nodes of a ring.
func Counters(r *client.Ring, name string) uint64 {
	var s uint64
	if r == nil {
		return 0
	}
	for _, x := range r.Nodes {
		s += x.Status.GetCounters()[name]
	}
	return s
}
