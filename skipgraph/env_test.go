package skipgraph

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// A deterministic test harness: every node gets a fakeEnv that records what it asks of the
// runtime, and a testNet moves messages between nodes one at a time (FIFO) and fires timers when
// the test advances the shared clock. Nothing runs unless a test says so.

// sentMsg is one Send: who sent what to whom.
type sentMsg struct {
	from, to overlay.NodeID
	m        *pb.Envelope
}

// setTimer is one SetTimer call with the time it falls due.
type setTimer struct {
	after time.Duration
	due   time.Time
	t     overlay.Timer
	seq   uint64 // order of SetTimer calls over the whole network, to break ties in due time
	fired bool
}

// fakeClock is the clock all nodes of a test share; tests move it by hand.
type fakeClock struct {
	now time.Time
	seq uint64
}

// fakeEnv is a deterministic overlay.Env for one node.
type fakeEnv struct {
	id      overlay.NodeID
	clock   *fakeClock
	rng     *rand.Rand
	log     *zap.Logger
	outbox  []sentMsg   // every Send, in order
	timers  []*setTimer // every SetTimer, in order
	results []overlay.Result
	events  []overlay.Event
	// queue, when set, receives every Send as well (the network's delivery queue).
	queue func(sentMsg)
	// skew is how far this node's clock runs ahead of the network's (timers are unaffected).
	skew time.Duration
}

func newFakeEnv(id overlay.NodeID, clock *fakeClock, seed uint64) *fakeEnv {
	return &fakeEnv{id: id, clock: clock, rng: rand.New(rand.NewPCG(seed, 0x5eed)), log: zap.NewNop()}
}

func (e *fakeEnv) Now() time.Time { return e.clock.now.Add(e.skew) }

func (e *fakeEnv) Send(to overlay.NodeID, m *pb.Envelope) {
	s := sentMsg{from: e.id, to: to, m: m}
	e.outbox = append(e.outbox, s)
	if e.queue != nil {
		e.queue(s)
	}
}

func (e *fakeEnv) SetTimer(after time.Duration, t overlay.Timer) {
	e.clock.seq++
	e.timers = append(e.timers, &setTimer{after: after, due: e.clock.now.Add(after), t: t, seq: e.clock.seq})
}

func (e *fakeEnv) Rand() *rand.Rand          { return e.rng }
func (e *fakeEnv) Logger() *zap.Logger       { return e.log }
func (e *fakeEnv) Complete(r overlay.Result) { e.results = append(e.results, r) }
func (e *fakeEnv) Report(ev overlay.Event)   { e.events = append(e.events, ev) }

// result returns the Result of request id, failing the test when there is none.
func (e *fakeEnv) result(t testing.TB, id uint64) overlay.Result {
	t.Helper()
	for _, r := range e.results {
		if r.ReqID == id {
			return r
		}
	}
	t.Fatalf("%s: no result for request %d (results: %+v)", e.id, id, e.results)
	return overlay.Result{}
}

// eventsOf returns the reported events of kind k.
func (e *fakeEnv) eventsOf(k overlay.EventKind) []overlay.Event {
	var out []overlay.Event
	for _, ev := range e.events {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// testNet holds a few nodes and delivers their messages in FIFO order.
type testNet struct {
	t     testing.TB
	cfg   Config
	clock *fakeClock
	nodes map[overlay.NodeID]*Node
	envs  map[overlay.NodeID]*fakeEnv
	ids   []overlay.NodeID // in order of creation
	queue []sentMsg
	// down nodes neither receive messages (theirs and those to them are dropped) nor fire timers.
	down map[overlay.NodeID]bool
	// paused nodes stand still: messages to them wait in held and their timers stay pending,
	// until resume delivers the messages and the overdue timers fire late.
	paused map[overlay.NodeID]bool
	held   []sentMsg
	// drop, when set, discards the messages it returns true for.
	drop func(sentMsg) bool
	// dropped counts discarded messages.
	dropped int
}

func newTestNet(t testing.TB, cfg Config) *testNet {
	return &testNet{
		t: t, cfg: cfg, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)},
		nodes: map[overlay.NodeID]*Node{}, envs: map[overlay.NodeID]*fakeEnv{}, down: map[overlay.NodeID]bool{}, paused: map[overlay.NodeID]bool{},
	}
}

// add creates node id with an empty in-memory store. It owns nothing yet.
func (nw *testNet) add(id overlay.NodeID) *Node {
	nw.t.Helper()
	env := newFakeEnv(id, nw.clock, uint64(len(nw.ids))+1)
	env.queue = func(s sentMsg) { nw.queue = append(nw.queue, s) }
	n, err := New(env, store.NewMemory(), id, nw.cfg)
	if err != nil {
		nw.t.Fatal(err)
	}
	nw.nodes[id], nw.envs[id] = n, env
	nw.ids = append(nw.ids, id)
	return n
}

// bootstrap creates node id as the first node of the overlay.
func (nw *testNet) bootstrap(id overlay.NodeID) *Node {
	nw.t.Helper()
	n := nw.add(id)
	if err := n.Bootstrap(); err != nil {
		nw.t.Fatal(err)
	}
	return n
}

// join creates node id, has it join through via next to the owner of position, and delivers
// every message until the network is quiet.
func (nw *testNet) join(id, via overlay.NodeID, position overlay.Key) *Node {
	nw.t.Helper()
	n := nw.add(id)
	if err := n.Join(via, position); err != nil {
		nw.t.Fatal(err)
	}
	nw.run()
	return n
}

// step delivers the oldest pending message. It reports false when none is pending.
func (nw *testNet) step() bool {
	if len(nw.queue) == 0 {
		return false
	}
	s := nw.queue[0]
	nw.queue = nw.queue[1:]
	n := nw.nodes[s.to]
	if nw.paused[s.to] {
		nw.held = append(nw.held, s)
		return true
	}
	if n == nil || nw.down[s.to] || nw.down[s.from] || (nw.drop != nil && nw.drop(s)) {
		nw.dropped++
		return true
	}
	n.Handle(s.from, s.m)
	return true
}

// run delivers messages until none is pending.
func (nw *testNet) run() {
	nw.t.Helper()
	for i := 0; nw.step(); i++ {
		if i > 1_000_000 {
			nw.t.Fatalf("network does not quiesce: %d messages still pending", len(nw.queue))
		}
	}
}

// advance moves the clock forward by d. Timers falling due meanwhile fire in due order (ties in
// the order they were set), each at its due time, and the network runs after each of them.
func (nw *testNet) advance(d time.Duration) { nw.advanceWith(d, nil) }

// advanceWith is advance with check, when not nil, called after every message and timer.
func (nw *testNet) advanceWith(d time.Duration, check func(when string)) {
	nw.t.Helper()
	end := nw.clock.now.Add(d)
	for {
		var next *setTimer
		var owner overlay.NodeID
		for _, id := range nw.ids {
			if nw.paused[id] {
				continue
			}
			for _, tm := range nw.envs[id].timers {
				if tm.fired || tm.due.After(end) {
					continue
				}
				if next == nil || tm.due.Before(next.due) || (tm.due.Equal(next.due) && tm.seq < next.seq) {
					next, owner = tm, id
				}
			}
		}
		if next == nil {
			break
		}
		next.fired = true
		if next.due.After(nw.clock.now) {
			nw.clock.now = next.due
		}
		if !nw.down[owner] {
			nw.nodes[owner].HandleTimer(next.t)
			if check != nil {
				check(fmt.Sprintf("after timer %d of %s at %s", next.t.Kind, owner, nw.clock.now.Format(time.TimeOnly)))
			}
		}
		if check != nil {
			nw.runChecked(check)
		} else {
			nw.run()
		}
	}
	nw.clock.now = end
}

// pause makes node id stand still, as a paused process does; resume lets it run again: the
// messages that arrived meanwhile are read first, then its overdue timers fire.
func (nw *testNet) pause(id overlay.NodeID) { nw.paused[id] = true }

func (nw *testNet) resume(id overlay.NodeID) {
	delete(nw.paused, id)
	var rest []sentMsg
	for _, s := range nw.held {
		if s.to == id {
			nw.nodes[id].Handle(s.from, s.m)
		} else {
			rest = append(rest, s)
		}
	}
	nw.held = rest
}

// crash stops node id: from now on it neither receives nor sends nor fires timers.
func (nw *testNet) crash(id overlay.NodeID) { nw.down[id] = true }

// live returns the nodes that are not down and own a range, in order of creation.
func (nw *testNet) live() []*Node {
	var out []*Node
	for _, id := range nw.ids {
		if n := nw.nodes[id]; !nw.down[id] && n.Owns() {
			out = append(out, n)
		}
	}
	return out
}

// owner returns the live node whose range contains k.
func (nw *testNet) owner(k overlay.Key) *Node {
	nw.t.Helper()
	var found *Node
	for _, n := range nw.live() {
		if n.Range().Contains(k) {
			if found != nil {
				nw.t.Fatalf("key %q owned by both %s and %s", k, found.ID(), n.ID())
			}
			found = n
		}
	}
	if found == nil {
		nw.t.Fatalf("key %q has no owner", k)
	}
	return found
}

// checkRing checks level 0 over the live nodes: following successors visits every node once and
// comes back, succ(pred(x)) = x, each range ends where the successor's starts, and no handoff is
// under way.
func (nw *testNet) checkRing() {
	nw.t.Helper()
	live := nw.live()
	if len(live) == 0 {
		nw.t.Fatal("no live node")
	}
	seen := map[overlay.NodeID]bool{}
	cur := live[0]
	for range live {
		if seen[cur.ID()] {
			nw.t.Fatalf("level-0 ring revisits %s before covering all %d nodes", cur.ID(), len(live))
		}
		seen[cur.ID()] = true
		if cur.Busy() {
			nw.t.Errorf("%s is still busy with a handoff", cur.ID())
		}
		pred, succ := cur.Neighbors(0)
		next := nw.nodes[succ.ID]
		if next == nil || nw.down[succ.ID] || !next.Owns() {
			nw.t.Fatalf("%s: level-0 successor %q is not a live node", cur.ID(), succ.ID)
		}
		if p, _ := next.Neighbors(0); p.ID != cur.ID() {
			nw.t.Errorf("succ(%s) = %s but pred(%s) = %s", cur.ID(), next.ID(), next.ID(), p.ID)
		}
		if pn := nw.nodes[pred.ID]; pn == nil || nw.down[pred.ID] {
			nw.t.Errorf("%s: level-0 predecessor %q is not a live node", cur.ID(), pred.ID)
		}
		if cur.Range().End != next.Self().Start {
			nw.t.Errorf("%s's range %s does not end where its successor %s starts (%q)", cur.ID(), cur.Range(), next.ID(), next.Self().Start)
		}
		cur = next
	}
	if cur != live[0] {
		nw.t.Fatalf("level-0 ring does not close: after %d steps from %s we are at %s", len(live), live[0].ID(), cur.ID())
	}
}

// checkLevels checks the levels above 0 over the live nodes (SPEC §8.2): on level ℓ each node's
// successor is the first node clockwise on level 0 that shares ℓ membership bits with it, the
// predecessor the first one counter-clockwise, and a node with no such node is alone there
// (Height() <= ℓ). Call it after checkRing.
func (nw *testNet) checkLevels() {
	nw.t.Helper()
	live := nw.live()
	var ring []*Node // level-0 order from live[0]
	for cur := live[0]; len(ring) < len(live); {
		ring = append(ring, cur)
		_, s := cur.Neighbors(0)
		cur = nw.nodes[s.ID]
	}
	for i, x := range ring {
		for l := 1; l < overlay.MaxLevel; l++ {
			var wantSucc, wantPred overlay.NodeID
			for j := 1; j < len(ring); j++ {
				if y := ring[(i+j)%len(ring)]; wantSucc == "" && overlay.SameRing(x.Self().MVec, y.Self().MVec, l) {
					wantSucc = y.ID()
				}
				if y := ring[(i-j+len(ring))%len(ring)]; wantPred == "" && overlay.SameRing(x.Self().MVec, y.Self().MVec, l) {
					wantPred = y.ID()
				}
			}
			if wantSucc == "" {
				if x.Height() > l {
					p, s := x.Neighbors(l)
					nw.t.Errorf("%s is alone on level %d but links %s and %s there", x.ID(), l, p.ID, s.ID)
				}
				break
			}
			if p, s := x.Neighbors(l); p.ID != wantPred || s.ID != wantSucc {
				nw.t.Errorf("%s on level %d: pred %q succ %q, want %q and %q", x.ID(), l, p.ID, s.ID, wantPred, wantSucc)
			}
		}
	}
}

// keysOf lists the keys in n's store in key order.
func keysOf(t testing.TB, n *Node) []overlay.Key {
	t.Helper()
	var out []overlay.Key
	if err := n.Store().Ascend(overlay.FullRange, func(it overlay.Item) bool {
		k := it.Key
		out = append(out, k)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
