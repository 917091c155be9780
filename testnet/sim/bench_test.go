package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
)

// BenchmarkSimulatorLookups measures the simulator's throughput in delivered messages per second
// of wall time on a settled overlay serving lookups (maintenance included), at 1,000 nodes and at
// 10,000, where the nodes' state no longer fits in the processor's caches.
func BenchmarkSimulatorLookups(b *testing.B) {
	for _, nodes := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchmarkLookups(b, nodes) })
	}
}

func benchmarkLookups(b *testing.B, nodes int) {
	h, err := NewHarness(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	keys := uint64(nodes) * 100
	if err := h.Build(nodes, 50*time.Millisecond, true, uniformPositions(h, keys), 100_000*time.Second, nil); err != nil {
		b.Fatal(err)
	}
	h.settle(2000*time.Second, func(int) {})
	b.ResetTimer()
	start := h.Net.Stats.Delivered
	for i := 0; i < b.N; i++ {
		k := overlay.Uint64Key(h.Net.rng.Uint64N(keys))
		h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.Get(k) }, func(overlay.Result) {})
		if i%1000 == 999 {
			h.Net.RunFor(time.Second)
		}
	}
	h.Net.RunWhile(func() bool { return h.Pending() > 0 }, h.Net.Now()+1000*time.Second)
	b.ReportMetric(float64(h.Net.Stats.Delivered-start)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkBuild1000 measures building a 1,000-node overlay by joins and letting it settle.
func BenchmarkBuild1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		h, err := NewHarness(DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Build(1000, 50*time.Millisecond, true, uniformPositions(h, 100_000), 100_000*time.Second, nil); err != nil {
			b.Fatal(err)
		}
		if !h.settle(2000*time.Second, func(int) {}) {
			b.Fatal("did not settle")
		}
		b.ReportMetric(float64(h.Net.Stats.Delivered)/b.Elapsed().Seconds(), "msgs/s")
	}
}
