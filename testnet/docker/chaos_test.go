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

	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Chaos test parameters. Failure detection takes about probe-misses × (probe-interval +
// probe-timeout) ≈ 1.5–3 s; the load window is 6 s (6 slots). Load is requests per second averaged over
// the window (nixmig.LoadTracker). thres leaves room for the background workload (≈165 key reads
// per second over 8 nodes, at most ≈60 on the largest range) and the pulse (200 gets/s on 5% of
// the keys, ≈2.5 × thres on the node holding it) at once: ≈365 of 800.
const (
	chaosNodes  = 8
	chaosSpare  = 8 // the join storm
	chaosKeys   = 2000
	chaosWindow = 6 * time.Second
	chaosLease  = 4 * time.Second
	chaosThres  = 100
	pulseWidth  = chaosKeys / 20 // 5%
	pulseRate   = 200.0
	// Bounds of the waits.
	ringBound    = 30 * time.Second
	balanceBound = chaosWindow + 75*time.Second // usually 7–15 s; a "NIX storm" (docs/BENCHMARKS.md) once took 47 s
	maxResets    = 2
)

// maxLockHold: no lock may be held by one node for one wave longer than its nodes' bound
// without renewal (nixmig.Config.LongestHold: MaxLeaseFactor leases of --lease, or the lease of
// their longest wave); a wave in this testnet lasts well under a second.
var maxLockHold = func() time.Duration {
	b := p2p.DefaultNodeConfig().Balance
	b.Lease = chaosLease
	return b.LongestHold() + 2*time.Second
}()

var chaosFlags = []string{
	"--window", chaosWindow.String(), "--slots", "6", "--check-interval", "500ms",
	"--thres", fmt.Sprint(chaosThres), "--over-thres", fmt.Sprint(4 * chaosThres),
	"--lease", chaosLease.String(),
	"--probe-interval", "500ms", "--probe-timeout", "500ms", "--probe-misses", "3",
	"--log-level", "debug", // handoffs, link changes and failures go to the container logs the test saves
}

var chaosWorkload = WorkloadConfig{Rate: 150, Workers: 6, GetShare: 0.6, ScanShare: 0.1, DelShare: 0.06, ScanKeys: 16, ScanLimit: 5,
	Timeout: 3 * time.Second, Quiet: 35 * time.Second}

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
	verify   string
	failed   []string // checks that failed
	notes    []string
}

// chaos is the state of the chaos test: one testnet, its workload and monitor, the results.
type chaos struct {
	t       *testing.T
	ctx     context.Context
	tl      *Timeline
	tn      *Testnet
	model   *Model
	wl      *Workload
	mon     *Monitor
	members []*Node // the nodes that should be on the ring
	used    map[*Node]bool
	results []*scenarioResult
	resets  int
	// totals over every workload of the run (a reset starts a new one)
	ops         map[string]int
	errs, viols int
}

// TestChaos runs one 8-node docker testnet through a sequence of faults while a checked workload
// runs from the host: a kill -9 in the middle of a NIXMIG wave (and the killed node's return
// after a long absence), a pause longer than the lock lease, a network partition of one node
// longer than failure detection, a rolling restart of every node, a join storm of 8 nodes, and a
// graceful restart of the seed node. After each it checks that the ring is whole, every lock is
// released, balancing completes under a fresh 5% pulse, and every acknowledged write is readable
// except the items of a killed node, which must be exactly those in the lost ranges the nodes
// report. A scenario that leaves the ring broken fails the test and the network is rebuilt
// (at most twice) so that the remaining scenarios still run. Every event goes to a timeline file
// whose path the test logs.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("docker chaos test: skipped with -short (it builds an image and runs 16 containers for about 4 minutes)")
	}
	d, err := Available(context.Background())
	if err != nil {
		t.Skipf("docker chaos test skipped: %v", err)
	}
	limit := 12 * time.Minute // a cold image build takes 2 min of it, the scenarios 4–6
	if dl, ok := t.Deadline(); ok && time.Until(dl)-45*time.Second < limit {
		limit = time.Until(dl) - 45*time.Second // leave time for compose down
		if limit < 6*time.Minute {
			t.Skipf("docker chaos test skipped: the test deadline leaves %v, it needs about 6 minutes", limit)
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
	c := &chaos{t: t, ctx: ctx, tl: tl, tn: tn, ops: map[string]int{}}
	t.Cleanup(func() {
		// Cleanups run even when the test fails or its context ran out.
		c.stop()
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		logs := strings.TrimSuffix(tl.Path(), ".log") + "-logs"
		if err := tn.SaveLogs(cctx, logs); err == nil {
			t.Logf("container logs: %s", logs)
		}
		if err := tn.Down(cctx); err != nil {
			t.Errorf("compose down: %v", err)
		}
		_ = tn.Close()
	})
	if err := c.start(); err != nil {
		t.Fatal(err)
	}

	c.baseline()
	killed := c.killInWave()
	if killed != nil {
		c.killedReturns(killed)
	}
	c.pause()
	c.partition()
	c.rollingRestart()
	c.joinStorm()
	c.seedRestart()

	if ctx.Err() != nil {
		t.Errorf("the chaos test ran out of its %v bound", limit)
	}
	c.stop()
	var ops []string
	for k, v := range c.ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(ops)
	summary := summarize(c.results) + fmt.Sprintf("whole run %.0fs, %d network resets: requests %s; %d client errors (LOST included); %d workload violations",
		time.Since(begin).Seconds(), c.resets, strings.Join(ops, ", "), c.errs, c.viols)
	for _, line := range strings.Split(summary, "\n") {
		tl.Event("summary", "%s", line)
	}
	t.Logf("summary (timeline %s):\n%s", tl.Path(), summary)
}

// start brings the first 8 services up, waits for the ring, loads the keys and starts the
// monitor and the workload.
func (c *chaos) start() error {
	start := time.Now()
	if err := c.tn.Up(c.ctx); err != nil {
		return err
	}
	c.members = append([]*Node(nil), c.tn.Nodes[:chaosNodes]...)
	c.used = map[*Node]bool{}
	c.tn.SetLive(c.members)
	upTime, _, err := c.tn.WaitRing(c.ctx, c.members, 90*time.Second, "start")
	if err != nil {
		return err
	}
	c.tl.Event("setup", "8 nodes up and the ring whole %.2fs after compose up (%.2fs of it waiting for the ring)", time.Since(start).Seconds(), upTime.Seconds())
	c.model = NewModel(NewKeySpace(chaosKeys))
	c.wl = NewWorkload(c.tn, c.model, chaosWorkload)
	if err := c.wl.Load(c.ctx, 200); err != nil {
		return err
	}
	c.mon = c.tn.StartMonitor(c.ctx, time.Second)
	c.wl.Start(c.ctx)
	return nil
}

// stop ends the workload and the monitor, adding the workload's counts to the totals.
func (c *chaos) stop() {
	if c.wl != nil {
		c.wl.Stop()
		rep := c.wl.Since(Mark{ops: map[string]int{}})
		for k, v := range rep.Ops {
			c.ops[k] += v
		}
		c.errs += len(rep.Errors)
		c.viols += len(rep.Violations)
		c.wl = nil
	}
	if c.mon != nil {
		c.mon.Stop()
		c.mon = nil
	}
}

// usable says whether a scenario can start: the network is up and enough time is left.
func (c *chaos) usable(name string) bool {
	if c.wl == nil {
		c.tl.Event("skip", "%s: not run, no network", name)
		c.t.Errorf("%s: not run: no working network (see the failures above)", name)
		return false
	}
	if dl, _ := c.ctx.Deadline(); time.Until(dl) < 75*time.Second {
		c.tl.Event("skip", "%s: not run, %v left", name, time.Until(dl))
		c.t.Errorf("%s: not run: only %v left of the test's bound", name, time.Until(dl).Round(time.Second))
		return false
	}
	return true
}

// fail records a failed check of a scenario.
func (c *chaos) fail(res *scenarioResult, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	res.failed = append(res.failed, msg)
	c.tl.Event("FAIL", "%s: %s", res.name, msg)
	c.t.Errorf("%s: %s", res.name, msg)
}

// broken handles a ring that did not become whole: the scenario fails, and the network is
// rebuilt from scratch for the scenarios that follow (at most maxResets times).
func (c *chaos) broken(res *scenarioResult, err error) {
	c.fail(res, "%v", err)
	res.verify = "not run: the ring did not become whole"
	c.results = append(c.results, res)
	c.stop()
	if c.resets >= maxResets || c.ctx.Err() != nil {
		c.tl.Event("reset", "no more network resets")
		return
	}
	c.resets++
	c.tl.Event("reset", "rebuilding the network after %s (reset %d of at most %d)", res.name, c.resets, maxResets)
	logs := fmt.Sprintf("%s-logs-before-reset%d", strings.TrimSuffix(c.tl.Path(), ".log"), c.resets)
	if err := c.tn.SaveLogs(c.ctx, logs); err == nil {
		c.tl.Event("reset", "container logs of the broken network: %s", logs)
		c.t.Logf("container logs of the network broken by %s: %s", res.name, logs)
	}
	if err := c.tn.Down(c.ctx); err != nil {
		c.t.Errorf("reset: %v", err)
		return
	}
	if err := c.start(); err != nil {
		c.t.Errorf("reset: %v", err)
		c.stop()
	}
}

// finish runs the checks common to every scenario once its ring is whole again: balancing
// completes under the scenario's pulse (measured from recoveredAt, after a whole load window),
// every lock is released and none was held too long, and the verification pass over every key.
func (c *chaos) finish(res *scenarioResult, mark Mark, faultAt, recoveredAt time.Time) {
	tn, wl, mon, ctx := c.tn, c.wl, c.mon, c.ctx
	res.balance = tn.WaitBalanced(ctx, c.members, recoveredAt, chaosWindow+time.Second, balanceBound, res.name)
	res.balSince = "after the ring was whole"
	if !res.balance.Balanced {
		c.fail(res, "balancing did not complete: some node over thres %v after the ring was whole", balanceBound)
	}
	var held []string
	res.unlock, held = tn.WaitUnlocked(ctx, c.members, maxLockHold, res.name)
	if len(held) > 0 {
		c.fail(res, "locks still held %v after balancing completed: %s", maxLockHold, strings.Join(held, ", "))
	}
	if long := mon.LongLocks(maxLockHold); len(long) > 0 {
		c.fail(res, "locks held longer than %v: %s", maxLockHold, strings.Join(long, "; "))
	}
	r1, _ := tn.Ring(ctx, c.members[0])
	v := wl.Verify(ctx, recoveredAt, r1, mon.Last())
	res.lostKeys = max(res.lostKeys, len(v.LostKeys))
	res.verify = fmt.Sprintf("%d keys: %d readable (%d inside lost ranges), %d lost, %d absent answered LOST, %d violations",
		v.Keys, v.OK, v.InLostOK, len(v.LostKeys), v.LostAbsent, len(v.Violations))
	c.tl.Event("verify", "%s: %s; lost ranges %d, nodes' lost_items counters sum to %d (cumulative)", res.name, res.verify, len(v.LostRanges), v.ReportedLost)
	for _, msg := range first(v.Violations, 20) {
		c.tl.Event("VIOLATION", "%s verify: %s", res.name, msg)
	}
	if len(v.Violations) > 0 {
		c.fail(res, "%d answers broke the model in the verification pass, e.g. %s", len(v.Violations), strings.Join(first(v.Violations, 3), "; "))
	}
	for _, i := range v.LostKeys[:min(len(v.LostKeys), 20)] {
		c.tl.Event("lost", "%s: key %d at %x answered LOST; %s", res.name, i, c.model.KS.Key(i), wl.history(i))
	}
	c.rewrite(res, append(v.LostKeys, v.BadKeys...))
	rep := wl.Since(mark)
	res.errors = rep.Summarize(faultAt)
	c.tl.Event("errors", "%s: %s", res.name, res.errors)
	uncorroborated := 0
	for _, la := range rep.Lost {
		if !mon.LostSeen(c.model.KS.Key(la.Key), la.T, 3*time.Second) {
			uncorroborated++
		}
	}
	if uncorroborated > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d of %d LOST answers not seen inside a lost range by the 1-s ring walks within 3 s", uncorroborated, len(rep.Lost)))
	}
	if len(rep.Violations) > 0 {
		var ex []string
		for _, v := range first2(rep.Violations, 3) {
			ex = append(ex, v.Op+": "+v.Msg)
		}
		c.fail(res, "%d workload answers broke the model, e.g. %s", len(rep.Violations), strings.Join(ex, "; "))
	}
	c.results = append(c.results, res)
}

// rewrite writes fresh values to keys found lost or damaged.
func (c *chaos) rewrite(res *scenarioResult, keys []int) {
	if len(keys) == 0 {
		return
	}
	left := c.wl.Rewrite(c.ctx, keys)
	c.tl.Event("verify", "%s: rewrote %d lost or damaged keys (%d left to their workers: %v)", res.name, len(keys)-len(left), len(left), left)
}

// baseline: balancing of a 5% pulse on the healthy 8-node network.
func (c *chaos) baseline() {
	res := &scenarioResult{name: "baseline", victim: "-"}
	if !c.usable(res.name) {
		return
	}
	mark := c.wl.Mark()
	target := pickTarget(c.tn, c.mon, c.members, c.used)
	startPulse(c.tn, c.wl, c.model, target)
	p := c.wl.Pulse()
	res.balance = c.tn.WaitBalanced(c.ctx, c.members, p.Started, chaosWindow+time.Second, balanceBound, res.name)
	res.balSince = "after the pulse started"
	if !res.balance.Balanced {
		c.fail(res, "balancing did not complete %v after the pulse started", balanceBound)
	}
	var held []string
	res.unlock, held = c.tn.WaitUnlocked(c.ctx, c.members, maxLockHold, res.name)
	if len(held) > 0 {
		c.fail(res, "locks still held %v after balancing completed: %s", maxLockHold, strings.Join(held, ", "))
	}
	rep := c.wl.Since(mark)
	res.errors = rep.Summarize(p.Started)
	if len(rep.Violations) > 0 {
		c.fail(res, "%d workload answers broke the model, e.g. %s", len(rep.Violations), rep.Violations[0].Msg)
	}
	c.results = append(c.results, res)
}

// killInWave: kill -9 a node in the middle of a NIXMIG wave. It returns the killed node.
func (c *chaos) killInWave() *Node {
	res := &scenarioResult{name: "kill -9 in a wave"}
	if !c.usable(res.name) {
		return nil
	}
	tn, wl, model := c.tn, c.wl, c.model
	mark := wl.Mark()
	target := pickTarget(tn, c.mon, c.members, c.used)
	startPulse(tn, wl, model, target)
	victim, how := waitForWave(c.ctx, tn, candidates(c.members, tn), target, 15*time.Second)
	res.victim, res.how = victim.Service, how
	c.used[victim] = true
	before := c.mon.Last()
	rest := Without(c.members, victim)
	tn.SetLive(rest)
	faultAt := time.Now()
	if err := tn.Kill(c.ctx, victim); err != nil {
		c.t.Fatal(err)
	}
	_, r, err := tn.WaitRing(c.ctx, rest, ringBound, res.name)
	res.recovery, res.recWhat = time.Since(faultAt), "kill → ring whole"
	if err != nil {
		c.broken(res, err)
		return nil
	}
	c.members = rest
	recoveredAt := time.Now()
	// The victim's keys at the last walk before the kill, beside what the nodes report lost.
	var victimRange *pb.KeyRange
	for _, x := range before.Nodes {
		if x.Peer.ID == victim.ID {
			victimRange = x.Status.GetRange()
		}
	}
	v := wl.Verify(c.ctx, recoveredAt, r)
	var lostRanges []string
	lostInRanges := 0
	for _, kr := range keyOrder(v.LostRanges) {
		n := len(model.KS.Within(kr))
		lostInRanges += n
		lostRanges = append(lostRanges, fmt.Sprintf("%s (%d keys)", RangeString(kr), n))
	}
	inVictim := 0
	if victimRange != nil {
		inVictim = len(model.KS.Within(victimRange))
	}
	note := fmt.Sprintf("right after repair: %d keys answered LOST (and %d absent ones), %d readable inside lost ranges; lost ranges reported: %s; lost_items counters sum to %d; the victim held [%s] (%d keys) at the last ring walk before the kill",
		len(v.LostKeys), v.LostAbsent, v.InLostOK, strings.Join(lostRanges, ", "), v.ReportedLost, RangeString(victimRange), inVictim)
	c.tl.Event("verify", "%s: %s", res.name, note)
	res.notes = append(res.notes, note)
	if len(v.LostRanges) == 0 {
		c.fail(res, "no node reports a lost range after %s was killed", victim.Service)
	}
	for _, msg := range first(v.Violations, 20) {
		c.tl.Event("VIOLATION", "%s verify after repair: %s", res.name, msg)
	}
	if len(v.Violations) > 0 {
		c.fail(res, "%d answers broke the model right after repair, e.g. %s", len(v.Violations), strings.Join(first(v.Violations, 3), "; "))
	}
	res.lostKeys = len(v.LostKeys)
	c.rewrite(res, append(v.LostKeys, v.BadKeys...))
	c.finish(res, mark, faultAt, recoveredAt)
	return victim
}

// killedReturns: the killed node is started again over its volume, long after it was declared
// dead; it restores its snapshot and must be re-admitted without bringing back stale values.
func (c *chaos) killedReturns(killed *Node) {
	res := &scenarioResult{name: "killed node returns", victim: killed.Service, how: "docker start after the kill scenario"}
	if !c.usable(res.name) {
		return
	}
	mark := c.wl.Mark()
	faultAt := time.Now()
	if err := c.tn.StartContainer(c.ctx, killed); err != nil {
		c.t.Fatal(err)
	}
	all := append(append([]*Node(nil), c.members...), killed)
	_, _, err := c.tn.WaitRing(c.ctx, all, ringBound, res.name)
	res.recovery, res.recWhat = time.Since(faultAt), "start → ring whole"
	if err != nil {
		c.broken(res, err)
		return
	}
	c.members = all
	c.tn.SetLive(c.members)
	target := pickTarget(c.tn, c.mon, c.members, c.used)
	startPulse(c.tn, c.wl, c.model, target)
	c.finish(res, mark, faultAt, time.Now())
}

// pause: docker pause a node (a locked one if the pulse's wave shows one) for longer than the
// lock lease, then unpause it.
func (c *chaos) pause() {
	c.outage("pause > lease", "unpause", chaosLease+3*time.Second, c.tn.Pause, c.tn.Unpause)
}

// partition: disconnect a node from the compose network for longer than failure detection,
// then connect it again at its address.
func (c *chaos) partition() {
	c.outage("partition", "reconnect", 6*time.Second, c.tn.Disconnect, c.tn.Connect)
}

// outage cuts a node in the middle of the pulse's wave off for hold (stop), brings it back
// (resume, named back in the results), and checks that the ring takes it back and that balancing
// resumes under a fresh pulse.
func (c *chaos) outage(name, back string, hold time.Duration, stop, resume func(context.Context, *Node) error) {
	res := &scenarioResult{name: name}
	if !c.usable(res.name) {
		return
	}
	tn := c.tn
	mark := c.wl.Mark()
	target := pickTarget(tn, c.mon, c.members, c.used)
	startPulse(tn, c.wl, c.model, target)
	victim, how := waitForWave(c.ctx, tn, candidates(c.members, tn), target, 15*time.Second)
	res.victim, res.how = victim.Service, how
	c.used[victim] = true
	tn.SetLive(Without(c.members, victim))
	faultAt := time.Now()
	if err := stop(c.ctx, victim); err != nil {
		c.t.Fatal(err)
	}
	time.Sleep(hold)
	resumed := time.Now()
	if err := resume(c.ctx, victim); err != nil {
		c.t.Fatal(err)
	}
	_, _, err := tn.WaitRing(c.ctx, c.members, ringBound, res.name)
	res.recovery, res.recWhat = time.Since(resumed), back+" → ring whole"
	if err != nil {
		c.broken(res, err)
		return
	}
	tn.SetLive(c.members)
	startPulse(tn, c.wl, c.model, target) // a fresh pulse: balancing must resume
	c.finish(res, mark, faultAt, time.Now())
	if res.lostKeys > 0 {
		c.fail(res, "%d acknowledged values answered LOST: no node died, nothing may be lost", res.lostKeys)
	}
}

// rollingRestart: every node in turn, waiting for the ring between them; every node but node0
// gracefully (docker restart: SIGTERM, the node hands its range over and exits, then joins again
// as a new member), node0 by kill -9 and start (its snapshot restores it): node0's graceful
// restart is seedRestart.
func (c *chaos) rollingRestart() {
	res := &scenarioResult{name: "rolling restart", victim: "all", how: "docker restart node7…node1, kill -9 + start node0"}
	if !c.usable(res.name) {
		return
	}
	tn := c.tn
	mark := c.wl.Mark()
	faultAt := time.Now()
	order := append([]*Node(nil), c.members...)
	sort.Slice(order, func(a, b int) bool { return order[a].Index > order[b].Index })
	var worst time.Duration
	var per []string
	for _, n := range order {
		if c.ctx.Err() != nil {
			break
		}
		tn.SetLive(Without(c.members, n))
		t0 := time.Now()
		if n.Index == 0 {
			if err := tn.Kill(c.ctx, n); err != nil {
				c.t.Fatal(err)
			}
			if err := tn.StartContainer(c.ctx, n); err != nil {
				c.t.Fatal(err)
			}
		} else if err := tn.Restart(c.ctx, n, 30*time.Second); err != nil {
			c.t.Fatal(err)
		}
		_, _, err := tn.WaitRing(c.ctx, c.members, ringBound, res.name+" "+n.Service)
		d := time.Since(t0)
		per = append(per, fmt.Sprintf("%s %.1fs", n.Service, d.Seconds()))
		if err != nil {
			res.notes = append(res.notes, "per node (restart command → ring whole): "+strings.Join(per, ", "))
			c.broken(res, err)
			return
		}
		tn.SetLive(c.members)
		worst = max(worst, d)
	}
	res.recovery, res.recWhat = worst, "slowest restart → ring whole"
	res.notes = append(res.notes, "per node (restart command → ring whole): "+strings.Join(per, ", "))
	target := pickTarget(tn, c.mon, c.members, c.used)
	startPulse(tn, c.wl, c.model, target)
	c.finish(res, mark, faultAt, time.Now())
}

// joinStorm: the 8 spare services start at once.
func (c *chaos) joinStorm() {
	res := &scenarioResult{name: "join storm", victim: "+8", how: "compose up -d of node8…node15 at once"}
	if !c.usable(res.name) {
		return
	}
	tn := c.tn
	mark := c.wl.Mark()
	faultAt := time.Now()
	newcomers := tn.Nodes[chaosNodes:]
	if err := tn.StartNodes(c.ctx, newcomers...); err != nil {
		c.t.Fatal(err)
	}
	all := append(append([]*Node(nil), c.members...), newcomers...)
	_, _, err := tn.WaitRing(c.ctx, all, 60*time.Second, res.name)
	res.recovery, res.recWhat = time.Since(faultAt), "compose up → ring whole (16)"
	if err != nil {
		c.broken(res, err)
		return
	}
	c.members = all
	tn.SetLive(c.members)
	target := pickTarget(tn, c.mon, c.members, c.used)
	startPulse(tn, c.wl, c.model, target)
	c.finish(res, mark, faultAt, time.Now())
}

// seedRestart: a graceful restart of node0, the node that started the overlay (--new-network).
func (c *chaos) seedRestart() {
	n0 := c.tn.Nodes[0]
	res := &scenarioResult{name: "node0 graceful restart", victim: n0.Service, how: "docker restart (SIGTERM)"}
	if !c.usable(res.name) {
		return
	}
	tn := c.tn
	mark := c.wl.Mark()
	tn.SetLive(Without(c.members, n0))
	faultAt := time.Now()
	if err := tn.Restart(c.ctx, n0, 30*time.Second); err != nil {
		c.t.Fatal(err)
	}
	_, _, err := tn.WaitRing(c.ctx, c.members, ringBound, res.name)
	res.recovery, res.recWhat = time.Since(faultAt), "restart → ring whole"
	if err != nil {
		// Walk from node0 itself to show where it went.
		r0, err0 := tn.Ring(c.ctx, n0)
		line := RingLine(tn, r0)
		if err0 != nil {
			line = err0.Error()
		}
		c.tl.Event("BUG", "%s: node0 did not rejoin the overlay; the ring walked from node0: %s", res.name, line)
		c.fail(res, "%v; the ring walked from node0 itself: %s", err, line)
		res.verify = "not run: node0 did not come back into the overlay"
		res.errors = c.wl.Since(mark).Summarize(faultAt)
		c.results = append(c.results, res)
		return
	}
	tn.SetLive(c.members)
	c.finish(res, mark, faultAt, time.Now())
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
// first, if it is locked) or a load over its thres, and returns it (a locked node first, then the
// most overloaded), or the target after bound. how says which.
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
		// An overloaded node starts a wave within --check-interval, and waves here finish in
		// milliseconds, so polls rarely catch a lock: an overloaded node is in the middle of
		// balancing too.
		var over *seen
		for i := range last {
			s := &last[i]
			if s.st.GetLoad() > s.st.GetThres() && (over == nil || s.st.GetLoad() > over.st.GetLoad()) {
				over = s
			}
		}
		if over != nil {
			how := fmt.Sprintf("overloaded (load %.0f, thres %.0f; waves %d started so far), no lock seen yet", over.st.GetLoad(), over.st.GetThres(), over.st.GetCounters()["waves_started"])
			tn.tl.Event("victim", "%s is %s", over.n.Service, how)
			return over.n, how
		}
		time.Sleep(100 * time.Millisecond)
	}
	how := fmt.Sprintf("no lock and no overload seen in %v; the pulse's target", bound)
	tn.tl.Event("victim", "%s: %s", target.Service, how)
	return target, how
}

func summarize(results []*scenarioResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-23s %-6s %-30s %-8s %-22s %-7s %s\n", "scenario", "victim", "recovery", "", "all under thres", "unlock", "client errors")
	for _, r := range results {
		bal := "no"
		if r.balance.Balanced {
			bal = fmt.Sprintf("%.1fs (max ×%.1f)", r.balance.Done.Seconds(), r.balance.MaxRatio)
		}
		rec := fmt.Sprintf("%.2fs", r.recovery.Seconds())
		if r.recWhat == "" {
			rec = ""
		}
		fmt.Fprintf(&b, "%-23s %-6s %-30s %-8s %-22s %-7s %s\n", r.name, r.victim, r.recWhat, rec,
			bal, fmt.Sprintf("%.2fs", r.unlock.Seconds()), r.errors)
		if r.how != "" {
			fmt.Fprintf(&b, "    victim: %s\n", r.how)
		}
		if r.balSince != "" {
			fo := "none seen"
			if r.balance.FirstOverload >= 0 {
				fo = fmt.Sprintf("%+.1fs", r.balance.FirstOverload.Seconds())
			}
			fmt.Fprintf(&b, "    balancing measured %s (first overload %s)\n", r.balSince, fo)
		}
		if r.verify != "" {
			fmt.Fprintf(&b, "    verify: %s\n", r.verify)
		}
		for _, n := range r.notes {
			fmt.Fprintf(&b, "    %s\n", n)
		}
		for _, f := range r.failed {
			fmt.Fprintf(&b, "    FAILED: %s\n", f)
		}
	}
	return b.String()
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func first2(s []Violation, n int) []Violation {
	if len(s) > n {
		return s[:n]
	}
	return s
}
