package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

func uniformPositions(h *Harness, space uint64) func(int) overlay.Key {
	return func(int) overlay.Key { return overlay.Uint64Key(h.Net.rng.Uint64N(space)) }
}

func build(t *testing.T, cfg Config, n int) *Harness {
	t.Helper()
	h, err := NewHarness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Build(n, time.Second, true, uniformPositions(h, 1_000_000), 100_000*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	h.Net.RunFor(200 * time.Second)
	return h
}

func TestBuildAndLookup(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Marshal = true
	h := build(t, cfg, 64)
	if rep := h.Net.Check(); !rep.OK() {
		t.Fatalf("after build: %s", rep)
	}
	// Write keys through random nodes, then read them back from random nodes.
	for i := 0; i < 500; i++ {
		k := overlay.Uint64Key(uint64(i * 1999))
		v := fmt.Sprint(i)
		h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.Put(k, []byte(v)) }, func(r overlay.Result) {
			if r.Status != pb.Status_STATUS_OK {
				t.Errorf("put %d: %v %s", i, r.Status, r.Err)
			}
		})
		h.Expected[k] = v
	}
	h.Net.RunFor(100 * time.Second)
	for i := 0; i < 500; i++ {
		k := overlay.Uint64Key(uint64(i * 1999))
		want := fmt.Sprint(i)
		h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.Get(k) }, func(r overlay.Result) {
			if r.Status != pb.Status_STATUS_OK || string(r.Value) != want {
				t.Errorf("get %d: %v %q %s", i, r.Status, r.Value, r.Err)
			}
		})
	}
	h.Net.RunFor(100 * time.Second)
	if h.Pending() != 0 {
		t.Fatalf("%d requests unanswered", h.Pending())
	}
	if m, x, w := h.Net.CheckItems(h.Expected, h.Lost); m+x+w != 0 {
		t.Fatalf("items: missing %d extra %d wrong %d", m, x, w)
	}
	if rep := h.Net.Check(); !rep.OK() {
		t.Fatalf("after load: %s", rep)
	}
}

// TestCheckFindsBrokenRings crashes the tallest node of a settled overlay and compares the
// checker's count of broken level rings with a brute-force count: for every survivor and level,
// its ring neighbours found by scanning all survivors.
func TestCheckFindsBrokenRings(t *testing.T) {
	h := build(t, DefaultConfig(), 64)
	if rep := h.Net.CheckStructure(); !rep.OK() {
		t.Fatalf("after build: %s", rep)
	}
	var tallest overlay.NodeID
	for _, s := range h.Net.owners() {
		if tallest == "" || s.node.Height() > h.Net.Node(tallest).Height() {
			tallest = s.id
		}
	}
	if err := h.Crash(tallest); err != nil {
		t.Fatal(err)
	}
	rep := h.Net.CheckStructure()
	if rep.Counts[1] == 0 {
		t.Errorf("level 0 still links to the crashed node, yet invariant 1 holds: %s", rep)
	}

	owners := h.Net.owners() // in start order
	want := 0
	for l := 1; l < overlay.MaxLevel; l++ {
		company := false
		for i, s := range owners {
			var ring []int // positions of the nodes sharing l bits with s, in start order
			for j, o := range owners {
				if o.node.Self().MVec>>(64-l) == s.node.Self().MVec>>(64-l) {
					ring = append(ring, j)
				}
			}
			if len(ring) == 1 {
				if s.node.Height() > l {
					want++
				}
				continue
			}
			company = true
			at := slices.Index(ring, i)
			p := owners[ring[(at-1+len(ring))%len(ring)]]
			if pred, _ := s.node.Neighbors(l); pred.ID != p.id {
				want++
			}
			if _, succ := p.node.Neighbors(l); succ.ID != s.id {
				want++
			}
		}
		if !company {
			break
		}
	}
	if want == 0 {
		t.Fatalf("crashing %s (height %d) broke no ring: the test proves nothing", tallest, h.Net.Node(tallest).Height())
	}
	if rep.Counts[2] != want {
		t.Errorf("checker counts %d ring violations, brute force %d: %s", rep.Counts[2], want, rep)
	}
	if !h.settle(500*time.Second, func(int) {}) {
		t.Fatalf("not repaired: %s", h.Net.Check())
	}
}

// TestCheckItemsAgainstBruteForce damages the stores of a small overlay in every way CheckItems
// must see — a key gone from its owner, a copy only at a node that does not own it, a wrong
// value, an unexpected key, a lost key gone — and compares its counts with a look-up of every
// expected key at its owner.
func TestCheckItemsAgainstBruteForce(t *testing.T) {
	h := build(t, DefaultConfig(), 16)
	for i := 0; i < 400; i++ {
		k := overlay.Uint64Key(uint64(i * 2499))
		v := fmt.Sprint(i)
		if err := h.Net.Owner(k).Store().Put(overlay.Item{Key: k, Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
		h.Expected[k] = v
	}
	if m, x, w := h.Net.CheckItems(h.Expected, h.Lost); m+x+w != 0 {
		t.Fatalf("undamaged: missing %d extra %d wrong %d", m, x, w)
	}
	key := func(i int) overlay.Key { return overlay.Uint64Key(uint64(i * 2499)) }
	owners := h.Net.owners()
	elsewhere := func(k overlay.Key) overlay.Store { // a store of a node that does not own k
		o := h.Net.Owner(k)
		for _, s := range owners {
			if s.node != o {
				return s.store
			}
		}
		t.Fatal("one owner only")
		return nil
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ { // gone
		must(h.Net.Owner(key(i)).Store().Delete(key(i)))
	}
	for i := 10; i < 15; i++ { // moved to a node that does not own it
		must(h.Net.Owner(key(i)).Store().Delete(key(i)))
		must(elsewhere(key(i)).Put(overlay.Item{Key: key(i), Value: []byte(h.Expected[key(i)])}))
	}
	for i := 15; i < 18; i++ { // gone, but reported lost
		must(h.Net.Owner(key(i)).Store().Delete(key(i)))
		h.Lost[key(i)] = true
	}
	h.Lost[key(18)] = true              // lost, yet still there
	h.Lost[overlay.Uint64Key(7)] = true // lost, never expected
	for i := 20; i < 24; i++ {          // wrong values
		must(h.Net.Owner(key(i)).Store().Put(overlay.Item{Key: key(i), Value: []byte("bad")}))
	}
	must(owners[0].store.Put(overlay.Item{Key: overlay.Uint64Key(1), Value: []byte("x")})) // unexpected
	must(owners[1].store.Put(overlay.Item{Key: overlay.Uint64Key(3), Value: []byte("y")}))

	var missing, extra, wrong int
	for k, v := range h.Expected {
		got, found, err := h.Net.Owner(k).Store().Get(k)
		must(err)
		switch {
		case !found && !h.Lost[k]:
			missing++
		case found && string(got.Value) != v:
			wrong++
		}
	}
	for _, s := range owners {
		must(s.store.Ascend(overlay.FullRange, func(it overlay.Item) bool {
			k := it.Key
			if _, ok := h.Expected[k]; !ok {
				extra++
			}
			return true
		}))
	}
	if missing != 15 || extra != 2 || wrong != 4 {
		t.Fatalf("brute force counts missing %d extra %d wrong %d: the damage did not land as planned", missing, extra, wrong)
	}
	if m, x, w := h.Net.CheckItems(h.Expected, h.Lost); m != missing || x != extra || w != wrong {
		t.Errorf("CheckItems: missing %d extra %d wrong %d; brute force %d, %d, %d", m, x, w, missing, extra, wrong)
	}
}

// TestKindOfEveryBody: every message body the protocol defines is counted under its own kind,
// named as its field (balancing messages were once counted as pongs).
func TestKindOfEveryBody(t *testing.T) {
	body := (&pb.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("body")
	fields := body.Fields()
	if fields.Len() != numKinds {
		t.Fatalf("%d message bodies, %d kinds", fields.Len(), numKinds)
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		m := &pb.Envelope{}
		m.ProtoReflect().Set(fd, m.ProtoReflect().NewField(fd))
		if got := KindNames[kindOf(m)]; got != string(fd.Name()) {
			t.Errorf("body %s counted as %q", fd.Name(), got)
		}
	}
}
