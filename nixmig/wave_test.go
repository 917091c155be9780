package nixmig

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// TestLockRefusedByOverloadedNode: a node more than clearlyOverloaded times over thres refuses a
// local wave that asks to end before overloaded nodes, saying why; under that margin, or asked
// without the flag, it joins the wave as before.
func TestLockRefusedByOverloadedNode(t *testing.T) {
	const wave = 9
	from := overlay.Peer{ID: "i"}
	request := func(flag bool) *pb.LockRequest {
		return &pb.LockRequest{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{{Id: []byte("i"), Start: []byte("k0")}}, TmpLoad: 100, Moved: 30, EndBeforeOverloaded: flag}
	}
	refused := func(env *recordingEnv) bool {
		for _, s := range env.sent {
			if r := s.m.GetBalance().GetLockRefused(); r != nil && r.Overloaded && s.to == "i" {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		load float64
		flag bool
		want bool
	}{{100, true, true}, {100, false, false}, {65, true, false}} {
		env, b := loadedNode(t, "r", DefaultConfig(), c.load)
		b.onLockRequest(from, wave, request(c.flag))
		if got := refused(env); got != c.want {
			t.Errorf("load %v, end_before_overloaded %v: refused %v, want %v", c.load, c.flag, got, c.want)
		}
		if joined := b.lock.wave == wave; joined == c.want {
			t.Errorf("load %v, end_before_overloaded %v: locked by the wave %v", c.load, c.flag, joined)
		}
	}
}

// TestInitiatorRefusedByOverloadedNeighbourSeeksMigrants: an initiator whose first neighbour
// refused as overloaded becomes its own end node and asks its hint cache for migrants; refused
// for being busy it backs off as before.
func TestInitiatorRefusedByOverloadedNeighbourSeeksMigrants(t *testing.T) {
	const wave = 7
	for _, overloaded := range []bool{true, false} {
		env, b := endNode(t, DefaultConfig()) // locked by wave 7, hints light and next
		b.initiated[wave] = initiatedWave{dir: pb.Side_SIDE_SUCC}
		b.lock.dir, b.lock.chain, b.lock.tmpL = pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 100
		b.onLockRefused(wave, &pb.LockRefused{Reason: "test", Overloaded: overloaded})
		locks, _ := env.balanceOps()
		if overloaded && (b.end == nil || len(locks) != 1 || locks[0] != "light") {
			t.Errorf("refused as overloaded: end state %+v, remote locks %v; want the initiator as end node asking light", b.end, locks)
		}
		if !overloaded && (b.end != nil || len(locks) != 0 || b.Stats.WavesFailed != 1) {
			t.Errorf("refused as busy: end state %+v, remote locks %v, %d waves failed; want the wave failed", b.end, locks, b.Stats.WavesFailed)
		}
	}
}

// TestEndsBeforeOverloadedOnlyWithOurChain: the rule is NIXMIG's, under overThres, and off in
// FaithfulChain and the baselines.
func TestEndsBeforeOverloadedOnlyWithOurChain(t *testing.T) {
	faithful, nixOnly := DefaultConfig(), DefaultConfig()
	faithful.FaithfulChain = true
	nixOnly.Algorithm = NIXOnly
	checkLoadRule(t, (*Balancer).endsBeforeOverloaded, []loadRuleCase{
		{"ours", DefaultConfig(), 100, true}, {"ours over overThres", DefaultConfig(), 500, false},
		{"faithful chain", faithful, 100, false}, {"NIX only", nixOnly, 100, false},
	})
}

// loadRuleCase: under cfg, a rule of a node's load should answer want at load.
type loadRuleCase struct {
	name string
	cfg  Config
	load float64
	want bool
}

// checkLoadRule asks rule of a lone node of each case's configuration.
func checkLoadRule(t *testing.T, rule func(*Balancer, float64) bool, cases []loadRuleCase) {
	t.Helper()
	for _, c := range cases {
		_, b := loneNode(t, "n", store.NewMemory(), c.cfg)
		if got := rule(b, c.load); got != c.want {
			t.Errorf("%s at %v: %v, want %v", c.name, c.load, got, c.want)
		}
	}
}

// TestAtLine: a node is at the line within half the headroom under thres (58.5–60 at thres 60),
// only with our rules in NIXMIG.
func TestAtLine(t *testing.T) {
	off, faithful, nixOnly := DefaultConfig(), DefaultConfig().Faithful(), DefaultConfig()
	off.Settle = false
	nixOnly.Algorithm = NIXOnly
	checkLoadRule(t, (*Balancer).atLine, []loadRuleCase{
		{"ours", DefaultConfig(), 59.5, true}, {"ours at thres", DefaultConfig(), 60, true},
		{"ours under the line", DefaultConfig(), 58, false}, {"ours over thres", DefaultConfig(), 60.5, false},
		{"settle off", off, 59.5, false}, {"faithful", faithful, 59.5, false}, {"NIX only", nixOnly, 59.5, false},
	})
}

// TestSettlingWaveEndsOnlyWithRoom: a member of a settling wave that would end above keep
// (here a node of 56 given 5, with no one to pass it to) does not become the wave's end node:
// it goes free, releases the members before it and tells the initiator the wave failed. With
// room (40 given 5) it ends the wave without seeking migrants. An ordinary wave ends at the
// full node as before.
func TestSettlingWaveEndsOnlyWithRoom(t *testing.T) {
	const wave = 9
	from := overlay.Peer{ID: "m"}
	request := func(settle bool) *pb.LockRequest {
		return &pb.LockRequest{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{{Id: []byte("i"), Start: []byte("k0")}, {Id: []byte("m"), Start: []byte("k1")}},
			TmpLoad: 59.5, Moved: 5, GiveFirst: true, Settle: settle}
	}
	failedTo := func(env *recordingEnv) (initiator bool, released []overlay.NodeID) {
		for _, s := range env.sent {
			if d := s.m.GetBalance().GetWaveDone(); d != nil && !d.Ok && s.to == "i" {
				initiator = true
			}
		}
		_, released = env.balanceOps()
		return initiator, released
	}

	env, b := loadedNode(t, "r", DefaultConfig(), 56)
	b.onLockRequest(from, wave, request(true))
	told, released := failedTo(env)
	if b.end != nil || b.lock.wave == wave || !told || len(released) != 1 || released[0] != "m" {
		t.Errorf("settling, no room: end %v, locked %v, initiator told %v, released %v; want free, m released, the initiator told", b.end != nil, b.lock.wave == wave, told, released)
	}

	env, b = loadedNode(t, "r", DefaultConfig(), 40)
	b.onLockRequest(from, wave, request(true))
	if locks, _ := env.balanceOps(); b.end == nil || b.end.exNodes != 0 || len(locks) != 0 {
		t.Errorf("settling, room: end %+v, remote locks %v; want the end node, no migrants sought", b.end, locks)
	}

	env, b = loadedNode(t, "r", DefaultConfig(), 56)
	b.onLockRequest(from, wave, request(false))
	if told, _ := failedTo(env); b.end == nil || told {
		t.Errorf("ordinary wave, no room: end %v, initiator told of a failure %v; want this node the end node", b.end != nil, told)
	}
}

// TestSettlingWaveBacksOffApart: a node at the line starts a settling wave on its check; when it
// fails, only the settling waves' back-off grows, so a wave from the node once it is over thres
// is not delayed by it.
func TestSettlingWaveBacksOffApart(t *testing.T) {
	_, b := loadedNode(t, "n", DefaultConfig(), 59.5) // alone: its neighbour is itself, the wave fails at once
	b.running = true
	b.onCheck()
	if b.Stats.SettlingWaves != 1 || b.Stats.WavesFailed != 1 {
		t.Fatalf("%d settling waves, %d failed; want one started and failed", b.Stats.SettlingWaves, b.Stats.WavesFailed)
	}
	settleFails := b.settleBackoff[pb.Side_SIDE_PRED].fails + b.settleBackoff[pb.Side_SIDE_SUCC].fails
	waveFails := b.backoff[pb.Side_SIDE_PRED].fails + b.backoff[pb.Side_SIDE_SUCC].fails
	if settleFails != 1 || waveFails != 0 {
		t.Errorf("back-off: settling %d fails, ordinary %d; want 1 and 0", settleFails, waveFails)
	}
}

// TestBackOffEndsWithItsNeighbour: a side's back-off holds while the neighbour the failed waves
// met is still there, and ends, its failures forgotten, once another node stands there; with
// FaithfulBackoff (SPEC §6.5) it runs its time out.
func TestBackOffEndsWithItsNeighbour(t *testing.T) {
	env, b := loadedNode(t, "n", DefaultConfig(), 100) // alone: its neighbour each way is itself
	_, faithful := loadedNode(t, "n", DefaultConfig().Faithful(), 100)
	for _, c := range []struct {
		b         *Balancer
		facing    overlay.NodeID
		wantReady bool
		wantFails int
	}{{b, "n", false, 10}, {b, "gone", true, 0}, {faithful, "gone", false, 10}} {
		st := backoffState{fails: 10, until: env.now.Add(500 * time.Second), facing: c.facing}
		ready := c.b.backedOff(&st, pb.Side_SIDE_SUCC, env.now)
		if ready != c.wantReady || st.fails != c.wantFails {
			t.Errorf("faithful %v, failed waves met %q, neighbour now n: ready %v with %d fails, want %v with %d",
				c.b.cfg.FaithfulBackoff, c.facing, ready, st.fails, c.wantReady, c.wantFails)
		}
	}
	b.running = true
	b.onCheck() // over thres with itself as neighbour: the wave fails at once
	st := b.backoff[pb.Side_SIDE_PRED]
	if st.fails == 0 {
		st = b.backoff[pb.Side_SIDE_SUCC]
	}
	if st.fails != 1 || st.facing != "n" {
		t.Errorf("after a failed wave: %d fails facing %q, want 1 facing n", st.fails, st.facing)
	}
}

// TestRefusedInitiatorToldWhenFree: a node that refused initiators' first lock requests as busy
// tells them once it is free and has no wave of its own to start — the one refused first, then
// the other freeEvery hop times later; the told initiator's back-off set by that wave ends, its
// count of failures kept, while a LockFree naming an older wave changes nothing. A node over
// thres starts its own wave instead, and with FaithfulBackoff nobody is told.
func TestRefusedInitiatorToldWhenFree(t *testing.T) {
	told := func(env *recordingEnv) (to []overlay.NodeID, waves []uint64) {
		for _, s := range env.sent {
			if m := s.m.GetBalance(); m.GetLockFree() != nil {
				to, waves = append(to, s.to), append(waves, m.Wave)
			}
		}
		return to, waves
	}
	request := func(initiator string, dir pb.Side) *pb.LockRequest {
		return &pb.LockRequest{Dir: dir, Chain: []*pb.NodeRef{{Id: []byte(initiator), Start: []byte("k0")}}, TmpLoad: 200, Moved: 50}
	}
	refuseTwo := func(cfg Config, load float64) (*recordingEnv, *Balancer) {
		env, b := loadedNode(t, "r", cfg, load)
		b.running = true
		b.lockFor(5, roleChain, time.Minute) // busy with another wave
		b.onLockRequest(overlay.Peer{ID: "p"}, 11, request("p", pb.Side_SIDE_SUCC))
		env.now = env.now.Add(time.Second)
		b.onLockRequest(overlay.Peer{ID: "s"}, 12, request("s", pb.Side_SIDE_PRED))
		b.onCheck()
		if to, _ := told(env); len(to) != 0 {
			t.Errorf("locked: told %v, want nobody", to)
		}
		b.unlock(5)
		return env, b
	}

	env, b := refuseTwo(DefaultConfig(), 40)
	for i, want := range [][]overlay.NodeID{{"p"}, {"p"}, {"p"}, {"p"}, {"p", "s"}, {"p", "s"}} {
		b.onCheck()
		if to, waves := told(env); !slices.Equal(to, want) || !slices.Equal(waves, []uint64{11, 12}[:len(want)]) {
			t.Errorf("check %d after going free: told %v of waves %v, want %v of waves 11, 12", i, to, waves, want)
		}
		env.now = env.now.Add(time.Second)
	}
	if b.Stats.LockFrees != 2 {
		t.Errorf("%d LockFrees counted, want 2", b.Stats.LockFrees)
	}
	for _, c := range []struct {
		name string
		cfg  Config
		load float64
	}{{"over thres", DefaultConfig(), 100}, {"faithful", DefaultConfig().Faithful(), 40}} {
		env, b := refuseTwo(c.cfg, c.load)
		b.onCheck()
		if to, _ := told(env); len(to) != 0 {
			t.Errorf("%s: told %v, want nobody", c.name, to)
		}
	}

	env, b = loadedNode(t, "i", DefaultConfig(), 100)
	until := env.now.Add(50 * time.Second)
	b.backoff[pb.Side_SIDE_SUCC] = backoffState{fails: 6, until: until, facing: "x", wave: 21}
	free := func(wave uint64) {
		b.Handle(overlay.Peer{ID: "x"}, &pb.Balance{Wave: wave, Op: &pb.Balance_LockFree{LockFree: &pb.LockFree{}}})
	}
	free(20)
	if st := b.backoff[pb.Side_SIDE_SUCC]; !st.until.Equal(until) {
		t.Errorf("told of an older wave: back-off until %v, want %v", st.until, until)
	}
	free(21)
	if st := b.backoff[pb.Side_SIDE_SUCC]; !st.until.Equal(env.now) || st.fails != 6 {
		t.Errorf("told of the wave that failed: back-off until %v with %d fails, want now with 6", st.until, st.fails)
	}
}

// TestSettlingWaveWhereWavesPass: a node at the line starts a settling wave right after a lock
// request came from a neighbour.
func TestSettlingWaveWhereWavesPass(t *testing.T) {
	env, b := loadedNode(t, "n", DefaultConfig(), 59.5)
	b.running = true
	b.noteSide(pb.Side_SIDE_PRED, env.now)
	b.onCheck()
	if b.Stats.SettlingWaves != 1 {
		t.Errorf("at the line just after a lock request: %d settling waves started, want 1", b.Stats.SettlingWaves)
	}
}

// TestInitiatedWaveForgottenWithoutOutcome: a wave whose outcome never comes is forgotten once
// no wave can still be running; one that may be is kept.
func TestInitiatedWaveForgottenWithoutOutcome(t *testing.T) {
	env, b := loadedNode(t, "r", DefaultConfig(), 10)
	b.initiated[3] = initiatedWave{dir: pb.Side_SIDE_SUCC, at: env.now}
	b.initiated[5] = initiatedWave{dir: pb.Side_SIDE_PRED, at: env.now.Add(time.Minute)}
	env.now = env.now.Add(b.cfg.initiatedHorizon() + time.Second)
	b.forgetInitiated(env.now)
	if _, kept := b.initiated[3]; kept {
		t.Error("a wave older than any wave can run is still awaited")
	}
	if _, kept := b.initiated[5]; !kept {
		t.Error("a wave that may still run was forgotten")
	}
}

// TestHeadroomOnlyWhereKeysAreLight: a node keeps the headroom (keep 57 at thres 60) while its
// loaded keys carry at most twice the headroom each (6/s): twelve keys of 4.5/s, nine of 5.9/s.
// With five keys of 10/s, as on the thesis's 5% pulse, it keeps thres itself (it may take a
// sixth), has room up to it, and is never at the line. Without headroom
// keep is thres. The rule reads the load it is given: the nine keys keep the headroom at their
// own 53.1/s, not at 58 or 59.5 (6.4/s and more a key).
func TestHeadroomOnlyWhereKeysAreLight(t *testing.T) {
	node := func(cfg Config, keys int, perKey float64) *Balancer {
		st := store.NewMemory()
		for i := range keys {
			if err := st.Put(overlay.Item{Key: overlay.Uint64Key(uint64(i)), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		env, b := loneNode(t, "n", st, cfg)
		for i := range keys {
			b.load.HitN(overlay.Uint64Key(uint64(i)), env.now, uint32(perKey*b.load.Window().Seconds()))
		}
		return b
	}
	for _, c := range []struct {
		name      string
		cfg       Config
		keys      int
		perKey    float64
		keep      float64
		roomAt58  bool // has room for a migrant's range when its load reads 58
		lineAt595 bool // at the line when its load reads 59.5
	}{
		{"light keys", DefaultConfig(), 12, 4.5, 57, false, true},
		{"keys just under twice the headroom", DefaultConfig(), 9, 5.9, 57, true, false},
		{"heavy keys", DefaultConfig(), 5, 10, 60, true, false},
		{"no headroom", DefaultConfig().Faithful(), 12, 4.5, 60, true, false},
	} {
		b := node(c.cfg, c.keys, c.perKey)
		if keep := b.keep(); math.Abs(keep-c.keep) > 1e-9 {
			t.Errorf("%s: keep %v, want %v", c.name, keep, c.keep)
		}
		if got := b.hasRoom(58); got != c.roomAt58 {
			t.Errorf("%s: room at 58 %v, want %v", c.name, got, c.roomAt58)
		}
		if got := b.atLine(59.5); got != c.lineAt595 {
			t.Errorf("%s: at the line at 59.5 %v, want %v", c.name, got, c.lineAt595)
		}
	}
}

// TestWaveTTLGrowsWhereWavesRunOutOfReach: each wave a node started that way and that ran out
// of reach doubles the ttl of its next wave that way, up to TTLMax; one that ended within reach
// halves it again (from where it stands: waves out of reach beyond TTLMax are not stored up). The
// other side and a fixed ttl (TTLMax 0) keep TTL; settling waves reach TTLMax.
func TestWaveTTLGrowsWhereWavesRunOutOfReach(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTL, cfg.TTLMax = 3, 10
	_, b := loadedNode(t, "n", cfg, 100)
	succ, pred := pb.Side_SIDE_SUCC, pb.Side_SIDE_PRED
	done := func(wave uint64, outOfReach bool) {
		b.initiated[wave] = initiatedWave{dir: succ}
		b.onWaveDone(wave, &pb.WaveDone{Ok: true, Dir: succ, Migrations: 1, OutOfReach: outOfReach})
	}
	want := func(step string, ttl int) {
		t.Helper()
		if got := b.waveTTL(succ, false); got != ttl {
			t.Errorf("%s: next wave's ttl %d, want %d", step, got, ttl)
		}
	}
	want("at first", 3)
	done(1, true)
	want("after one wave out of reach", 6)
	done(3, true)
	want("after two", 10)
	done(5, true)
	want("after three", 10)
	if got := b.waveTTL(pred, false); got != 3 {
		t.Errorf("the other side's ttl %d, want 3", got)
	}
	if got := b.waveTTL(succ, true); got != 10 {
		t.Errorf("a settling wave's ttl %d, want TTLMax 10", got)
	}
	done(7, false)
	want("after a wave within reach", 6)
	done(9, false)
	want("after two within reach", 3)
	done(11, false)
	want("after three within reach", 3)
	if b.Stats.WavesOutOfReach != 3 {
		t.Errorf("%d waves counted out of reach, want 3", b.Stats.WavesOutOfReach)
	}

	for _, fixed := range []int{0, 2} {
		cfg.TTLMax = fixed
		_, b = loadedNode(t, "n", cfg, 100)
		done(1, true)
		want(fmt.Sprintf("largest ttl %d, after a wave out of reach", fixed), 3)
	}
}

// TestSettlingWaveReachesTwiceAsFarAfterRunningOutOfReach: a node's settling waves reach
// TTLMax; once one that way failed having run out of reach, the next that way reaches twice as
// far, until one fails within reach or succeeds. The other side is not affected.
func TestSettlingWaveReachesTwiceAsFarAfterRunningOutOfReach(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TTL, cfg.TTLMax = 3, 10
	_, b := loadedNode(t, "n", cfg, 100)
	succ, pred := pb.Side_SIDE_SUCC, pb.Side_SIDE_PRED
	wave := uint64(0)
	settled := func(d *pb.WaveDone) {
		wave++
		b.initiated[wave] = initiatedWave{dir: succ, settle: true}
		d.Dir = succ
		b.onWaveDone(wave, d)
	}
	want := func(step string, ttl int) {
		t.Helper()
		if got := b.waveTTL(succ, true); got != ttl {
			t.Errorf("%s: next settling wave's ttl %d, want %d", step, got, ttl)
		}
	}
	want("at first", 10)
	settled(&pb.WaveDone{Ok: false, OutOfReach: true})
	want("after one out of reach", 20)
	if got := b.waveTTL(pred, true); got != 10 {
		t.Errorf("the other side's settling ttl %d, want 10", got)
	}
	settled(&pb.WaveDone{Ok: false, OutOfReach: true})
	want("after two out of reach", 20)
	settled(&pb.WaveDone{Ok: false})
	want("after one failed within reach", 10)
	settled(&pb.WaveDone{Ok: false, OutOfReach: true})
	settled(&pb.WaveDone{Ok: true})
	want("after one settled", 10)
}

// TestTTLMaxRefused: a largest ttl over MaxTTL, or negative, is refused; one at or under ttl
// keeps the ttl fixed.
func TestTTLMaxRefused(t *testing.T) {
	for _, c := range []struct {
		ttl, ttlMax int
		ok          bool
	}{{5, 0, true}, {5, 5, true}, {3, 12, true}, {3, MaxTTL, true}, {20, 12, true}, {5, -1, false}, {3, MaxTTL + 1, false}} {
		cfg := DefaultConfig()
		cfg.TTL, cfg.TTLMax = c.ttl, c.ttlMax
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("ttl %d, largest %d: %v, want ok %v", c.ttl, c.ttlMax, err, c.ok)
		}
	}
}

// TestWaveLockLeaseFollowsItsTTL: a member locks for the lease of the wave's ttl — 192 s for a
// settling wave's 24, 96 s for a wave grown to 12, the ordinary 40 s for one of 3 — so that
// only long waves hold long locks.
func TestWaveLockLeaseFollowsItsTTL(t *testing.T) {
	for _, c := range []struct {
		ttl  uint32
		want time.Duration
	}{{24, 192 * time.Second}, {12, 96 * time.Second}, {3, 40 * time.Second}, {0, 40 * time.Second},
		// Past this node's own longest wave, a settling wave's: it locks no longer than that (a
		// request of ttl 55 once held a node for 440 s, past LongestHold: FuzzBalanceMessage).
		{55, 192 * time.Second}} {
		env, b := loadedNode(t, "r", DefaultConfig(), 100)
		b.onLockRequest(overlay.Peer{ID: "i"}, 9, &pb.LockRequest{Dir: pb.Side_SIDE_SUCC,
			Chain: []*pb.NodeRef{{Id: []byte("i"), Start: []byte("k0")}}, TmpLoad: 100, Moved: 30, Ttl: c.ttl})
		if b.lock.wave != 9 {
			t.Fatalf("ttl %d: the wave did not lock the node", c.ttl)
		}
		if got := b.lock.until.Sub(env.now); got != c.want {
			t.Errorf("a wave of ttl %d locked the node for %v, want %v", c.ttl, got, c.want)
		}
	}
}
