package local

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay"
)

// TestPartitionHeals: eight real nodes are cut into two arcs of the ring, four and four, for
// long enough that each side takes the other's ranges over and closes a ring of its own. Once
// the cut heals, the nodes call on those they declared dead (callCutOff), the two rings merge
// into one of eight, and every key reads its value: the cut lost nothing.
func TestPartitionHeals(t *testing.T) {
	nw := startNet(t, 8, Options{})
	c := newClient(t)
	ring := checkRing(t, c, nw, 8)
	ref := load(t, c, nw, 400)
	index := map[string]int{}
	for _, m := range nw.Members() {
		index[m.Runtime.ID().String()] = m.Index
	}
	sides := map[int]int{}
	for i, rn := range ring.Nodes {
		sides[index[rn.Peer.ID.String()]] = i * 2 / len(ring.Nodes)
	}
	if err := nw.Partition(sides); err != nil {
		t.Fatal(err)
	}
	// Each side closes a ring of its own over the whole circle.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, _ := nw.Entry()
	for {
		r, err := c.Ring(ctx, e, 1000)
		if err == nil && r.Closed && len(r.Nodes) == 4 && len(r.Errors()) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the cut side of the entry node never closed a ring of four: %v, %d nodes", err, len(ringNodes(r)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Long enough for every link across the cut, on every level, to be found dead: refresh
	// passes run every 2 s.
	time.Sleep(10 * time.Second)
	nw.Heal()
	checkRing(t, c, nw, 8)
	if bad := readAll(t, c, nw, ref); len(bad) != 0 {
		t.Fatalf("%d keys unreadable after the cut healed: %v", len(bad), bad)
	}
}

// TestSeedsStartedApartMerge: two networks of four real nodes each start apart under one
// network name — two seeds, each with joiners of its own, as after a cut longer than the day a
// node calls on the successors it declared dead — and each takes writes of its own. Nothing
// links them: no node of either ever knew a node of the other. Once one host of each side
// connects, the DHT lets the nodes find each other's side, and the ring checks
// (Options.RingCheck: a node found on the DHT is sent a search for the checker's start) merge
// the two rings into one of eight, where every key written on either side reads its value.
func TestSeedsStartedApartMerge(t *testing.T) {
	joinAt := func(offset int) func(int) overlay.Key {
		rng := rand.New(rand.NewPCG(uint64(offset), 11))
		return func(int) overlay.Key { return overlay.Key(keyOf(offset + rng.IntN(400))) }
	}
	opts := Options{Network: "seeds-started-apart", RingCheck: time.Second}
	opts.JoinAt = joinAt(0)
	a := startNet(t, 4, opts)
	opts.JoinAt = joinAt(400)
	b := startNet(t, 4, opts)
	c := newClient(t)
	checkRing(t, c, a, 4)
	checkRing(t, c, b, 4)
	ref := loadFrom(t, c, a, 0, 400)
	for k, v := range loadFrom(t, c, b, 400, 400) {
		ref[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Running()[0].Host().Connect(ctx, b.Running()[0].AddrInfo()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	checkRingWithin(t, c, a, 8, time.Minute)
	t.Logf("one ring of eight %s after the hosts connected", time.Since(start).Round(100*time.Millisecond))
	if bad := readAll(t, c, a, ref); len(bad) != 0 {
		t.Fatalf("%d keys unreadable after the rings merged: %v", len(bad), bad)
	}
}
