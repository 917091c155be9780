package sim

import (
	"testing"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
)

// BenchmarkSimulatorLookups measures the simulator's throughput in delivered messages per second
// of wall time on a settled 1,000-node overlay serving lookups (maintenance included).
func BenchmarkSimulatorLookups(b *testing.B) {
	h, err := NewHarness(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Build(1000, 50*time.Millisecond, true, uniformPositions(h, 100_000), 100_000*time.Second, nil); err != nil {
		b.Fatal(err)
	}
	h.settle(2000*time.Second, func(int) {})
	b.ResetTimer()
	start := h.Net.Stats.Delivered
	for i := 0; i < b.N; i++ {
		k := overlay.Uint64Key(h.Net.rng.Uint64N(100_000))
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
