package nixmig

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// Timer kinds owned by this package (above the skip graph's block).
const (
	timerCheck overlay.TimerKind = skipgraph.LastTimerKind + 1 + iota
	timerLease
	timerIB
	// LastTimerKind is the last kind this package uses.
	LastTimerKind = timerIB
)

// Stats counts what a balancer did; experiments and metrics read them.
type Stats struct {
	WavesStarted, WavesOK, WavesFailed int
	LockRefusals                       int // lock requests this node refused
	NIX, MIG                           int // NIX handoffs given, migrations done (counted at the end node)
	Probes                             int // probe messages sent (UNL fallback, Item Balancing)
	UNLHits                            int // remote waves whose candidate came from the hint cache
	RemoteTries, RemoteAccepted        int // remote lock requests to a candidate M, and accepted ones
	LeasesExpired                      int
	Locked                             time.Duration // total time held by locks
}

// MaxLeaseFactor bounds every lease: no lock lasts longer than MaxLeaseFactor·Config.Lease
// without renewal.
const MaxLeaseFactor = 6

// role is what a lock makes a node do for its wave.
type role uint8

const (
	roleChain   role = iota + 1 // reserved by a local wave (initiator included)
	roleRemote                  // the underloaded node M of a remote wave
	roleMigrant                 // a remote node reserved to migrate
	roleIB                      // a party of an Item Balancing exchange
)

// lockState is the node's one lock (SPEC §3).
type lockState struct {
	wave  uint64
	role  role
	since time.Time
	until time.Time
	// For a local-wave member: the wave's direction, the chain reserved up to this node and
	// what the exam computed here.
	dir     pb.Side
	chain   []overlay.Peer
	tmpL    float64
	exNodes int
}

// endState is the work of the end node E of a wave, from the exam's end to the MIG phase.
type endState struct {
	wave     uint64
	dir      pb.Side
	chain    []overlay.Peer // P first, E last
	tmpL     float64
	exNodes  int
	tries    int // candidates for M asked
	probes   int // probes left in this search
	m        overlay.Peer
	migrants []overlay.Peer
	splits   []overlay.Key // where each migrant's piece starts (ends, below)
	ordered  int           // migrants ordered so far
	done     int           // migrants that reported their end
	share    float64
	below    bool
	nixes    int
	migs     int
}

// migrating is a migration this node is carrying out for a wave.
type migrating struct {
	wave        uint64
	end         overlay.NodeID
	incarnation uint64
	left        bool // the end node heard that the old range is handed over
}

type backoffState struct {
	fails int
	until time.Time
}

// sideStat is an exponentially decaying count of lock requests received from one side.
type sideStat struct {
	value float64
	at    time.Time
}

// Balancer is one node's balancer.
type Balancer struct {
	env   overlay.Env
	sg    *skipgraph.Node
	store overlay.Store
	cfg   Config
	load  *LoadTracker

	lock      lockState
	end       *endState
	migrating *migrating
	initiated map[uint64]pb.Side // waves this node started and whose outcome it awaits
	backoff   [3]backoffState    // by pb.Side
	sides     [3]sideStat        // lock requests received, by the side they came from
	unl       hintCache
	ib        ibState
	running   bool
	checks    uint64

	Stats Stats
}

// New creates the balancer of skip graph node sg. It installs itself as sg's observer.
func New(env overlay.Env, sg *skipgraph.Node, cfg Config) (*Balancer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nixmig config: %w", err)
	}
	lt, err := NewLoadTracker(cfg.Window, cfg.Slots)
	if err != nil {
		return nil, err
	}
	b := &Balancer{env: env, sg: sg, store: sg.Store(), cfg: cfg, load: lt, initiated: map[uint64]pb.Side{}}
	b.unl.init(cfg.UNLCache, cfg.Window)
	sg.SetObserver(b)
	return b, nil
}

// Config returns the balancer's parameters.
func (b *Balancer) Config() Config { return b.cfg }

// Tracker returns the node's load tracker.
func (b *Balancer) Tracker() *LoadTracker { return b.load }

// Load returns the node's current load.
func (b *Balancer) Load() float64 { return b.load.Load(b.env.Now()) }

// Locked reports whether a lock holds the node now, and for which wave.
func (b *Balancer) Locked() (uint64, bool) {
	if b.lock.wave != 0 && b.env.Now().Before(b.lock.until) {
		return b.lock.wave, true
	}
	return 0, false
}

// Start begins the periodic load checks (and Item Balancing's probes). Calling it again is
// harmless.
func (b *Balancer) Start() {
	if b.running || b.cfg.Algorithm == None {
		return
	}
	b.running = true
	first := time.Duration(b.env.Rand().Int64N(int64(b.cfg.CheckInterval))) + 1
	b.env.SetTimer(first, overlay.Timer{Kind: timerCheck})
	if b.cfg.Algorithm == ItemBalancing {
		first := time.Duration(b.env.Rand().Int64N(int64(b.cfg.IBInterval))) + 1
		b.env.SetTimer(first, overlay.Timer{Kind: timerIB})
	}
}

// Stop ends the periodic checks and probes: the node starts no more balancing operations
// (those under way finish or their leases run out).
func (b *Balancer) Stop() { b.running = false }

// HandleTimer processes a timer this package set.
func (b *Balancer) HandleTimer(t overlay.Timer) {
	switch t.Kind {
	case timerCheck:
		b.onCheck()
	case timerLease:
		b.onLeaseTimer(t.ID)
	case timerIB:
		b.onIBTimer()
	}
}

// --- Observer: what the skip graph shows the balancer ---

// Served counts one request served for key k.
func (b *Balancer) Served(k overlay.Key) { b.load.Hit(k, b.env.Now()) }

// PieceLeaving hands over the load statistics of a piece whose ownership flipped away.
func (b *Balancer) PieceLeaving(piece overlay.Range) []*pb.KeyLoad {
	return b.load.Export(piece, b.keysIn(piece), b.env.Now())
}

// PieceArrived takes in the statistics of a piece that became this node's.
func (b *Balancer) PieceArrived(_ overlay.Range, loads []*pb.KeyLoad) {
	if err := b.load.Import(loads, b.env.Now()); err != nil {
		b.env.Logger().Warn("load statistics of a received piece rejected", zap.Error(err))
	}
}

// keysIn yields the stored keys of r in order.
func (b *Balancer) keysIn(r overlay.Range) func(yield func(overlay.Key) bool) {
	return func(yield func(overlay.Key) bool) {
		_ = b.store.Ascend(r, func(k overlay.Key, _ []byte) bool { return yield(k) })
	}
}

// --- locks ---

// idle reports whether the node may join a balancing operation: no live lock, owning a range,
// no handoff under way.
func (b *Balancer) idle() bool {
	if b.lock.wave != 0 && !b.env.Now().Before(b.lock.until) {
		b.unlock(b.lock.wave) // the lease ran out
		b.Stats.LeasesExpired++
	}
	return b.lock.wave == 0 && b.sg.State() == skipgraph.StateActive && !b.sg.Busy() && b.migrating == nil
}

func (b *Balancer) lockFor(wave uint64, r role, lease time.Duration) {
	now := b.env.Now()
	b.lock = lockState{wave: wave, role: r, since: now, until: now.Add(lease)}
	b.env.SetTimer(lease, overlay.Timer{Kind: timerLease, ID: wave})
}

// renew extends the lock of wave, if the node holds it.
func (b *Balancer) renew(wave uint64, lease time.Duration) bool {
	if b.lock.wave != wave {
		return false
	}
	if until := b.env.Now().Add(lease); until.After(b.lock.until) {
		b.lock.until = until
		b.env.SetTimer(lease, overlay.Timer{Kind: timerLease, ID: wave})
	}
	return true
}

func (b *Balancer) unlock(wave uint64) {
	if b.lock.wave != wave || wave == 0 {
		return
	}
	b.Stats.Locked += b.env.Now().Sub(b.lock.since)
	b.lock = lockState{}
}

func (b *Balancer) onLeaseTimer(wave uint64) {
	if b.lock.wave != wave || b.env.Now().Before(b.lock.until) {
		return
	}
	b.Stats.LeasesExpired++
	if e := b.end; e != nil && e.wave == wave {
		b.abortEnd(e, "lease expired")
		return
	}
	b.unlock(wave)
}

// --- sending ---

func (b *Balancer) send(to overlay.NodeID, wave uint64, op any) {
	m := &pb.Balance{Wave: wave}
	switch o := op.(type) {
	case *pb.LockRequest:
		m.Op = &pb.Balance_Lock{Lock: o}
	case *pb.LockRefused:
		m.Op = &pb.Balance_LockRefused{LockRefused: o}
	case *pb.Release:
		m.Op = &pb.Balance_Release{Release: o}
	case *pb.NixTurn:
		m.Op = &pb.Balance_NixTurn{NixTurn: o}
	case *pb.RemoteLock:
		m.Op = &pb.Balance_RemoteLock{RemoteLock: o}
	case *pb.RemoteReply:
		m.Op = &pb.Balance_RemoteReply{RemoteReply: o}
	case *pb.MigOrder:
		m.Op = &pb.Balance_MigOrder{MigOrder: o}
	case *pb.MigDone:
		m.Op = &pb.Balance_MigDone{MigDone: o}
	case *pb.WaveDone:
		m.Op = &pb.Balance_WaveDone{WaveDone: o}
	case *pb.Probe:
		m.Op = &pb.Balance_Probe{Probe: o}
	case *pb.ProbeReply:
		m.Op = &pb.Balance_ProbeReply{ProbeReply: o}
	case *pb.IBOffer:
		m.Op = &pb.Balance_IbOffer{IbOffer: o}
	case *pb.IBNix:
		m.Op = &pb.Balance_IbNix{IbNix: o}
	default:
		panic(fmt.Sprintf("nixmig: cannot send %T", op)) // a programming error, not input
	}
	if to == b.sg.ID() {
		b.Handle(b.sg.Self(), m)
		return
	}
	b.sg.Send(to, &pb.Envelope{Body: &pb.Envelope_Balance{Balance: m}}, pb.Cause_CAUSE_BALANCE)
}

// Handle processes one balancing message from peer from (already validated by Validate).
func (b *Balancer) Handle(from overlay.Peer, m *pb.Balance) {
	switch op := m.Op.(type) {
	case *pb.Balance_Lock:
		b.onLockRequest(from, m.Wave, op.Lock)
	case *pb.Balance_LockRefused:
		b.onLockRefused(m.Wave)
	case *pb.Balance_Release:
		b.onRelease(m.Wave, op.Release)
	case *pb.Balance_NixTurn:
		b.onNixTurn(m.Wave, op.NixTurn)
	case *pb.Balance_RemoteLock:
		b.onRemoteLock(from, m.Wave, op.RemoteLock)
	case *pb.Balance_RemoteReply:
		b.onRemoteReply(m.Wave, op.RemoteReply)
	case *pb.Balance_MigOrder:
		b.onMigOrder(from, m.Wave, op.MigOrder)
	case *pb.Balance_MigDone:
		b.onMigDone(m.Wave, op.MigDone)
	case *pb.Balance_WaveDone:
		b.onWaveDone(m.Wave, op.WaveDone)
	case *pb.Balance_Probe:
		b.onProbe(from, m.Wave, op.Probe)
	case *pb.Balance_ProbeReply:
		b.onProbeReply(from, m.Wave, op.ProbeReply)
	case *pb.Balance_IbOffer:
		b.onIBOffer(from, m.Wave, op.IbOffer)
	case *pb.Balance_IbNix:
		b.onIBNix(from, m.Wave, op.IbNix)
	}
}

// --- the initiator ---

func (b *Balancer) onCheck() {
	if !b.running {
		return
	}
	b.env.SetTimer(b.cfg.CheckInterval, overlay.Timer{Kind: timerCheck})
	b.checks++
	now := b.env.Now()
	if b.checks%64 == 0 {
		b.load.Compact(now)
	}
	b.checkMigration()
	if b.cfg.Algorithm == ItemBalancing || !b.idle() {
		return
	}
	l := b.load.Load(now)
	if l <= b.cfg.Thres {
		return
	}
	dir, ok := b.chooseDirection(now)
	if !ok {
		return
	}
	b.startWave(dir, l)
}

// chooseDirection picks the side a new wave goes to (SPEC §7.3): the one whose neighbours sent
// fewer lock requests lately, among the sides not backing off; a coin toss on a tie.
func (b *Balancer) chooseDirection(now time.Time) (pb.Side, bool) {
	pred, succ := pb.Side_SIDE_PRED, pb.Side_SIDE_SUCC
	predOK, succOK := !now.Before(b.backoff[pred].until), !now.Before(b.backoff[succ].until)
	switch {
	case predOK && !succOK:
		return pred, true
	case succOK && !predOK:
		return succ, true
	case !predOK && !succOK:
		return 0, false
	}
	p, s := b.sideValue(pred, now), b.sideValue(succ, now)
	switch {
	case p < s:
		return pred, true
	case s < p:
		return succ, true
	case b.env.Rand().IntN(2) == 0:
		return pred, true
	default:
		return succ, true
	}
}

func (b *Balancer) sideValue(s pb.Side, now time.Time) float64 {
	st := b.sides[s]
	if st.at.IsZero() {
		return 0
	}
	return st.value * math.Exp2(-now.Sub(st.at).Seconds()/b.cfg.DirectionHalfLife.Seconds())
}

func (b *Balancer) noteSide(s pb.Side, now time.Time) {
	b.sides[s] = sideStat{value: b.sideValue(s, now) + 1, at: now}
}

// neighbour returns the level-0 neighbour on side s.
func (b *Balancer) neighbour(s pb.Side) overlay.Peer {
	pred, succ := b.sg.Neighbors(0)
	if s == pb.Side_SIDE_PRED {
		return pred
	}
	return succ
}

func opposite(s pb.Side) pb.Side {
	if s == pb.Side_SIDE_PRED {
		return pb.Side_SIDE_SUCC
	}
	return pb.Side_SIDE_PRED
}

func (b *Balancer) newWave() uint64 { return b.env.Rand().Uint64() | 1 }

func (b *Balancer) startWave(dir pb.Side, l float64) {
	wave := b.newWave()
	b.Stats.WavesStarted++
	b.initiated[wave] = dir
	b.lockFor(wave, roleChain, b.cfg.Lease)
	self := b.sg.Self()
	b.lock.dir, b.lock.chain, b.lock.tmpL = dir, []overlay.Peer{self}, l
	if b.cfg.Algorithm == MIGOnly {
		// No local wave: the initiator is its own end node, its remote wave sized from its load.
		b.beginEnd(wave, dir, []overlay.Peer{self}, l, b.exNodes(l))
		return
	}
	next := b.neighbour(dir)
	if next.IsZero() || next.ID == self.ID {
		b.waveFailed(wave, dir)
		return
	}
	b.send(next.ID, wave, &pb.LockRequest{Dir: dir, Chain: []*pb.NodeRef{self.ToPB()}, TmpLoad: l, Thres: b.cfg.Thres, OverThres: b.cfg.OverThres})
}

// waveFailed ends a wave that reserved nothing (or whose outcome was a failure) at the
// initiator: unlock and back off in that direction (SPEC §6.5).
func (b *Balancer) waveFailed(wave uint64, dir pb.Side) {
	b.unlock(wave)
	delete(b.initiated, wave)
	b.Stats.WavesFailed++
	bo := &b.backoff[dir]
	bo.fails++
	slots := int64(1)<<min(bo.fails, 10) - 1
	bo.until = b.env.Now().Add(time.Duration(b.env.Rand().Int64N(slots+1)) * b.cfg.HopTime)
}

func (b *Balancer) onWaveDone(wave uint64, d *pb.WaveDone) {
	dir, ok := b.initiated[wave]
	if !ok {
		return
	}
	if !d.Ok {
		b.waveFailed(wave, dir)
		return
	}
	delete(b.initiated, wave)
	b.Stats.WavesOK++
	b.backoff[dir] = backoffState{}
}

// moved is what a NIX from a node with load l moves on (SPEC §6.1).
func moved(l, thres, overThres, a float64) float64 {
	switch {
	case l > overThres:
		return a * (l - thres)
	case l > thres:
		return l - thres
	}
	return 0
}

// exNodes is how many extra nodes a load l needs besides this one.
func (b *Balancer) exNodes(l float64) int {
	if b.cfg.FaithfulExNodes {
		return max(0, int(math.Floor(l/b.cfg.Thres-1)))
	}
	return max(0, int(math.Ceil(l/b.cfg.Thres))-1)
}

// --- the local wave (SPEC §6.1) ---

func (b *Balancer) onLockRequest(from overlay.Peer, wave uint64, r *pb.LockRequest) {
	now := b.env.Now()
	b.noteSide(opposite(r.Dir), now)
	last := from.ID
	if !b.idle() || b.inChain(r.Chain) {
		b.Stats.LockRefusals++
		b.send(last, wave, &pb.LockRefused{Reason: "busy"})
		return
	}
	self := b.sg.Self()
	l := b.load.Load(now)
	tmpL := l + moved(r.TmpLoad, r.Thres, r.OverThres, b.cfg.A)
	ex := b.exNodes(tmpL)
	chain := append(peersFromPB(r.Chain), self)
	b.lockFor(wave, roleChain, b.cfg.Lease)
	b.lock.dir, b.lock.chain, b.lock.tmpL, b.lock.exNodes = r.Dir, chain, tmpL, ex
	reserved := len(chain) - 1
	next := b.neighbour(r.Dir)
	if tmpL > b.cfg.Thres && reserved < b.cfg.TTL && ex <= b.cfg.TTL && !next.IsZero() && next.ID != self.ID && next.ID != chain[0].ID {
		b.send(next.ID, wave, &pb.LockRequest{Dir: r.Dir, Chain: peersToPB(chain), TmpLoad: tmpL, Thres: b.cfg.Thres, OverThres: b.cfg.OverThres})
		return
	}
	b.beginEnd(wave, r.Dir, chain, tmpL, ex)
}

func (b *Balancer) inChain(chain []*pb.NodeRef) bool {
	for _, r := range chain {
		if overlay.NodeID(r.Id) == b.sg.ID() {
			return true
		}
	}
	return false
}

// onLockRefused: the next node refused, so this node, the last reserved, ends the wave.
func (b *Balancer) onLockRefused(wave uint64) {
	if b.lock.wave != wave || b.lock.role != roleChain {
		return
	}
	if len(b.lock.chain) == 1 {
		b.waveFailed(wave, b.lock.dir) // nothing reserved: the initiator backs off
		return
	}
	b.beginEnd(wave, b.lock.dir, b.lock.chain, b.lock.tmpL, b.lock.exNodes)
}

func (b *Balancer) onRelease(wave uint64, r *pb.Release) {
	if e := b.end; e != nil && e.wave == wave && r.Abort {
		b.abortEnd(e, r.Reason)
		return
	}
	if b.lock.wave == wave {
		b.unlock(wave)
	}
}

// --- the end node: remote wave (SPEC §6.2) ---

func (b *Balancer) beginEnd(wave uint64, dir pb.Side, chain []overlay.Peer, tmpL float64, ex int) {
	e := &endState{wave: wave, dir: dir, chain: chain, tmpL: tmpL, exNodes: min(ex, maxChain-1), probes: b.cfg.MaxProbes}
	b.end = e
	b.renew(wave, b.cfg.Lease)
	if e.exNodes > 0 && b.cfg.Algorithm != NIXOnly {
		b.seekM(e, overlay.Peer{})
		return
	}
	b.startNIX(e)
}

func (e *endState) involves(id overlay.NodeID) bool {
	for _, p := range e.chain {
		if p.ID == id {
			return true
		}
	}
	return false
}

// seekM looks for an underloaded idle node: first in the hint cache (SmartUNL), then by
// probing random routing-table entries, walking on from the answers (SPEC §7.1). via is the
// node to probe next, if a probe answer named one.
func (b *Balancer) seekM(e *endState, via overlay.Peer) {
	if e.tries >= 3 {
		b.startNIX(e)
		return
	}
	if b.cfg.SmartUNL && via.IsZero() {
		if h, ok := b.unl.best(b.env.Now(), e.involves); ok {
			b.Stats.UNLHits++
			b.remoteLock(e, h)
			return
		}
	}
	if e.probes <= 0 {
		b.startNIX(e)
		return
	}
	target := via
	if target.IsZero() || target.ID == b.sg.ID() || e.involves(target.ID) {
		target = b.randomTableEntry(e.involves)
	}
	if target.IsZero() {
		b.startNIX(e)
		return
	}
	e.probes--
	b.Stats.Probes++
	b.send(target.ID, e.wave, &pb.Probe{Load: b.load.Load(b.env.Now())})
}

// randomTableEntry returns a random node of the routing table outside skip.
func (b *Balancer) randomTableEntry(skip func(overlay.NodeID) bool) overlay.Peer {
	h := b.sg.Height()
	for range 4 {
		if h == 0 {
			break
		}
		pred, succ := b.sg.Neighbors(b.env.Rand().IntN(h))
		p := pred
		if b.env.Rand().IntN(2) == 0 {
			p = succ
		}
		if !p.IsZero() && p.ID != b.sg.ID() && (skip == nil || !skip(p.ID)) {
			return p
		}
	}
	return overlay.Peer{}
}

func (b *Balancer) onProbe(from overlay.Peer, wave uint64, _ *pb.Probe) {
	next := b.randomTableEntry(func(id overlay.NodeID) bool { return id == from.ID })
	reply := &pb.ProbeReply{Load: b.load.Load(b.env.Now()), Thres: b.cfg.Thres, Idle: b.idle()}
	if !next.IsZero() {
		reply.Next = next.ToPB()
	}
	b.send(from.ID, wave, reply)
}

func (b *Balancer) onProbeReply(from overlay.Peer, wave uint64, r *pb.ProbeReply) {
	if b.ib.probe == wave && wave != 0 {
		b.onIBProbeReply(from, r)
		return
	}
	e := b.end
	if e == nil || e.wave != wave || e.m.ID != "" {
		return
	}
	if r.Idle && r.Load < r.Thres && !e.involves(from.ID) {
		b.remoteLock(e, from)
		return
	}
	var via overlay.Peer
	if r.Next != nil {
		via = overlay.PeerFromPB(r.Next)
	}
	b.seekM(e, via)
}

func (b *Balancer) remoteLock(e *endState, m overlay.Peer) {
	e.tries++
	e.m = m
	b.Stats.RemoteTries++
	b.send(m.ID, e.wave, &pb.RemoteLock{End: b.sg.Self().ToPB(), Want: uint32(e.exNodes)})
}

// onRemoteLock reserves this node as M (first request) or as a migrant after M.
func (b *Balancer) onRemoteLock(from overlay.Peer, wave uint64, r *pb.RemoteLock) {
	end := overlay.NodeID(r.End.Id)
	l := b.load.Load(b.env.Now())
	// M and the migrants wait for the NIX chain and the migrations before them; a long wave
	// still gets a bounded lease.
	lease := b.cfg.Lease * time.Duration(min(r.Want+2, MaxLeaseFactor))
	if r.M == nil {
		if !b.idle() || l >= b.cfg.Thres || end == b.sg.ID() {
			b.send(end, wave, &pb.RemoteReply{Reason: "candidate not idle or not underloaded"})
			return
		}
		b.lockFor(wave, roleRemote, lease)
		self := b.sg.Self().ToPB()
		_, succ := b.sg.Neighbors(0)
		if r.Want == 0 || succ.IsZero() || succ.ID == b.sg.ID() {
			b.send(end, wave, &pb.RemoteReply{M: self})
			return
		}
		b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: l, MThres: b.cfg.Thres, M: self})
		return
	}
	reply := &pb.RemoteReply{M: r.M, Migrants: r.Migrants}
	if !b.idle() || end == b.sg.ID() || r.AccLoad+l >= r.MThres {
		b.send(end, wave, reply)
		return
	}
	b.lockFor(wave, roleMigrant, lease)
	migrants := append(r.Migrants, b.sg.Self().ToPB())
	_, succ := b.sg.Neighbors(0)
	if len(migrants) >= int(r.Want) || succ.IsZero() || succ.ID == b.sg.ID() {
		b.send(end, wave, &pb.RemoteReply{M: r.M, Migrants: migrants})
		return
	}
	b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: r.AccLoad + l, MThres: r.MThres, M: r.M, Migrants: migrants})
}

func (b *Balancer) onRemoteReply(wave uint64, r *pb.RemoteReply) {
	e := b.end
	if e == nil || e.wave != wave || e.migrants != nil {
		return
	}
	if r.M == nil {
		e.m = overlay.Peer{}
		b.seekM(e, overlay.Peer{})
		return
	}
	b.Stats.RemoteAccepted++
	e.m = overlay.PeerFromPB(r.M)
	e.migrants = peersFromPB(r.Migrants)
	if len(e.migrants) == 0 {
		b.send(e.m.ID, wave, &pb.Release{Reason: "no migrants"})
	}
	b.startNIX(e)
}

// --- NIX chain (SPEC §6.3) ---

func (b *Balancer) startNIX(e *endState) {
	if e.migrants == nil {
		e.migrants = []overlay.Peer{}
	}
	b.renew(e.wave, b.cfg.Lease)
	b.send(e.chain[0].ID, e.wave, &pb.NixTurn{Dir: e.dir, Chain: peersToPB(e.chain), Index: 0})
}

func (b *Balancer) onNixTurn(wave uint64, t *pb.NixTurn) {
	chain := peersFromPB(t.Chain)
	i := int(t.Index)
	if i >= len(chain) {
		return
	}
	last := chain[len(chain)-1].ID
	if b.lock.wave != wave {
		// This node's lock ran out: the wave cannot go on.
		b.send(last, wave, &pb.Release{Abort: true, Reason: "chain member lost its lock"})
		return
	}
	if i == len(chain)-1 {
		if e := b.end; e != nil && e.wave == wave {
			b.migPhase(e)
		}
		return
	}
	b.renew(wave, b.cfg.Lease)
	pass := func() {
		b.unlock(wave)
		b.send(chain[i+1].ID, wave, &pb.NixTurn{Dir: t.Dir, Chain: t.Chain, Index: t.Index + 1})
	}
	want := moved(b.load.Load(b.env.Now()), b.cfg.Thres, b.cfg.OverThres, b.cfg.A)
	if want <= 0 {
		pass()
		return
	}
	split, ok := b.nixSplit(t.Dir == pb.Side_SIDE_SUCC, want)
	if !ok {
		pass()
		return
	}
	err := b.sg.GiveNIX(t.Dir == pb.Side_SIDE_SUCC, split, pb.Cause_CAUSE_BALANCE, func(ok bool, _ int) {
		if !ok {
			b.unlock(wave)
			b.send(last, wave, &pb.Release{Abort: true, Reason: "nix aborted"})
			return
		}
		b.Stats.NIX++
		pass()
	})
	if err != nil {
		b.unlock(wave)
		b.send(last, wave, &pb.Release{Abort: true, Reason: err.Error()})
	}
}

// ownKeys returns the keys of the node's range in order from its start.
func (b *Balancer) ownKeys() []overlay.Key {
	var keys []overlay.Key
	_ = b.store.Ascend(b.sg.Range(), func(k overlay.Key, _ []byte) bool {
		keys = append(keys, k)
		return true
	})
	return keys
}

// nixSplit picks the split key of a NIX carrying want to the successor (up) or the predecessor
// (SPEC §4 step 1): the shortest piece from the end touching the helper whose load reaches want,
// never the whole range — short of load, all but the key farthest from the helper.
func (b *Balancer) nixSplit(up bool, want float64) (overlay.Key, bool) {
	keys := b.ownKeys()
	if len(keys) < 2 {
		return "", false
	}
	split, _, _, ok := b.cutPiece(keys, up, want)
	if up && (!ok || split == keys[0]) {
		split = keys[1]
	}
	if !up && (!ok || split > keys[len(keys)-1] || split == keys[len(keys)-1]) {
		split = keys[len(keys)-1]
	}
	if split == b.sg.Range().Start {
		return "", false
	}
	return split, true
}

// cutPiece finds the shortest piece carrying want from the upper end (up) or the lower end of
// the keys; it returns the split key, the piece's load and key count.
func (b *Balancer) cutPiece(keys []overlay.Key, up bool, want float64) (overlay.Key, float64, int, bool) {
	now := b.env.Now()
	if up {
		desc := func(yield func(overlay.Key) bool) {
			for i := len(keys) - 1; i >= 0; i-- {
				if !yield(keys[i]) {
					return
				}
			}
		}
		split, got, n, ok := b.load.SplitDown(desc, want, now)
		return split, got, n, ok
	}
	asc := func(yield func(overlay.Key) bool) {
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}
	split, got, n, ok := b.load.SplitUp(asc, want, now)
	return split, got, n, ok
}

// --- MIG phase (SPEC §6.4) ---

// migPhase starts the migrations. The end node cuts its range for all of them at once — the
// i-th migrant's piece carries the i-th share counted from the side SmartRNP chose — and orders
// them one after another, each as soon as the one before has handed its old range over: the
// leaves chain towards M one at a time, while the joins next to the end node overlap with them.
func (b *Balancer) migPhase(e *endState) {
	b.renew(e.wave, b.cfg.Lease)
	r := len(e.migrants)
	l := b.load.Load(b.env.Now())
	if r == 0 || l <= b.cfg.Thres {
		b.finishEnd(e, true)
		return
	}
	if b.cfg.FaithfulMigShare {
		e.share = e.tmpL / float64(r)
	} else {
		e.share = l / float64(r+1)
	}
	keys := b.ownKeys()
	e.below = b.placeBelow(keys, e.share)
	e.splits = b.migSplits(keys, e.below, e.share, r)
	if len(e.splits) == 0 {
		b.finishEnd(e, true)
		return
	}
	b.orderMigrant(e)
}

// orderMigrant sends the next migration order.
func (b *Balancer) orderMigrant(e *endState) {
	i := e.ordered
	e.ordered++
	b.renew(e.wave, b.cfg.Lease)
	b.send(e.migrants[i].ID, e.wave, &pb.MigOrder{Target: b.sg.Self().ToPB(), Split: []byte(e.splits[i]), Below: e.below})
}

// placeBelow is SmartRNP (SPEC §7.2): the migrant goes to the side whose piece carrying share
// holds fewer keys (or as the experiment's placement option says).
func (b *Balancer) placeBelow(keys []overlay.Key, share float64) bool {
	switch b.cfg.Placement {
	case PlaceRandom:
		return b.env.Rand().IntN(2) == 0
	}
	_, _, nUp, _ := b.cutPiece(keys, true, share)
	_, _, nDown, _ := b.cutPiece(keys, false, share)
	below := nDown < nUp
	if b.cfg.Placement == PlaceAdversarial {
		return !below
	}
	return below
}

// migSplits cuts the end node's range for up to r migrants, each piece carrying share, from the
// upper end (migrants join above, the first one outermost) or from the lower end (below). It
// never hands out the key farthest from that end, and returns fewer cuts when the load runs out.
func (b *Balancer) migSplits(keys []overlay.Key, below bool, share float64, r int) []overlay.Key {
	now := b.env.Now()
	var splits []overlay.Key
	acc, want := 0.0, share
	n := len(keys)
	for j := 0; j < n-1 && len(splits) < r; j++ {
		k := keys[n-1-j] // from the upper end
		if below {
			k = keys[j]
		}
		acc += b.load.KeyLoad(k, now)
		if acc < want {
			continue
		}
		if below {
			// The piece is [start, k] inclusive: it ends just after k.
			k += "\x00"
		}
		splits = append(splits, k)
		want += share
	}
	return splits
}

func (b *Balancer) onMigOrder(from overlay.Peer, wave uint64, o *pb.MigOrder) {
	if b.lock.wave != wave || b.lock.role == roleChain {
		b.send(from.ID, wave, &pb.MigDone{})
		return
	}
	b.renew(wave, b.cfg.Lease*4)
	inc := b.sg.Self().Incarnation
	if err := b.sg.Migrate(overlay.NodeID(o.Target.Id), overlay.Key(o.Split), o.Below); err != nil {
		b.env.Logger().Info("migration refused", zap.Error(err))
		b.unlock(wave)
		b.send(from.ID, wave, &pb.MigDone{})
		return
	}
	b.migrating = &migrating{wave: wave, end: from.ID, incarnation: inc}
}

// checkMigration tells the end node how this node's migration goes: once its old range is
// handed over, and once it has joined again.
func (b *Balancer) checkMigration() {
	mg := b.migrating
	if mg == nil {
		return
	}
	state := b.sg.State()
	if !mg.left && (state == skipgraph.StateNew || state == skipgraph.StateJoining || b.sg.Self().Incarnation != mg.incarnation) {
		mg.left = true
		b.send(mg.end, mg.wave, &pb.MigDone{Left: true})
	}
	if state == skipgraph.StateActive && b.sg.Self().Incarnation != mg.incarnation {
		b.migrating = nil
		b.send(mg.end, mg.wave, &pb.MigDone{Ok: true})
		b.unlock(mg.wave)
	}
}

func (b *Balancer) onMigDone(wave uint64, d *pb.MigDone) {
	if b.ib.placing == wave {
		if d.Left {
			return
		}
		b.ib.placing = 0
		if d.Ok {
			b.Stats.MIG++
		}
		b.unlock(wave)
		return
	}
	e := b.end
	if e == nil || e.wave != wave {
		return
	}
	if d.Left {
		if e.ordered < len(e.splits) {
			b.orderMigrant(e)
		}
		return
	}
	if d.Ok {
		e.migs++
		b.Stats.MIG++
	}
	e.done++
	if e.ordered == e.done && e.ordered < len(e.splits) {
		b.orderMigrant(e) // the migrant failed before it left: the next one goes now
		return
	}
	if e.done == len(e.splits) {
		b.finishEnd(e, true)
	}
}

// finishEnd ends the wave at its end node: the remote nodes not used go free, and the
// initiator hears the outcome.
func (b *Balancer) finishEnd(e *endState, ok bool) {
	b.end = nil
	if e.m.ID != "" && e.migrants != nil {
		b.send(e.m.ID, e.wave, &pb.Release{Reason: "wave over"})
	}
	for _, p := range e.migrants[min(e.ordered, len(e.migrants)):] {
		b.send(p.ID, e.wave, &pb.Release{Reason: "wave over"})
	}
	b.unlock(e.wave)
	b.send(e.chain[0].ID, e.wave, &pb.WaveDone{Ok: ok, Dir: e.dir, Nixes: uint32(e.nixes), Migrations: uint32(e.migs)})
}

// abortEnd gives up a wave at its end node: everyone still reserved goes free.
func (b *Balancer) abortEnd(e *endState, reason string) {
	for i := 1; i < len(e.chain)-1; i++ {
		b.send(e.chain[i].ID, e.wave, &pb.Release{Reason: reason})
	}
	if e.migrants == nil {
		e.migrants = []overlay.Peer{}
		if e.m.ID != "" {
			// A remote lock may be under way: release M (and whatever it reserved expires).
			b.send(e.m.ID, e.wave, &pb.Release{Reason: reason})
			e.m = overlay.Peer{}
		}
	}
	b.finishEnd(e, false)
}

// --- helpers ---

func peersFromPB(refs []*pb.NodeRef) []overlay.Peer {
	out := make([]overlay.Peer, len(refs))
	for i, r := range refs {
		out[i] = overlay.PeerFromPB(r)
	}
	return out
}

func peersToPB(peers []overlay.Peer) []*pb.NodeRef {
	out := make([]*pb.NodeRef, len(peers))
	for i, p := range peers {
		out[i] = p.ToPB()
	}
	return out
}
