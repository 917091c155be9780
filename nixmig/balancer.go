package nixmig

import (
	"fmt"
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
	timerTurn
	timerResend
	timerSample
	// LastTimerKind is the last kind this package uses.
	LastTimerKind = timerSample
)

// Stats counts what a balancer did; experiments and metrics read them.
type Stats struct {
	WavesStarted, WavesOK, WavesFailed int
	SettlingWaves                      int // waves started by a node at the line (atLine)
	WavesOutOfReach                    int // waves that ended out of reach (WaveDone.out_of_reach; counted at the initiator)
	LockRefusals                       int // lock requests this node refused
	LockFrees                          int // initiators it refused told it went free (wakeRefused)
	NIX, MIG                           int // NIX handoffs given, migrations done (counted at the end node)
	SplitLeaves                        int // migrations whose range went to both neighbours (counted at the migrant)
	Probes                             int // probe messages sent (UNL fallback, Item Balancing, the threshold algorithm's samples)
	UNLHits                            int // remote waves whose candidate came from the hint cache
	RemoteTries, RemoteAccepted        int // remote lock requests to a candidate M, and accepted ones
	LeasesExpired                      int
	Numbered                           int           // balancing messages sent numbered, asking for an acknowledgement (reliable.go)
	Resent                             int           // balancing messages sent again, unacknowledged (reliable.go)
	Locked                             time.Duration // total time held by locks
}

// maxRemoteGivenUp bounds Balancer.remoteGivenUp: a remote wave's reply comes within a lease or
// two, and a node gives up at most one wave a lease.
const maxRemoteGivenUp = 8

// MaxLeaseFactor bounds the leases of remote waves: MaxLeaseFactor·Config.LockLease() at most
// (Config.LongestHold bounds every lock).
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
	// movedIn is the load the wave's plan brings this member; giveFirst that every member
	// reserved before it can give from its own keys (LockRequest.give_first); gave that it
	// gave first in a shifted chain and keeps its lock until the member before has given.
	movedIn   float64
	giveFirst bool
	gave      bool
	// pieceCap, at an initiator that planned a shiftable piece: the most its NIX hands on.
	pieceCap float64
	// settle: the wave is a settling wave (LockRequest.settle).
	settle bool
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
	migrants []overlay.Peer // nil while the remote wave is under way
	// migrantKeep: each migrant's keep, when the remote wave reported them (RemoteReply).
	migrantKeep []float64
	// splitLeaves: the migrants whose leaves are split, each with the absorber that takes the
	// top of its range first.
	splitLeaves []*pb.SplitPlan
	// chainDone: the NIX chain reached this node. The MIG phase starts when the chain is done
	// and the remote wave is over (migrants not nil).
	chainDone bool
	// shift: the NIX chain is shifted (Config.FaithfulChain).
	shift   bool
	splits  []overlay.Key // where each migrant's piece starts (ends, below)
	ordered int           // migrants ordered so far
	done    int           // migrants that reported their end
	below   bool
	migs    int
	// outOfReach: the wave ended here because it reserved all its ttl allows, this node still
	// over keep (WaveDone.out_of_reach).
	outOfReach bool
}

// migrating is a migration this node is carrying out for a wave.
type migrating struct {
	wave        uint64
	end         overlay.NodeID
	incarnation uint64
	left        bool // the end node heard that the old range is handed over
}

// initiatedWave is a wave this node started: its direction, whether it is a settling wave, and
// when it started.
type initiatedWave struct {
	dir    pb.Side
	settle bool
	at     time.Time
}

type backoffState struct {
	fails  int
	until  time.Time
	facing overlay.NodeID // the neighbour that way when the last wave failed
	wave   uint64         // the last wave that failed: a LockFree naming it ends the wait
}

// refusedWave is a wave whose first lock request this node refused as busy: its initiator is
// told when this node goes free (wakeRefused).
type refusedWave struct {
	wave      uint64
	initiator overlay.NodeID
	at        time.Time
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
	initiated map[uint64]initiatedWave // waves this node started and whose outcome it awaits
	backoff   [3]backoffState          // by pb.Side
	// settleBackoff, by pb.Side: the back-off of settling waves (atLine), apart from the
	// back-off of waves from overloaded nodes, which a run of failed settling waves must not
	// delay.
	settleBackoff [3]backoffState
	// noMigrants, by pb.Side: the last wave this node started or ended that way brought no
	// migrants (shiftablePiece).
	noMigrants [3]bool
	// remoteGivenUp: the waves whose remote wave was under way when this node gave them up as
	// their end node, oldest first, at most maxRemoteGivenUp: a late reply's migrants are
	// released (releaseRemote).
	remoteGivenUp []uint64
	// outOfReach, by pb.Side: how many times the ttl of this node's next wave that way is
	// doubled — one up for each wave it started that way that ran out of reach, while under
	// TTLMax, one down for each that did not (waveTTL).
	outOfReach [3]int
	// settleFar, by pb.Side: the last settling wave this node started that way ran out of reach,
	// so its next one that way reaches twice as far (waveTTL).
	settleFar [3]bool
	sides     [3]sideStat // lock requests received, by the side they came from
	// refused, by pb.Side: the last wave this node refused from its neighbour that way, the
	// wave's initiator, until it is told this node went free; lastFree is when this node last
	// told one (wakeRefused).
	refused   [3]refusedWave
	lastFree  time.Time
	unl       hintCache
	ib        ibState
	threshold thresholdState
	running   bool
	checks    uint64
	// tracking is the range the load statistics were last trimmed to (trimToRange); owning
	// whether the node owned it then.
	tracking overlay.Range
	owning   bool

	// waiting is a NIX turn that came while this node was still receiving (the commit of the
	// member before overtaken); it is taken up again one hop time later.
	waiting     *pb.NixTurn
	waitingWave uint64

	reliable reliableState

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
	b := &Balancer{env: env, sg: sg, store: sg.Store(), cfg: cfg, load: lt, initiated: map[uint64]initiatedWave{},
		reliable: reliableState{outstanding: map[uint64]*outstanding{}, seen: map[seenKey]time.Time{},
			numberedWaves: map[uint64]time.Time{}}}
	b.unl.init(cfg.UNLCache, cfg.Window, !cfg.FaithfulMigrants)
	sg.SetObserver(b)
	return b, nil
}

// Config returns the balancer's parameters.
func (b *Balancer) Config() Config { return b.cfg }

// Tracker returns the node's load tracker.
func (b *Balancer) Tracker() *LoadTracker { return b.load }

// Load returns the node's current load.
func (b *Balancer) Load() float64 { return b.load.Load(b.env.Now()) }

// LoadOf returns the load that a piece's statistics, as handed over with it, would add to this
// node's now.
func (b *Balancer) LoadOf(loads []*pb.KeyLoad) float64 { return b.load.LoadOf(loads, b.env.Now()) }

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
	switch b.cfg.Algorithm {
	case ItemBalancing:
		first := time.Duration(b.env.Rand().Int64N(int64(b.cfg.IBInterval))) + 1
		b.env.SetTimer(first, overlay.Timer{Kind: timerIB})
	case Threshold:
		b.startThreshold()
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
	case timerTurn:
		if turn := b.waiting; turn != nil && t.ID == b.waitingWave {
			b.waiting = nil
			b.onNixTurn(t.ID, turn)
		}
	case timerResend:
		b.onResendTimer(t.ID)
	case timerSample:
		b.onSampleTimer(t.ID)
	}
}

// --- Observer: what the skip graph shows the balancer ---

// Served counts one request served for key k.
func (b *Balancer) Served(k overlay.Key) { b.load.Hit(k, b.env.Now()) }

// PieceLeaving hands over the load statistics of a piece whose ownership flipped away.
func (b *Balancer) PieceLeaving(piece overlay.Range) []*pb.KeyLoad {
	return b.load.Export(piece, b.env.Now())
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
		_ = b.store.Ascend(r, func(it overlay.Item) bool { return yield(it.Key) })
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
	case *pb.LockFree:
		m.Op = &pb.Balance_LockFree{LockFree: o}
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
	if b.acking(b.env.Now(), wave) {
		b.number(to, m)
	}
	b.sg.Send(to, &pb.Envelope{Body: &pb.Envelope_Balance{Balance: m}}, pb.Cause_CAUSE_BALANCE)
}

// Handle processes one balancing message from peer from (already validated by Validate).
func (b *Balancer) Handle(from overlay.Peer, m *pb.Balance) {
	if !b.received(from, m) {
		return
	}
	switch op := m.Op.(type) {
	case *pb.Balance_Lock:
		b.onLockRequest(from, m.Wave, op.Lock)
	case *pb.Balance_LockRefused:
		b.onLockRefused(m.Wave, op.LockRefused)
	case *pb.Balance_Release:
		b.onRelease(m.Wave, op.Release)
	case *pb.Balance_LockFree:
		b.onLockFree(m.Wave)
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
