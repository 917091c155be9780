package p2p

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	dutil "github.com/libp2p/go-libp2p/p2p/discovery/util"
	routedhost "github.com/libp2p/go-libp2p/p2p/host/routed"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// MetaStore is a store that also keeps named metadata durably (node/store's Pebble does). With
// one, a runtime persists its node's snapshot and a restarted node takes its place back.
type MetaStore interface {
	overlay.Store
	GetMeta(name string) ([]byte, bool, error)
	SetMeta(name string, value []byte) error
}

// syncer is a store whose writes are durable only once synced (node/store's Pebble).
type syncer interface{ Sync() error }

// snapshotMeta names the metadata entry holding the node's snapshot.
const snapshotMeta = "snapshot"

// storeWrittenMeta names the metadata entry holding a time the store takes no value after: a
// lease, renewed before each step that could pass it, so that every item the store holds was
// written before the bound persisted ahead of it. A restored node gives it to the protocol
// (RestoreStoreWritten): the writes the ring made in its range while it was down are then
// known newer than its copies.
const storeWrittenMeta = "store-written-bound"

// StoreWrittenLease is how far ahead the bound is set; it is renewed when less than
// storeWrittenRenew of it is left, so that a busy node writes it every few seconds.
const (
	StoreWrittenLease = 10 * time.Second
	storeWrittenRenew = 3 * time.Second
)

// recentDeletesEvery is how often at most the snapshot is written for the node's recent deletes
// alone (NodeSnapshot.recent_deletes): every delete changes them, and every write of them
// rewrites them all. A crash forgets the deletes of the last few seconds; Close writes them.
const recentDeletesEvery = 5 * time.Second

// memberMeta marks a data directory whose node has owned a range: an overlay exists, so a
// restart never starts a new one (NewNetwork), even after a graceful leave.
const memberMeta = "member"

// Config is what a Runtime needs.
type Config struct {
	Identity    crypto.PrivKey
	ListenAddrs []string // multiaddrs, e.g. /ip4/127.0.0.1/tcp/0
	// Bootstrap peers: DHT entry points and the first introducers of a join.
	Bootstrap []peer.AddrInfo
	// Network names the overlay; nodes advertise it on the DHT and find introducers through it.
	Network string
	// NewNetwork: with no snapshot, no bootstrap peer that answers as a member of an overlay
	// (inOverlay) and a data directory that was never a member of one, start a new overlay
	// owning the whole key circle (a seed). Without it such a node refuses to start.
	NewNetwork bool
	// JoinAt, when set, is the key whose owner the node joins next to; otherwise a random key.
	JoinAt *overlay.Key
	Node   node.Config
	// Store holds the node's items; a MetaStore also keeps its snapshot across restarts.
	Store  overlay.Store
	Logger *zap.Logger
	// Registerer receives the runtime's metrics (and libp2p's); nil disables them.
	Registerer prometheus.Registerer
	// OnEvent, when set, sees every protocol event the node reports, on the node's goroutine
	// (it must not block).
	OnEvent func(overlay.Event)
	// HoldBalancing: do not start balancing when the node joins; StartBalancing does (experiments
	// that first let a skewed load build up).
	HoldBalancing bool
	// Timeouts: a client request's whole life at the entry node, one frame write, and how long an
	// idle overlay stream stays open.
	ClientTimeout time.Duration
	WriteTimeout  time.Duration
	IdleTimeout   time.Duration
	// Gater, when set, may refuse the host's connections (tests cut a local network in two
	// with it).
	Gater coreconnmgr.ConnectionGater
	// RingCheck is how often, on average, a node serving a range gives its node a peer found on
	// the DHT under Network to cross-check (Node.CrossCheck): two rings that formed apart — a
	// cut longer than the day a node calls on the successors it declared dead, or two seeds
	// started apart — merge through it. 10 minutes when zero; negative turns it off.
	RingCheck time.Duration
}

// Runtime runs one node on a libp2p host: every message, timer and client request becomes a step
// of one event loop that calls the node, so the protocol code runs exactly as in the simulator.
type Runtime struct {
	cfg    Config
	log    *zap.Logger
	host   host.Host // routed: dials peers whose addresses it lacks through the DHT
	kad    *dht.IpfsDHT
	node   *node.Node
	store  overlay.Store
	meta   MetaStore // nil when the store keeps no metadata
	syncer syncer    // nil when the store's writes are durable (or volatile) as they are made
	self   overlay.NodeID
	rng    *rand.Rand
	events chan func()
	stop   chan struct{}
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Owned by the loop goroutine.
	outbox    []outMsg
	local     []outMsg // messages the node sent to itself, handled next
	lastSnap  []byte   // the snapshot last persisted, without its tombstones and recent deletes
	lastTombs uint64   // and the node's tombstone version then
	// lastRecent is the node's recent-delete version last persisted, recentAt when.
	lastRecent uint64
	recentAt   time.Time
	member     bool // memberMeta is written
	protected  map[peer.ID]bool
	learned    map[peer.ID]learnedAddrs // the addresses last learned for each peer, to skip repeats
	waiters    map[uint64]chan overlay.Result
	completed  []completion        // results of this step, handed to their waiters once it is durable
	starting   chan overlay.Result // the waiter of the request being started (it may complete at once)
	senders    map[overlay.NodeID]*sender
	balancing  bool
	onLeft     []chan struct{}
	closeOnce  sync.Once

	// writtenBound is the persisted bound on when the store last took a value
	// (storeWrittenMeta); restoredBound the one a restart found.
	writtenBound  time.Time
	restoredBound time.Time

	metrics *metrics
	stats   counters
}

type outMsg struct {
	to overlay.NodeID
	m  *pb.Envelope
}

// counters are updated from many goroutines.
type counters struct {
	framesIn, framesOut, badFrames, badProtocol, dropped, sendErrors atomic.Uint64
}

// Start creates the host and the node and puts the node in the overlay: restored from its
// snapshot, joined through the bootstrap peers, or, with NewNetwork, as the first node. It
// returns once the node is started, not once it has joined: Joined and the node's events tell.
func Start(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Identity == nil {
		return nil, errors.New("p2p: no identity key")
	}
	if cfg.Store == nil {
		return nil, errors.New("p2p: no store")
	}
	if err := checkFits(cfg.Node); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.ClientTimeout = orDefault(cfg.ClientTimeout, 30*time.Second)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, 10*time.Second)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, 2*time.Minute)
	cfg.RingCheck = ringCheckPeriod(cfg.RingCheck)
	if len(cfg.ListenAddrs) == 0 {
		cfg.ListenAddrs = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	}
	h, kad, err := newHost(hostConfig{identity: cfg.Identity, listenAddrs: cfg.ListenAddrs, bootstrap: cfg.Bootstrap, registerer: cfg.Registerer, gater: cfg.Gater})
	if err != nil {
		return nil, err
	}
	var seed [16]byte
	_, _ = crand.Read(seed[:])
	rctx, cancel := context.WithCancel(context.Background())
	r := &Runtime{
		cfg: cfg, log: cfg.Logger, host: routedhost.Wrap(h, kad), kad: kad, store: cfg.Store,
		self:   overlay.NodeID(h.ID()),
		rng:    rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))),
		events: make(chan func(), 4096), stop: make(chan struct{}), done: make(chan struct{}),
		ctx: rctx, cancel: cancel,
		protected: map[peer.ID]bool{}, learned: map[peer.ID]learnedAddrs{},
		waiters: map[uint64]chan overlay.Result{},
		senders: map[overlay.NodeID]*sender{},
	}
	r.meta, _ = cfg.Store.(MetaStore)
	r.syncer, _ = cfg.Store.(syncer)
	r.log = r.log.With(zap.String("node", h.ID().String()))
	fail := func(err error) (*Runtime, error) {
		cancel()
		_ = kad.Close()
		_ = h.Close()
		return nil, err
	}
	nd, err := node.New(r, cfg.Store, r.self, cfg.Node)
	if err != nil {
		return fail(err)
	}
	r.node = nd
	nd.SetAddrs(r.addrBytes())
	if cfg.Registerer != nil {
		if r.metrics, err = newMetrics(r, cfg.Registerer); err != nil {
			return fail(err)
		}
	}
	snap, err := r.loadSnapshot()
	if err != nil {
		return fail(err)
	}
	// Handlers go up before the node enters the overlay, so that no answer is missed; messages
	// wait in the event queue until the loop runs.
	h.SetStreamHandler(OverlayProtocol, r.handleOverlay)
	h.SetStreamHandler(ClientProtocol, r.handleClient)
	h.SetStreamHandlerMatch("/skiprange/unknown", isUnknownSkiprangeProtocol, r.handleUnknown)

	reached := 0
	dialWait := 10 * time.Second
	if cfg.NewNetwork {
		dialWait = 3 * time.Second // a seed asks briefly: on a first start nobody is there
	}
	for _, b := range cfg.Bootstrap {
		cctx, ccancel := context.WithTimeout(ctx, dialWait)
		err := r.host.Connect(cctx, b)
		ccancel()
		if err != nil {
			r.log.Warn("bootstrap peer unreachable", zap.String("peer", b.ID.String()), zap.Error(err))
			continue
		}
		if cfg.NewNetwork && !r.inOverlay(ctx, b.ID, dialWait) {
			// A seed counts only a peer that is in an overlay: peers started with it answer
			// too while they are still joining through it, and a seed that joined them
			// waited with them for ever (the docker chaos test's start, once: all eight
			// nodes joining, none the first).
			r.log.Info("bootstrap peer is not in an overlay", zap.String("peer", b.ID.String()))
			continue
		}
		reached++
	}
	var enter func() error
	switch {
	case snap != nil:
		enter = func() error {
			if err := nd.Restore(snap); err != nil {
				return err
			}
			if !r.restoredBound.IsZero() {
				nd.RestoreStoreWritten(r.restoredBound)
			}
			return nil
		}
	case cfg.NewNetwork && reached == 0 && (len(cfg.Bootstrap) == 0 || !r.wasMember()):
		// A seed node: it starts the overlay unless a bootstrap peer answers — then an overlay
		// exists (the seed restarted after a graceful leave) and it joins it. A seed with
		// bootstrap peers that was a member before joins them in any case, retrying until one
		// answers.
		enter = nd.Bootstrap
	case len(cfg.Bootstrap) > 0:
		position := r.joinPosition()
		intro := make([]overlay.NodeID, 0, len(cfg.Bootstrap))
		for _, b := range cfg.Bootstrap {
			intro = append(intro, overlay.NodeID(b.ID))
		}
		enter = func() error { return nd.Join(intro[0], position, intro[1:]...) }
	default:
		return fail(errors.New("no bootstrap peers and no saved state: give bootstrap peers to join a network, or start a new one"))
	}
	go r.loop()
	if err := r.call(ctx, enter); err != nil {
		r.Close()
		return nil, err
	}
	if cfg.Network != "" {
		r.wg.Add(1)
		go r.rendezvous()
	}
	return r, nil
}

// inOverlay asks peer id for its status over the client protocol and reports whether it owns a
// range of an overlay. No answer within wait (its event loop may not run yet) counts as no.
func (r *Runtime) inOverlay(ctx context.Context, id peer.ID, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	s, err := r.host.NewStream(ctx, id, ClientProtocol)
	if err != nil {
		return false
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	req := &pb.ClientRequest{Version: ClientVersion, Op: pb.ClientOp_CLIENT_OP_STATUS}
	if err := NewFrameWriter(s).WriteMsg(req); err != nil {
		return false
	}
	var rep pb.ClientReply
	if err := NewFrameReader(s).ReadMsg(&rep); err != nil {
		return false
	}
	return rep.GetNode().GetRange() != nil
}

// ringCheckPeriod is Config.RingCheck as the rendezvous loop reads it: 10 minutes for zero, 0
// (no checks) for a negative period. (orDefault turned a negative one, skipnode's
// --ring-check 0, into the default.)
func ringCheckPeriod(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return 10 * time.Minute
	case d < 0:
		return 0
	}
	return d
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (r *Runtime) joinPosition() overlay.Key {
	if r.cfg.JoinAt != nil {
		return *r.cfg.JoinAt
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], r.rng.Uint64())
	return overlay.Key(b[:])
}

// addrBytes returns the host's listen addresses in wire form.
func (r *Runtime) addrBytes() [][]byte {
	var out [][]byte
	for _, a := range r.host.Addrs() {
		out = append(out, a.Bytes())
	}
	return out
}

// ID returns the node's peer ID.
func (r *Runtime) ID() peer.ID { return peer.ID(r.self) }

// Host returns the libp2p host.
func (r *Runtime) Host() host.Host { return r.host }

// AddrInfo returns the node's peer ID and listen addresses: what others need to reach it.
func (r *Runtime) AddrInfo() peer.AddrInfo {
	return peer.AddrInfo{ID: r.host.ID(), Addrs: r.host.Addrs()}
}

// loop is the node's one goroutine: it runs each step, then persists the snapshot if it changed,
// and only then lets the step's messages go — a peer never hears of a state this node could
// forget by crashing.
func (r *Runtime) loop() {
	defer close(r.done)
	for {
		if len(r.local) > 0 {
			m := r.local[0]
			r.local = r.local[1:]
			r.beforeStep()
			r.node.Handle(r.self, m.m)
			r.afterStep()
			continue
		}
		select {
		case fn := <-r.events:
			r.beforeStep()
			fn()
			r.afterStep()
		case <-r.stop:
			r.persistSnapshot(true) // the recent deletes not yet written
			return
		}
	}
}

// post queues fn to run on the loop. It blocks while the queue is full (back-pressure on the
// streams that feed it) and gives up once the runtime stops.
func (r *Runtime) post(fn func()) bool {
	select {
	case r.events <- fn:
		return true
	case <-r.stop:
		return false
	}
}

// call runs fn on the loop and waits for its error.
func (r *Runtime) call(ctx context.Context, fn func() error) error {
	errc := make(chan error, 1)
	if !r.post(func() { errc <- fn() }) {
		return errStopped
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stop:
		return errStopped
	}
}

var errStopped = errors.New("node stopped")

// beforeStep renews the persisted bound on the store's last write (storeWrittenMeta) when the
// step could pass it: synced before any item of the step, it stays ahead of every item a crash
// leaves on disk.
func (r *Runtime) beforeStep() {
	now := r.Now()
	if r.meta == nil || now.Add(storeWrittenRenew).Before(r.writtenBound) {
		return
	}
	bound := now.Add(StoreWrittenLease)
	if err := r.meta.SetMeta(storeWrittenMeta, binary.BigEndian.AppendUint64(nil, uint64(bound.UnixNano()))); err != nil {
		r.log.Error("persist the store's write bound: after a restart, writes made while this node was down may not replace its copies", zap.Error(err))
		return
	}
	r.writtenBound = bound
}

func (r *Runtime) afterStep() {
	r.persistSnapshot(false)
	if !r.member && r.meta != nil && r.node.Owns() {
		if err := r.meta.SetMeta(memberMeta, []byte{1}); err != nil {
			r.log.Error("persist membership: a restart with --new-network could start a second overlay", zap.Error(err))
		} else {
			r.member = true
		}
	}
	if r.syncer != nil {
		// A write this step acknowledges must survive a crash of the process (kill -9 loses
		// unsynced Pebble writes): one sync per step that wrote, before any answer goes out.
		if err := r.syncer.Sync(); err != nil {
			r.log.Error("sync the store: writes of this step may be lost in a crash", zap.Error(err))
		}
	}
	for _, c := range r.completed {
		c.to <- c.res
	}
	r.completed = r.completed[:0]
	r.protectNeighbours()
	if len(r.onLeft) > 0 && r.node.HandedOver() {
		for _, ch := range r.onLeft {
			close(ch)
		}
		r.onLeft = nil
	}
	if !r.balancing && !r.cfg.HoldBalancing && r.node.Owns() {
		r.balancing = true
		r.node.Balancer.Start()
	}
	out := r.outbox
	r.outbox = nil
	for _, o := range out {
		if o.to == r.self {
			r.local = append(r.local, o)
			continue
		}
		r.sendTo(o.to, o.m)
	}
}

// persistSnapshot writes the node's snapshot when it changed — for its recent deletes alone,
// only recentDeletesEvery at most, unless final (the runtime stops). A failed write is logged
// loudly: the node keeps running, but a restart would not find its place.
func (r *Runtime) persistSnapshot(final bool) {
	if r.meta == nil {
		return
	}
	// Every step compares the snapshot without its tombstones, which can be many (deletes in
	// lost parts and in pieces handed off lately) and change rarely: their version says when
	// they did. The recent deletes likewise, which change with every delete.
	encode := proto.MarshalOptions{Deterministic: true}.Marshal
	tombs := r.node.TombstoneVersion()
	recentVersion := r.node.RecentDeleteVersion()
	now := r.Now()
	s := r.node.Snapshot()
	var raw []byte
	var err error
	if s != nil {
		all := s.Tombstones
		s.Tombstones = nil
		raw, err = encode(s)
		s.Tombstones = all
	}
	recentDue := recentVersion != r.lastRecent && (final || !now.Before(r.recentAt.Add(recentDeletesEvery)))
	if err == nil && string(raw) == string(r.lastSnap) && tombs == r.lastTombs && !recentDue {
		return
	}
	full := raw
	if s != nil {
		s.RecentDeletes = r.node.RecentDeletes()
	}
	if err == nil && (len(s.GetTombstones()) > 0 || len(s.GetRecentDeletes()) > 0) {
		full, err = encode(s)
	}
	if err != nil {
		r.log.Error("encode snapshot", zap.Error(err))
		return
	}
	if err := r.meta.SetMeta(snapshotMeta, full); err != nil {
		r.log.Error("persist snapshot: a restart would not restore this node's place", zap.Error(err))
		return
	}
	r.lastSnap, r.lastTombs, r.lastRecent, r.recentAt = raw, tombs, recentVersion, now
}

// wasMember reports whether this data directory's node has owned a range before (a seed that
// left gracefully and restarts must join the overlay that exists, not start another when its
// bootstrap peers do not answer at once: the chaos test saw a restarted seed answer "not found"
// for acknowledged keys from a second, empty overlay).
func (r *Runtime) wasMember() bool {
	if r.meta == nil {
		return false
	}
	v, ok, err := r.meta.GetMeta(memberMeta)
	r.member = err == nil && ok && len(v) > 0
	return r.member
}

func (r *Runtime) loadSnapshot() (*pb.NodeSnapshot, error) {
	if r.meta == nil {
		return nil, nil
	}
	raw, ok, err := r.meta.GetMeta(snapshotMeta)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if !ok || len(raw) == 0 {
		return nil, nil
	}
	s := new(pb.NodeSnapshot)
	if err := proto.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("snapshot is corrupt (remove the data directory to start as a new node): %w", err)
	}
	if v, ok, err := r.meta.GetMeta(storeWrittenMeta); err == nil && ok && len(v) == 8 {
		r.restoredBound = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	}
	return s, nil // lastSnap stays empty: the first step writes the snapshot again
}

// protectNeighbours keeps the connections to the node's neighbours on every level out of the
// connection manager's trimming.
func (r *Runtime) protectNeighbours() {
	want := map[peer.ID]bool{}
	for l := 0; l < r.node.Height(); l++ {
		p, s := r.node.Neighbors(l)
		for _, x := range []overlay.Peer{p, s} {
			if !x.IsZero() && x.ID != r.self {
				want[peer.ID(x.ID)] = true
			}
		}
	}
	cm := r.host.ConnManager()
	for id := range r.protected {
		if !want[id] {
			cm.Unprotect(id, "skiprange-neighbour")
			delete(r.protected, id)
		}
	}
	for id := range want {
		if !r.protected[id] {
			cm.Protect(id, "skiprange-neighbour")
			r.protected[id] = true
		}
	}
}

// rendezvous advertises the network's name on the DHT and, while the node has not joined,
// looks there every two seconds for more introducers (its bootstrap peers may be DHT nodes
// only, or gone). While the node is alone — every node it knew failed or was unreachable, as
// after a partition — it names the nodes found there and its bootstrap peers to the node, which
// calls on them: one that answers merges the rings again. While it serves a range in a ring,
// it gives the node one of them at random to cross-check now and then (Config.RingCheck).
func (r *Runtime) rendezvous() {
	defer r.wg.Done()
	disc := drouting.NewRoutingDiscovery(r.kad)
	ns := "skiprange/" + r.cfg.Network
	dutil.Advertise(r.ctx, disc, ns)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	nextCheck := time.Now().Add(jittered(r.cfg.RingCheck))
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		var joining, alone bool
		if r.call(r.ctx, func() error {
			joining, alone = r.node.State() == skipgraph.StateJoining, r.node.Alone()
			return nil
		}) != nil {
			return
		}
		checkRing := !joining && !alone && r.cfg.RingCheck > 0 && time.Now().After(nextCheck)
		if !joining && !alone && !checkRing {
			continue
		}
		ids, err := r.findPeers(disc, ns)
		switch {
		case joining:
			if err == nil {
				r.post(func() { r.node.AddIntroducers(ids...) })
			}
		case checkRing:
			nextCheck = time.Now().Add(jittered(r.cfg.RingCheck))
			if len(ids) > 0 {
				id := ids[rand.IntN(len(ids))]
				r.post(func() { r.node.CrossCheck(id) })
			}
		default:
			for _, b := range r.cfg.Bootstrap {
				if b.ID != r.host.ID() {
					r.host.Peerstore().AddAddrs(b.ID, b.Addrs, time.Hour)
					ids = append(ids, overlay.NodeID(b.ID))
				}
			}
			r.post(func() {
				for _, id := range ids {
					r.node.Rediscover(id)
				}
			})
		}
	}
}

// findPeers returns the other nodes advertised on the DHT under ns, their addresses added to the
// peer store, and the lookup's error (after 10 s at most; the peers found by then are returned).
func (r *Runtime) findPeers(disc *drouting.RoutingDiscovery, ns string) ([]overlay.NodeID, error) {
	fctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	found, err := dutil.FindPeers(fctx, disc, ns)
	var ids []overlay.NodeID
	for _, p := range found {
		if p.ID != r.host.ID() {
			r.host.Peerstore().AddAddrs(p.ID, p.Addrs, time.Hour)
			ids = append(ids, overlay.NodeID(p.ID))
		}
	}
	return ids, err
}

// jittered returns d scaled by a random factor in [0.5, 1.5), so that nodes started together
// do not all look at once (d itself when it is not positive).
func jittered(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// Leave hands the node's range over to its neighbour and waits until the neighbour confirmed
// it (or ctx ends), then closes the runtime: the node does not linger to forward stray messages,
// whose senders retry and find the new owner.
func (r *Runtime) Leave(ctx context.Context) error {
	left := make(chan struct{})
	err := r.call(ctx, func() error {
		if err := r.node.Leave(); err != nil {
			return err
		}
		r.onLeft = append(r.onLeft, left)
		return nil
	})
	if err == nil {
		select {
		case <-left:
		case <-ctx.Done():
			err = fmt.Errorf("leave did not complete: %w", ctx.Err())
		}
	}
	r.Close()
	return err
}

// Close stops the node at once, without leaving: to the others it is a crash. Its snapshot and
// store stay, so a new runtime over the same data directory takes its place back.
func (r *Runtime) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.cancel()
		<-r.done
		r.wg.Wait()
		for _, s := range r.senders {
			s.close()
		}
		_ = r.kad.Close()
		_ = r.host.Close()
		if r.metrics != nil {
			r.metrics.unregister()
		}
	})
}

// Env implementation. The node calls these from the loop goroutine only.

func (r *Runtime) Now() time.Time { return time.Now() }

func (r *Runtime) Send(to overlay.NodeID, m *pb.Envelope) {
	r.outbox = append(r.outbox, outMsg{to: to, m: m})
}

func (r *Runtime) SetTimer(after time.Duration, t overlay.Timer) {
	time.AfterFunc(after, func() { r.post(func() { r.node.HandleTimer(t) }) })
}

func (r *Runtime) Rand() *rand.Rand { return r.rng }

func (r *Runtime) Logger() *zap.Logger { return r.log }

// completion is a result waiting for the end of its step.
type completion struct {
	to  chan overlay.Result // buffered: the send never blocks
	res overlay.Result
}

func (r *Runtime) Complete(res overlay.Result) {
	if ch, ok := r.waiters[res.ReqID]; ok {
		delete(r.waiters, res.ReqID)
		r.completed = append(r.completed, completion{ch, res})
		return
	}
	if r.starting != nil {
		r.completed = append(r.completed, completion{r.starting, res})
		r.starting = nil
	}
	// Otherwise nobody waits: the request was started through Do, or its waiter gave up.
}

func (r *Runtime) Report(e overlay.Event) {
	fields := []zap.Field{zap.String("range", e.Range.String()), zap.String("detail", e.Detail)}
	if e.Kind == overlay.EventRangeLost {
		fields = append(fields, zap.Int("items_lost", e.Items))
	}
	if e.Peer != "" {
		fields = append(fields, zap.Stringer("peer", peer.ID(e.Peer)))
	}
	switch e.Kind {
	case overlay.EventRangeLost:
		r.log.Error("RANGE LOST: items there were held only by a failed node and are gone", fields...)
	case overlay.EventInvalidMessage:
		r.log.Warn("invalid message rejected", fields...)
	case overlay.EventConflict:
		r.log.Warn("conflicting view of the ring", fields...)
	case overlay.EventJoined:
		r.log.Info("joined: owns a range", fields...)
	case overlay.EventLeft:
		r.log.Info("left: done forwarding", fields...)
	}
	if r.metrics != nil {
		r.metrics.event(e.Kind)
	}
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// Request starts an operation on the node (a Get, Put, Scan… returning its request id) and
// waits for its result: the in-process equivalent of a client request.
func (r *Runtime) Request(ctx context.Context, start func(n *node.Node) uint64) (overlay.Result, error) {
	ch := make(chan overlay.Result, 1)
	var id uint64
	err := r.call(ctx, func() error {
		r.starting = ch
		id = start(r.node)
		if r.starting != nil { // not completed at once
			r.starting = nil
			r.waiters[id] = ch
		}
		return nil
	})
	if err != nil {
		return overlay.Result{}, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		r.post(func() { delete(r.waiters, id) })
		return overlay.Result{}, ctx.Err()
	case <-r.stop:
		return overlay.Result{}, errStopped
	}
}

// StartBalancing starts the node's balancer if it is not running (see Config.HoldBalancing).
func (r *Runtime) StartBalancing(ctx context.Context) error {
	return r.call(ctx, func() error {
		r.cfg.HoldBalancing, r.balancing = false, true
		r.node.Balancer.Start()
		return nil
	})
}

// Do runs fn on the node's goroutine and waits for it: the way tests, tools and the daemon read
// or drive the node without racing its loop.
func (r *Runtime) Do(ctx context.Context, fn func(n *node.Node)) error {
	return r.call(ctx, func() error { fn(r.node); return nil })
}
