package nixmig

import (
	"math"
	"testing"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
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
		for _, l := range []float64{0, 1e-9, b.thresholdAt(lowestThreshold), math.NaN(), math.Inf(-1)} {
			if got := b.level(l); got != lowestThreshold-1 {
				t.Errorf("δ %g: load %g at level %d, want %d", delta, l, got, lowestThreshold-1)
			}
		}
		for _, l := range []float64{math.Inf(1), math.MaxFloat64} {
			if got := b.level(l); got != highestLevel {
				t.Errorf("δ %g: load %g at level %d, want the highest, %d", delta, l, got, highestLevel)
			}
		}
	}
}

func TestThresholdConfigRefused(t *testing.T) {
	for _, c := range []struct {
		delta   float64
		samples int
	}{{1, 4}, {0.5, 4}, {math.NaN(), 4}, {17, 4}, {2, -1}, {2, MaxThresholdSamples + 1}} {
		cfg := DefaultConfig()
		cfg.Algorithm = Threshold
		cfg.ThresholdDelta, cfg.ThresholdSamples = c.delta, c.samples
		if cfg.Validate() == nil {
			t.Errorf("δ %g with %d samples accepted", c.delta, c.samples)
		}
	}
}

// TestThresholdReorderAsksTheLightestNode: a node whose sample found an idle node at most
// T_m−2 asks it to move next to it (IB_MOVE): at 70/s (level 0, T_−2 ≈ 22.9) one at 20/s; at
// 40/s (level −1, T_−3 ≈ 14.2) not that one. And once the balancer is stopped no answer still
// in flight starts anything.
func TestThresholdReorderAsksTheLightestNode(t *testing.T) {
	for _, c := range []struct {
		name          string
		load, lightL  float64
		stopped, want bool
	}{
		{"level 0, a node at 20/s", 70, 20, false, true},
		{"level −1, a node at 20/s", 40, 20, false, false},
		{"level −1, a node at 14/s", 40, 14, false, true},
		{"stopped", 100, 0, true, false},
	} {
		cfg := DefaultConfig()
		cfg.Algorithm = Threshold
		env, b := loadedNode(t, "h", cfg, c.load)
		b.Start()
		if c.stopped {
			b.Stop()
		}
		b.threshold = thresholdState{sample: 5, waiting: 1, sampled: b.level(c.load), at: env.now}
		b.onThresholdReply(overlay.Peer{ID: "light"}, &pb.ProbeReply{Load: c.lightL, Thres: 60, Idle: true})
		moves := env.count(func(m *pb.Balance) bool { return m.GetIbOffer().GetStep() == pb.IBStep_IB_MOVE })
		if (moves == 1) != c.want || moves > 1 {
			t.Errorf("%s: %d reorders asked, want %v", c.name, moves, c.want)
		}
		if b.threshold.sample != 0 {
			t.Errorf("%s: the sample is still open after its last answer", c.name)
		}
	}
}
