package sim

import (
	"fmt"
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
