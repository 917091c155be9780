package nixmig

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
	"google.golang.org/protobuf/proto"
)

// recordingEnv is an overlay.Env that keeps what a node sends and drops its timers.
type recordingEnv struct {
	now  time.Time
	rng  *rand.Rand
	sent []sentEnvelope
}

type sentEnvelope struct {
	to overlay.NodeID
	m  *pb.Envelope
}

func (e *recordingEnv) Now() time.Time { return e.now }
func (e *recordingEnv) Send(to overlay.NodeID, m *pb.Envelope) {
	e.sent = append(e.sent, sentEnvelope{to, m})
}
func (e *recordingEnv) SetTimer(time.Duration, overlay.Timer) {}
func (e *recordingEnv) Rand() *rand.Rand                      { return e.rng }
func (e *recordingEnv) Logger() *zap.Logger                   { return zap.NewNop() }
func (e *recordingEnv) Complete(overlay.Result)               {}
func (e *recordingEnv) Report(overlay.Event)                  {}

// balanceOps lists, in order, the nodes sent a remote lock and the nodes sent a release.
func (e *recordingEnv) balanceOps() (locks, releases []overlay.NodeID) {
	for _, s := range e.sent {
		b := s.m.GetBalance()
		switch {
		case b == nil:
		case b.GetRemoteLock() != nil:
			locks = append(locks, s.to)
		case b.GetRelease() != nil:
			releases = append(releases, s.to)
		}
	}
	return locks, releases
}

// loneNode returns the balancer of a one-node network: node id, bootstrapped over st.
func loneNode(t *testing.T, id overlay.NodeID, st overlay.Store, cfg Config) (*recordingEnv, *Balancer) {
	t.Helper()
	env := &recordingEnv{now: time.Unix(1000, 0), rng: rand.New(rand.NewPCG(1, 2))}
	sg, err := skipgraph.New(env, st, id, skipgraph.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := sg.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	b, err := New(env, sg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env, b
}

// endNode returns a one-node network's balancer, locked by wave 7 as the only member of its
// chain, with two hints in its cache: light (5/s) and next (10/s).
func endNode(t *testing.T, cfg Config) (*recordingEnv, *Balancer) {
	t.Helper()
	env, b := loneNode(t, "e", store.NewMemory(), cfg)
	at := env.now.UnixNano()
	b.unl.add(&pb.LoadHint{Node: &pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}, Load: 5, Thres: 60, At: at})
	b.unl.add(&pb.LoadHint{Node: &pb.NodeRef{Id: []byte("next"), Start: []byte("k2")}, Load: 10, Thres: 60, At: at})
	b.lockFor(7, roleChain, cfg.LockLease())
	return env, b
}

// TestEndNodeAsksNextCandidateWhenMGivesNoMigrant: the first candidate M accepts but its
// successor is too heavy to leave its range to M, so no migrant comes. The end node releases M
// and asks the next candidate of its hint cache instead of giving up the remote wave (before,
// it started its NIX chain and passed its lump on; FaithfulRemote keeps that rule).
func TestEndNodeAsksNextCandidateWhenMGivesNoMigrant(t *testing.T) {
	const wave = 7
	env, b := endNode(t, DefaultConfig())
	b.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 160, 3, false, false)
	if locks, _ := env.balanceOps(); len(locks) != 1 || locks[0] != "light" {
		t.Fatalf("first remote locks %v, want the least loaded hint, light", locks)
	}
	b.onRemoteReply(wave, &pb.RemoteReply{M: &pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}})
	locks, releases := env.balanceOps()
	if len(releases) != 1 || releases[0] != "light" {
		t.Errorf("releases %v, want light released", releases)
	}
	if len(locks) != 2 || locks[1] != "next" {
		t.Errorf("remote locks %v, want the next candidate asked after light gave no migrant", locks)
	}
	if b.end == nil || b.end.migrants != nil {
		t.Errorf("the remote wave ended: end state %+v", b.end)
	}

	// The thesis's rule (SPEC §6.2): rNodes = 0 skips the MIG phase and the NIX phase runs.
	faithful := DefaultConfig()
	faithful.FaithfulRemote = true
	env2, b2 := endNode(t, faithful)
	b2.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b2.sg.Self()}, 160, 3, false, false)
	b2.onRemoteReply(wave, &pb.RemoteReply{M: &pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}})
	if locks, _ := env2.balanceOps(); len(locks) != 1 {
		t.Errorf("faithful: remote locks %v, want light only", locks)
	}
}

// count returns how many balancing messages of the kind has picks were sent.
func (e *recordingEnv) count(has func(*pb.Balance) bool) int {
	n := 0
	for _, s := range e.sent {
		if b := s.m.GetBalance(); b != nil && has(b) {
			n++
		}
	}
	return n
}

func isNixTurn(b *pb.Balance) bool  { return b.GetNixTurn() != nil }
func isWaveDone(b *pb.Balance) bool { return b.GetWaveDone() != nil }

// TestEndNodeRunsNIXChainAlongsideRemoteWave: the end node starts the NIX chain at once, while
// its remote wave looks for migrants, and the MIG phase (here: the wave's end, as no migrant is
// found) waits for both. FaithfulPhases starts the chain only when the remote wave is over.
func TestEndNodeRunsNIXChainAlongsideRemoteWave(t *testing.T) {
	const wave = 7
	p := overlay.Peer{ID: "p", Start: "k0"} // the initiator, this end node's neighbour
	env, b := endNode(t, DefaultConfig())
	chain := []overlay.Peer{p, b.sg.Self()}
	b.beginEnd(wave, pb.Side_SIDE_SUCC, chain, 160, 3, false, false)
	if locks, _ := env.balanceOps(); len(locks) != 1 || env.count(isNixTurn) != 1 {
		t.Fatalf("after the exam: remote locks %v, NIX turns %d; want one of each", locks, env.count(isNixTurn))
	}
	// The chain reaches this node while the remote wave is still under way.
	b.onNixTurn(wave, &pb.NixTurn{Dir: pb.Side_SIDE_SUCC, Chain: overlay.PeersToPB(chain), Index: 1})
	if env.count(isWaveDone) != 0 || b.end == nil {
		t.Fatal("the wave ended while its remote wave was still under way")
	}
	b.onRemoteReply(wave, &pb.RemoteReply{}) // light refuses: next is asked
	b.onRemoteReply(wave, &pb.RemoteReply{}) // next refuses; no hint or table entry is left
	if env.count(isWaveDone) != 1 || b.end != nil {
		t.Fatalf("after the remote wave: wave done sent %d times, end state %+v", env.count(isWaveDone), b.end)
	}

	faithful := DefaultConfig()
	faithful.FaithfulPhases = true
	env2, b2 := endNode(t, faithful)
	b2.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{p, b2.sg.Self()}, 160, 3, false, false)
	if env2.count(isNixTurn) != 0 {
		t.Fatal("FaithfulPhases: the NIX chain started during the remote wave")
	}
	b2.onRemoteReply(wave, &pb.RemoteReply{})
	b2.onRemoteReply(wave, &pb.RemoteReply{})
	if env2.count(isNixTurn) != 1 {
		t.Fatalf("FaithfulPhases: NIX turns %d after the remote wave, want 1", env2.count(isNixTurn))
	}
}

// TestMigrantNotMuchLargerThanM: a node asked to migrate onto M (remote lock with M set) joins
// the migrants only if it stores at most migrantSizeRatio times the items of M and the migrants
// before it (acc_items), so a node that took in earlier migrants' ranges is not sent away with
// all of them. FaithfulMigrants (the thesis) lets any idle node light enough migrate.
func TestMigrantNotMuchLargerThanM(t *testing.T) {
	const wave = 9
	const items = 48 // what the asked node stores
	migrants := func(cfg Config, accItems uint64) int {
		t.Helper()
		st := store.NewMemory()
		for i := range items {
			if err := st.Put(overlay.Item{Key: overlay.Uint64Key(uint64(i)), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		env, b := loneNode(t, "s", st, cfg)
		m := &pb.NodeRef{Id: []byte("m"), Start: []byte("k0")}
		b.onRemoteLock(overlay.Peer{ID: "m"}, wave, &pb.RemoteLock{End: &pb.NodeRef{Id: []byte("e")}, Want: 1, MThres: 60, M: m, AccItems: accItems})
		for _, s := range env.sent {
			if r := s.m.GetBalance().GetRemoteReply(); r != nil {
				return len(r.Migrants)
			}
		}
		t.Fatal("no remote reply sent")
		return 0
	}
	if got := migrants(DefaultConfig(), items/migrantSizeRatio); got != 1 {
		t.Errorf("a node storing %d items, M %d: %d migrants, want 1", items, items/migrantSizeRatio, got)
	}
	if got := migrants(DefaultConfig(), items/migrantSizeRatio-1); got != 0 {
		t.Errorf("a node storing %d items, M %d: %d migrants, want 0 (it stays)", items, items/migrantSizeRatio-1, got)
	}
	faithful := DefaultConfig()
	faithful.FaithfulMigrants = true
	if got := migrants(faithful, 1); got != 1 {
		t.Errorf("FaithfulMigrants: %d migrants, want 1", got)
	}
}

// TestHintsRankedBySuccessorItems: among equally light candidates for M, the one whose
// successor (the migrant) stores fewer items is asked first, and a hint that does not know its
// successor's items comes last; FaithfulMigrants ranks by load alone (the fresher first).
func TestHintsRankedBySuccessorItems(t *testing.T) {
	for _, faithful := range []bool{false, true} {
		var c hintCache
		c.init(8, time.Hour, !faithful)
		at := time.Unix(1000, 0).UnixNano()
		add := func(id string, load float64, succItems *uint64, at int64) {
			c.add(&pb.LoadHint{Node: &pb.NodeRef{Id: []byte(id), Start: []byte(id)}, Load: load, Thres: 60, SuccessorItems: succItems, At: at})
		}
		add("big", 0, proto.Uint64(30000), at+3)
		add("unknown", 0, nil, at+2)
		add("small", 0, proto.Uint64(100), at+1)
		add("loaded", 20, proto.Uint64(3), at+4)
		var order []string
		for {
			p, ok := c.best(time.Unix(1000, 0), func(overlay.NodeID) bool { return false })
			if !ok {
				break
			}
			order = append(order, string(p.ID))
		}
		want := []string{"small", "big", "unknown", "loaded"}
		if faithful {
			want = []string{"big", "unknown", "small", "loaded"}
		}
		if !slices.Equal(order, want) {
			t.Errorf("faithful %v: candidates in order %v, want %v", faithful, order, want)
		}
	}
}

// loadedNode returns a lone node storing twelve keys that carry load between them (one window's
// worth of hits each).
func loadedNode(t *testing.T, id overlay.NodeID, cfg Config, load float64) (*recordingEnv, *Balancer) {
	t.Helper()
	const keys = 12
	st := store.NewMemory()
	for i := range keys {
		if err := st.Put(overlay.Item{Key: overlay.Uint64Key(uint64(i)), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	env, b := loneNode(t, id, st, cfg)
	hits := uint32(load / keys * b.load.Window().Seconds())
	for i := range keys {
		b.load.HitN(overlay.Uint64Key(uint64(i)), env.now, hits)
	}
	if got := b.Load(); got < load-1 || got > load+0.01 {
		t.Fatalf("set-up: load %v, want about %v", got, load)
	}
	return env, b
}

// TestRemoteWaveKeepsHeadroom: a node over keep (thres less the headroom) but under thres has no
// room a migrant's range could use, so it neither offers itself as M in the hints it adds to
// relayed messages nor accepts to be M, and an end node that probed it does not ask it; as an
// end node it still calls the migrants its remote wave found rather than keeping a load at
// thres, where the noise of its measured load puts it over again. With no headroom (the thesis's rule) keep is thres and all three go as before.
func TestRemoteWaveKeepsHeadroom(t *testing.T) {
	const wave = 7
	noHeadroom := DefaultConfig()
	noHeadroom.Headroom = 0
	for _, c := range []struct {
		name        string
		cfg         Config
		load        float64
		wantOffered bool
	}{
		{"under keep", DefaultConfig(), 50, true},
		{"between keep and thres", DefaultConfig(), 58.5, false},
		{"between keep and thres, no headroom", noHeadroom, 58.5, true},
	} {
		// Hints: the node adds itself to a relayed route only when it would accept being M.
		_, b := loadedNode(t, "h", c.cfg, c.load)
		route := &pb.Route{}
		b.Relayed(route)
		if offered := len(route.Hints) == 1; offered != c.wantOffered {
			t.Errorf("%s: hint added %v, want %v", c.name, offered, c.wantOffered)
		}

		// M: the first remote lock of a wave.
		env, b := loadedNode(t, "m", c.cfg, c.load)
		b.onRemoteLock(overlay.Peer{ID: "e"}, wave, &pb.RemoteLock{End: &pb.NodeRef{Id: []byte("e")}, Want: 0})
		var reply *pb.RemoteReply
		for _, s := range env.sent {
			if r := s.m.GetBalance().GetRemoteReply(); r != nil {
				reply = r
			}
		}
		if accepted := reply != nil && reply.M != nil; reply == nil || accepted != c.wantOffered {
			t.Errorf("%s: remote reply %v, want M accepted %v", c.name, reply, c.wantOffered)
		}

		// End node seeking M: a probed node's reply makes it a candidate only with room.
		env, b = loadedNode(t, "e", c.cfg, 300)
		b.end = &endState{wave: wave, dir: pb.Side_SIDE_SUCC, chain: []overlay.Peer{b.sg.Self()}, exNodes: 1}
		b.onProbeReply(overlay.Peer{ID: "p"}, wave, &pb.ProbeReply{Load: c.load, Thres: c.cfg.Thres, Idle: true})
		asked := env.count(func(m *pb.Balance) bool { return m.GetRemoteLock() != nil }) == 1
		if asked != c.wantOffered {
			t.Errorf("%s: probed node asked to be M %v, want %v", c.name, asked, c.wantOffered)
		}

		// End node: the MIG phase with one migrant found.
		env, b = loadedNode(t, "e", c.cfg, c.load)
		b.lockFor(wave, roleChain, c.cfg.LockLease())
		e := &endState{wave: wave, dir: pb.Side_SIDE_SUCC, chain: []overlay.Peer{b.sg.Self()}, tmpL: c.load, exNodes: 1,
			m: overlay.Peer{ID: "m"}, migrants: []overlay.Peer{{ID: "g", Start: "g"}}, chainDone: true}
		b.end = e
		b.migPhase(e)
		ordered := env.count(func(m *pb.Balance) bool { return m.GetMigOrder() != nil }) == 1
		if wantOrder := c.load > c.cfg.Keep(); ordered != wantOrder {
			t.Errorf("%s: migrant ordered %v, want %v", c.name, ordered, wantOrder)
		}
	}
}

// TestAbsorberTakesTheTopOfTheLastMigrant: a remote lock sent past the last migrant s (absorb),
// whose 35 M cannot take whole (M and the migrants 70 against M's keep 57). An idle node with
// room reserves itself and names the load to take: what leaves M and itself equal, capped
// halfway from M's overflow (13) to s's whole load, so that s keeps a key for M — here, at load
// 0, 24 of s's 35, and at most its room, 57. Asked to take more than its room (an overflow of
// 63), it frees s and the end node gets the migrants before s.
func TestAbsorberTakesTheTopOfTheLastMigrant(t *testing.T) {
	const wave = 11
	ask := func(accLoad, lastLoad float64) (*recordingEnv, *pb.RemoteReply) {
		t.Helper()
		env, b := loneNode(t, "a", store.NewMemory(), DefaultConfig())
		b.onRemoteLock(overlay.Peer{ID: "s"}, wave, &pb.RemoteLock{End: ref("e"), Want: 3, AccLoad: accLoad, MThres: 57, M: ref("m"),
			Migrants: []*pb.NodeRef{ref("r"), ref("s")}, Absorb: true, LastLoad: lastLoad})
		for _, s := range env.sent {
			if r := s.m.GetBalance().GetRemoteReply(); r != nil && s.to == "e" {
				return env, r
			}
		}
		t.Fatal("no remote reply to the end node")
		return nil, nil
	}
	_, r := ask(70, 35)
	if len(r.Splits) != 1 || len(r.Migrants) != 2 {
		t.Fatalf("with room: %d split leaves, %d migrants; want 1, 2", len(r.Splits), len(r.Migrants))
	}
	if p := r.Splits[0]; string(p.Absorber.Id) != "a" || p.Migrant != 1 || p.GiveUp != 24 || p.GiveUpMax != 57 {
		t.Errorf("with room: split leave %v; want migrant 1 (s) to a, give up 24 (max 57)", p)
	}
	env, r := ask(120, 70)
	_, releases := env.balanceOps()
	if len(r.Splits) != 0 || len(r.Migrants) != 1 || string(r.Migrants[0].Id) != "r" || !slices.Equal(releases, []overlay.NodeID{"s"}) {
		t.Errorf("without room: split leaves %v, migrants %v, releases %v; want none, [r], [s]", r.Splits, r.Migrants, releases)
	}
}

// TestSplitLeaveNeedsItsAbsorber: a migrant ordered to split its leave whose successor is no
// longer the absorber the remote wave reserved (here it has none: it is alone) gives nothing,
// does not migrate, unlocks, and tells the end node so (MigDone without ok).
func TestSplitLeaveNeedsItsAbsorber(t *testing.T) {
	const wave = 12
	st := store.NewMemory()
	for i := range 8 {
		if err := st.Put(overlay.Item{Key: overlay.Uint64Key(uint64(i)), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	env, b := loneNode(t, "s", st, DefaultConfig())
	b.lockFor(wave, roleMigrant, b.cfg.LockLease())
	b.onMigOrder(overlay.Peer{ID: "e"}, wave, &pb.MigOrder{Target: ref("e"), Split: []byte("k"), Absorber: ref("a"), GiveUp: 10, GiveUpMax: 20})
	var done *pb.MigDone
	for _, s := range env.sent {
		if d := s.m.GetBalance().GetMigDone(); d != nil && s.to == "e" {
			done = d
		}
		if s.m.GetHandoff() != nil {
			t.Errorf("a piece went to %s", s.to)
		}
	}
	if done == nil || done.Ok || done.Left {
		t.Errorf("end node told %v; want a MigDone without ok", done)
	}
	if _, locked := b.Locked(); locked || b.migrating != nil || b.sg.State() != skipgraph.StateActive {
		t.Errorf("after a refused split leave: locked %v, migrating %v, state %v", locked, b.migrating, b.sg.State())
	}
}

// TestMigSharesFollowTheMigrantsKeeps: with migrants whose keeps differ from the end node's, each
// piece aims at a share of the load in proportion to the keep of the node that will carry it and
// is capped there; with equal keeps (or none reported) every node gets an equal share under the
// end node's keep, and the thesis's rule tmpL/r uncapped.
func TestMigSharesFollowTheMigrantsKeeps(t *testing.T) {
	_, b := loneNode(t, "e", store.NewMemory(), DefaultConfig())
	own := b.cfg.Keep() // 57
	for _, c := range []struct {
		name          string
		keeps         []float64
		shares, capAt []float64
	}{
		{"none reported", nil, []float64{60, 60}, []float64{own, own}},
		{"all the end node's", []float64{own, own}, []float64{60, 60}, []float64{own, own}},
		// Capacity 57 + 28.5 + 85.5 = 171: 180·28.5/171 = 30, 180·85.5/171 = 90.
		{"heterogeneous", []float64{28.5, 85.5}, []float64{30, 90}, []float64{28.5, 85.5}},
	} {
		e := &endState{migrantKeep: c.keeps, tmpL: 200}
		shares, keeps := b.migShares(e, 180, 2)
		for i := range shares {
			if math.Abs(shares[i]-c.shares[i]) > 1e-9 || keeps[i] != c.capAt[i] {
				t.Errorf("%s: shares %v caps %v, want %v %v", c.name, shares, keeps, c.shares, c.capAt)
				break
			}
		}
	}
	// A migrant reserving itself appends its keep, unless a node before it (an older version)
	// sent none: then the list stays empty rather than shorter than the migrants.
	if got := b.withOwnKeep([]float64{28.5}, 1); len(got) != 2 || got[1] != own {
		t.Errorf("withOwnKeep after one keep = %v", got)
	}
	if got := b.withOwnKeep(nil, 1); got != nil {
		t.Errorf("withOwnKeep after a migrant without keep = %v, want none", got)
	}
	faithful := DefaultConfig()
	faithful.FaithfulMigShare = true
	_, fb := loneNode(t, "f", store.NewMemory(), faithful)
	shares, keeps := fb.migShares(&endState{migrantKeep: []float64{28.5, 85.5}, tmpL: 200}, 180, 2)
	if shares[0] != 100 || shares[1] != 100 || !math.IsInf(keeps[0], 1) || !math.IsInf(keeps[1], 1) {
		t.Errorf("faithful: shares %v caps %v, want tmpL/r = 100 uncapped", shares, keeps)
	}
}

// TestLateRemoteReplyReleasesWhatItReserved: an end node that gave its wave up while the remote
// wave was under way (here: its lease ran out) releases M, and when M's reply comes after all it
// releases the migrants and the split leave's absorber the reply names — left alone they stayed
// locked until their own leases ran out. A reply sent again for a wave whose first reply was
// taken releases nothing (its migrants may be migrating), nor does a second late reply.
func TestLateRemoteReplyReleasesWhatItReserved(t *testing.T) {
	const wave = 7
	ref := func(id string) *pb.NodeRef { return &pb.NodeRef{Id: []byte(id), Start: []byte("k" + id)} }
	reply := &pb.RemoteReply{M: ref("light"), Migrants: []*pb.NodeRef{ref("a"), ref("b")},
		Splits: []*pb.SplitPlan{{Migrant: 1, Absorber: ref("c"), GiveUp: 1}}}

	env, b := endNode(t, DefaultConfig())
	b.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 160, 3, false, false)
	b.abortEnd(b.end, "lease expired")
	_, released := env.balanceOps()
	if !slices.Equal(released, []overlay.NodeID{"light"}) {
		t.Fatalf("the wave given up released %v, want M (light) alone", released)
	}
	env.sent = nil
	b.onRemoteReply(wave, reply)
	_, released = env.balanceOps()
	slices.Sort(released)
	if !slices.Equal(released, []overlay.NodeID{"a", "b", "c", "light"}) {
		t.Errorf("the late reply released %v, want the migrants a and b, the absorber c and M", released)
	}
	env.sent = nil
	b.onRemoteReply(wave, reply)
	if _, released := env.balanceOps(); len(released) != 0 {
		t.Errorf("a second late reply released %v, want nothing", released)
	}

	env, b = endNode(t, DefaultConfig())
	b.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 160, 3, false, false)
	b.onRemoteReply(wave, reply)
	env.sent = nil
	b.onRemoteReply(wave, reply)
	if _, released := env.balanceOps(); len(released) != 0 {
		t.Errorf("a reply sent again released %v, want nothing released", released)
	}
}
