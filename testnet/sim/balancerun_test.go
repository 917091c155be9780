package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/testnet/workload"
)

// smallBalance is a scaled-down thesis setting: 50 nodes with 100 keys each, mean load 50
// against thres 60, a short load window.
func smallBalance(alg nixmig.Algorithm, w workload.Workload, seed uint64) BalanceParams {
	net := DefaultConfig()
	net.Node.Balance.Algorithm = alg
	net.Node.Balance.Window = 100 * time.Second
	net.Node.Balance.Slots = 10
	return BalanceParams{
		Nodes: 50, Keys: 5000, Seed: seed, Workload: w, Rate: 25,
		Duration: 1200 * time.Second, Warmup: 100 * time.Second, StopAfter: 50 * time.Second,
		Sample: 10 * time.Second, Net: net,
	}
}

func TestBalanceNIXMIGPulse(t *testing.T) {
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []nixmig.Algorithm{nixmig.NIXMIG, nixmig.NIXOnly, nixmig.MIGOnly, nixmig.ItemBalancing, nixmig.Threshold} {
		t.Run(alg.String(), func(t *testing.T) {
			res, err := RunBalance(smallBalance(alg, w, 1), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: completed %v in %.0f s, %d msgs, %d items (%d to migrants, lower bound %d), nix %d mig %d, overloaded %d→%d, gini %.2f→%.2f, check %s, wall %.1fs",
				alg, res.Completed, res.CompletionTime, res.Messages, res.Items, res.MigrantItems, res.LowerBound, res.NIX, res.MIG,
				res.OverloadedStart, res.OverloadedEnd, res.GiniStart, res.GiniEnd, res.Check, res.Wall)
			if res.Check != "ok" {
				t.Fatalf("invariants after balancing: %s", res.Check)
			}
			if res.OverloadedStart == 0 {
				t.Fatalf("the pulse overloaded no node: the test does not test balancing")
			}
			// A network that loses nothing: no node has a reason to ask for acknowledgements.
			if res.Numbered != 0 {
				t.Fatalf("%d balancing messages numbered on a network that loses nothing", res.Numbered)
			}
			if alg == nixmig.NIXMIG && !res.Completed {
				t.Fatalf("NIXMIG did not bring every node under thres")
			}
			// Migrants' pieces are part of the moved items, and only algorithms that migrate
			// have them.
			migrates := alg != nixmig.NIXOnly
			if res.MigrantItems > res.Items || (res.MigrantItems > 0) != (migrates && res.MIG > 0) {
				t.Fatalf("items to migrants %d of %d moved, %d migrations", res.MigrantItems, res.Items, res.MIG)
			}
			// The kinds add up to the whole; leaves belong to migrations, NIX pieces to NIXes.
			if res.NIXItems+res.LeaveItems+res.MigrantItems != res.Items ||
				(res.LeaveItems > 0 && res.MIG == 0) || (res.NIXItems > 0) != (res.NIX > 0) {
				t.Fatalf("items by kind: %d NIX + %d leaves + %d to migrants, of %d moved (%d NIX, %d migrations)",
					res.NIXItems, res.LeaveItems, res.MigrantItems, res.Items, res.NIX, res.MIG)
			}
		})
	}
}

// TestBalanceHeterogeneousNodes: nodes of thres 60, 120 and 240 (SPEC §1: each node sets its
// own) under a pulse that nodes of 60 alone could not carry. NIXMIG must bring every node under
// its own thres — which needs the larger nodes loaded past 60 — with every invariant held.
func TestBalanceHeterogeneousNodes(t *testing.T) {
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	p := smallBalance(nixmig.NIXMIG, w, 1)
	p.Rate = 40 // 8/s a hot key: seven under 60, so 500 hot keys need 72 nodes of 60 (of 50)
	p.SnapshotsAt = []time.Duration{p.Warmup}
	p.RingEvery = 100 * time.Second
	homogeneous := p.Feasibility()
	p.Thresholds = []float64{60, 120, 240}
	mixed := p.Feasibility()
	if homogeneous.Feasible || !homogeneous.Decided || !mixed.Feasible {
		t.Fatalf("nodes of 60 alone: %v; mixed: %v", homogeneous, mixed)
	}
	res, err := RunBalance(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("completed %v in %.0f s, %d msgs, %d items, nix %d mig %d, overloaded %d→%d, check %s; %s",
		res.Completed, res.CompletionTime, res.Messages, res.Items, res.NIX, res.MIG, res.OverloadedStart, res.OverloadedEnd, res.Check, res.Feasibility)
	if res.Check != "ok" || !res.Completed {
		t.Fatalf("completed %v, check %s", res.Completed, res.Check)
	}
	end := res.Snapshots[len(res.Snapshots)-1]
	classes := map[float64]int{}
	over60 := 0
	for i, l := range end.Load {
		classes[end.Thres[i]]++
		if l >= end.Thres[i] {
			t.Errorf("node %d at %.1f/s over its thres %g at the end", i, l, end.Thres[i])
		}
		if l >= 60 {
			over60++
		}
	}
	if len(classes) != 3 || over60 == 0 {
		t.Fatalf("thresholds at the end %v, %d nodes carrying 60/s or more", classes, over60)
	}
	// The ring records carry each node's thres too, for the ring map.
	ring := res.Ring[len(res.Ring)-1]
	if len(ring.Thres) != len(ring.Load) {
		t.Fatalf("the last ring record holds %d thresholds for %d nodes", len(ring.Thres), len(ring.Load))
	}
	ringClasses := map[float64]int{}
	for _, th := range ring.Thres {
		ringClasses[th]++
	}
	if len(ringClasses) != 3 {
		t.Fatalf("ring record thresholds %v", ringClasses)
	}
}

// An invalid balancing message is rejected and counted by the node, never acted on.
func TestInvalidBalanceMessageCounted(t *testing.T) {
	nw, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	n, err := nw.Add("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	bad := &pb.Envelope{From: &pb.NodeRef{Id: []byte("b")}, Body: &pb.Envelope_Balance{Balance: &pb.Balance{
		Wave: 7, Op: &pb.Balance_NixTurn{NixTurn: &pb.NixTurn{Dir: pb.Side_SIDE_SUCC, Index: 3}},
	}}}
	n.Handle("b", bad)
	if n.Stats.Invalid != 1 {
		t.Fatalf("invalid balancing messages counted: %d, want 1", n.Stats.Invalid)
	}
	if _, locked := n.Balancer.Locked(); locked {
		t.Fatal("an invalid message locked the node")
	}
}

// TestBalanceInterrupted checks that a run asked to stop (a user's Ctrl-C) ends at the next
// simulated second with its checks done, and that up to there it is the run it would have been:
// the metric series is a prefix of the uninterrupted one's.
func TestBalanceInterrupted(t *testing.T) {
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := RunBalance(smallBalance(nixmig.NIXMIG, w, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := smallBalance(nixmig.NIXMIG, w, 3)
	seconds := 0
	p.Interrupted = func() bool { seconds++; return seconds >= 130 }
	cut, err := RunBalance(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cut.InterruptedAt != 130 || whole.InterruptedAt != 0 {
		t.Fatalf("interrupted at %v (uninterrupted run: %v), want 130", cut.InterruptedAt, whole.InterruptedAt)
	}
	if cut.Check != "ok" {
		t.Fatalf("checks after the interruption: %s", cut.Check)
	}
	if n := len(cut.Series); n == 0 || cut.Series[n-1].T != 130 || len(whole.Series) <= n {
		t.Fatalf("interrupted series %+v, %d samples whole: want it to end at 130 s, before the whole run's", cut.Series, len(whole.Series))
	}
	if cut.Completed || !whole.Completed || whole.CompletionTime <= 30 {
		t.Fatalf("completed %v interrupted, %v in %.0f s whole: the cut must come before completion", cut.Completed, whole.Completed, whole.CompletionTime)
	}
	for i, s := range cut.Series {
		if s != whole.Series[i] {
			t.Fatalf("sample %d differs: %+v interrupted, %+v whole", i, s, whole.Series[i])
		}
	}
}

// With direct queries NIXMIG balances the pulse as with routed ones: no query message is sent,
// SmartUNL still finds underloaded nodes through the traced routes' hints, and every check holds.
func TestBalanceDirectQueries(t *testing.T) {
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	p := smallBalance(nixmig.NIXMIG, w, 1)
	p.Queries = QueriesDirect
	res, err := RunBalance(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("completed %v in %.0f s, %d msgs, %d items, %d UNL hits, %d probes, check %s", res.Completed, res.CompletionTime,
		res.Messages, res.Items, res.UNLHits, res.Probes, res.Check)
	switch {
	case res.Check != "ok":
		t.Fatalf("invariants after balancing: %s", res.Check)
	case res.OverloadedStart == 0 || !res.Completed:
		t.Fatalf("overloaded %d at the start, completed %v: want a pulse that NIXMIG balances", res.OverloadedStart, res.Completed)
	case res.QueryMessages != 0 || res.QueryRetries != 0 || res.QueryModel != "direct":
		t.Fatalf("%s queries sent %d messages and %d retries", res.QueryModel, res.QueryMessages, res.QueryRetries)
	case res.UNLHits == 0:
		t.Fatal("no UNL hit: the traced routes carried no hints")
	}
}

// TestBalanceReportsOverloaded: the run tells Overloaded, every second of balancing, the count
// of nodes over thres that its samples record.
func TestBalanceReportsOverloaded(t *testing.T) {
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	p := smallBalance(nixmig.NIXMIG, w, 1)
	var heard []int
	p.Overloaded = func(nodes int) { heard = append(heard, nodes) }
	res, err := RunBalance(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(heard) == 0 || heard[0] == 0 {
		t.Fatalf("heard %v: nothing, or no node over thres at the start", heard)
	}
	for _, s := range res.Series {
		i := int(s.T - p.Warmup.Seconds()) // the first second heard is the one that ends the warm-up
		if i < 0 || i >= len(heard) {
			continue
		}
		if heard[i] != s.Overloaded {
			t.Fatalf("at %.0f s heard %d nodes over thres, the sample says %d", s.T, heard[i], s.Overloaded)
		}
	}
}

// faultyPulse runs NIXMIG on the small setting's 10% pulse with the faults that fault sets, and
// fails the test if the run ends with a broken invariant.
func faultyPulse(t *testing.T, seed uint64, fault func(p *BalanceParams)) *BalanceResult {
	t.Helper()
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	p := smallBalance(nixmig.NIXMIG, w, seed)
	fault(&p)
	res, err := RunBalance(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Check != "ok" {
		t.Fatalf("invariants after balancing: %s", res.Check)
	}
	return res
}

// crash crashes the fraction of the nodes this long into balancing, queries counted direct.
func crash(fraction float64, after time.Duration) func(p *BalanceParams) {
	return func(p *BalanceParams) {
		p.Queries = QueriesDirect
		p.CrashFraction = fraction
		p.CrashAfter = after
	}
}

// Under message loss a batch put of the load phase can fail with part of it stored; it is sent
// again. Before, it was counted as a failed query while its keys stayed expected, and the end
// check reported them missing as if balancing had lost them (seed 2 then: 156 keys). Runs go
// on, seed after seed, until one has retried a batch (seed 6 since the ring checks), or the test
// would not test this; each must end with every check ok.
func TestLoadRetriedUnderLoss(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		res := faultyPulse(t, seed, func(p *BalanceParams) {
			p.Net.Loss = 0.05
			p.Duration = 300 * time.Second
		})
		if res.LoadRetries > 0 {
			return
		}
	}
	t.Fatal("no batch put of the load was sent again in twelve runs: the test does not test the retry")
}

// With direct queries, the keys lost with crashed nodes are read by nobody afterwards, as with
// routed scans, which return only stored keys. Counted at their range's new owner, they were
// load it could never hand on, and a crash run stayed unbalanced to its end (this seed).
func TestDirectReadsForgetLostKeys(t *testing.T) {
	res := faultyPulse(t, 7, crash(0.1, 20*time.Second))
	if res.ItemsLost == 0 {
		t.Fatal("the crash lost no item: the test does not test reads of lost keys")
	}
	// smallBalance's 50 nodes, less the crashed.
	if want := fmt.Sprintf("of %d (", 50-res.Crashed); !strings.Contains(res.FeasibilityAfterCrash, want) {
		t.Errorf("feasibility after the crash %q does not count the %d survivors", res.FeasibilityAfterCrash, 50-res.Crashed)
	}
	if !res.Completed {
		t.Fatalf("not balanced after the crash (%d nodes over thres at the end)", res.OverloadedEnd)
	}
}

// A giver whose receiver crashed before confirming a NIX commit held the piece's items as a copy
// outside its range, the only copy left of keys the crash counted lost, and the end check
// failed invariant 3 (on this seed: 75 items). It now writes them to the piece's owner.
func TestUnconfirmedHandoffCopyGoesToOwner(t *testing.T) {
	if res := faultyPulse(t, 4, crash(0.05, 20*time.Second)); res.ItemsLost == 0 {
		t.Fatal("the crash lost no item: the test does not test a crashed receiver")
	}
}

// A migrant joins again through the node it was told to join next to, then the node that took
// its old range; when both crash (a fifth of the nodes at once, this seed) it asked the dead for
// ever and stayed joining. The nodes it was linked to are its introducers too now.
func TestMigrantRejoinsWhenItsIntroducersCrash(t *testing.T) {
	if res := faultyPulse(t, 8, crash(0.2, 30*time.Second)); res.Crashed == 0 {
		t.Fatal("nothing crashed")
	}
}

// TestBalanceCompletesUnder5PercentLoss: under 5% message loss nodes that have seen losses
// acknowledge their balancing messages and send them again until acknowledged (nixmig's
// reliable.go). Before, one lost message of a wave's few dozen left its nodes locked until their
// leases ran out and most waves failed: these seeds took 704–1,089 s to balance, 931 s on the
// mean (now 328–621 s; the bound is a mean of 600 s, every seed balancing), and on the thesis's
// 500 nodes 16 runs of 19 did not balance in 1,300 s.
func TestBalanceCompletesUnder5PercentLoss(t *testing.T) {
	const seeds, bound = 4, 600.0
	resent, total := 0, 0.0
	for seed := uint64(1); seed <= seeds; seed++ {
		res := faultyPulse(t, seed, func(p *BalanceParams) {
			p.Net.Loss = 0.05
			p.Queries = QueriesDirect
		})
		t.Logf("seed %d: completed %v at %.0f s, %d messages sent again", seed, res.Completed, res.CompletionTime, res.Resent)
		if !res.Completed {
			t.Errorf("seed %d: not every node under thres", seed)
		}
		resent += res.Resent
		total += res.CompletionTime
	}
	if mean := total / seeds; mean > bound {
		t.Errorf("balancing took %.0f s on the mean, over %.0f s", mean, bound)
	}
	if resent == 0 {
		t.Fatal("no balancing message was sent again: the test does not test acknowledgements")
	}
}

// TestThresholdAlgorithm: Ganesan et al.'s threshold algorithm (nixmig/threshold.go). Under a
// light uniform load every node sits below the levels at which it acts: no probe, nothing
// moves. Under the 10% pulse it balances with both of its operations — NIX to a lighter
// neighbour and the reorder of a light node next to a heavy one — and ends far flatter than it
// began, though it aims at a bounded ratio of loads, not at every node under thres.
func TestThresholdAlgorithm(t *testing.T) {
	light := smallBalance(nixmig.Threshold, workload.Uniform{K: 5000}, 1)
	light.Rate = 5 // 10/s a node against T_−2 = thres/δ² ≈ 22.9
	res, err := RunBalance(light, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Check != "ok" || res.Probes != 0 || res.Items != 0 || res.Messages != 0 {
		t.Fatalf("light uniform load: check %s, %d probes, %d items moved, %d messages", res.Check, res.Probes, res.Items, res.Messages)
	}
	w, err := workload.NewPulse(5000, 100, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	res, err = RunBalance(smallBalance(nixmig.Threshold, w, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pulse: %d msgs, %d probes, %d items, nix %d mig %d, overloaded %d→%d, gini %.2f→%.2f, max/mean %.2f→%.2f",
		res.Messages, res.Probes, res.Items, res.NIX, res.MIG, res.OverloadedStart, res.OverloadedEnd,
		res.GiniStart, res.GiniEnd, res.MaxMeanStart, res.MaxMeanEnd)
	if res.Check != "ok" || res.NIX == 0 || res.MIG == 0 || res.Probes == 0 {
		t.Fatalf("pulse: check %s, %d NIX, %d migrations, %d probes", res.Check, res.NIX, res.MIG, res.Probes)
	}
	if !(res.GiniEnd < res.GiniStart/2) || !(res.MaxMeanEnd < res.MaxMeanStart/2) {
		t.Fatalf("pulse: gini %.2f → %.2f, max/mean %.2f → %.2f: not balanced", res.GiniStart, res.GiniEnd, res.MaxMeanStart, res.MaxMeanEnd)
	}
}
