package sim

import (
	"testing"
	"time"
)

// TestRunOfDeadNodesRelinked crashes three consecutive nodes at once, the middle one the tallest
// such run has: no live node knew the middle one's links from a pong of its own, as its both
// level-0 neighbours died with it. The live node before the run holds the tables of its
// successors (the successor's and its copies of those beyond), finds the run dead together and
// relinks around all three, looking through the dead ones to the live nodes beyond; so every
// level is exact again soon after the failures are detected rather than after refresh passes
// have climbed the rings one after another.
func TestRunOfDeadNodesRelinked(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 3
	h, err := NewHarness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Build(300, 100*time.Millisecond, true, uniformPositions(h, 1_000_000), 20_000*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if !h.settle(2000*time.Second, func(int) {}) {
		t.Fatalf("no settle after build: %s", h.Net.CheckStructure())
	}
	owners := h.Net.owners()
	best := 1
	for i := 1; i+1 < len(owners); i++ {
		if owners[i].node.Height() > owners[best].node.Height() {
			best = i
		}
	}
	run := owners[best-1 : best+2]
	height := run[1].node.Height()
	for _, s := range run {
		if err := h.Crash(s.id); err != nil {
			t.Fatal(err)
		}
	}
	// Detection takes up to a probe interval plus ProbeMisses timeouts; relinking, a hop or two.
	const bound = 40 * time.Second
	start := h.Net.Now()
	for !h.Net.CheckStructure().OK() {
		if h.Net.Now()-start > bound {
			t.Fatalf("a run of 3 dead nodes (the middle one %d levels tall) not repaired within %s: %s", height, bound, h.Net.CheckStructure())
		}
		h.Net.RunFor(time.Second)
	}
	t.Logf("run of 3 dead nodes, middle %d levels tall, repaired in %s", height, h.Net.Now()-start)
}
