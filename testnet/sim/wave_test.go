package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// waveRing builds four nodes over keys 0..99 — n00000 owns keys [0,13), n00001 [13,26),
// n00002 [26,60), n00003 [60,100) — serves rate[k] gets per second on key k on a fixed schedule
// for a whole load window, lets the balancers run (thres 60, 5% headroom: keep 57, unless set
// changes them), and returns every node's final load. watch, if not nil, is installed as the
// network's OnDeliver when the balancers start.
func waveRing(t *testing.T, rate [100]float64, set func(*Config), watch func(to, from overlay.NodeID, m *pb.Envelope)) map[overlay.NodeID]float64 {
	t.Helper()
	var timed func(time.Duration, overlay.NodeID, overlay.NodeID, *pb.Envelope)
	if watch != nil {
		timed = func(_ time.Duration, to, from overlay.NodeID, m *pb.Envelope) { watch(to, from, m) }
	}
	return waveRingAt(t, []uint64{0, 13, 26, 60}, rate, set, timed)
}

// waveRingAt is waveRing with the nodes starting at the given keys; watch also gets the
// virtual time of each delivery.
func waveRingAt(t *testing.T, starts []uint64, rate [100]float64, set func(*Config), watch func(now time.Duration, to, from overlay.NodeID, m *pb.Envelope)) map[overlay.NodeID]float64 {
	t.Helper()
	cfg := DefaultConfig()
	b := &cfg.Node.Balance
	b.Window, b.Slots, b.Thres, b.Headroom = 100*time.Second, 10, 60, 0.05
	set(&cfg)
	h := hundredKeys(t, cfg, starts)
	h.Net.RunFor(100 * time.Second)

	t0 := h.Net.Now()
	const run = 300 * time.Second
	for k, r := range rate {
		if r == 0 {
			continue
		}
		key := overlay.Uint64Key(uint64(k))
		for at := time.Duration(float64(time.Second) / r / 2); at < run; at += time.Duration(float64(time.Second) / r) {
			h.Net.At(t0+at, func() {
				h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.Get(key) }, func(overlay.Result) {})
			})
		}
	}
	h.Net.RunFor(b.Window + time.Second)
	if watch != nil {
		h.Net.OnDeliver = func(to, from overlay.NodeID, m *pb.Envelope) { watch(h.Net.Now(), to, from, m) }
	}
	for _, s := range h.Net.order {
		s.node.Balancer.Start()
	}
	h.Net.RunUntil(t0 + run)
	if rep := h.Net.Check(); !rep.OK() {
		t.Fatalf("invariants: %s", rep)
	}
	if m, x, w := h.Net.CheckItems(h.Expected, h.Lost); m+x+w > 0 {
		t.Fatalf("items: %d missing, %d unexpected, %d wrong", m, x, w)
	}
	loads := map[overlay.NodeID]float64{}
	for _, s := range h.Net.owners() {
		loads[s.id] = s.node.Balancer.Load()
	}
	return loads
}

// hundredKeys builds a network of nodes starting at the given keys and writes keys 0–99 to it
// (the write is under way when it returns; the harness expects every key).
func hundredKeys(t *testing.T, cfg Config, starts []uint64) *Harness {
	t.Helper()
	h, err := NewHarness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Build(len(starts), time.Second, false, func(i int) overlay.Key { return overlay.Uint64Key(starts[i]) }, 1000*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	items := make([]overlay.Item, 100)
	for k := range items {
		items[k] = overlay.Item{Key: overlay.Uint64Key(uint64(k)), Value: []byte("v")}
		h.Expected[items[k].Key] = "v"
	}
	h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.PutBatch(items) }, func(overlay.Result) {})
	return h
}

// oursAndSequential runs measure with our NIX chain and with the thesis's sequential one
// (FaithfulChain).
func oursAndSequential[R any](measure func(set func(*Config)) R) (ours, sequential R) {
	return measure(func(*Config) {}), measure(func(c *Config) { c.Node.Balance.FaithfulChain = true })
}

// wantUnderKeep fails the test where a node of loads ends above keep (57, plus the load
// tracker's noise).
func wantUnderKeep(t *testing.T, what string, loads map[overlay.NodeID]float64) {
	t.Helper()
	if id, top := maxLoad(loads); top > 57.3 {
		t.Errorf("%s: %s ends at %.1f, above keep 57 (loads %v)", what, id, top, loads)
	}
}

func maxLoad(loads map[overlay.NodeID]float64) (overlay.NodeID, float64) {
	var id overlay.NodeID
	top := -1.0
	for n, l := range loads {
		if l > top {
			id, top = n, l
		}
	}
	return id, top
}

// headroomLayout is TestWaveKeepsHeadroom's load: n00000 at 62, both its neighbours at 54,
// n00002 at 10. A wave from n00000 is a chain of two NIXes whichever way it goes.
func headroomLayout() [100]float64 {
	var rate [100]float64
	for k := 0; k < 13; k++ { // n00000
		rate[k] = 5
	}
	rate[6] = 2
	for k := 15; k < 25; k++ { // n00001: keys 13 and 14 at 2, 25 cold
		rate[k] = 5
	}
	rate[13], rate[14] = 2, 2
	rate[26], rate[27] = 5, 5  // n00002
	for k := 87; k < 97; k++ { // n00003: keys 97 and 98 at 2, 99 cold
		rate[k] = 5
	}
	rate[97], rate[98] = 2, 2
	return rate
}

// TestWaveKeepsHeadroom: n00000 carries 62 (twelve keys of 5/s and, in the middle, one of 2/s),
// both its neighbours 54 (ten keys of 5/s and, next to n00000, two of 2/s), and n00002, beyond
// either, 10. Under the thesis's rules one key moves to a neighbour, which ends at 59, just under
// thres, where the noise of measured load will push it over again. With 5% headroom (keep 57)
// the neighbour passes a key on to n00002 and every node ends at or under 57.
func TestWaveKeepsHeadroom(t *testing.T) {
	rate := headroomLayout()
	const keep = 57.0
	ours := waveRing(t, rate, func(*Config) {}, nil)
	if id, top := maxLoad(ours); top > keep+0.3 {
		t.Errorf("with headroom: %s ends at %.1f, above keep %.1f (loads %v)", id, top, keep, ours)
	}
	thesis := waveRing(t, rate, func(c *Config) { c.Node.Balance = c.Node.Balance.Faithful() }, nil)
	if _, top := maxLoad(thesis); top < 58.5 {
		t.Errorf("the thesis's rules left every node at or under %.1f: this layout no longer shows what headroom changes (loads %v)", top, thesis)
	}
}

// TestSettlingWaveLeavesTheLine: n00000 carries 59.4 (twelve keys of 4.95/s), under thres 60
// but at the line, where the load tracker's noise carries a node over and back; both its
// neighbours carry 50 and have room for a key under keep (57). No node is over thres, so no
// ordinary wave starts: without settling waves n00000 stays at the line; with them it hands a
// key to a neighbour and every node ends at or under keep.
func TestSettlingWaveLeavesTheLine(t *testing.T) {
	var rate [100]float64
	for k := 0; k < 12; k++ { // n00000: 59.4, key 12 cold
		rate[k] = 4.95
	}
	for k := 13; k < 23; k++ { // n00001: 50
		rate[k] = 5
	}
	rate[26], rate[27] = 5, 5  // n00002: 10
	for k := 87; k < 97; k++ { // n00003: 50
		rate[k] = 5
	}
	wantUnderKeep(t, "settling waves", waveRing(t, rate, func(*Config) {}, nil))
	off := waveRing(t, rate, func(c *Config) { c.Node.Balance.Settle = false }, nil)
	if l := off["n00000"]; l < 58.5 {
		t.Errorf("without settling waves n00000 ends at %.1f, not at the line: this layout no longer shows what they change (loads %v)", l, off)
	}
}

// TestSettlingWaveReachesPastTTL: n00000 carries 59.4 (twelve keys of 4.95/s), at the line; the
// three nodes on either side carry 55 (eleven keys of 5/s: a key more would put them over keep,
// 57), and only the fourth each way, 22, has room. A settling wave reaching twice TTLMax nodes
// shifts a key along the packed nodes to the room and every node ends at or under keep — with
// the defaults, and with TTL = TTLMax = 2, where it reaches 4 nodes and an ordinary wave 2;
// with TTL = TTLMax = 1 it finds no room and n00000 stays at the line.
func TestSettlingWaveReachesPastTTL(t *testing.T) {
	var rate [100]float64
	for k := range 12 { // n00000: keys 0–11
		rate[k] = 4.95
	}
	for k := 12; k < 100; k++ { // n00001–n00008: eleven keys each
		rate[k] = 5
	}
	for k := 45; k < 67; k++ { // n00004 and n00005: the room
		rate[k] = 2
	}
	starts := []uint64{0, 12, 23, 34, 45, 56, 67, 78, 89}
	wantUnderKeep(t, "settling waves, defaults", waveRingAt(t, starts, rate, func(*Config) {}, nil))
	wantUnderKeep(t, "settling waves reaching twice TTLMax 2", waveRingAt(t, starts, rate, func(c *Config) {
		c.Node.Balance.TTL, c.Node.Balance.TTLMax = 2, 2
	}, nil))
	short := waveRingAt(t, starts, rate, func(c *Config) { c.Node.Balance.TTL, c.Node.Balance.TTLMax = 1, 1 }, nil)
	if l := short["n00000"]; l < 58.5 {
		t.Errorf("settling waves reaching 2 nodes: n00000 ends at %.1f, not at the line: this layout no longer shows what the reach changes (loads %v)", l, short)
	}
}

// TestWavePlansWithWholeKeys: n00000 carries 60.5 (twelve keys of 5/s and one of 0.5/s at its
// lower end), both its neighbours 53 (ten keys of 5/s and, next to n00000, three of 1/s), and
// n00002 10. n00000 sheds 3.5 above keep (57), which takes a whole key of 5. Planned with the
// bare excess the neighbour expects 56.5, stays the wave's end and ends at 58, above keep;
// planned with the key the neighbour expects 58 and passes a key on to n00002.
func TestWavePlansWithWholeKeys(t *testing.T) {
	var rate [100]float64
	rate[0] = 0.5
	for k := 1; k < 13; k++ {
		rate[k] = 5
	}
	for k := 13; k < 26; k++ { // n00001: three keys of 1 next to n00000, then ten of 5
		rate[k] = 5
	}
	rate[13], rate[14], rate[15] = 1, 1, 1
	rate[26], rate[27] = 5, 5   // n00002: 10
	for k := 87; k < 100; k++ { // n00003: ten keys of 5, then three of 1 next to n00000
		rate[k] = 5
	}
	rate[97], rate[98], rate[99] = 1, 1, 1
	const keep = 57.0
	ours := waveRing(t, rate, func(*Config) {}, nil)
	if id, top := maxLoad(ours); top > keep+0.3 {
		t.Errorf("planned with whole keys: %s ends at %.1f, above keep %.1f (loads %v)", id, top, keep, ours)
	}
	// Without settling waves, which would tidy up the node left at the line afterwards.
	bare := waveRing(t, rate, func(c *Config) { c.Node.Balance.FaithfulMoved, c.Node.Balance.Settle = true, false }, nil)
	if _, top := maxLoad(bare); top <= keep+0.3 {
		t.Errorf("planned with bare excesses, every node still ends at or under keep: this layout no longer shows what planning with keys changes (loads %v)", bare)
	}
}

// TestNIXChainPassesTurnAtFlip: a member of a NIX chain passes the turn on as soon as its piece
// flipped (the receiver acknowledged every item), not after its commit is confirmed, so the
// next member's NIX overlaps the commit's round trip.
func TestNIXChainPassesTurnAtFlip(t *testing.T) {
	passed, late := 0, 0
	confirmed := map[overlay.NodeID]bool{} // members whose NIX commit was confirmed since their turn
	watch := func(to, from overlay.NodeID, m *pb.Envelope) {
		switch {
		case m.GetHandoffCommitAck() != nil:
			confirmed[to] = true
		case m.GetBalance().GetNixTurn() != nil:
			if m.GetBalance().GetNixTurn().Index >= 1 {
				passed++
				if confirmed[from] {
					late++
				}
			}
			confirmed[to] = false
		}
	}
	loads := waveRing(t, headroomLayout(), func(*Config) {}, watch)
	wantUnderKeep(t, "the wave", loads)
	if passed == 0 {
		t.Fatal("no NIX turn was passed on: this layout no longer makes a chain")
	}
	if late > 0 {
		t.Errorf("%d of %d NIX turns were passed on only after the commit was confirmed", late, passed)
	}
}

// TestNIXTurnWaitsForOvertakenCommit: with jittered latencies a NIX turn can overtake the
// commit its sender sent just before it. The member must wait for the piece: planning its own
// NIX without it, it would keep the key it was given and end above keep.
func TestNIXTurnWaitsForOvertakenCommit(t *testing.T) {
	overtaken := 0
	for seed := uint64(1); seed <= 6; seed++ {
		receiving := map[overlay.NodeID]bool{} // got a handoff chunk, not yet its commit
		watch := func(to, _ overlay.NodeID, m *pb.Envelope) {
			switch {
			case m.GetHandoff() != nil:
				receiving[to] = true
			case m.GetHandoffCommit() != nil:
				receiving[to] = false
			case m.GetBalance().GetNixTurn() != nil && receiving[to]:
				overtaken++
			}
		}
		set := func(c *Config) {
			c.Seed, c.Jitter = seed, 900*time.Millisecond
			c.FitTimeouts()
		}
		loads := waveRing(t, headroomLayout(), set, watch)
		wantUnderKeep(t, fmt.Sprintf("seed %d", seed), loads)
	}
	if overtaken == 0 {
		t.Fatal("no NIX turn overtook a commit in six seeds: the test no longer checks the wait")
	}
}

// TestShiftedChain: fifteen nodes round the ring, n00000 holding four hot keys of 16/s (64, over
// thres), the six nodes on either side of it three (48: no room for a fourth under keep 57), and
// the two nodes beyond them, which meet opposite n00000, two (32: room for one). Whichever way
// n00000's wave goes, one hot key's worth must move across seven boundaries to a node with room,
// further than ttl (5) nodes. Every member can give that from its own keys, so our chain is
// shifted — every other member gives at once, the rest as soon as their piece is in — and the
// wave reaches past ttl to the room in one go. The thesis's sequential chain (FaithfulChain)
// stops at ttl, leaving its end node over thres for a second wave. Both must end with every node
// at or under keep; ours in less time.
func TestShiftedChain(t *testing.T) {
	const nodes = 15
	var starts []uint64
	for i := range nodes {
		starts = append(starts, uint64(100*i/nodes))
	}
	hot := map[int]int{0: 4, 7: 2, 8: 2} // hot keys per node; every other node 3
	var rate [100]float64
	for i, start := range starts {
		n, ok := hot[i]
		if !ok {
			n = 3
		}
		for k := range n { // after the node's first, cold key
			rate[int(start)+1+k] = 16
		}
	}
	type run struct {
		loads        map[overlay.NodeID]float64
		span         time.Duration // from the first NIX turn to the last piece's commit
		shiftedTo    int           // members told by the end node to give first
		longestChain int           // nodes a lock request names (the reserved ones before its receiver)
	}
	measure := func(set func(*Config)) run {
		var r run
		var first, last time.Duration
		watch := func(now time.Duration, _, _ overlay.NodeID, m *pb.Envelope) {
			b := m.GetBalance()
			switch {
			case b.GetLock() != nil:
				r.longestChain = max(r.longestChain, len(b.GetLock().Chain))
			case b.GetNixTurn() != nil:
				if first == 0 {
					first = now
				}
				if b.GetNixTurn().Shift {
					r.shiftedTo++
				}
			case m.GetHandoffCommit() != nil:
				last = now
			}
		}
		r.loads = waveRingAt(t, starts, rate, set, watch)
		r.span = last - first
		return r
	}
	ours, thesis := oursAndSequential(measure)
	t.Logf("shifted: %v, %d told to give first, longest lock request %d; sequential: %v, longest %d", ours.span, ours.shiftedTo, ours.longestChain, thesis.span, thesis.longestChain)
	wantUnderKeep(t, "shifted chain", ours.loads)
	wantUnderKeep(t, "sequential chain", thesis.loads)
	if ours.shiftedTo < 4 || thesis.shiftedTo != 0 {
		t.Fatalf("members told to give first: %d shifted, %d sequential; want at least 4 (every other one of seven) and 0", ours.shiftedTo, thesis.shiftedTo)
	}
	if ours.longestChain < 7 || thesis.longestChain > 5 {
		t.Errorf("longest lock request named %d nodes shifted, %d sequential; want at least 7 (to the room) and at most ttl 5", ours.longestChain, thesis.longestChain)
	}
	if ours.span*2 > thesis.span {
		t.Errorf("the shifted chain took %v, the sequential one %v: want at most half", ours.span, thesis.span)
	}
}

// TestLumpGoesOnInShiftablePieces: twenty-four nodes round the ring, n00000 holding six hot keys
// of 16/s (96: three too many), every other node three (48: no room under keep 57) except two
// pairs with two (room for one each), eight and nine nodes away either way. No node can take a
// migrant (a light node's successor is too loaded to leave its range to it), so the first wave
// carries the three keys sequentially to the ttl-th node, whose search for migrants finds none.
// That node's next wave that way must send the lump on in pieces a full member can give from its
// own keys — two keys, the three a node packed like its end holds under keep, less one — so that
// the chain is shifted and reaches the rooms; and the lump must end spread, every node at or
// under keep.
func TestLumpGoesOnInShiftablePieces(t *testing.T) {
	const nodes = 24
	starts := []uint64{0}
	for i := 1; i < nodes; i++ {
		starts = append(starts, uint64(7+4*(i-1))) // n00000 owns [0,7), the others four keys
	}
	rooms := map[int]bool{8: true, 9: true, 15: true, 16: true}
	var rate [100]float64
	for i, start := range starts {
		n := 3
		switch {
		case i == 0:
			n = 6
		case rooms[i]:
			n = 2
		}
		for k := range n { // after the node's first, cold key
			rate[int(start)+1+k] = 16
		}
	}
	type run struct {
		loads     map[overlay.NodeID]float64
		pieces    int   // lock requests from an initiator over thres planning two keys
		gave      []int // hot keys in the first NIX of each such initiator after it
		shiftedTo int   // members told by an end node to give first
	}
	measure := func(set func(*Config)) run {
		var r run
		capped := map[overlay.NodeID]bool{} // initiators that planned two keys, until they give
		watch := func(_ time.Duration, _, from overlay.NodeID, m *pb.Envelope) {
			b := m.GetBalance()
			switch {
			case b.GetLock() != nil:
				l := b.GetLock()
				if len(l.Chain) == 1 && l.TmpLoad > 60 && l.Moved > 24 && l.Moved < 40 && l.GiveFirst {
					r.pieces++
					capped[overlay.NodeID(l.Chain[0].Id)] = true
				}
			case m.GetHandoff() != nil && m.GetHandoff().Seq == 0 && capped[from]:
				delete(capped, from)
				n := 0
				for _, it := range m.GetHandoff().Items {
					if rate[overlay.KeyUint64(overlay.Key(it.Key))] > 0 {
						n++
					}
				}
				r.gave = append(r.gave, n)
			case b.GetNixTurn().GetShift():
				r.shiftedTo++
			}
		}
		r.loads = waveRingAt(t, starts, rate, set, watch)
		return r
	}
	ours, thesis := oursAndSequential(measure)
	t.Logf("ours: %d two-key pieces planned, hot keys given %v, %d told to give first; sequential: %d, %d", ours.pieces, ours.gave, ours.shiftedTo, thesis.pieces, thesis.shiftedTo)
	wantUnderKeep(t, "ours", ours.loads)
	wantUnderKeep(t, "sequential", thesis.loads)
	if ours.pieces == 0 || thesis.pieces != 0 {
		t.Errorf("waves sending the lump on two keys at a time: %d ours, %d sequential; want some and none", ours.pieces, thesis.pieces)
	}
	for _, n := range ours.gave {
		if n != 2 {
			t.Errorf("an initiator that planned two keys gave %d (gave %v)", n, ours.gave)
		}
	}
	if ours.shiftedTo == 0 {
		t.Error("no member was told to give first: the pieces did not make a shifted chain")
	}
}

// TestSplitLeave: fourteen nodes, ttl 1. n00000 carries 90; the five nodes on either side of it
// carry 55 (five keys of 11/s: none has room for a key), the three opposite it 35 each — room
// enough, but no two neighbours together fit under keep (57), so none of them could leave its
// range to the other and migrate. With split leaves the middle one of them gives the top of its
// range to its successor and the rest to its predecessor (about 52 each) and joins where the
// load is; with the thesis's migrant rules no migration happens.
func TestSplitLeave(t *testing.T) {
	var starts []uint64
	var rate [100]float64
	at := uint64(0)
	node := func(keys int, hot int, load float64) {
		starts = append(starts, at)
		for k := 1; k <= hot; k++ { // the node's first key stays cold
			rate[int(at)+k] = load
		}
		at += uint64(keys)
	}
	node(20, 18, 5)
	for range 5 {
		node(6, 5, 11)
	}
	for range 3 {
		node(6, 5, 7)
	}
	for range 5 {
		node(6, 5, 11)
	}
	type run struct {
		loads       map[overlay.NodeID]float64
		splitOrders int // migration orders asking for a split leave
		migrations  int // migrants that joined again
	}
	measure := func(set func(*Config)) run {
		var r run
		watch := func(_ time.Duration, _, _ overlay.NodeID, m *pb.Envelope) {
			b := m.GetBalance()
			switch {
			case b.GetMigOrder().GetGiveUp() > 0:
				r.splitOrders++
			case b.GetMigDone().GetOk():
				r.migrations++
			}
		}
		r.loads = waveRingAt(t, starts, rate, func(c *Config) { c.Node.Balance.TTL = 1; set(c) }, watch)
		return r
	}
	ours := measure(func(*Config) {})
	thesis := measure(func(c *Config) { c.Node.Balance.FaithfulMigrants = true })
	t.Logf("ours: %d split orders, %d migrations, loads %v; thesis's migrants: %d, %d, loads %v",
		ours.splitOrders, ours.migrations, ours.loads, thesis.splitOrders, thesis.migrations, thesis.loads)
	wantUnderKeep(t, "split leaves", ours.loads)
	if ours.splitOrders == 0 || ours.migrations == 0 {
		t.Errorf("split leaves: %d orders, %d migrations; want some of each", ours.splitOrders, ours.migrations)
	}
	if thesis.splitOrders != 0 || thesis.migrations != 0 {
		t.Errorf("thesis's migrant rules: %d split orders, %d migrations; want none", thesis.splitOrders, thesis.migrations)
	}
}

// TestWaveCarriesItsTTL: eight nodes over keys 0..99, ten keys each (the last thirty, ten of them
// loaded); n00000 carries 70 (ten keys of 7/s), the three nodes on either side of it 55 (ten of
// 5.5/s: no room for a key under keep 57), n00004, opposite, nothing. The chain is the thesis's
// sequential one, so that a wave reaches ttl nodes. With ttl 1 everywhere n00000's wave reserves
// one neighbour, which still has a key too many and ends the wave out of reach: n00000 hears so
// (WaveDone.out_of_reach, the signal that grows its next wave's ttl). With ttl 2 at n00000
// alone the neighbour, whose own ttl is 1, reserves the next node too: a member goes as far as
// the wave's ttl, chosen by its initiator, not its own.
func TestWaveCarriesItsTTL(t *testing.T) {
	starts := []uint64{0, 10, 20, 30, 40, 50, 60, 70}
	var rate [100]float64
	for k := range 10 {
		rate[k] = 7
	}
	for _, first := range []int{10, 20, 30, 50, 60, 90} {
		for k := first; k < first+10; k++ {
			rate[k] = 5.5
		}
	}
	type run struct {
		ttls        map[uint32]int // lock requests by the ttl they carry
		longest     int            // the most nodes a lock request's chain named
		outOfReach  int            // wave outcomes out of reach heard by n00000
		initiatorTo int            // lock requests sent by n00000
	}
	measure := func(initiatorTTL int) run {
		r := run{ttls: map[uint32]int{}}
		watch := func(_ time.Duration, to, _ overlay.NodeID, m *pb.Envelope) {
			b := m.GetBalance()
			if l := b.GetLock(); l != nil {
				r.ttls[l.Ttl]++
				r.longest = max(r.longest, len(l.Chain))
				if len(l.Chain) == 1 && string(l.Chain[0].Id) == "n00000" {
					r.initiatorTo++
				}
			}
			if d := b.GetWaveDone(); d != nil && d.OutOfReach && to == "n00000" {
				r.outOfReach++
			}
		}
		waveRingAt(t, starts, rate, func(c *Config) {
			c.Node.Balance.TTL, c.Node.Balance.FaithfulChain = 1, true
			base := c.Node
			c.NodeConfig = func(i int) node.Config {
				nc := base
				if i == 0 {
					nc.Balance.TTL = initiatorTTL
				}
				return nc
			}
		}, watch)
		return r
	}
	one, two := measure(1), measure(2)
	t.Logf("ttl 1: %+v; ttl 2 at the initiator: %+v", one, two)
	if one.initiatorTo == 0 || one.outOfReach == 0 || one.longest != 1 {
		t.Errorf("ttl 1: %d waves from n00000, %d heard out of reach, chains of up to %d nodes; want some, some, 1", one.initiatorTo, one.outOfReach, one.longest)
	}
	if two.initiatorTo == 0 || two.ttls[2] == 0 || two.longest != 2 {
		t.Errorf("ttl 2 at n00000: %d waves from it, lock requests by ttl %v, chains of up to %d nodes; want some, some with ttl 2, 2", two.initiatorTo, two.ttls, two.longest)
	}
}
