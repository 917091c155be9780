package nixmig

import (
	"math"
	"testing"
)

// TestThresholdLevels: a load in (T_m, T_m+1] is at level m, T_j = thres·δ^j, exactly at the
// boundaries too, and every load at or under the lowest threshold shares the level below it.
func TestThresholdLevels(t *testing.T) {
	for _, delta := range []float64{(1 + math.Sqrt(5)) / 2, 2, 1.1} {
		cfg := DefaultConfig()
		cfg.ThresholdDelta = delta
		b := &Balancer{cfg: cfg}
		for m := lowestThreshold; m <= 12; m++ {
			tm := cfg.Thres * math.Pow(delta, float64(m))
			if got := b.level(tm); got != m-1 {
				t.Errorf("δ %g: load T_%d = %g at level %d, want %d", delta, m, tm, got, m-1)
			}
			if got := b.level(math.Nextafter(tm, math.Inf(1))); got != m {
				t.Errorf("δ %g: load just over T_%d = %g at level %d, want %d", delta, m, tm, got, m)
			}
		}
		for _, l := range []float64{0, 1e-9, b.thresholdAt(lowestThreshold)} {
			if got := b.level(l); got != lowestThreshold-1 {
				t.Errorf("δ %g: load %g at level %d, want %d", delta, l, got, lowestThreshold-1)
			}
		}
	}
}

func TestThresholdConfigRefused(t *testing.T) {
	for _, c := range []struct {
		delta   float64
		samples int
	}{{1, 4}, {0.5, 4}, {math.NaN(), 4}, {17, 4}, {2, -1}, {2, maxThresholdSamples + 1}} {
		cfg := DefaultConfig()
		cfg.Algorithm = Threshold
		cfg.ThresholdDelta, cfg.ThresholdSamples = c.delta, c.samples
		if cfg.Validate() == nil {
			t.Errorf("δ %g with %d samples accepted", c.delta, c.samples)
		}
	}
}
