package skipgraph

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Tests of the balancer's hooks in the skip graph (balance.go, membership.go): NIX handoffs to
// either level-0 neighbour, migrations (a leave, then an exact join above or below a target),
// and the Observer calls. They run on the deterministic fake network of env_test.go.

// fiveNodes is fourNodes plus e at 4000: a ["",1000), b [1000,2000), c [2000,3000),
// d [3000,4000), e [4000,""), with keys 0, 100, ..., 4900 stored (ten per node, none in e's
// upper part beyond 4900).
func fiveNodes(t *testing.T) *testNet {
	t.Helper()
	nw := fourNodes(t)
	nw.join("e", "a", k(4000))
	nw.advance(time.Minute)
	if got := nw.nodes["e"].Range(); got != (overlay.Range{Start: k(4000), End: ""}) {
		t.Fatalf("e owns %s", got)
	}
	load(t, nw, nw.nodes["a"], items(0, 5000, 100))
	nw.checkRing()
	nw.checkLevels()
	return nw
}

// nixDone records the calls of a GiveNIX done callback.
type nixDone struct {
	calls int
	ok    bool
	items int
}

func (d *nixDone) fn() func(bool, int) {
	return func(ok bool, items int) { d.calls, d.ok, d.items = d.calls+1, ok, items }
}

// keyInts returns n's stored keys as integers.
func keyInts(t *testing.T, n *Node) []int {
	t.Helper()
	var out []int
	for _, key := range keysOf(t, n) {
		out = append(out, int(overlay.KeyUint64(key)))
	}
	return out
}

// intsFrom returns from, from+step, ... below to.
func intsFrom(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// checkNoOverlap fails when two live nodes believe they own a common key, or one holds an item
// outside what it owns, is receiving, or has handed over without confirmation yet. It must hold
// after every single message: ranges only grow when a piece is committed, and shrink when it
// flips, never the other way round.
func (nw *testNet) checkNoOverlap(when string) {
	nw.t.Helper()
	live := nw.live()
	for i, x := range live {
		for _, y := range live[i+1:] {
			if common := x.Range().Intersect(y.Range()); len(common) > 0 {
				nw.t.Fatalf("%s: %s owns %s and %s owns %s: both own %v", when, x.ID(), x.Range(), y.ID(), y.Range(), common)
			}
		}
		allowed := []overlay.Range{x.Range()}
		if x.in != nil {
			allowed = append(allowed, x.in.piece)
		}
		for _, c := range x.committing {
			allowed = append(allowed, c.piece)
		}
		for _, key := range keysOf(nw.t, x) {
			if !slices.ContainsFunc(allowed, func(r overlay.Range) bool { return r.Contains(key) }) {
				nw.t.Fatalf("%s: %s holds %d outside %v", when, x.ID(), overlay.KeyUint64(key), allowed)
			}
		}
	}
}

// runChecked delivers messages one at a time until none is pending, calling check after each.
func (nw *testNet) runChecked(check func(when string)) {
	nw.t.Helper()
	for i := 0; ; i++ {
		if len(nw.queue) == 0 {
			return
		}
		s := nw.queue[0]
		nw.step()
		check(fmt.Sprintf("after message %d (%T %s→%s)", i, s.m.Body, s.from, s.to))
		if i > 1_000_000 {
			nw.t.Fatal("network does not quiesce")
		}
	}
}

// getFrom reads key i from node from and returns the result.
func (nw *testNet) getFrom(from overlay.NodeID, i int) overlay.Result {
	nw.t.Helper()
	id := nw.nodes[from].Get(k(i))
	nw.run()
	return nw.envs[from].result(nw.t, id)
}

// checkReads reads each key from every live node: it must be answered by owner with its value.
func (nw *testNet) checkReads(owner overlay.NodeID, keys []int, values map[int]string) {
	nw.t.Helper()
	for _, from := range nw.live() {
		for _, i := range keys {
			want := string(val(i))
			if v, ok := values[i]; ok {
				want = v
			}
			r := nw.getFrom(from.ID(), i)
			if r.Status != pb.Status_STATUS_OK || string(r.Value) != want || r.Owner != owner {
				nw.t.Fatalf("get %d from %s: %v %q at %s, want %q at %s", i, from.ID(), r.Status, r.Value, r.Owner, want, owner)
			}
		}
	}
}

func TestNIXToSuccessor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ChunkItems = 2 // the piece streams in three chunks
	nw := newTestNet(t, cfg)
	nw.bootstrap("a")
	nw.join("b", "a", k(1000))
	nw.join("c", "a", k(2000))
	nw.join("d", "b", k(3000))
	nw.advance(time.Minute)
	load(t, nw, nw.nodes["a"], items(0, 4000, 100))
	b, c := nw.nodes["b"], nw.nodes["c"]
	bVer, cVer := b.Self().Version, c.Self().Version
	bStats, cStats := b.Stats, c.Stats
	marks := nw.outboxMarks()

	var done nixDone
	if err := b.GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	if !b.Busy() || b.Range() != (overlay.Range{Start: k(1000), End: k(2000)}) {
		t.Fatalf("giver after GiveNIX: busy %v, range %s", b.Busy(), b.Range())
	}
	for _, s := range nw.queue {
		if h := s.m.GetHandoff(); h == nil || s.to != "c" || h.Kind != pb.HandoffKind_HANDOFF_NIX || s.m.Cause != pb.Cause_CAUSE_BALANCE ||
			overlay.Key(h.Start) != k(1500) || overlay.Key(h.End) != k(2000) {
			t.Fatalf("queued after GiveNIX: %s→%s %v", s.from, s.to, s.m)
		}
	}
	// While the piece streams the giver still owns it: reads are answered there, and writes
	// to the piece land there and follow the stream.
	env := nw.envs["b"]
	put := b.Put(k(1700), []byte("new"))
	add := b.Put(k(1750), []byte("fresh"))
	del := b.Delete(k(1600))
	stays := b.Put(k(1200), []byte("stays"))
	for _, id := range []uint64{put, add, del, stays} {
		if r := env.result(t, id); r.Status != pb.Status_STATUS_OK || r.Owner != "b" {
			t.Fatalf("write during the stream: %+v", r)
		}
	}
	get := b.Get(k(1800))
	if r := env.result(t, get); r.Status != pb.Status_STATUS_OK || r.Owner != "b" {
		t.Fatalf("read during the stream: %+v", r)
	}
	nw.runChecked(nw.checkNoOverlap)

	if done.calls != 1 || !done.ok || done.items != 5 {
		t.Fatalf("done called %d times, ok %v, items %d; want once, true, 5 (the items of the piece when it left)", done.calls, done.ok, done.items)
	}
	if b.Busy() || c.Busy() {
		t.Fatalf("busy after the NIX: b %v c %v", b.Busy(), c.Busy())
	}
	if got := b.Range(); got != (overlay.Range{Start: k(1000), End: k(1500)}) {
		t.Fatalf("giver owns %s", got)
	}
	if got := c.Range(); got != (overlay.Range{Start: k(1500), End: k(3000)}) {
		t.Fatalf("receiver owns %s", got)
	}
	if b.Self().Version != bVer || c.Self().Version <= cVer {
		t.Fatalf("versions: giver %d→%d (its start did not move), receiver %d→%d (its start moved down)", bVer, b.Self().Version, cVer, c.Self().Version)
	}
	if _, s := b.Neighbors(0); s.ID != "c" || s.Start != k(1500) || s.Version != c.Self().Version {
		t.Fatalf("giver's record of its successor: %s at %q version %d", s.ID, s.Start, s.Version)
	}
	if got, want := keyInts(t, b), intsFrom(1000, 1500, 100); !slices.Equal(got, want) {
		t.Fatalf("giver holds %v, want %v", got, want)
	}
	if got, want := keyInts(t, c), []int{1500, 1700, 1750, 1800, 1900, 2000, 2100, 2200, 2300, 2400, 2500, 2600, 2700, 2800, 2900}; !slices.Equal(got, want) {
		t.Fatalf("receiver holds %v, want %v", got, want)
	}
	if b.Stats.ItemsOut[pb.Cause_CAUSE_BALANCE] != 5 || b.Stats.HandoffsOut != bStats.HandoffsOut+1 || c.Stats.HandoffsIn != cStats.HandoffsIn+1 {
		t.Fatalf("stats: giver %+v, receiver %+v", b.Stats, c.Stats)
	}
	nw.checkBalanceCause(marks, "b")
	nw.checkRing()
	nw.checkReads("c", []int{1500, 1800, 1900}, map[int]string{})
	nw.checkReads("c", []int{1700, 1750}, map[int]string{1700: "new", 1750: "fresh"})
	nw.checkReads("b", []int{1000, 1400}, nil)
	nw.checkReads("b", []int{1200}, map[int]string{1200: "stays"})
	if r := nw.getFrom("d", 1600); r.Status != pb.Status_STATUS_NOT_FOUND || r.Owner != "c" {
		t.Fatalf("get of the key deleted during the stream: %+v", r)
	}
	nw.advance(2 * time.Minute)
	nw.checkRing()
	nw.checkLevels()
	if done.calls != 1 {
		t.Fatalf("done called %d times", done.calls)
	}
}

func TestNIXToPredecessor(t *testing.T) {
	nw := fiveNodes(t)
	b, c := nw.nodes["b"], nw.nodes["c"]
	bVer, cVer := b.Self().Version, c.Self().Version
	var done nixDone
	if err := c.GiveNIX(false, k(2500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	// A write to the piece while it streams goes with it; one to the rest stays.
	put := c.Put(k(2300), []byte("moved"))
	keep := c.Put(k(2700), []byte("kept"))
	nw.runChecked(nw.checkNoOverlap)
	for _, id := range []uint64{put, keep} {
		if r := nw.envs["c"].result(t, id); r.Status != pb.Status_STATUS_OK || r.Owner != "c" {
			t.Fatalf("write during the stream: %+v", r)
		}
	}
	if done.calls != 1 || !done.ok || done.items != 5 {
		t.Fatalf("done called %d times, ok %v, items %d", done.calls, done.ok, done.items)
	}
	if got := c.Range(); got != (overlay.Range{Start: k(2500), End: k(3000)}) {
		t.Fatalf("giver owns %s", got)
	}
	if got := b.Range(); got != (overlay.Range{Start: k(1000), End: k(2500)}) {
		t.Fatalf("receiver owns %s", got)
	}
	if c.Self().Version <= cVer || b.Self().Version != bVer {
		t.Fatalf("versions: giver %d→%d (its start moved up), receiver %d→%d", cVer, c.Self().Version, bVer, b.Self().Version)
	}
	if _, s := b.Neighbors(0); s.ID != "c" || s.Start != k(2500) || s.Version != c.Self().Version {
		t.Fatalf("receiver's record of its successor: %s at %q version %d", s.ID, s.Start, s.Version)
	}
	if got, want := keyInts(t, b), intsFrom(1000, 2500, 100); !slices.Equal(got, want) {
		t.Fatalf("receiver holds %v, want %v", got, want)
	}
	if got, want := keyInts(t, c), intsFrom(2500, 3000, 100); !slices.Equal(got, want) {
		t.Fatalf("giver holds %v, want %v", got, want)
	}
	nw.checkRing()
	nw.checkReads("b", []int{2000, 2400}, nil)
	nw.checkReads("b", []int{2300}, map[int]string{2300: "moved"})
	nw.checkReads("c", []int{2500, 2900}, nil)
	nw.checkReads("c", []int{2700}, map[int]string{2700: "kept"})
	nw.advance(2 * time.Minute)
	nw.checkRing()
	nw.checkLevels()
	if done.calls != 1 || len(b.LostRanges())+len(c.LostRanges()) != 0 {
		t.Fatalf("done called %d times; lost ranges b %v c %v", done.calls, b.LostRanges(), c.LostRanges())
	}
}

// TestNIXOverSeam hands the wrapping part of the seam owner's range to its successor and back:
// the seam moves, nothing else changes.
func TestNIXOverSeam(t *testing.T) {
	nw := fiveNodes(t)
	a, e := nw.nodes["a"], nw.nodes["e"]
	// e owns [4000, "") and a ["", 1000): e hands [4500, "") to a, whose start moves down
	// past the seam.
	var done nixDone
	if err := e.GiveNIX(true, k(4500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if !done.ok || done.items != 5 {
		t.Fatalf("done %+v", done)
	}
	if got := a.Range(); got != (overlay.Range{Start: k(4500), End: k(1000)}) || !got.Wraps() {
		t.Fatalf("a owns %s", got)
	}
	if got := e.Range(); got != (overlay.Range{Start: k(4000), End: k(4500)}) {
		t.Fatalf("e owns %s", got)
	}
	nw.checkRing()
	nw.checkReads("a", []int{4500, 4900, 0, 900}, nil)
	// And a hands its part below the seam back to e, which now owns [4000, 500).
	done = nixDone{}
	if err := a.GiveNIX(false, k(500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if !done.ok || done.items != 10 {
		t.Fatalf("done %+v", done)
	}
	if got := e.Range(); got != (overlay.Range{Start: k(4000), End: k(500)}) {
		t.Fatalf("e owns %s", got)
	}
	if got := a.Range(); got != (overlay.Range{Start: k(500), End: k(1000)}) {
		t.Fatalf("a owns %s", got)
	}
	nw.checkRing()
	nw.checkReads("e", []int{4000, 4900, 0, 400}, nil)
	nw.checkReads("a", []int{500, 900}, nil)
	nw.advance(2 * time.Minute)
	nw.checkRing()
	nw.checkLevels()
}

// netState is what a refused or aborted NIX must leave unchanged.
type netState struct {
	ranges   map[overlay.NodeID]overlay.Range
	versions map[overlay.NodeID]uint64
	keys     map[overlay.NodeID][]int
}

func (nw *testNet) state(t *testing.T) netState {
	s := netState{map[overlay.NodeID]overlay.Range{}, map[overlay.NodeID]uint64{}, map[overlay.NodeID][]int{}}
	for _, n := range nw.live() {
		s.ranges[n.ID()], s.versions[n.ID()], s.keys[n.ID()] = n.Range(), n.Self().Version, keyInts(t, n)
	}
	return s
}

func (s netState) diff(o netState) string {
	for id, r := range s.ranges {
		if o.ranges[id] != r || o.versions[id] != s.versions[id] || !slices.Equal(o.keys[id], s.keys[id]) {
			return fmt.Sprintf("%s: range %s→%s, version %d→%d, keys %v→%v", id, r, o.ranges[id], s.versions[id], o.versions[id], s.keys[id], o.keys[id])
		}
	}
	if len(s.ranges) != len(o.ranges) {
		return fmt.Sprintf("%d live nodes → %d", len(s.ranges), len(o.ranges))
	}
	return ""
}

func TestNIXRefusedAtTheGiver(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	before := nw.state(t)
	never := func(bool, int) { t.Fatal("done called for a NIX that was refused") }
	for _, c := range []struct {
		name   string
		toSucc bool
		split  overlay.Key
	}{
		{"split at the start", true, k(1000)},
		{"split at the start, to pred", false, k(1000)},
		{"split at the end", true, k(2000)},
		{"split beyond the end", true, k(2500)},
		{"split below the start", false, k(500)},
	} {
		if err := b.GiveNIX(c.toSucc, c.split, pb.Cause_CAUSE_BALANCE, never); err == nil {
			t.Errorf("%s: no error", c.name)
		}
		if b.Busy() || len(nw.queue) != 0 {
			t.Fatalf("%s: refused NIX left the giver busy %v, %d messages queued", c.name, b.Busy(), len(nw.queue))
		}
	}
	if diff := before.diff(nw.state(t)); diff != "" {
		t.Fatalf("refused NIXes changed something: %s", diff)
	}
	// A giver busy with another handoff refuses at once.
	var first nixDone
	if err := b.GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, first.fn()); err != nil {
		t.Fatal(err)
	}
	if err := b.GiveNIX(false, k(1200), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a busy giver started a second NIX")
	}
	// So does a receiver busy receiving: c takes b's piece and cannot give while it does.
	nw.step() // the chunk reaches c
	if !nw.nodes["c"].Busy() {
		t.Fatal("c is not receiving")
	}
	if err := nw.nodes["c"].GiveNIX(true, k(2500), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a node receiving a piece started a NIX")
	}
	nw.run()
	if first.calls != 1 || !first.ok {
		t.Fatalf("the first NIX: %+v", first)
	}
	nw.checkRing()

	// Not active: a node that has not joined, and one that is leaving.
	z := nw.add("z")
	if err := z.GiveNIX(true, k(1), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a node that owns nothing started a NIX")
	}
	d := nw.nodes["d"]
	if err := d.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := d.GiveNIX(true, k(3500), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a leaving node started a NIX")
	}
	nw.run()

	// A lone node has nobody to give to.
	solo := newTestNet(t, DefaultConfig())
	s := solo.bootstrap("s")
	if err := s.GiveNIX(true, k(5), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a lone node started a NIX")
	}
	if err := s.GiveNIX(false, k(5), pb.Cause_CAUSE_BALANCE, never); err == nil {
		t.Fatal("a lone node started a NIX")
	}
	if s.Busy() || len(solo.queue) != 0 || !s.Range().IsFull() {
		t.Fatalf("lone node after refused NIXes: busy %v, %d queued, range %s", s.Busy(), len(solo.queue), s.Range())
	}
}

// abortReasons returns the reasons of the HandoffAborts node id sent.
func (nw *testNet) abortReasons(id overlay.NodeID) []string {
	var out []string
	for _, s := range nw.envs[id].outbox {
		if a := s.m.GetHandoffAbort(); a != nil {
			out = append(out, a.Reason)
		}
	}
	return out
}

// TestNIXRefusedByTheReceiver: a receiver that is leaving or busy with another handoff refuses
// the piece; the giver's done reports failure and nothing changes.
func TestNIXRefusedByTheReceiver(t *testing.T) {
	nw := fiveNodes(t)
	a, c, d := nw.nodes["a"], nw.nodes["c"], nw.nodes["d"]
	// c leaves: b receives c's range. Before anything is delivered, d gives its lower part to
	// c (leaving) and a its upper part to b (busy receiving c's range).
	if err := c.Leave(); err != nil {
		t.Fatal(err)
	}
	before := nw.state(t)
	var toLeaver, toBusy nixDone
	if err := d.GiveNIX(false, k(3500), pb.Cause_CAUSE_BALANCE, toLeaver.fn()); err != nil {
		t.Fatal(err)
	}
	if err := a.GiveNIX(true, k(500), pb.Cause_CAUSE_BALANCE, toBusy.fn()); err != nil {
		t.Fatal(err)
	}
	// c's chunk reaches b first, then d's reaches c (leaving) and a's reaches b (receiving).
	nw.runChecked(nw.checkNoOverlap)
	if toLeaver.calls != 1 || toLeaver.ok || toLeaver.items != 0 || toBusy.calls != 1 || toBusy.ok || toBusy.items != 0 {
		t.Fatalf("done: to the leaver %+v, to the busy receiver %+v", toLeaver, toBusy)
	}
	if r := nw.abortReasons("c"); !slices.Equal(r, []string{"receiver is leaving"}) {
		t.Fatalf("c's refusals %q", r)
	}
	if r := nw.abortReasons("b"); !slices.Equal(r, []string{"busy with another handoff"}) {
		t.Fatalf("b's refusals %q", r)
	}
	if a.Busy() || d.Busy() {
		t.Fatalf("givers still busy: a %v d %v", a.Busy(), d.Busy())
	}
	after := nw.state(t)
	for _, id := range []overlay.NodeID{"a", "d", "e"} {
		if after.ranges[id] != before.ranges[id] || after.versions[id] != before.versions[id] || !slices.Equal(after.keys[id], before.keys[id]) {
			t.Fatalf("%s changed: %s", id, before.diff(after))
		}
	}
	nw.advance(time.Minute)
	if toLeaver.calls != 1 || toBusy.calls != 1 {
		t.Fatalf("done called again: %+v %+v", toLeaver, toBusy)
	}
	if got := a.Range(); got != (overlay.Range{Start: "", End: k(1000)}) || len(keyInts(t, a)) != 10 {
		t.Fatalf("a owns %s with %d keys", got, len(keyInts(t, a)))
	}
	if got := d.Range(); got != (overlay.Range{Start: k(3000), End: k(4000)}) || len(keyInts(t, d)) != 10 {
		t.Fatalf("d owns %s with %d keys", got, len(keyInts(t, d)))
	}
	nw.advance(2 * time.Minute)
	nw.checkRing()
	nw.checkLevels()
}

// TestNIXLeaseExpires: the receiver's acknowledgements are lost; at the end of its lease the
// giver aborts and keeps everything, the receiver discards what it got, done reports failure.
func TestNIXLeaseExpires(t *testing.T) {
	for _, toSucc := range []bool{true, false} {
		t.Run(fmt.Sprintf("toSucc=%v", toSucc), func(t *testing.T) {
			nw := fiveNodes(t)
			b := nw.nodes["b"]
			recv, split := nw.nodes["c"], k(1500) // b gives [1500, 2000) to c, or [1000, 1500) to a
			if !toSucc {
				recv = nw.nodes["a"]
			}
			before := nw.state(t)
			bStats, rStats := b.Stats, recv.Stats
			nw.drop = func(s sentMsg) bool { return s.m.GetHandoffAck() != nil }
			var done nixDone
			if err := b.GiveNIX(toSucc, split, pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
				t.Fatal(err)
			}
			nw.run()
			if !b.Busy() || !recv.Busy() || recv.Store().Len() != 15 {
				t.Fatalf("mid-handoff: busy giver %v receiver %v, receiver holds %d", b.Busy(), recv.Busy(), recv.Store().Len())
			}
			// Until it flips, the giver still owns and serves the piece (a read that reached the
			// receiver would wait there for the verdict: read from the giver's other side).
			from, key := overlay.NodeID("a"), 1700
			if !toSucc {
				from, key = "c", 1200
			}
			if r := nw.getFrom(from, key); r.Owner != "b" || r.Status != pb.Status_STATUS_OK {
				t.Fatalf("read of the piece during the handoff: %+v", r)
			}
			nw.advance(nw.cfg.HandoffLease - time.Second)
			if !b.Busy() || done.calls != 0 {
				t.Fatalf("the giver gave up before its lease ran out (done %+v)", done)
			}
			nw.advance(time.Second)
			if b.Busy() || recv.Busy() || done.calls != 1 || done.ok || done.items != 0 {
				t.Fatalf("after the lease: busy giver %v receiver %v, done %+v", b.Busy(), recv.Busy(), done)
			}
			nw.drop = nil
			if diff := before.diff(nw.state(t)); diff != "" {
				t.Fatalf("an aborted NIX changed something: %s", diff)
			}
			if b.Stats.Aborts != bStats.Aborts+1 || recv.Stats.Aborts != rStats.Aborts+1 || b.Stats.HandoffsOut != bStats.HandoffsOut || recv.Stats.HandoffsIn != rStats.HandoffsIn {
				t.Fatalf("stats: giver %+v, receiver %+v", b.Stats, recv.Stats)
			}
			nw.advance(3 * time.Minute)
			if done.calls != 1 {
				t.Fatalf("done called %d times", done.calls)
			}
			if diff := before.diff(nw.state(t)); diff != "" {
				t.Fatalf("after the abort settled: %s", diff)
			}
			nw.checkRing()
			nw.checkLevels()
			nw.checkReads("b", []int{1000, 1500, 1900}, nil)
		})
	}
}

// TestNIXAbortLostReceiverDiscards: the receiver acknowledged, but both its acknowledgements
// and the giver's abort are lost. The giver keeps the piece after its lease; the receiver asks
// for the verdict several times, then discards it (reporting a conflict). No key ends up at two
// nodes.
func TestNIXAbortLostReceiverDiscards(t *testing.T) {
	nw := fiveNodes(t)
	b, c := nw.nodes["b"], nw.nodes["c"]
	before := nw.state(t)
	nw.drop = func(s sentMsg) bool { return s.m.GetHandoffAck() != nil || s.m.GetHandoffAbort() != nil }
	var done nixDone
	if err := b.GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.advanceWith(nw.cfg.HandoffLease+time.Duration(maxCommitRetries+2)*nw.cfg.HandoffRetry, nw.checkNoOverlap)
	nw.drop = nil
	if b.Busy() || c.Busy() || done.calls != 1 || done.ok {
		t.Fatalf("busy giver %v receiver %v, done %+v", b.Busy(), c.Busy(), done)
	}
	if diff := before.diff(nw.state(t)); diff != "" {
		t.Fatalf("an aborted NIX changed something: %s", diff)
	}
	if ev := nw.envs["c"].eventsOf(overlay.EventConflict); len(ev) != 1 {
		t.Fatalf("receiver's conflict events: %+v", ev)
	}
	nw.advance(time.Minute)
	nw.checkRing()
	nw.checkLevels()
}

// TestNIXCommitRepeated: the first commits are lost; the giver repeats its commit until the
// receiver confirms; done is called once, at the flip (the receiver acknowledged every item),
// not again when the commit is finally confirmed.
func TestNIXCommitRepeated(t *testing.T) {
	nw := fiveNodes(t)
	b, c := nw.nodes["b"], nw.nodes["c"]
	lost := 0
	nw.drop = func(s sentMsg) bool {
		if s.m.GetHandoffCommit() != nil && lost < 3 {
			lost++
			return true
		}
		return false
	}
	var done nixDone
	if err := b.GiveNIX(false, k(1500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	// Flipped at the giver, not committed at the receiver: the receiver answers for the piece
	// (Responsible) but holds reads for it until the commit.
	a := nw.nodes["a"]
	if b.Range() != (overlay.Range{Start: k(1500), End: k(2000)}) || b.Responsible(k(1200)) || !a.Responsible(k(1200)) {
		t.Fatalf("after the flip: giver owns %s, responsible giver %v receiver %v", b.Range(), b.Responsible(k(1200)), a.Responsible(k(1200)))
	}
	if !a.Busy() || done.calls != 1 || !done.ok || c.Busy() {
		t.Fatalf("receiver busy %v, done %+v", a.Busy(), done)
	}
	// The piece is in flight: a runtime measuring load finds it at the giver, addressed to a
	// receiver that awaits its commit.
	flipped := func() (n int, awaited bool) {
		b.FlippedPieces(func(xfer uint64, to overlay.NodeID, _ []*pb.KeyLoad) {
			n++
			awaited = to == "a" && a.AwaitingCommit("b", xfer) && !a.AwaitingCommit("c", xfer) && !a.AwaitingCommit("b", xfer+1)
		})
		return n, awaited
	}
	if n, awaited := flipped(); n != 1 || !awaited {
		t.Fatalf("in flight: %d pieces, awaited by a %v", n, awaited)
	}
	get := a.Get(k(1200))
	nw.run()
	for _, r := range nw.envs["a"].results {
		if r.ReqID == get {
			t.Fatalf("a read of the piece was answered before the commit: %+v", r)
		}
	}
	nw.advanceWith(time.Minute, nw.checkNoOverlap)
	if done.calls != 1 || !done.ok || done.items != 5 {
		t.Fatalf("done %+v", done)
	}
	if n, _ := flipped(); n != 0 || a.Busy() {
		t.Fatalf("after the commit: %d pieces in flight, receiver busy %v", n, a.Busy())
	}
	if r := nw.envs["a"].result(t, get); r.Status != pb.Status_STATUS_OK || r.Owner != "a" {
		t.Fatalf("held read: %+v", r)
	}
	if got := nw.nodes["a"].Range(); got != (overlay.Range{Start: "", End: k(1500)}) {
		t.Fatalf("receiver owns %s", got)
	}
	nw.checkRing()
	nw.checkLevels()
}

// recObserver records the Observer calls of one node.
type recObserver struct {
	id      overlay.NodeID
	log     *[]string // calls of every node, in order
	served  []overlay.Key
	relayed []overlay.Key
	leaving []overlay.Range
	arrived []overlay.Range
	loads   [][]*pb.KeyLoad
	// give returns the statistics PieceLeaving hands over.
	give func(overlay.Range) []*pb.KeyLoad
}

func (o *recObserver) Served(k overlay.Key) { o.served = append(o.served, k) }
func (o *recObserver) Relayed(r *pb.Route) {
	o.relayed = append(o.relayed, overlay.Key(r.Key))
	*o.log = append(*o.log, fmt.Sprintf("%s relayed %d", o.id, overlay.KeyUint64(overlay.Key(r.Key))))
}

func (o *recObserver) PieceLeaving(piece overlay.Range) []*pb.KeyLoad {
	o.leaving = append(o.leaving, piece)
	*o.log = append(*o.log, fmt.Sprintf("%s leaving %s", o.id, piece))
	if o.give == nil {
		return nil
	}
	return o.give(piece)
}

func (o *recObserver) PieceArrived(piece overlay.Range, loads []*pb.KeyLoad) {
	o.arrived = append(o.arrived, piece)
	o.loads = append(o.loads, loads)
	*o.log = append(*o.log, fmt.Sprintf("%s arrived %s", o.id, piece))
}

// observe installs a recording observer on every node of nw.
func (nw *testNet) observe() (map[overlay.NodeID]*recObserver, *[]string) {
	log := &[]string{}
	obs := map[overlay.NodeID]*recObserver{}
	for _, id := range nw.ids {
		o := &recObserver{id: id, log: log}
		obs[id] = o
		nw.nodes[id].SetObserver(o)
	}
	return obs, log
}

func TestObserverSeesNIX(t *testing.T) {
	for _, toSucc := range []bool{true, false} {
		t.Run(fmt.Sprintf("toSucc=%v", toSucc), func(t *testing.T) {
			nw := fiveNodes(t)
			obs, log := nw.observe()
			giver := "c"
			recv, piece := overlay.NodeID("d"), overlay.Range{Start: k(2600), End: k(3000)}
			if !toSucc {
				recv, piece = "b", overlay.Range{Start: k(2000), End: k(2600)}
			}
			loads := []*pb.KeyLoad{{Key: []byte(k(2100)), Slot: 7, Counts: []uint32{1, 2, 3}}, {Key: []byte(k(2700)), Slot: 7, Counts: []uint32{4}}}
			obs["c"].give = func(overlay.Range) []*pb.KeyLoad { return loads }
			var done nixDone
			if err := nw.nodes["c"].GiveNIX(toSucc, k(2600), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
				t.Fatal(err)
			}
			// Step by step: PieceLeaving when the acknowledgement reaches the giver (the flip),
			// PieceArrived when the commit reaches the receiver.
			for len(nw.queue) > 0 {
				s := nw.queue[0]
				nl, na := len(obs["c"].leaving), len(obs[recv].arrived)
				nw.step()
				switch {
				case s.m.GetHandoffAck() != nil:
					if len(obs["c"].leaving) != nl+1 || len(obs[recv].arrived) != na {
						t.Fatalf("at the flip: leaving %d→%d, arrived %d", nl, len(obs["c"].leaving), len(obs[recv].arrived))
					}
				case s.m.GetHandoffCommit() != nil:
					if len(obs[recv].arrived) != na+1 || len(obs["c"].leaving) != 1 {
						t.Fatalf("at the commit: arrived %d→%d", na, len(obs[recv].arrived))
					}
				default:
					if len(obs["c"].leaving) != nl || len(obs[recv].arrived) != na {
						t.Fatalf("observer called on %T", s.m.Body)
					}
				}
			}
			if done.calls != 1 || !done.ok {
				t.Fatalf("done %+v", done)
			}
			if !slices.Equal(obs["c"].leaving, []overlay.Range{piece}) || len(obs["c"].arrived) != 0 {
				t.Fatalf("giver %s: leaving %v arrived %v", giver, obs["c"].leaving, obs["c"].arrived)
			}
			o := obs[recv]
			if !slices.Equal(o.arrived, []overlay.Range{piece}) || len(o.leaving) != 0 || len(o.loads) != 1 || len(o.loads[0]) != len(loads) {
				t.Fatalf("receiver %s: arrived %v leaving %v, loads %v", recv, o.arrived, o.leaving, o.loads)
			}
			for i := range loads {
				if !proto.Equal(o.loads[0][i], loads[i]) {
					t.Fatalf("load %d arrived as %v, left as %v", i, o.loads[0][i], loads[i])
				}
			}
			for id, x := range obs {
				if id != "c" && id != recv && len(x.leaving)+len(x.arrived) != 0 {
					t.Fatalf("%s saw pieces: leaving %v arrived %v", id, x.leaving, x.arrived)
				}
			}
			// An aborted NIX neither leaves nor arrives.
			*log = nil
			nw.drop = func(s sentMsg) bool { return s.m.GetHandoffAck() != nil }
			done = nixDone{}
			split := k(2300) // inside c's range, whichever part it gave
			if !toSucc {
				split = k(2800)
			}
			if err := nw.nodes["c"].GiveNIX(toSucc, split, pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
				t.Fatal(err)
			}
			nw.advance(nw.cfg.HandoffLease + time.Second)
			nw.drop = nil
			if done.calls != 1 || done.ok {
				t.Fatalf("done %+v", done)
			}
			for _, l := range *log {
				if !bytes.Contains([]byte(l), []byte("relayed")) {
					t.Fatalf("observer called for an aborted NIX: %q", *log)
				}
			}
		})
	}
}

func TestObserverSeesReads(t *testing.T) {
	nw := fiveNodes(t)
	obs, _ := nw.observe()
	reset := func() {
		for _, o := range obs {
			o.served, o.relayed = nil, nil
		}
	}
	// A Get of a stored key is served once, at its owner; a missing key, a Put, a Find and a
	// Delete are not reads of stored items.
	get := nw.nodes["a"].Get(k(2300))
	nw.run()
	if r := nw.envs["a"].result(t, get); r.Owner != "c" || r.Status != pb.Status_STATUS_OK {
		t.Fatalf("get: %+v", r)
	}
	for id, o := range obs {
		want := []overlay.Key(nil)
		if id == "c" {
			want = []overlay.Key{k(2300)}
		}
		if !slices.Equal(o.served, want) {
			t.Fatalf("%s served %v, want %v", id, o.served, want)
		}
	}
	reset()
	nw.nodes["a"].Get(k(2350))
	nw.nodes["b"].Put(k(2400), []byte("w"))
	nw.nodes["b"].Find(k(2400))
	nw.nodes["e"].Delete(k(2500))
	nw.run()
	for id, o := range obs {
		if len(o.served) != 0 {
			t.Fatalf("%s served %v for a missing key, a write, a find and a delete", id, o.served)
		}
	}
	// A range query serves each key it returns once, at the node that holds it.
	reset()
	scan := nw.nodes["b"].Scan(k(2750), k(3250), 0, 0)
	nw.run()
	if r := nw.envs["b"].result(t, scan); len(r.Items) != 5 || !slices.Equal(r.ServedBy, []overlay.NodeID{"c", "d"}) {
		t.Fatalf("scan: %d items served by %v", len(r.Items), r.ServedBy)
	}
	if got := obs["c"].served; !slices.Equal(got, []overlay.Key{k(2800), k(2900)}) {
		t.Fatalf("c served %v", got)
	}
	if got := obs["d"].served; !slices.Equal(got, []overlay.Key{k(3000), k(3100), k(3200)}) {
		t.Fatalf("d served %v", got)
	}
	// A limited scan serves only what it returns.
	reset()
	scan = nw.nodes["a"].Scan(k(2750), k(3250), 3, 0)
	nw.run()
	if r := nw.envs["a"].result(t, scan); len(r.Items) != 3 || !r.More {
		t.Fatalf("limited scan: %d items, more %v", len(r.Items), r.More)
	}
	if n := len(obs["c"].served) + len(obs["d"].served); n != 3 || len(obs["d"].served) != 1 {
		t.Fatalf("limited scan served c %v d %v", obs["c"].served, obs["d"].served)
	}
}

func TestObserverSeesRoutes(t *testing.T) {
	nw := fiveNodes(t)
	obs, _ := nw.observe()
	// Every node a client message passes, its origin and the owner included, sees its route
	// once per pass.
	for _, from := range []overlay.NodeID{"a", "b", "e"} {
		for _, key := range []int{0, 1500, 3700, 4900} {
			for _, o := range obs {
				o.relayed = nil
			}
			env := nw.envs[from]
			mark := map[overlay.NodeID]int{}
			for id, e := range nw.envs {
				mark[id] = len(e.outbox)
			}
			get := nw.nodes[from].Get(k(key))
			nw.run()
			r := env.result(t, get)
			// The nodes that received the lookup, from the outboxes.
			passed := map[overlay.NodeID]int{from: 1}
			for id, e := range nw.envs {
				for _, s := range e.outbox[mark[id]:] {
					if l := s.m.GetLookup(); l != nil && l.ReqId == get && s.from == id {
						passed[s.to]++
					}
				}
			}
			for id, o := range obs {
				if len(o.relayed) != passed[id] {
					t.Fatalf("get %d from %s (owner %s, %d hops): %s saw the route %d times, it passed %d times", key, from, r.Owner, r.Hops, id, len(o.relayed), passed[id])
				}
				for _, rk := range o.relayed {
					if rk != k(key) {
						t.Fatalf("%s saw route key %q", id, rk)
					}
				}
			}
			if len(obs[r.Owner].relayed) == 0 {
				t.Fatalf("the owner %s did not see the route", r.Owner)
			}
		}
	}
	// Messages that are not clients' (joins, maintenance) are not shown.
	for _, o := range obs {
		o.relayed = nil
	}
	nw.join("f", "a", k(2500))
	nw.advance(time.Minute)
	for id, o := range obs {
		if len(o.relayed) != 0 {
			t.Fatalf("%s saw %d routes of a join and maintenance", id, len(o.relayed))
		}
	}
}

// outboxMarks notes how many messages each node has sent so far.
func (nw *testNet) outboxMarks() map[overlay.NodeID]int {
	m := map[overlay.NodeID]int{}
	for id, e := range nw.envs {
		m[id] = len(e.outbox)
	}
	return m
}

// checkBalanceCause checks that the handoff and join messages the nodes ids sent since marks
// (a migrant's and its target's) are sent for CAUSE_BALANCE.
func (nw *testNet) checkBalanceCause(marks map[overlay.NodeID]int, ids ...overlay.NodeID) {
	nw.t.Helper()
	for _, id := range ids {
		for _, s := range nw.envs[id].outbox[marks[id]:] {
			switch {
			case s.m.GetJoinRequest() != nil && s.from == id,
				s.m.GetHandoff() != nil, s.m.GetHandoffCommit() != nil:
				if s.m.Cause != pb.Cause_CAUSE_BALANCE {
					nw.t.Errorf("%s sent %T to %s for %v", id, s.m.Body, s.to, s.m.Cause)
				}
			}
		}
	}
}

// checkRanges checks the live nodes' ranges against want (id → range).
func (nw *testNet) checkRanges(want map[overlay.NodeID]overlay.Range) {
	nw.t.Helper()
	for id, r := range want {
		n := nw.nodes[id]
		if !n.Owns() || n.Range() != r {
			nw.t.Fatalf("%s (%s) owns %s, want %s", id, n.State(), n.Range(), r)
		}
	}
	if len(nw.live()) != len(want) {
		nw.t.Fatalf("%d live nodes, want %d", len(nw.live()), len(want))
	}
}

func TestMigrateAbove(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	old := b.Self()
	marks := nw.outboxMarks()
	if err := b.Migrate("d", k(3500), false); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	nw.checkRanges(map[overlay.NodeID]overlay.Range{
		"a": {Start: "", End: k(2000)}, // b's range went to its predecessor
		"c": {Start: k(2000), End: k(3000)},
		"d": {Start: k(3000), End: k(3500)},
		"b": {Start: k(3500), End: k(4000)}, // the migrant, above the target
		"e": {Start: k(4000), End: ""},
	})
	self := b.Self()
	if self.ID != old.ID || self.MVec != old.MVec || self.Incarnation == old.Incarnation || self.Version <= old.Version {
		t.Fatalf("migrant's descriptor %+v, was %+v: same id and vector, new incarnation, higher version", self, old)
	}
	if p, s := b.Neighbors(0); p.ID != "d" || s.ID != "e" {
		t.Fatalf("migrant links pred %s succ %s", p.ID, s.ID)
	}
	if got, want := keyInts(t, b), intsFrom(3500, 4000, 100); !slices.Equal(got, want) {
		t.Fatalf("migrant holds %v, want %v", got, want)
	}
	if got, want := keyInts(t, nw.nodes["a"]), intsFrom(0, 2000, 100); !slices.Equal(got, want) {
		t.Fatalf("a holds %v, want %v", got, want)
	}
	if got, want := keyInts(t, nw.nodes["d"]), intsFrom(3000, 3500, 100); !slices.Equal(got, want) {
		t.Fatalf("d holds %v, want %v", got, want)
	}
	nw.checkRing()
	nw.checkBalanceCause(marks, "b", "d")
	if b.Stats.ItemsOut[pb.Cause_CAUSE_BALANCE] != 10 || nw.nodes["d"].Stats.ItemsOut[pb.Cause_CAUSE_BALANCE] != 5 {
		t.Fatalf("items out for balance: migrant %v, target %v", b.Stats.ItemsOut, nw.nodes["d"].Stats.ItemsOut)
	}
	nw.checkReads("a", []int{1000, 1500, 1900}, nil)
	nw.checkReads("b", []int{3500, 3900}, nil)
	nw.checkReads("d", []int{3000, 3400}, nil)
	nw.advanceWith(2*time.Minute, nw.checkNoOverlap)
	nw.checkRing()
	nw.checkLevels()
	for _, n := range nw.live() {
		for l := 0; l < n.Height(); l++ {
			if p, s := n.Neighbors(l); (p.ID == "b" && p.Incarnation != self.Incarnation) || (s.ID == "b" && s.Incarnation != self.Incarnation) {
				t.Errorf("%s links the migrant's former incarnation at level %d", n.ID(), l)
			}
		}
	}
}

func TestMigrateBelow(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	marks := nw.outboxMarks()
	if err := b.Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	nw.checkRanges(map[overlay.NodeID]overlay.Range{
		"a": {Start: "", End: k(2000)},
		"c": {Start: k(2000), End: k(3000)},
		"b": {Start: k(3000), End: k(3500)}, // the migrant, below the target
		"d": {Start: k(3500), End: k(4000)}, // the target's start moved up
		"e": {Start: k(4000), End: ""},
	})
	if p, s := b.Neighbors(0); p.ID != "c" || s.ID != "d" {
		t.Fatalf("migrant links pred %s succ %s", p.ID, s.ID)
	}
	if p, _ := nw.nodes["d"].Neighbors(0); p.ID != "b" {
		t.Fatalf("the target's predecessor is %s", p.ID)
	}
	// The migrant told the target's former predecessor to link it.
	if _, s := nw.nodes["c"].Neighbors(0); s.ID != "b" {
		t.Fatalf("the target's former predecessor links %s", s.ID)
	}
	if got, want := keyInts(t, b), intsFrom(3000, 3500, 100); !slices.Equal(got, want) {
		t.Fatalf("migrant holds %v, want %v", got, want)
	}
	if got, want := keyInts(t, nw.nodes["d"]), intsFrom(3500, 4000, 100); !slices.Equal(got, want) {
		t.Fatalf("target holds %v, want %v", got, want)
	}
	nw.checkRing()
	nw.checkBalanceCause(marks, "b", "d")
	nw.checkReads("b", []int{3000, 3400}, nil)
	nw.checkReads("d", []int{3500, 3900}, nil)
	nw.checkReads("a", []int{1000, 1900}, nil)
	nw.advanceWith(2*time.Minute, nw.checkNoOverlap)
	nw.checkRing()
	nw.checkLevels()
}

// TestMigrateBelowNeighborUpdateLost: the migrant's word to the target's former predecessor c
// is lost. c must not stretch its range over the migrant's piece when it hears the target's new
// start (the learn rule), must refuse nothing it should not, and the pong rule links it to the
// migrant once it pings.
func TestMigrateBelowNeighborUpdateLost(t *testing.T) {
	nw := fiveNodes(t)
	b, c, d := nw.nodes["b"], nw.nodes["c"], nw.nodes["d"]
	nw.drop = func(s sentMsg) bool {
		u := s.m.GetNeighborUpdate()
		return u != nil && s.from == "b" && s.to == "c" && u.Level == 0 && u.Side == pb.Side_SIDE_SUCC
	}
	if err := b.Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if nw.dropped != 1 {
		t.Fatalf("%d messages dropped", nw.dropped)
	}
	nw.drop = nil
	if got := b.Range(); got != (overlay.Range{Start: k(3000), End: k(3500)}) {
		t.Fatalf("migrant owns %s", got)
	}
	// c heard nothing of the migrant yet: it still ends where d used to start, even once it
	// hears d's new start.
	if _, s := c.Neighbors(0); s.ID != "d" || c.Range() != (overlay.Range{Start: k(2000), End: k(3000)}) {
		t.Fatalf("c links %s and owns %s", s.ID, c.Range())
	}
	find := d.Find(k(2500)) // a message from d to c, carrying d's new start
	nw.run()
	if r := nw.envs["d"].result(t, find); r.Owner != "c" {
		t.Fatalf("find: %+v", r)
	}
	if _, s := c.Neighbors(0); c.Range() != (overlay.Range{Start: k(2000), End: k(3000)}) {
		t.Fatalf("c stretched its range to %s on hearing %s at %q", c.Range(), s.ID, s.Start)
	}
	// A read of the migrant's piece through c still reaches the migrant.
	if r := nw.getFrom("c", 3200); r.Owner != "b" || r.Status != pb.Status_STATUS_OK {
		t.Fatalf("get 3200 from c: %+v", r)
	}
	// Meanwhile c, not adjacent to d any more, cannot hand d a piece: d refuses.
	var done nixDone
	if err := c.GiveNIX(true, k(2500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if done.calls != 1 || done.ok {
		t.Fatalf("a NIX to a node that is not the successor: done %+v", done)
	}
	if r := nw.abortReasons("d"); !slices.Contains(r, "not adjacent") {
		t.Fatalf("d's refusals: %q", r)
	}
	if c.Range() != (overlay.Range{Start: k(2000), End: k(3000)}) || d.Range() != (overlay.Range{Start: k(3500), End: k(4000)}) {
		t.Fatalf("after the refused NIX: c %s d %s", c.Range(), d.Range())
	}
	// Pings repair the link: d names the migrant as its predecessor, c checks it, and the
	// migrant starts exactly where c's range ends.
	nw.advanceWith(3*nw.cfg.ProbeInterval, nw.checkNoOverlap)
	if _, s := c.Neighbors(0); s.ID != "b" {
		t.Fatalf("after pings c's successor is %s", s.ID)
	}
	if len(nw.envs["c"].eventsOf(overlay.EventConflict)) != 0 {
		t.Fatalf("c re-admitted the migrant as if wrongly declared dead: %+v", nw.envs["c"].eventsOf(overlay.EventConflict))
	}
	nw.advanceWith(2*time.Minute, nw.checkNoOverlap)
	nw.checkRing()
	nw.checkLevels()
	nw.checkReads("b", []int{3000, 3400}, nil)
	nw.checkReads("c", []int{2000, 2900}, nil)
}

// TestMigrateNoRangeLost: a migration is not a failure. The migrant's leave handoff and its
// join carry its new incarnation; its former predecessor, which takes its range, must not take
// that for a restart of the node it linked to and report the range lost.
func TestMigrateNoRangeLost(t *testing.T) {
	for _, below := range []bool{false, true} {
		t.Run(fmt.Sprintf("below=%v", below), func(t *testing.T) {
			nw := fiveNodes(t)
			if err := nw.nodes["b"].Migrate("d", k(3500), below); err != nil {
				t.Fatal(err)
			}
			nw.run()
			nw.advance(time.Minute)
			nw.checkRing()
			for _, n := range nw.live() {
				if ev := nw.envs[n.ID()].eventsOf(overlay.EventRangeLost); len(ev) != 0 {
					t.Errorf("%s reported a range lost: %+v", n.ID(), ev)
				}
				if lost := n.LostRanges(); len(lost) != 0 {
					t.Errorf("%s marks %v lost", n.ID(), lost)
				}
			}
			// A key never written in the migrant's former range is not found, not "lost".
			if r := nw.getFrom("c", 1550); r.Status != pb.Status_STATUS_NOT_FOUND {
				t.Errorf("get of a key never written where the migrant was: %v (%s)", r.Status, r.Err)
			}
		})
	}
}

// TestMigrateNextToNeighbour migrates a node next to its own neighbours: to its successor
// (below and above) and to its predecessor, which has just taken its range (above).
func TestMigrateNextToNeighbour(t *testing.T) {
	for _, c := range []struct {
		name   string
		target overlay.NodeID
		split  int
		below  bool
		want   map[overlay.NodeID]overlay.Range
	}{
		{"below its successor", "c", 2500, true, map[overlay.NodeID]overlay.Range{
			"a": {Start: "", End: k(2000)}, "b": {Start: k(2000), End: k(2500)}, "c": {Start: k(2500), End: k(3000)},
			"d": {Start: k(3000), End: k(4000)}, "e": {Start: k(4000), End: ""}}},
		{"above its successor", "c", 2500, false, map[overlay.NodeID]overlay.Range{
			"a": {Start: "", End: k(2000)}, "c": {Start: k(2000), End: k(2500)}, "b": {Start: k(2500), End: k(3000)},
			"d": {Start: k(3000), End: k(4000)}, "e": {Start: k(4000), End: ""}}},
		{"above its predecessor", "a", 500, false, map[overlay.NodeID]overlay.Range{
			"a": {Start: "", End: k(500)}, "b": {Start: k(500), End: k(2000)}, "c": {Start: k(2000), End: k(3000)},
			"d": {Start: k(3000), End: k(4000)}, "e": {Start: k(4000), End: ""}}},
		{"below its predecessor", "a", 500, true, map[overlay.NodeID]overlay.Range{
			"b": {Start: "", End: k(500)}, "a": {Start: k(500), End: k(2000)}, "c": {Start: k(2000), End: k(3000)},
			"d": {Start: k(3000), End: k(4000)}, "e": {Start: k(4000), End: ""}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := fiveNodes(t)
			if err := nw.nodes["b"].Migrate(c.target, k(c.split), c.below); err != nil {
				t.Fatal(err)
			}
			nw.runChecked(nw.checkNoOverlap)
			nw.advanceWith(time.Minute, nw.checkNoOverlap)
			nw.checkRanges(c.want)
			nw.checkRing()
			nw.checkLevels()
			for id, r := range c.want {
				for _, key := range keyInts(t, nw.nodes[id]) {
					if !r.Contains(k(key)) {
						t.Fatalf("%s holds %d outside %s", id, key, r)
					}
				}
			}
			total := 0
			for _, n := range nw.live() {
				total += n.Store().Len()
			}
			if total != 50 {
				t.Fatalf("%d items stored, want 50", total)
			}
			nw.checkReads(nw.owner(k(2200)).ID(), []int{2200}, nil)
			nw.checkReads(nw.owner(k(1800)).ID(), []int{1800}, nil)
		})
	}
}

// TestMigrantNamedAsItsOwnStaleSuccessor: a migrated below c (taking [2000, 2500)), and b has
// not heard of it: b still links to c at 2000. c then migrates next to b, above 1500, leaving
// [2500, 3000) to a. b's handoff names c's former incarnation as the successor: it left its
// range gracefully to a, so the link is stale and a is the successor. Taken for a crashed
// former incarnation, c claimed [1500, 3000) — a's live range — and reported it lost (a random
// case of TestBalanceProperties).
func TestMigrantNamedAsItsOwnStaleSuccessor(t *testing.T) {
	nw := fiveNodes(t)
	a, b, c := nw.nodes["a"], nw.nodes["b"], nw.nodes["c"]
	stale := c.Self()
	if err := a.Migrate("c", k(2500), true); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	b.levels[0].succ, b.succList = stale, []overlay.Peer{stale, nw.nodes["d"].Self(), nw.nodes["e"].Self()}
	if err := c.Migrate("b", k(1500), false); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	nw.checkRanges(map[overlay.NodeID]overlay.Range{
		"e": {Start: k(4000), End: k(1000)}, // a's range went to its predecessor
		"b": {Start: k(1000), End: k(1500)},
		"c": {Start: k(1500), End: k(2000)},
		"a": {Start: k(2000), End: k(3000)}, // c's former range went to a
		"d": {Start: k(3000), End: k(4000)},
	})
	if c.Stats.RangesLost != 0 {
		t.Fatalf("c reported %d ranges lost; its former incarnation left gracefully", c.Stats.RangesLost)
	}
	nw.advance(time.Minute)
	nw.checkRing()
}

// TestMigrateRefused: bad targets are refused at once and leave the node where it was.
func TestMigrateRefused(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	before := nw.state(t)
	if err := b.Migrate("b", k(3500), false); err == nil {
		t.Fatal("a node migrated next to itself")
	}
	if err := b.Migrate("", k(3500), false); err == nil {
		t.Fatal("a node migrated next to nobody")
	}
	long := overlay.Key(bytes.Repeat([]byte{'k'}, nw.cfg.MaxKeyLen+1))
	if err := b.Migrate("d", long, false); err == nil {
		t.Fatal("a node migrated to an invalid split")
	}
	z := nw.add("z")
	if err := z.Migrate("d", k(3500), false); err == nil {
		t.Fatal("a node that never joined migrated")
	}
	if b.State() != StateActive || len(nw.queue) != 0 {
		t.Fatalf("after refused migrations: %s, %d messages queued", b.State(), len(nw.queue))
	}
	if diff := before.diff(nw.state(t)); diff != "" {
		t.Fatal(diff)
	}
	// Once refused, the node leaves like any other (the refused migration left no trace).
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	nw.run()
	nw.advance(nw.cfg.Linger + time.Second)
	if b.State() != StateLeft || len(nw.envs["b"].eventsOf(overlay.EventLeft)) != 1 {
		t.Fatalf("leave after refused migrations: %s", b.State())
	}
}

// TestJoinBelowPredecessorLinksAtOnce: a node that joins below its giver tells its new
// predecessor (the giver's former one) to link to it (joined, HANDOFF_JOIN_BELOW). That word
// must be taken, without a conflict: the new node starts exactly where the predecessor's range
// ends, so the predecessor's range does not change. (It was refused until onNeighborUpdate
// accepted a level-0 successor starting at the range's end.)
func TestJoinBelowPredecessorLinksAtOnce(t *testing.T) {
	nw := fiveNodes(t)
	if err := nw.nodes["b"].Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if _, s := nw.nodes["c"].Neighbors(0); s.ID != "b" {
		t.Errorf("the target's former predecessor links %s, not the migrant", s.ID)
	}
	if ev := nw.envs["c"].eventsOf(overlay.EventConflict); len(ev) != 0 {
		t.Errorf("c reported conflicts: %+v", ev)
	}
	nw.checkRing()
}

// TestLeaverUnawareOfAJoinBelowItsSuccessor: of r, l and m, m migrates below r (taking r's start,
// r's moves up), and l, r's predecessor, does not hear of it before it leaves: it hands its range
// to r naming r as its successor. The range ends at m's start, not r's: r must link m. Taking
// the leaver's word, r found itself the last node and owned the whole circle beside m (a random
// case of TestBalanceCrashProperties, kept as -known-leaver-unaware-of-a-join-below).
func TestLeaverUnawareOfAJoinBelowItsSuccessor(t *testing.T) {
	nw := newTestNet(t, DefaultConfig())
	r := nw.bootstrap("r")
	l := nw.join("l", "r", k(500))
	m := nw.join("m", "r", k(800))
	nw.advance(time.Minute)
	// m's word of its new place (and r's, that m is its predecessor) does not reach l.
	nw.drop = func(s sentMsg) bool {
		u := s.m.GetNeighborUpdate()
		return s.to == "l" && u != nil && overlay.NodeID(u.Node.GetId()) == "m" && m.State() != StateLeaving
	}
	if err := m.Migrate("r", k(100), true); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if m.State() != StateActive || m.Range().End != r.Self().Start {
		t.Fatalf("m is %s owning %s, r starts at %x: the migration below r did not happen", m.State(), m.Range(), r.Self().Start)
	}
	if _, s := l.Neighbors(0); s.ID != "r" {
		t.Fatalf("l links %s: the test wants it unaware of m", s.ID)
	}
	nw.drop = nil
	if err := l.Leave(); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if r.Alone() || r.Range().End != m.Self().Start {
		t.Fatalf("r owns %s (alone %v), m starts at %x", r.Range(), r.Alone(), m.Self().Start)
	}
	nw.advance(time.Minute)
	nw.checkRing()
}

// TestJoinerMadeKnownToTheGiversNewPredecessor: a migrates below d, and d hands it the piece
// naming its predecessor c; before a acknowledges, c leaves, giving its range to b and telling d
// that b is its predecessor now. a, once joined, tells c (gone) to link it; d crashes right
// after the flip, before b has pinged it. b must know a by then: in the random case of
// TestBalanceCrashProperties this comes from (kept as -known-joiner-unknown-to-the-givers-new-
// predecessor), b found d dead before a did and took d's range over up to e, past a live node it
// never heard of. (Here a finds d dead first, and b's probe past d hears of a from e; the link
// is what fails without the fix.) The giver tells its predecessor as it is at the flip.
func TestJoinerMadeKnownToTheGiversNewPredecessor(t *testing.T) {
	nw := fiveNodes(t)
	a, b, c := nw.nodes["a"], nw.nodes["b"], nw.nodes["c"]
	if err := a.Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	handedOut := func() bool {
		for _, s := range nw.queue {
			if h := s.m.GetHandoff(); h != nil && s.from == "d" && h.Kind == pb.HandoffKind_HANDOFF_JOIN_BELOW {
				return true
			}
		}
		return false
	}
	for !handedOut() {
		if !nw.step() {
			t.Fatal("d never handed a its piece")
		}
	}
	nw.pause("a")
	if err := c.Leave(); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if p, _ := nw.nodes["d"].Neighbors(0); p.ID != "b" {
		t.Fatalf("after c left, d's predecessor is %s, want b", p.ID)
	}
	nw.resume("a")
	nw.runChecked(nw.checkNoOverlap)
	if got := a.Range(); got != (overlay.Range{Start: k(3000), End: k(3500)}) {
		t.Fatalf("the migrant owns %s, want [3000, 3500)", got)
	}
	if _, s := b.Neighbors(0); s.ID != "a" {
		t.Errorf("b links %s as its successor, not the migrant", s.ID)
	}
	nw.crashAndSettle("d", b, overlay.Range{Start: k(1000), End: k(3000)})
}

// crashAndSettle crashes id, runs the network for a minute checking that no two nodes own a
// common key at any step, and checks the ring and taker's range then.
func (nw *testNet) crashAndSettle(id overlay.NodeID, taker *Node, want overlay.Range) {
	nw.t.Helper()
	nw.crash(id)
	nw.advanceWith(time.Minute, nw.checkNoOverlap)
	nw.checkRing()
	if got := taker.Range(); got != want {
		nw.t.Errorf("%s owns %s, want %s", taker.ID(), got, want)
	}
}

// TestTakeOverStopsAtTheNodeTheSuccessorNamed: a migrates in below d, and c, d's predecessor,
// links it on its word; c's successor list still starts with d (a's answers to c are lost), and
// b, asking c, hears of a only as c's successor. d then leaves, handing its range to a, and c
// crashes. b must take c's range over up to a, not up to d's old start, which lies past a's
// (a random case of TestBalanceCrashProperties, kept as
// -known-successor-list-behind-a-successor-update).
func TestTakeOverStopsAtTheNodeTheSuccessorNamed(t *testing.T) {
	nw := fiveNodes(t)
	a, b, d := nw.nodes["a"], nw.nodes["b"], nw.nodes["d"]
	if err := a.Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	nw.run()
	nw.drop = func(s sentMsg) bool { return s.from == "a" && s.to == "c" && s.m.GetPong() != nil }
	for i := 0; b.maintain.succSucc.ID != "a"; i++ {
		if i == 300 {
			t.Fatal("b never heard from c that a is its successor")
		}
		nw.advance(100 * time.Millisecond)
	}
	if b.listed("a") {
		t.Fatal("b lists a: the case needs a list that does not")
	}
	if err := d.Leave(); err != nil {
		t.Fatal(err)
	}
	nw.run()
	nw.drop = nil
	nw.crashAndSettle("c", b, overlay.Range{Start: k(1000), End: k(3000)})
}

// TestMigrateWhileMigrating: a second Migrate while the first one's leave is under way is
// refused, and the first migration goes on as ordered.
func TestMigrateWhileMigrating(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	if err := b.Migrate("d", k(3500), false); err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate("e", k(4500), false); err == nil {
		t.Fatal("a second migration was accepted while the first one runs")
	}
	nw.run()
	nw.advance(time.Minute)
	if b.State() != StateActive || b.Range() != (overlay.Range{Start: k(3500), End: k(4000)}) {
		t.Fatalf("migrant is %s owning %s, want active at [3500, 4000)", b.State(), b.Range())
	}
	nw.checkRing()
	nw.checkLevels()
}

// TestMigrateSplitTaken: a migration whose split has become another node's start by the time
// the migrant asks to join there cannot be placed as ordered. It must not leave the migrant out
// of the overlay for ever, retrying the same position: the migrant ends up owning a range again
// (or the failure is reported).
func TestMigrateSplitTaken(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	if err := b.Migrate("d", k(3000), false); err != nil { // d starts at 3000
		t.Fatal(err)
	}
	nw.run()
	nw.advance(10 * time.Minute)
	refused := 0
	for _, s := range nw.envs["d"].outbox {
		if r := s.m.GetJoinRefused(); r != nil && s.to == "b" {
			refused++
		}
	}
	if b.State() != StateActive {
		t.Fatalf("after 10 minutes the migrant is %s, owns nothing, and was refused %d times", b.State(), refused)
	}
	nw.checkRing()
}

// TestPredecessorMissesTwoJoins: a migrant joins below d (b takes [3000, 3500), d moves up to
// 3500), and before d's former predecessor c pinged, a second node joins next to it: below d
// again (a takes [3500, 3800)), or above the first migrant (a takes [3200, 3500)). The joiners'
// NeighborUpdates to their new predecessors are lost (or, as in the property test, sent to a
// predecessor that has just left). c still ends at 3000, where b starts; pings must make it link
// b. (The balancer's MIG phase places migrants consecutively, each next to the one before: the
// same pattern.)
func TestPredecessorMissesTwoJoins(t *testing.T) {
	for _, c := range []struct {
		name  string
		split int
		below bool
		want  map[overlay.NodeID]overlay.Range
	}{
		{"below, then below the target again", 3800, true, map[overlay.NodeID]overlay.Range{
			"e": {Start: k(4000), End: k(2000)}, // a held b's former range too; both went to e, over the seam
			"c": {Start: k(2000), End: k(3000)}, "b": {Start: k(3000), End: k(3500)},
			"a": {Start: k(3500), End: k(3800)}, "d": {Start: k(3800), End: k(4000)}}},
		{"below, then above the first migrant", 3200, false, map[overlay.NodeID]overlay.Range{
			"e": {Start: k(4000), End: k(2000)},
			"c": {Start: k(2000), End: k(3000)}, "b": {Start: k(3000), End: k(3200)},
			"a": {Start: k(3200), End: k(3500)}, "d": {Start: k(3500), End: k(4000)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := fiveNodes(t)
			// The joiners' word to their new predecessors is lost: only pings can repair.
			nw.drop = func(s sentMsg) bool {
				u := s.m.GetNeighborUpdate()
				return u != nil && u.Level == 0 && u.Side == pb.Side_SIDE_SUCC
			}
			if err := nw.nodes["b"].Migrate("d", k(3500), true); err != nil {
				t.Fatal(err)
			}
			nw.runChecked(nw.checkNoOverlap)
			if err := nw.nodes["a"].Migrate("d", k(c.split), c.below); err != nil {
				t.Fatal(err)
			}
			nw.runChecked(nw.checkNoOverlap)
			nw.drop = nil
			nw.checkRanges(c.want)
			nw.advanceWith(3*time.Minute, nw.checkNoOverlap)
			if _, s := nw.nodes["c"].Neighbors(0); s.ID != "b" {
				t.Errorf("c's successor is %s (recorded at %d), want b", s.ID, overlay.KeyUint64(s.Start))
			}
			nw.checkRing()
			nw.checkLevels()
		})
	}
}

// TestObserverSeesMigration: a migration is two handoffs, and the load statistics travel with
// both: the migrant's whole range to its predecessor, then the target's piece to the migrant.
func TestObserverSeesMigration(t *testing.T) {
	nw := fiveNodes(t)
	obs, _ := nw.observe()
	for id, o := range obs {
		o.give = func(piece overlay.Range) []*pb.KeyLoad {
			return []*pb.KeyLoad{{Key: []byte(piece.Start), Slot: 1, Counts: []uint32{uint32(len(id))}}, {Key: []byte(id), Slot: 1}}
		}
	}
	if err := nw.nodes["b"].Migrate("d", k(3500), false); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	left, taken := overlay.Range{Start: k(1000), End: k(2000)}, overlay.Range{Start: k(3500), End: k(4000)}
	for _, c := range []struct {
		id              overlay.NodeID
		leaving, arrive []overlay.Range
		from            overlay.NodeID // whose statistics arrived
	}{
		{"b", []overlay.Range{left}, []overlay.Range{taken}, "d"},
		{"a", nil, []overlay.Range{left}, "b"},
		{"d", []overlay.Range{taken}, nil, ""},
		{"c", nil, nil, ""},
		{"e", nil, nil, ""},
	} {
		o := obs[c.id]
		if !slices.Equal(o.leaving, c.leaving) || !slices.Equal(o.arrived, c.arrive) {
			t.Fatalf("%s: leaving %v arrived %v, want %v and %v", c.id, o.leaving, o.arrived, c.leaving, c.arrive)
		}
		if c.from == "" {
			continue
		}
		if len(o.loads) != 1 || len(o.loads[0]) != 2 || string(o.loads[0][1].Key) != string(c.from) || overlay.Key(o.loads[0][0].Key) != c.arrive[0].Start {
			t.Fatalf("%s received statistics %v, want %s's for %s", c.id, o.loads, c.from, c.arrive[0])
		}
	}
}

// TestNIXTwoNodes: with two nodes the successor and the predecessor are the same node; a NIX
// either way moves one boundary and leaves the other (the seam side) alone.
func TestNIXTwoNodes(t *testing.T) {
	for _, toSucc := range []bool{true, false} {
		t.Run(fmt.Sprintf("toSucc=%v", toSucc), func(t *testing.T) {
			nw := newTestNet(t, DefaultConfig())
			a := nw.bootstrap("a")
			b := nw.join("b", "a", k(1000))
			load(t, nw, a, items(0, 2000, 100))
			nw.advance(time.Minute)
			var done nixDone
			// To the predecessor (b, over the seam): a keeps [500, 1000) and b wraps round.
			split, wantA, wantB := k(500), overlay.Range{Start: k(500), End: k(1000)}, overlay.Range{Start: k(1000), End: k(500)}
			aKeys, bKeys := []int{500, 900}, []int{0, 400, 1000, 1900}
			if toSucc {
				wantA, wantB = overlay.Range{Start: "", End: k(500)}, overlay.Range{Start: k(500), End: ""}
				aKeys, bKeys = []int{0, 400}, []int{500, 900, 1000, 1900}
			}
			if err := a.GiveNIX(toSucc, split, pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
				t.Fatal(err)
			}
			nw.runChecked(nw.checkNoOverlap)
			if done.calls != 1 || !done.ok || done.items != 5 {
				t.Fatalf("done %+v", done)
			}
			if a.Range() != wantA || b.Range() != wantB {
				t.Fatalf("a owns %s, b owns %s; want %s and %s", a.Range(), b.Range(), wantA, wantB)
			}
			nw.advance(time.Minute)
			nw.checkRing()
			nw.checkLevels()
			nw.checkReads("a", aKeys, nil)
			nw.checkReads("b", bKeys, nil)
		})
	}
}

// TestNIXCrossing: two neighbours start a NIX to each other at the same moment; each refuses
// the other's piece (it is busy giving), both report failure, and nothing moves.
func TestNIXCrossing(t *testing.T) {
	nw := fiveNodes(t)
	before := nw.state(t)
	var bc, cb nixDone
	if err := nw.nodes["b"].GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, bc.fn()); err != nil {
		t.Fatal(err)
	}
	if err := nw.nodes["c"].GiveNIX(false, k(2500), pb.Cause_CAUSE_BALANCE, cb.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if bc.calls != 1 || bc.ok || cb.calls != 1 || cb.ok {
		t.Fatalf("done: b→c %+v, c→b %+v", bc, cb)
	}
	if diff := before.diff(nw.state(t)); diff != "" {
		t.Fatal(diff)
	}
	// Once both are idle again, either NIX goes through.
	if err := nw.nodes["b"].GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, bc.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if bc.calls != 2 || !bc.ok || nw.nodes["c"].Range() != (overlay.Range{Start: k(1500), End: k(3000)}) {
		t.Fatalf("second NIX: %+v, c owns %s", bc, nw.nodes["c"].Range())
	}
}

// TestMigrateToPredecessorAfterNIX: b hands [1500, 2000) to its successor c, then migrates
// next to its predecessor a (above, at 500) before a pinged it. a takes b's range by the leave
// handoff; it must never, even for a moment, believe it owns c's new lower part [1500, 2000).
func TestMigrateToPredecessorAfterNIX(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	var done nixDone
	if err := b.GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	if !done.ok {
		t.Fatalf("NIX: %+v", done)
	}
	if err := b.Migrate("a", k(500), false); err != nil {
		t.Fatal(err)
	}
	nw.runChecked(nw.checkNoOverlap)
	nw.checkRanges(map[overlay.NodeID]overlay.Range{
		"a": {Start: "", End: k(500)}, "b": {Start: k(500), End: k(1500)}, "c": {Start: k(1500), End: k(3000)},
		"d": {Start: k(3000), End: k(4000)}, "e": {Start: k(4000), End: ""},
	})
	nw.checkRing()
}

// TestReadReachesJoinerBeforeCommit: the giver of a join flips and forwards reads for the piece
// to the joiner; until the joiner commits (the first commit is lost here; on a network with
// jitter a read may simply overtake it) nobody else links it. A read must then wait at the
// joiner for the commit, as it does at a NIX or leave receiver, and be answered: whether it
// comes through the giver (c's read goes to d, which forwards to the joiner) or from the
// joiner's successor-to-be (e's read walks counter-clockwise from e to d).
func TestReadReachesJoinerBeforeCommit(t *testing.T) {
	for _, migrate := range []bool{false, true} {
		for _, from := range []overlay.NodeID{"c", "e"} {
			t.Run(fmt.Sprintf("migrant=%v/from=%s", migrate, from), func(t *testing.T) {
				nw := fiveNodes(t)
				joiner := overlay.NodeID("b")
				first := true
				nw.drop = func(s sentMsg) bool {
					if s.m.GetHandoffCommit() != nil && s.to == joiner && first {
						first = false
						return true
					}
					return false
				}
				if migrate {
					if err := nw.nodes["b"].Migrate("d", k(3500), false); err != nil {
						t.Fatal(err)
					}
				} else {
					joiner = "f"
					if err := nw.add("f").Join("a", k(3500)); err != nil { // d's middle item is 3500
						t.Fatal(err)
					}
				}
				nw.run()
				j := nw.nodes[joiner]
				if j.State() != StateJoining || !j.Busy() || nw.nodes["d"].Range() != (overlay.Range{Start: k(3000), End: k(3500)}) {
					t.Fatalf("joiner %s busy %v; d owns %s", j.State(), j.Busy(), nw.nodes["d"].Range())
				}
				get := nw.nodes[from].Get(k(3700))
				nw.run()
				nw.advance(time.Minute) // the commit is repeated
				r := nw.envs[from].result(t, get)
				if r.Status != pb.Status_STATUS_OK || r.Owner != joiner || string(r.Value) != string(val(3700)) {
					t.Fatalf("get 3700 from %s during the join: %v %q at %s (%s, %d hops)", from, r.Status, r.Value, r.Owner, r.Err, r.Hops)
				}
			})
		}
	}
}

// TestMigrateAfterTargetLeft: the target left (and is gone) before the migrant, having handed
// its range on, asks it for a place. The migrant must not ask the gone target for ever: the node
// that took the migrant's range, alive and in the overlay, introduces it to the owner of the
// position instead (found by the balancing property test: a migrant joining for ever).
func TestMigrateAfterTargetLeft(t *testing.T) {
	nw := fiveNodes(t)
	if err := nw.nodes["d"].Leave(); err != nil {
		t.Fatal(err)
	}
	nw.advance(time.Minute)
	if got := nw.nodes["d"].State(); got != StateLeft {
		t.Fatalf("d is %s, want left", got)
	}
	nw.crash("d") // gone: it answers nothing any more
	b := nw.nodes["b"]
	if err := b.Migrate("d", k(3500), true); err != nil {
		t.Fatal(err)
	}
	nw.advance(10 * time.Minute)
	if b.State() != StateActive || !b.Range().Contains(k(3400)) {
		t.Fatalf("migrant b is %s owning %s, want active next to 3500", b.State(), b.Range())
	}
	nw.checkRing()
	nw.checkReads("a", []int{1000, 1900}, nil) // the migrant's old range
	nw.checkReads("b", []int{3000, 3400}, nil)
	nw.checkReads("c", []int{3600}, nil) // the gone target's range went to c
}

// TestRejoinForgetsThePredecessorsSilence: a node that gave its place up because its
// predecessor fell silent (rejoinAfresh) and joined again must not judge its new predecessor —
// often the same node — by that silence. Kept, it started waiting for its neighbours' word at
// once after joining, and after a mass crash, with the repairs around it slow, gave its new
// place up too, dropping the only copies of the range it had just been handed (20% of 500
// nodes crashing at once: 438 of the 538 keys lost on one seed).
func TestRejoinForgetsThePredecessorsSilence(t *testing.T) {
	nw := fiveNodes(t)
	b := nw.nodes["b"]
	if b.predHeardID != "a" {
		t.Fatalf("b last heard from its predecessor %q, want a", b.predHeardID)
	}
	b.predHeard = nw.clock.now.Add(-time.Hour) // a fell silent long ago, others are heard
	b.heardAny = nw.clock.now
	b.startWait()
	b.unconfirmedSince = nw.clock.now.Add(-(maxUnconfirmed + 1) * nw.cfg.ProbeInterval)
	b.checkWait() // gives the place up and joins again
	if b.State() != StateJoining {
		t.Fatalf("b is %s, not joining again", b.State())
	}
	for i := 0; b.State() != StateActive; i++ {
		if i == 3000 {
			t.Fatalf("b is %s five minutes after giving its place up", b.State())
		}
		nw.advance(100 * time.Millisecond)
	}
	// Joined: its new predecessor has not spoken to it since (the join's messages came while it
	// had no links), and must not count as silent for what b heard of it before.
	if b.mayBeReplaced() {
		t.Fatalf("b, just joined after a, waits for its neighbours' word (a last heard %s ago)", nw.clock.now.Sub(b.predHeard))
	}
}

// TestTakeOverStopsAtAJoinerPastASilentNode: e migrates in at 1500, between b and c, unheard of
// by a, b's predecessor. c crashes, and e takes its range over and tells d; then b crashes. c is
// silent to a's probes too, so a is not to ask it; but d, the first node past it that answers,
// names e as its predecessor, and a's take-over of b's range must stop there rather than go up
// to c's start, over e's range (a random case of TestBalanceCrashProperties, kept as
// -known-takeover-up-to-a-silent-node-past-a-joiner: two nodes crashed at once with a joiner
// between them).
func TestTakeOverStopsAtAJoinerPastASilentNode(t *testing.T) {
	nw := fiveNodesWithEBetweenBAndC(t)
	a, b, c, d, e := nw.nodes["a"], nw.nodes["b"], nw.nodes["c"], nw.nodes["d"], nw.nodes["e"]
	nw.crash("c")
	for i := 0; e.Range() != (overlay.Range{Start: k(1500), End: k(3000)}) || d.levels[0].pred.ID != "e"; i++ {
		if i == 600 {
			t.Fatalf("e never took c's range over and told d (e owns %s)", e.Range())
		}
		nw.advance(100 * time.Millisecond)
	}
	unheardOf(a, "e", b, c, d) // its list and links as before the migration
	nw.crashAndSettle("b", a, overlay.Range{Start: a.Self().Start, End: k(1500)})
}

// fiveNodesWithEBetweenBAndC is fiveNodes after e migrated in at 1500, in b's range: the ring
// is a, b, e ([1500, 2000)), c, d.
func fiveNodesWithEBetweenBAndC(t *testing.T) *testNet {
	t.Helper()
	nw := fiveNodes(t)
	e := nw.nodes["e"]
	if err := e.Migrate("b", k(1500), false); err != nil {
		t.Fatal(err)
	}
	nw.run()
	nw.advance(time.Minute)
	if got := e.Range(); got != (overlay.Range{Start: k(1500), End: k(2000)}) {
		t.Fatalf("e owns %s after its migration, want [1500, 2000)", got)
	}
	return nw
}

// unheardOf makes n as if it had never heard of id: list is its successor list, and no link
// names id.
func unheardOf(n *Node, id overlay.NodeID, list ...*Node) {
	n.succList = nil
	for _, p := range list {
		n.succList = append(n.succList, p.Self())
	}
	n.maintain.succSucc = overlay.Peer{}
	for i := range n.levels {
		if n.levels[i].pred.ID == id {
			n.levels[i].pred = overlay.Peer{}
		}
		if n.levels[i].succ.ID == id {
			n.levels[i].succ = overlay.Peer{}
		}
	}
}

// TestTakeOverAsksAgainWhenTheAnswerNamesASilentNode: e migrates in at 1500, between b and c,
// unheard of by a. b and c crash together; e takes c's range over and tells d, but d answers
// a's ask first, naming the silent c as its predecessor. a asks d again a probe interval later
// and stops its take-over of b's range at e, rather than going up to d over e's range (a random
// case of TestBalanceCrashProperties, kept as
// -known-takeover-over-a-joiner-the-asked-node-had-not-heard-of).
func TestTakeOverAsksAgainWhenTheAnswerNamesASilentNode(t *testing.T) {
	nw := fiveNodesWithEBetweenBAndC(t)
	a := nw.nodes["a"]
	unheardOf(a, "e", nw.nodes["b"], nw.nodes["c"], nw.nodes["d"])
	// e's word reaches d only after d answered a's first ask.
	asked := false
	nw.drop = func(s sentMsg) bool {
		if s.from == "a" && s.to == "d" && s.m.GetPing().GetTable() {
			asked = true
		}
		return s.from == "e" && s.to == "d" && !asked
	}
	nw.crash("b")
	nw.crash("c")
	nw.advanceWith(time.Minute, nw.checkNoOverlap)
	if !asked {
		t.Fatal("a never asked d: the case tests nothing")
	}
	nw.checkRing()
	if got, want := a.Range(), (overlay.Range{Start: a.Self().Start, End: k(1500)}); got != want {
		t.Errorf("a owns %s, want %s", got, want)
	}
}

// TestPartTakenOverDuringAJoinWrittenOut: f joins at 1500, taking [1500, 2000) from b, and its
// acknowledgements are slow; meanwhile c dies, b takes [2000, 3000) over and a key is written
// there (at b). Once the join flips f owns up to d's start, 3000, but was handed the items only
// up to 2000: the key written meanwhile stayed at b, outside its range, found by no read (skipsim
// balance --pause 0.1 --pause-for 120s --seed 9). b now writes it out to f after the flip.
func TestPartTakenOverDuringAJoinWrittenOut(t *testing.T) {
	nw, b := takeOverDuringAHandoff(t, "f", func(nw *testNet) { nw.join("f", "b", k(1500)) })
	nw.checkRing()
	f := nw.nodes["f"]
	if got := f.Range(); got != (overlay.Range{Start: k(1500), End: k(3000)}) {
		t.Fatalf("f owns %s, want [1500, 3000)", got)
	}
	if got := value(t, f, 2500); got != "written meanwhile" {
		t.Fatalf("2500 at f: %q, want the value written while b held it", got)
	}
	if n, _ := b.Store().Count(overlay.Range{Start: k(2000), End: k(3000)}); n != 0 {
		t.Fatalf("b still holds %d items of [2000, 3000)", n)
	}
}

// takeOverDuringAHandoff starts, on fiveNodes, a handoff of b's (start) whose receiver's
// acknowledgements are held back; meanwhile c dies, b takes [2000, 3000) over, 2500 is written
// there and 2600 deleted, at b. Then the acknowledgements go through and a minute passes. It
// returns the network and b.
func takeOverDuringAHandoff(t *testing.T, receiver overlay.NodeID, start func(nw *testNet)) (*testNet, *Node) {
	t.Helper()
	nw, b, release := heldHandoffAfterATakeOver(t, receiver, start)
	release()
	nw.advance(time.Minute)
	return nw, b
}

// heldHandoffAfterATakeOver is takeOverDuringAHandoff up to the receiver's acknowledgements,
// which go through once release is called.
func heldHandoffAfterATakeOver(t *testing.T, receiver overlay.NodeID, start func(nw *testNet)) (nw *testNet, b *Node, release func()) {
	t.Helper()
	nw = fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	slow := true
	nw.drop = func(s sentMsg) bool { return slow && s.from == receiver && s.to == "b" && s.m.GetHandoffAck() != nil }
	start(nw)
	b = nw.nodes["b"]
	if !b.Busy() {
		t.Fatalf("b is not handing %s a piece: the case tests nothing", receiver)
	}
	nw.crash("c")
	for i := 0; b.Range().End != k(3000); i++ {
		if i == 25 {
			t.Fatalf("b did not take c's range over while its handoff was under way (b owns %s)", b.Range())
		}
		nw.advance(time.Second)
	}
	b.Put(k(2500), []byte("written meanwhile"))
	b.Delete(k(2600))
	nw.run()
	if got := value(t, b, 2500); got != "written meanwhile" || !b.Busy() {
		t.Fatalf("2500 at b: %q, b busy %v: the case tests nothing", got, b.Busy())
	}
	return nw, b, func() { slow = false }
}

// leaveB starts b's leave, for takeOverDuringAHandoff.
func leaveB(t *testing.T) func(nw *testNet) {
	return func(nw *testNet) {
		if err := nw.nodes["b"].Leave(); err != nil {
			t.Fatal(err)
		}
		nw.run()
	}
}

// TestPartTakenOverDuringALeaveWrittenOut: b leaves, handing [1000, 2000) to a, and a's
// acknowledgements are slow; meanwhile c dies, b takes [2000, 3000) over and a key is written
// there (at b). Once the leave flips, the key must not leave with b: b writes it out through a
// to whoever owns it then.
func TestPartTakenOverDuringALeaveWrittenOut(t *testing.T) {
	nw, b := takeOverDuringAHandoff(t, "a", leaveB(t))
	if b.State() != StateLeft {
		t.Fatalf("b is %s, want left", b.State())
	}
	nw.checkRing()
	if got := value(t, nw.owner(k(2500)), 2500); got != "written meanwhile" {
		t.Fatalf("2500 at its owner %s: %q, want the value written while b held it", nw.owner(k(2500)).ID(), got)
	}
}

// TestPartTakenOverDuringALeaveWrittenOutPromptly: as above, with b's requests waiting two
// minutes an attempt (skipsim's setting). The write-out goes through a, which routes it into c,
// dead, until it takes c's range over itself: each attempt of a batch of copies sent through a
// node is short, so the value reaches a seconds after that, not two minutes. Meanwhile a
// paused node back in c's place was re-admitted without it and served its older value
// (skipsim balance --nodes 50 ... --pause 0.1 --pause-for 120s --loss 0.05 --seed 44).
func TestPartTakenOverDuringALeaveWrittenOutPromptly(t *testing.T) {
	nw, b, release := heldHandoffAfterATakeOver(t, "a", leaveB(t))
	b.cfg.RequestTimeout = 2 * time.Minute
	release()
	a := nw.nodes["a"]
	for i := 0; ; i++ {
		if a.Responsible(k(2500)) {
			if it, ok, _ := a.Store().Get(k(2500)); ok && string(it.Value) == "written meanwhile" {
				break
			}
		}
		if i == 60 {
			t.Fatalf("a a minute after b's leave: owns %s, 2500 not there; b left: %v", a.Range(), b.State() == StateLeft)
		}
		nw.advance(time.Second)
	}
}

// TestDeleteInAPartTakenOverDuringALeaveWrittenOut: as above, and 2600 deleted at b in the part
// it took over. The delete goes out with the items: when an older copy of 2600 reaches the new
// owner later (a re-admission's), it does not stand. Left behind with b, the delete was undone
// so (small runs with a fifth of the nodes paused, seed 49).
func TestDeleteInAPartTakenOverDuringALeaveWrittenOut(t *testing.T) {
	nw, _ := takeOverDuringAHandoff(t, "a", leaveB(t))
	owner := nw.owner(k(2600))
	owner.Handle("d", &pb.Envelope{From: nw.nodes["d"].selfRef, Body: &pb.Envelope_BatchPut{BatchPut: &pb.BatchPut{
		ReqId: 1, Origin: nw.nodes["d"].selfRef, Route: &pb.Route{Key: []byte(k(2600))}, Copies: true, KeepExisting: true,
		Items: []*pb.Item{{Key: []byte(k(2600)), Value: []byte("older copy"), Written: 1}}}}})
	if it, ok, _ := owner.Store().Get(k(2600)); ok {
		t.Fatalf("2600 at its owner %s: %q, want it deleted", owner.ID(), it.Value)
	}
}

// TestCopiesBelowASuccessorThatMovedDownWrittenOut: c's start moves down from 2000 to 1500 by
// no handoff of b's (a node overlapping b, unknown to it, gave c that part — seen after mass
// pauses). What b holds in [1500, 2000) is a copy now, found by no read: b writes it out to c,
// whose value stands, and drops it.
func TestCopiesBelowASuccessorThatMovedDownWrittenOut(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	b, c := nw.nodes["b"], nw.nodes["c"]
	_ = b.Store().Put(overlay.Item{Key: k(1750), Value: []byte("b's copy")})
	_ = c.Store().Put(overlay.Item{Key: k(1750), Value: []byte("c's")})
	c.self = c.self.WithStart(k(1500), c.self.Version+1)
	c.refreshSelfRef()
	nw.advance(time.Minute)
	if got := b.Range(); got != (overlay.Range{Start: k(1000), End: k(1500)}) {
		t.Fatalf("b owns %s, want [1000, 1500)", got)
	}
	if n, _ := b.Store().Count(overlay.Range{Start: k(1500), End: k(2000)}); n != 0 {
		t.Fatalf("b still holds %d items of [1500, 2000), outside its range", n)
	}
	if got := value(t, c, 1750); got != "c's" {
		t.Fatalf("1750 at c: %q, want c's own value", got)
	}
}

// TestAbortedJoinKeepsTheJoinersOwnCopies: f, joining at 1500, still holds a copy of 1750 from a
// former place (not yet written out: its write failed). b's handoff of [1500, 2000) to f aborts
// (f's acknowledgements never arrive). f drops what the handoff brought, and keeps its own
// copy: dropping the whole piece lost 112 such items after mass pauses (skipsim balance --pause
// 0.2 --pause-for 60s --seed 12).
func TestAbortedJoinKeepsTheJoinersOwnCopies(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	nw.drop = func(s sentMsg) bool { return s.from == "f" && s.to == "b" && s.m.GetHandoffAck() != nil }
	f := nw.add("f")
	_ = f.Store().Put(overlay.Item{Key: k(1750), Value: []byte("f's copy")})
	if err := f.Join("b", k(1500)); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if n, _ := f.Store().Count(overlay.Range{Start: k(1500), End: k(2000)}); n < 2 {
		t.Fatalf("f holds %d items of the piece: the handoff did not start, the case tests nothing", n)
	}
	for i := 0; f.in != nil; i++ {
		if i == 60 {
			t.Fatal("b's handoff to f never aborted")
		}
		nw.advance(time.Second)
	}
	if got := value(t, f, 1750); got != "f's copy" {
		t.Fatalf("1750 at f: %q, want f's own copy kept", got)
	}
	if n, _ := f.Store().Count(overlay.Range{Start: k(1500), End: k(2000)}); n != 1 {
		t.Fatalf("f holds %d items of [1500, 2000) after the abort, want only its own copy", n)
	}
}

// TestChunksInFlightNotSentAgainForEveryAnswer: b hands c a piece of 39 one-item chunks while
// writes into the piece keep coming, each forwarded to c as one more chunk. c, having applied the
// last chunk, answers every chunk with the chunks it has applied — fewer than b has sent by then,
// the newest still on their way — and b took each answer for a loss and sent them all again, the
// duplicates drawing more answers: a leave to a node back from a pause took two million messages
// (skipsim balance --pause 0.1 --pause-for 120s --seed 16). Now b sends chunks again once every
// half retry interval at most.
func TestChunksInFlightNotSentAgainForEveryAnswer(t *testing.T) {
	nw, b, c := oneItemChunksFromBToC(t)
	const writes = 100
	chunks, written := nixUnderWrites(t, nw, b, c, writes)
	if written < writes/2 {
		t.Fatalf("only %d writes during the handoff: the test tests nothing", written)
	}
	if limit := 3 * (39 + written); chunks > limit {
		t.Errorf("b sent %d chunks for 39 items and %d writes; want no more than %d", chunks, written, limit)
	}
	if got := c.Range(); got.Start != k(1000)+"\x00" {
		t.Errorf("c owns %s, want it to start past b's one key", got)
	}
}

// TestChunkMissedTwiceStillArrives: c misses chunk 20 of a NIX of 39 one-item chunks twice, the
// first time and again when b sends the rest once more on c's answer. b sends chunks again once
// every half retry interval at most (TestChunksInFlightNotSentAgainForEveryAnswer); c, making no
// progress, asks again after its own retry interval, and the piece goes through.
func TestChunkMissedTwiceStillArrives(t *testing.T) {
	nw, b, c := oneItemChunksFromBToC(t)
	dropped := 0
	nw.drop = func(s sentMsg) bool {
		if h := s.m.GetHandoff(); h != nil && s.from == "b" && h.Seq == 20 && dropped < 2 {
			dropped++
			return true
		}
		return false
	}
	var done nixDone
	if err := b.GiveNIX(true, k(1000)+"\x00", pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.advance(time.Minute)
	if dropped != 2 {
		t.Fatalf("chunk 20 dropped %d times, want 2: the test tests nothing", dropped)
	}
	if done.calls != 1 || !done.ok || done.items != 39 {
		t.Fatalf("done called %d times, ok %v, items %d; want once, true, 39", done.calls, done.ok, done.items)
	}
	if got := c.Range(); got.Start != k(1000)+"\x00" || c.Store().Len() != 39 {
		t.Errorf("c owns %s with %d items, want it to start past b's one key with 39", got, c.Store().Len())
	}
}

// oneItemChunksFromBToC builds a ring of a, b [1000, 2000) holding 40 items, and c [2000, …),
// handoffs going one item to a chunk.
// nixUnderWrites has b give c its piece above its first key by a NIX while every handoff chunk
// b sends, up to most of them, draws a write into the piece at b; it checks that the NIX
// succeeded and that every write reached c, and returns the chunks b sent and the writes made.
func nixUnderWrites(t *testing.T, nw *testNet, b, c *Node, most int) (chunks, written int) {
	t.Helper()
	nw.drop = func(s sentMsg) bool {
		if s.m.GetHandoff() == nil || s.from != "b" {
			return false
		}
		chunks++
		if written < most && b.Busy() {
			b.Put(k(1500)+overlay.Key(fmt.Sprint(written)), []byte("w"))
			written++
		}
		return false
	}
	var done nixDone
	if err := b.GiveNIX(true, k(1000)+"\x00", pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	nw.advance(time.Minute)
	if done.calls != 1 || !done.ok {
		t.Fatalf("done called %d times, ok %v; want once, true", done.calls, done.ok)
	}
	for i := range written {
		if _, ok, _ := c.Store().Get(k(1500) + overlay.Key(fmt.Sprint(i))); !ok {
			t.Fatalf("write %d missing at c", i)
		}
	}
	return chunks, written
}

func oneItemChunksFromBToC(t *testing.T) (nw *testNet, b, c *Node) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChunkItems = 1
	nw = newTestNet(t, cfg)
	nw.bootstrap("a")
	nw.join("b", "a", k(1000))
	nw.join("c", "a", k(2000))
	nw.advance(time.Minute)
	load(t, nw, nw.nodes["a"], items(1000, 2000, 25))
	return nw, nw.nodes["b"], nw.nodes["c"]
}

// TestWritesHeldOnceTheBulkIsAcknowledged: b hands c a piece of one-item chunks while every chunk
// b sends draws a write into the piece. Forwarded to c, each write was one more chunk to
// acknowledge and drew the next write, so the acknowledgement of the last chunk never caught up
// until the writes stopped: a leave of 14,000 keys taking client writes aborted 25 times as its
// lease ran out (500 nodes, a fifth paused, seed 9). Once c has acknowledged the bulk, writes to
// the piece wait at b for the flip and then go to c.
func TestWritesHeldOnceTheBulkIsAcknowledged(t *testing.T) {
	nw, b, c := oneItemChunksFromBToC(t)
	const most = 1000 // where the writes stop; reached only if each chunk draws another
	if _, written := nixUnderWrites(t, nw, b, c, most); written >= most/2 {
		t.Errorf("%d writes went into the handoff, each drawing another: the acknowledgement never caught up", written)
	}
	for _, r := range nw.envs["b"].results {
		if r.Status != pb.Status_STATUS_OK {
			t.Fatalf("a write during the handoff failed: %+v", r)
		}
	}
}
