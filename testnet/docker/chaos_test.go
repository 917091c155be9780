package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay/pb"
)

// Chaos test parameters. Failure detection takes about probe-misses × (probe-interval +
// probe-timeout) ≈ 1.5–3 s; the load window is 10 s. Load is requests per second averaged over
// the window (nixmig.LoadTracker). thres leaves room for the background workload (≈165 key reads
// per second over 8 nodes, at most ≈60 on the largest range) and the pulse (200 gets/s on 5% of
// the keys, ≈2.5 × thres on the node holding it) at once: ≈365 of 800.
const (
	chaosNodes  = 8
	chaosSpare  = 8 // the join storm
	chaosKeys   = 2000
	chaosWindow = 10 * time.Second
	chaosLease  = 4 * time.Second
	chaosThres  = 100
	pulseWidth  = chaosKeys / 20 // 5%
	pulseRate   = 200.0
	// No lock may be held by one node for one wave longer than nixmig.MaxLeaseFactor leases
	// without renewal; a wave in this testnet lasts well under a second.
	maxLockHold = 6*chaosLease + 2*time.Second
)

var chaosFlags = []string{
	"--window", chaosWindow.String(), "--slots", "10", "--check-interval", "500ms",
	"--thres", fmt.Sprint(chaosThres), "--over-thres", fmt.Sprint(4 * chaosThres),
	"--lease", chaosLease.String(),
	"--probe-interval", "500ms", "--probe-timeout", "500ms", "--probe-misses", "3",
}

// scenarioResult is what one scenario measured, for the summary at the end.
type scenarioResult struct {
	name     string
	victim   string
	how      string        // why this victim (locked, overloaded)
	recovery time.Duration // fault (or its end) → ring whole
	recWhat  string
	balance  BalanceResult
	balSince string
	unlock   time.Duration
	errors   ErrorSummary
	lostKeys int
	reported uint64
	verify   string
	notes    []string
}

// TestChaos runs one 8-node docker testnet through a sequence of faults while a checked workload
// runs from the host: a kill -9 in the middle of a NIXMIG wave (and the killed node's return
// after a long absence), a pause longer than the lock lease, a network partition of one node
// longer than failure detection, a rolling restart of every node, a join storm of 8 nodes, and a
// graceful restart of the seed node. After each it checks that the ring is whole, every lock is
// released, balancing completes under a fresh 5% pulse, and every acknowledged write is readable
// except the items of a killed node, which must be exactly those in the lost ranges the nodes
// report. Every event goes to a timeline file whose path the test logs.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("docker chaos test: skipped with -short (it builds an image and runs 16 containers for about 4 minutes)")
	}
	d, err := Available(context.Background())
	if err != nil {
		t.Skipf("docker chaos test skipped: %v", err)
	}
	limit := 8 * time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl)-45*time.Second < limit {
		limit = time.Until(dl) - 45*time.Second // leave time for compose down
		if limit < 4*time.Minute {
			t.Skipf("docker chaos test skipped: the test deadline leaves %v, it needs about 4 minutes", limit)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()

	tl, err := NewTimeline()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tl.Close() })
	t.Logf("timeline: %s", tl.Path())
	if err := CleanStale(ctx); err != nil {
		t.Skipf("docker chaos test skipped: %v", err)
	}

	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	begin := time.Now()
	build, err := BuildImage(ctx, repo, work, DefaultImage)
	if err != nil {
		t.Fatal(err)
	}
	tl.Event("build", "image %s and skipnet built in %.1fs", build.Image, time.Since(begin).Seconds())

	project := fmt.Sprintf("%s%d", ProjectPrefix, time.Now().UnixNano()%1_000_000_000)
	tn, err := NewTestnet(ctx, d, Config{Services: chaosNodes + chaosSpare, Start: chaosNodes, NodeFlags: chaosFlags,
		Build: build, Dir: filepath.Join(work, "net"), Project: project, Timeline: tl})
	if err != nil {
		t.Fatal(err)
	}
	tl.Event("setup", "compose project %s in %s, node flags: %s", project, filepath.Join(work, "net"), strings.Join(chaosFlags, " "))
	var wl *Workload
	var mon *Monitor
	t.Cleanup(func() {
		// Cleanups run even when the test fails or its context ran out.
		if wl != nil {
			wl.Stop()
		}
		if mon != nil {
			mon.Stop()
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		logs := strings.TrimSuffix(tl.Path(), ".log") + "-logs"
		if err := tn.SaveLogs(cctx, logs); err == nil {
			t.Logf("container logs: %s", logs)
		}
		if err := tn.Down(cctx); err != nil {
			t.Errorf("compose down: %v", err)
		}
	})

	start := time.Now()
	if err := tn.Up(ctx); err != nil {
		t.Fatal(err)
	}
	members := append([]*Node(nil), tn.Nodes[:chaosNodes]...)
	tn.SetLive(members)
	upTime, _, err := tn.WaitRing(ctx, members, 60*time.Second, "start")
	if err != nil {
		t.Fatal(err)
	}
	tl.Event("setup", "8 nodes up and the ring whole %.2fs after compose up (%.2fs of it waiting for the ring)", time.Since(start).Seconds(), upTime.Seconds())

	model := NewModel(NewKeySpace(chaosKeys))
	wl = NewWorkload(tn, model, WorkloadConfig{Rate: 150, Workers: 6, GetShare: 0.6, ScanShare: 0.1, ScanKeys: 16, ScanLimit: 5,
		Timeout: 3 * time.Second, Quiet: 35 * time.Second})
	if err := wl.Load(ctx, 200); err != nil {
		t.Fatal(err)
	}
	mon = tn.StartMonitor(ctx, time.Second)
	wl.Start(ctx)

	var results []*scenarioResult
	used := map[*Node]bool{}

	// runScenario wraps the common checks after a fault: the ring whole (done by the scenario,
	// which gives recoveredAt and the ring), balancing under the scenario's pulse, locks, data.
	finish := func(res *scenarioResult, mark Mark, faultAt, recoveredAt time.Time, members []*Node) {
		res.balance = tn.WaitBalanced(ctx, members, recoveredAt, chaosWindow+time.Second, chaosWindow+45*time.Second, res.name)
		res.balSince = "after the ring was whole"
		if !res.balance.Balanced {
			t.Errorf("%s: balancing did not complete: some node over thres %v after the ring was whole (see timeline)", res.name, chaosWindow+45*time.Second)
		}
		var held []string
		res.unlock, held = tn.WaitUnlocked(ctx, members, maxLockHold, res.name)
		if len(held) > 0 {
			t.Errorf("%s: locks still held %v after balancing completed: %s", res.name, maxLockHold, strings.Join(held, ", "))
		}
		if long := mon.LongLocks(maxLockHold); len(long) > 0 {
			t.Errorf("%s: locks held longer than %v: %s", res.name, maxLockHold, strings.Join(long, "; "))
		}
		r1, _ := tn.Ring(ctx, members[0])
		v := wl.Verify(ctx, recoveredAt, r1, mon.Last())
		res.lostKeys, res.reported = len(v.LostKeys), v.ReportedLost
		res.verify = fmt.Sprintf("%d keys: %d readable (%d inside lost ranges), %d lost, %d violations", v.Keys, v.OK, v.InLostOK, len(v.LostKeys), len(v.Violations))
		tl.Event("verify", "%s: %s; lost ranges %d, nodes' lost_items counters sum to %d (cumulative)", res.name, res.verify, len(v.LostRanges), v.ReportedLost)
		for i, msg := range v.Violations {
			if i < 20 {
				tl.Event("VIOLATION", "%s verify: %s", res.name, msg)
			}
		}
		if len(v.Violations) > 0 {
			t.Errorf("%s: %d answers broke the model in the verification pass, e.g. %s", res.name, len(v.Violations), strings.Join(first(v.Violations, 5), "; "))
		}
		if len(v.LostKeys) > 0 {
			if failed := wl.Rewrite(ctx, v.LostKeys); len(failed) > 0 {
				t.Errorf("%s: could not rewrite lost keys %v", res.name, failed)
			}
			tl.Event("verify", "%s: rewrote the %d lost keys", res.name, len(v.LostKeys))
		}
		rep := wl.Since(mark)
		res.errors = rep.Summarize(faultAt)
		tl.Event("errors", "%s: %s", res.name, res.errors)
		uncorroborated := 0
		for _, la := range rep.Lost {
			if !mon.LostSeen(model.KS.Key(la.Key), la.T, 3*time.Second) {
				uncorroborated++
			}
		}
		if uncorroborated > 0 {
			res.notes = append(res.notes, fmt.Sprintf("%d of %d LOST answers not seen inside a lost range by the 1-s ring walks within 3 s", uncorroborated, len(rep.Lost)))
		}
		for _, v := range rep.Violations {
			res.notes = append(res.notes, "workload violation: "+v.Op+": "+v.Msg)
		}
		if len(rep.Violations) > 0 {
			t.Errorf("%s: %d workload answers broke the model, e.g. %s: %s", res.name, len(rep.Violations), rep.Violations[0].Op, rep.Violations[0].Msg)
		}
		results = append(results, res)
	}

	// (0) Baseline: balancing of a 5% pulse on the healthy 8-node network.
	{
		res := &scenarioResult{name: "baseline"}
		mark := wl.Mark()
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		p := wl.Pulse()
		res.balance = tn.WaitBalanced(ctx, members, p.Started, chaosWindow+time.Second, chaosWindow+45*time.Second, "baseline")
		res.balSince = "after the pulse started"
		if !res.balance.Balanced {
			t.Errorf("baseline: balancing did not complete %v after the pulse started", chaosWindow+45*time.Second)
		}
		res.unlock, _ = tn.WaitUnlocked(ctx, members, maxLockHold, "baseline")
		res.victim = "-"
		rep := wl.Since(mark)
		res.errors = rep.Summarize(p.Started)
		if len(rep.Violations) > 0 {
			t.Errorf("baseline: %d workload answers broke the model, e.g. %s", len(rep.Violations), rep.Violations[0].Msg)
		}
		results = append(results, res)
	}

	// (a) kill -9 a node in the middle of a NIXMIG wave.
	var killed *Node
	if ctx.Err() == nil {
		res := &scenarioResult{name: "kill -9 in a wave"}
		mark := wl.Mark()
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		victim, how := waitForWave(ctx, tn, candidates(members, tn), target, 15*time.Second)
		res.victim, res.how = victim.Service, how
		used[victim] = true
		before := mon.Last()
		rest := Without(members, victim)
		tn.SetLive(rest)
		faultAt := time.Now()
		if err := tn.Kill(ctx, victim); err != nil {
			t.Fatal(err)
		}
		killed = victim
		rec, r, err := tn.WaitRing(ctx, rest, 30*time.Second, res.name)
		res.recovery, res.recWhat = rec, "kill → ring whole"
		if err != nil {
			t.Fatalf("%s: %v", res.name, err)
		}
		recoveredAt := time.Now()
		// The victim's keys at the last walk before the kill, beside what the nodes report lost.
		var victimRange *pb.KeyRange
		for _, x := range before.Nodes {
			if x.Peer.ID == victim.ID {
				victimRange = x.Status.GetRange()
			}
		}
		v := wl.Verify(ctx, recoveredAt, r)
		var lostRanges []string
		for _, kr := range keyOrder(v.LostRanges) {
			lostRanges = append(lostRanges, fmt.Sprintf("%s (%d keys)", RangeString(kr), len(model.KS.Within(kr))))
		}
		inVictim := 0
		if victimRange != nil {
			inVictim = len(model.KS.Within(victimRange))
		}
		tl.Event("verify", "%s: right after repair: %d keys lost, %d readable inside lost ranges; nodes report lost ranges %s and lost_items counters summing to %d; the victim held [%s] (%d keys) at the last walk before the kill",
			res.name, len(v.LostKeys), v.InLostOK, strings.Join(lostRanges, ", "), v.ReportedLost, RangeString(victimRange), inVictim)
		res.notes = append(res.notes, fmt.Sprintf("right after repair: %d keys answered LOST, all inside the reported lost ranges %s; lost_items counters sum to %d; the victim held %d keys at the last walk before the kill",
			len(v.LostKeys), strings.Join(lostRanges, ", "), v.ReportedLost, inVictim))
		if len(v.LostRanges) == 0 {
			t.Errorf("%s: no node reports a lost range after %s was killed", res.name, victim.Service)
		}
		for _, msg := range first(v.Violations, 20) {
			tl.Event("VIOLATION", "%s verify after repair: %s", res.name, msg)
		}
		if len(v.Violations) > 0 {
			t.Errorf("%s: %d answers broke the model right after repair, e.g. %s", res.name, len(v.Violations), strings.Join(first(v.Violations, 5), "; "))
		}
		res.lostKeys = len(v.LostKeys)
		if failed := wl.Rewrite(ctx, v.LostKeys); len(failed) > 0 {
			t.Errorf("%s: could not rewrite lost keys %v", res.name, failed)
		}
		tl.Event("verify", "%s: rewrote the %d lost keys", res.name, len(v.LostKeys))
		lost := res.lostKeys
		members = rest
		finish(res, mark, faultAt, recoveredAt, members)
		res.lostKeys = lost
	}

	// (a′) the killed node comes back over its volume after a long absence.
	if ctx.Err() == nil && killed != nil {
		res := &scenarioResult{name: "killed node returns", victim: killed.Service, how: "docker start after the kill scenario"}
		mark := wl.Mark()
		faultAt := time.Now()
		if err := tn.StartContainer(ctx, killed); err != nil {
			t.Fatal(err)
		}
		all := append(append([]*Node(nil), members...), killed)
		rec, _, err := tn.WaitRing(ctx, all, 30*time.Second, res.name)
		res.recovery, res.recWhat = rec, "start → ring whole"
		if err != nil {
			t.Errorf("%s: %v", res.name, err)
			// Go on without it: stop the container so that it cannot confuse the rest.
			_ = tn.docker(ctx, "stop", "-t", "1", killed.Container)
			res.verify = "not run: the node did not come back"
			results = append(results, res)
		} else {
			members = all
			tn.SetLive(members)
			target := pickTarget(tn, mon, members, used)
			startPulse(tn, wl, model, target)
			finish(res, mark, faultAt, time.Now(), members)
		}
	}

	// (b) docker pause a node (locked, if one is) for longer than the lock lease.
	if ctx.Err() == nil {
		res := &scenarioResult{name: "pause > lease"}
		mark := wl.Mark()
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		victim, how := waitForWave(ctx, tn, candidates(members, tn), target, 15*time.Second)
		res.victim, res.how = victim.Service, how
		used[victim] = true
		tn.SetLive(Without(members, victim))
		faultAt := time.Now()
		if err := tn.Pause(ctx, victim); err != nil {
			t.Fatal(err)
		}
		time.Sleep(chaosLease + 3*time.Second)
		if err := tn.Unpause(ctx, victim); err != nil {
			t.Fatal(err)
		}
		unpausedAt := time.Now()
		rec, _, err := tn.WaitRing(ctx, members, 30*time.Second, res.name)
		res.recovery, res.recWhat = rec, "unpause → ring whole"
		if err != nil {
			t.Fatalf("%s: %v", res.name, err)
		}
		tn.SetLive(members)
		_ = unpausedAt
		startPulse(tn, wl, model, target) // a fresh pulse: balancing must resume
		finish(res, mark, faultAt, time.Now(), members)
	}

	// (c) disconnect a node from the network for longer than failure detection.
	if ctx.Err() == nil {
		res := &scenarioResult{name: "partition"}
		mark := wl.Mark()
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		victim, how := waitForWave(ctx, tn, candidates(members, tn), target, 15*time.Second)
		res.victim, res.how = victim.Service, how
		used[victim] = true
		tn.SetLive(Without(members, victim))
		faultAt := time.Now()
		if err := tn.Disconnect(ctx, victim); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		if err := tn.Connect(ctx, victim); err != nil {
			t.Fatal(err)
		}
		rec, _, err := tn.WaitRing(ctx, members, 30*time.Second, res.name)
		res.recovery, res.recWhat = rec, "reconnect → ring whole"
		if err != nil {
			t.Fatalf("%s: %v", res.name, err)
		}
		tn.SetLive(members)
		startPulse(tn, wl, model, target)
		finish(res, mark, faultAt, time.Now(), members)
	}

	// (d) rolling restart: every node but node0 gracefully (docker restart: SIGTERM, the node
	// hands its range over and exits, then rejoins as a new member), node0 by kill -9 and start
	// (its snapshot restores it); node0's graceful restart is scenario (f).
	if ctx.Err() == nil {
		res := &scenarioResult{name: "rolling restart", victim: "all", how: "docker restart node7…node1, kill+start node0"}
		mark := wl.Mark()
		faultAt := time.Now()
		order := append([]*Node(nil), members...)
		sort.Slice(order, func(a, b int) bool { return order[a].Index > order[b].Index })
		var worst time.Duration
		var per []string
		for _, n := range order {
			if ctx.Err() != nil {
				break
			}
			tn.SetLive(Without(members, n))
			t0 := time.Now()
			if n.Index == 0 {
				if err := tn.Kill(ctx, n); err != nil {
					t.Fatal(err)
				}
				if err := tn.StartContainer(ctx, n); err != nil {
					t.Fatal(err)
				}
			} else if err := tn.Restart(ctx, n, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			rec, _, err := tn.WaitRing(ctx, members, 30*time.Second, res.name+" "+n.Service)
			if err != nil {
				t.Fatalf("%s: %v", res.name, err)
			}
			tn.SetLive(members)
			d := time.Since(t0)
			worst = max(worst, d)
			per = append(per, fmt.Sprintf("%s %.1fs", n.Service, d.Seconds()))
			_ = rec
		}
		res.recovery, res.recWhat = worst, "slowest restart → ring whole"
		res.notes = append(res.notes, "per node (restart command → ring whole): "+strings.Join(per, ", "))
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		finish(res, mark, faultAt, time.Now(), members)
	}

	// (e) join storm: 8 more nodes at once.
	if ctx.Err() == nil {
		res := &scenarioResult{name: "join storm", victim: "node8…node15", how: "compose up -d of 8 services at once"}
		mark := wl.Mark()
		faultAt := time.Now()
		newcomers := tn.Nodes[chaosNodes:]
		if err := tn.StartNodes(ctx, newcomers...); err != nil {
			t.Fatal(err)
		}
		all := append(append([]*Node(nil), members...), newcomers...)
		rec, _, err := tn.WaitRing(ctx, all, 60*time.Second, res.name)
		res.recovery, res.recWhat = rec, "up → ring whole with 16"
		if err != nil {
			t.Fatalf("%s: %v", res.name, err)
		}
		members = all
		tn.SetLive(members)
		target := pickTarget(tn, mon, members, used)
		startPulse(tn, wl, model, target)
		finish(res, mark, faultAt, time.Now(), members)
	}

	// (f) graceful restart of node0, the node that started the overlay (--new-network).
	if ctx.Err() == nil {
		n0 := tn.Nodes[0]
		res := &scenarioResult{name: "node0 graceful restart", victim: n0.Service, how: "docker restart (SIGTERM)"}
		mark := wl.Mark()
		tn.SetLive(Without(members, n0))
		faultAt := time.Now()
		if err := tn.Restart(ctx, n0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		rec, _, err := tn.WaitRing(ctx, members, 20*time.Second, res.name)
		res.recovery, res.recWhat = rec, "restart → ring whole"
		if err != nil {
			// Walk from node0 itself to show where it went.
			r0, err0 := tn.Ring(ctx, n0)
			line := RingLine(tn, r0)
			if err0 != nil {
				line = err0.Error()
			}
			tl.Event("BUG", "%s: node0 did not rejoin the overlay; its own ring: %s", res.name, line)
			t.Errorf("%s: %v; the ring walked from node0 itself: %s", res.name, err, line)
			res.verify = "node0 did not come back into the overlay"
			res.errors = wl.Since(mark).Summarize(faultAt)
			results = append(results, res)
		} else {
			tn.SetLive(members)
			finish(res, mark, faultAt, time.Now(), members)
		}
	}

	if ctx.Err() != nil {
		t.Errorf("the chaos test ran out of its %v bound", limit)
	}
	wl.Stop()
	mon.Stop()
	total := wl.Since(Mark{ops: map[string]int{}})
	summary := summarize(results, total, time.Since(begin))
	for _, line := range strings.Split(summary, "\n") {
		tl.Event("summary", "%s", line)
	}
	t.Logf("summary (timeline %s):\n%s", tl.Path(), summary)
}

// candidates are the nodes a scenario may fault: not node0 and node1, which later nodes
// bootstrap through.
func candidates(members []*Node, tn *Testnet) []*Node {
	return Without(members, tn.Nodes[0], tn.Nodes[1])
}

// pickTarget returns a candidate node not used yet, the one with the most items, where the next
// pulse goes.
func pickTarget(tn *Testnet, mon *Monitor, members []*Node, used map[*Node]bool) *Node {
	r := mon.Last()
	cands := candidates(members, tn)
	var best *Node
	var most uint64
	if r != nil {
		for _, x := range r.Nodes {
			n := tn.ByID(x.Peer.ID)
			if n == nil || used[n] || len(Without(cands, n)) == len(cands) {
				continue
			}
			if best == nil || x.Status.GetItems() > most {
				best, most = n, x.Status.GetItems()
			}
		}
	}
	if best == nil {
		for _, n := range cands {
			if !used[n] {
				return n
			}
		}
		return cands[len(cands)-1]
	}
	return best
}

// startPulse centres a 5% pulse on the keys of target's range (as the target reports it).
func startPulse(tn *Testnet, wl *Workload, m *Model, target *Node) {
	lo := 0
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if st, err := tn.Status(ctx, target); err == nil && st.GetRange() != nil {
		keys := m.KS.Within(st.GetRange())
		if len(keys) > 0 {
			lo = keys[len(keys)/2] - pulseWidth/2
		}
		tn.tl.Event("pulse", "target %s owns %s (%d keys)", target.Service, RangeString(st.GetRange()), len(keys))
	}
	wl.SetPulse(&PulseSpec{Lo: (lo + m.KS.N) % m.KS.N, Width: pulseWidth, Rate: pulseRate})
}

// waitForWave polls the candidates' statuses every 100 ms until one reports a lock (the target
// first, if it is locked) and returns it, or, after bound, the most overloaded candidate (or the
// target). how says which.
func waitForWave(ctx context.Context, tn *Testnet, cands []*Node, target *Node, bound time.Duration) (*Node, string) {
	deadline := time.Now().Add(bound)
	type seen struct {
		n  *Node
		st *pb.NodeStatus
	}
	var last []seen
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var mu sync.Mutex
		var wg sync.WaitGroup
		last = last[:0]
		for _, n := range cands {
			wg.Add(1)
			go func(n *Node) {
				defer wg.Done()
				st, err := tn.Status(ctx, n)
				if err == nil {
					mu.Lock()
					last = append(last, seen{n, st})
					mu.Unlock()
				}
			}(n)
		}
		wg.Wait()
		var locked *seen
		for i := range last {
			s := &last[i]
			if s.st.GetLocked() && (locked == nil || s.n == target) {
				locked = s
			}
		}
		if locked != nil {
			how := fmt.Sprintf("locked by wave %d (load %.0f, thres %.0f)", locked.st.GetLockWave(), locked.st.GetLoad(), locked.st.GetThres())
			tn.tl.Event("victim", "%s is %s", locked.n.Service, how)
			return locked.n, how
		}
		time.Sleep(100 * time.Millisecond)
	}
	var worst *seen
	for i := range last {
		if worst == nil || last[i].st.GetLoad() > worst.st.GetLoad() {
			worst = &last[i]
		}
	}
	if worst != nil && worst.st.GetLoad() > worst.st.GetThres() {
		how := fmt.Sprintf("no lock seen in %v; the most overloaded (load %.0f, thres %.0f)", bound, worst.st.GetLoad(), worst.st.GetThres())
		tn.tl.Event("victim", "%s: %s", worst.n.Service, how)
		return worst.n, how
	}
	how := fmt.Sprintf("no lock and no overload seen in %v; the pulse's target", bound)
	tn.tl.Event("victim", "%s: %s", target.Service, how)
	return target, how
}

func summarize(results []*scenarioResult, total Report, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-8s %-28s %-10s %-24s %-9s %s\n", "scenario", "victim", "recovery", "", "balanced (all < thres)", "unlock", "client errors")
	for _, r := range results {
		bal := "no"
		if r.balance.Balanced {
			bal = fmt.Sprintf("%.1fs (max ×%.1f)", r.balance.Done.Seconds(), r.balance.MaxRatio)
		}
		fmt.Fprintf(&b, "%-24s %-8s %-28s %-10s %-24s %-9s %s\n", r.name, r.victim, r.recWhat, fmt.Sprintf("%.2fs", r.recovery.Seconds()),
			bal, fmt.Sprintf("%.2fs", r.unlock.Seconds()), r.errors)
		if r.how != "" {
			fmt.Fprintf(&b, "    victim: %s\n", r.how)
		}
		if r.balSince != "" {
			fmt.Fprintf(&b, "    balancing measured %s (first overload %+.1fs)\n", r.balSince, r.balance.FirstOverload.Seconds())
		}
		if r.verify != "" {
			fmt.Fprintf(&b, "    verify: %s\n", r.verify)
		}
		for _, n := range r.notes {
			fmt.Fprintf(&b, "    %s\n", n)
		}
	}
	s := total.Summarize(total.From)
	var ops []string
	for k, v := range total.Ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(ops)
	fmt.Fprintf(&b, "whole run %.0fs: requests %s; %d errors; %d violations", elapsed.Seconds(), strings.Join(ops, ", "), s.Count, len(total.Violations))
	return b.String()
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
