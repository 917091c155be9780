package local

import (
	"context"
	"testing"
	"time"
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
