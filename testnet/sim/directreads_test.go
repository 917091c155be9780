package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/testnet/workload"
)

// Direct queries must count at each key's owner exactly the reads a routed scan of the same query
// returns: ranges that wrap round the circle, the whole circle, ranges cut by the scan's limit,
// ranges over many nodes or none, and batches that fall in different load slots.
func TestDirectReadsCountWhatScansRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Node.Balance.Window = 40 * time.Second
	cfg.Node.Balance.Slots = 4 // 10 s slots: the queries below fall in three or four of them
	const space = 1_000_000
	keys := make([]overlay.Key, 600)
	for i := range keys {
		keys[i] = overlay.Uint64Key(uint64(i)*1500 + 7)
	}
	load := func(h *Harness) {
		items := make([]overlay.Item, len(keys))
		for i, k := range keys {
			items[i] = overlay.Item{Key: k, Value: []byte("v")}
		}
		h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.PutBatch(items) }, func(overlay.Result) {})
		h.Net.RunWhile(func() bool { return h.Pending() > 0 }, h.Net.Now()+1000*time.Second)
	}
	routed, direct := build(t, cfg, 12), build(t, cfg, 12)
	load(routed)
	load(direct)

	rng := rand.New(rand.NewPCG(5, 6))
	var queries []workload.Query
	for range 120 {
		q := workload.Query{Start: overlay.Uint64Key(rng.Uint64N(space)), End: overlay.Uint64Key(rng.Uint64N(space)), Keys: rng.IntN(80)}
		switch rng.IntN(6) {
		case 0:
			q.End = q.Start // the whole circle, cut by the limit
		case 1:
			q.Keys = 1000 // no cut: every key of a wrapping or long range
		}
		queries = append(queries, q)
	}
	reads := map[overlay.Key]int{}
	for _, q := range queries {
		routed.Do(routed.RandomOwner(), func(n *node.Node) uint64 { return n.Scan(q.Start, q.End, q.Keys+16, 0) }, func(r overlay.Result) {
			for _, it := range r.Items {
				reads[it.Key]++
			}
		})
		routed.Net.RunWhile(func() bool { return routed.Pending() > 0 }, routed.Net.Now()+1000*time.Second)
	}
	if len(reads) == 0 {
		t.Fatal("the scans read nothing")
	}

	nw := direct.Net
	d := newDirectReads(keys, cfg.Node.Balance.Window, cfg.Node.Balance.Slots, nw.epoch)
	start := nw.Now()
	for i, q := range queries {
		d.add(start+time.Duration(i)*240*time.Millisecond, q) // 28.8 s in all
	}
	nw.RunUntil(start + 29*time.Second)
	d.flush(nw, nil)
	now := nw.epoch.Add(nw.Now())
	w := cfg.Node.Balance.Window.Seconds()
	for _, k := range keys {
		owner := ownerByRange(t, nw, k)
		if got, want := owner.Balancer.Tracker().KeyLoad(k, now)*w, float64(reads[k]); got < want-1e-9 || got > want+1e-9 {
			t.Fatalf("key %x at %s: %v reads counted, the scans read it %v times", k, owner.ID(), got, want)
		}
	}
	total := 0
	for _, c := range reads {
		total += c
	}
	sum := 0.0
	for _, s := range nw.order {
		sum += s.node.Balancer.Load() * w
	}
	if sum < float64(total)-1e-6 || sum > float64(total)+1e-6 {
		t.Fatalf("the nodes' loads add up to %v reads, the scans made %d", sum, total)
	}

	// A traced route ends at the key's owner, as a routed message would.
	for range 200 {
		k := overlay.Uint64Key(rng.Uint64N(space))
		end := trace(nw, direct.RandomOwner(), k)
		if want := ownerByRange(t, nw, k); end == nil || end.node != want {
			t.Fatalf("the route to %x ended at %v, its owner is %s", k, end, want.ID())
		}
	}
}

// ownerByRange returns the one live node whose range contains k.
func ownerByRange(t *testing.T, nw *Network, k overlay.Key) *node.Node {
	t.Helper()
	var owner *node.Node
	for _, s := range nw.order {
		if s.alive && s.node.Owns() && s.node.Range().Contains(k) {
			if owner != nil {
				t.Fatalf("key %x: ranges of %s and %s overlap", k, owner.ID(), s.node.ID())
			}
			owner = s.node
		}
	}
	if owner == nil {
		t.Fatalf("key %x: no owner", k)
	}
	return owner
}

// Between the flip at a NIX's giver and the commit at its receiver, a routed query for a key of
// the piece waits at the receiver; direct reads must be counted there too, not at the giver, whose
// start still says the key is in its range but which has handed the key's load over already.
func TestDirectReadsFollowPiecesInFlight(t *testing.T) {
	cfg, nw, keys := sixNodesHolding600Keys(t)

	// The piece is the upper half of the giver's keys, given to its successor.
	i, mine := ownerWithTenKeys(t, nw)
	giver, receiver, split := nw.owners()[i].node, nw.owners()[i+1].node, mine[len(mine)/2]
	if err := giver.GiveNIX(true, split, pb.Cause_CAUSE_BALANCE, func(bool, int) {}); err != nil {
		t.Fatal(err)
	}
	inFlight := func() bool {
		return !giver.Responsible(split) && receiver.Responsible(split) && receiver.Self().Start > split
	}
	now := readWhenInFlight(t, cfg, nw, keys, split, inFlight)
	if g, r := giver.Balancer.Tracker().KeyLoad(split, now), receiver.Balancer.Tracker().KeyLoad(split, now); g != 0 || r == 0 {
		t.Fatalf("read counted at the giver: %v, at the receiver: %v; want it at the receiver only", g, r)
	}
	nw.RunFor(100 * time.Second)
	if rep := nw.Check(); !rep.OK() {
		t.Fatalf("after the NIX: %s", rep)
	}
}

// A node joining below an owner holds the piece the owner flipped to it the same way, between the
// flip and the commit, but owns no range yet and stands in no owner's place: reads of its keys
// were counted at the owner by start, which had handed their statistics over already, and stayed
// there as load it could not give away.
func TestDirectReadsFollowPiecesToAJoiner(t *testing.T) {
	cfg, nw, keys := sixNodesHolding600Keys(t)
	i, mine := ownerWithTenKeys(t, nw)
	giver, position := nw.owners()[i].node, mine[len(mine)/2]
	joiner, err := nw.Add("joiner")
	if err != nil {
		t.Fatal(err)
	}
	if err := joiner.Join(giver.ID(), position); err != nil {
		t.Fatal(err)
	}
	inFlight := func() bool { return !giver.Responsible(position) && joiner.Responsible(position) && !joiner.Owns() }
	now := readWhenInFlight(t, cfg, nw, keys, position, inFlight)
	for _, s := range nw.owners() {
		if l := s.node.Balancer.Tracker().KeyLoad(position, now); l != 0 {
			t.Errorf("read counted at %s, an owner: %v", s.id, l)
		}
	}
	if l := joiner.Balancer.Tracker().KeyLoad(position, now); l == 0 {
		t.Error("read not counted at the joiner")
	}
	nw.RunFor(100 * time.Second)
	if rep := nw.Check(); !rep.OK() {
		t.Fatalf("after the join: %s", rep)
	}
}

// sixNodesHolding600Keys builds six nodes and writes 600 keys spread over the key space.
func sixNodesHolding600Keys(t *testing.T) (Config, *Network, []overlay.Key) {
	t.Helper()
	cfg := DefaultConfig()
	h := build(t, cfg, 6)
	keys := make([]overlay.Key, 600)
	items := make([]overlay.Item, len(keys))
	for i := range keys {
		keys[i] = overlay.Uint64Key(uint64(i)*1500 + 7)
		items[i] = overlay.Item{Key: keys[i], Value: []byte("v")}
	}
	h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.PutBatch(items) }, func(overlay.Result) {})
	h.Net.RunWhile(func() bool { return h.Pending() > 0 }, h.Net.Now()+1000*time.Second)
	return cfg, h.Net, keys
}

// ownerWithTenKeys returns the index among the owners of one, not the last, whose range holds ten
// keys or more and does not wrap, and its keys.
func ownerWithTenKeys(t *testing.T, nw *Network) (int, []overlay.Key) {
	t.Helper()
	owners := nw.owners()
	for i, s := range owners[:len(owners)-1] {
		var mine []overlay.Key
		_ = s.node.Store().Ascend(s.node.Range(), func(it overlay.Item) bool { mine = append(mine, it.Key); return true })
		if len(mine) >= 10 && s.node.Range().Start < s.node.Range().End {
			return i, mine
		}
	}
	t.Fatal("no owner with ten keys")
	return 0, nil
}

// readWhenInFlight runs the network until inFlight holds — a piece holding key flipped and not
// yet committed — and counts one direct read of key then; it returns the time of the read.
func readWhenInFlight(t *testing.T, cfg Config, nw *Network, keys []overlay.Key, key overlay.Key, inFlight func() bool) time.Time {
	t.Helper()
	nw.RunWhile(func() bool { return !inFlight() }, nw.Now()+100*time.Second)
	if !inFlight() {
		t.Fatal("the piece was never seen between the flip and the commit")
	}
	d := newDirectReads(keys, cfg.Node.Balance.Window, cfg.Node.Balance.Slots, nw.epoch)
	d.add(nw.Now(), workload.Query{Start: key, End: key + "\x00", Keys: 1})
	d.flush(nw, nil)
	return nw.epoch.Add(nw.Now())
}
