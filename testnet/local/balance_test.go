package local

import (
	"context"
	"testing"
	"time"
)

// TestLiveBalancing: 16 real nodes under a 5% pulse of exact-match reads. Before balancing the
// pulse overloads the nodes that own it; NIXMIG brings every node under thres while every read
// keeps returning the right value.
func TestLiveBalancing(t *testing.T) {
	if testing.Short() {
		t.Skip("live balancing takes half a minute")
	}
	res, err := RunPulse(context.Background(), PulseParams{Nodes: 16, Keys: 2000, Width: 0.05, Rate: 300, Thres: 50, Limit: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.WrongAnswers != 0 || res.FailedReads != 0 {
		t.Fatalf("of %d reads, %d returned a wrong value and %d failed (first failure: %q; first wrong value: %q)",
			res.Reads, res.WrongAnswers, res.FailedReads, res.FirstFailure, res.FirstWrong)
	}
	if res.MaxLoadBefore <= res.Thres {
		t.Fatalf("the pulse never overloaded a node (max load %.1f, thres %.1f): the test shows nothing", res.MaxLoadBefore, res.Thres)
	}
	if !res.Balanced {
		t.Fatalf("not balanced within %v: max load %.1f > thres %.1f (loads %v)", res.Limit, res.MaxLoadAfter, res.Thres, res.Loads)
	}
	t.Logf("balanced after %v: max load %.1f → %.1f (thres %.0f), %d items moved by balancing, %d reads all right",
		res.TimeToBalance.Round(100*time.Millisecond), res.MaxLoadBefore, res.MaxLoadAfter, res.Thres, res.ItemsMoved, res.Reads)
}

// TestLiveBalancing32 is issue #4's live-balancing benchmark (docs/BENCHMARKS.md): 32 nodes, a
// 5% pulse, beside `skipsim balance` with the same parameters.
func TestLiveBalancing32(t *testing.T) {
	if !benchEnabled() {
		t.Skip("set SKIPRANGE_BENCH=1 to run (docs/BENCHMARKS.md)")
	}
	res, err := RunPulse(context.Background(), PulseParams{Nodes: 32, Keys: 4000, Width: 0.05, Rate: 600, Thres: 60, Limit: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("balanced %v after %v: max load %.1f → %.1f (thres %.0f), %d items moved by balancing, %d reads, %d failed, %d wrong",
		res.Balanced, res.TimeToBalance.Round(100*time.Millisecond), res.MaxLoadBefore, res.MaxLoadAfter, res.Thres, res.ItemsMoved, res.Reads, res.FailedReads, res.WrongAnswers)
}
