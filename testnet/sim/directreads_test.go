package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
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
