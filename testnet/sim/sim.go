package sim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// Config describes the simulated network.
type Config struct {
	Seed uint64
	// Latency is the delay of one hop (the thesis's time unit: 1 s of simulated time).
	Latency time.Duration
	// Jitter adds a uniform random delay in [0, Jitter) to each message.
	Jitter time.Duration
	// Loss is the probability that a message is dropped.
	Loss float64
	// Node is the protocol configuration of every node, unless NodeConfig is set.
	Node node.Config
	// NodeConfig, when not nil, gives the node added index-th (from 0, in the order of Add) its
	// own configuration, which it keeps when it restarts: heterogeneous nodes (BalanceParams.
	// Thresholds).
	NodeConfig func(index int) node.Config
	// Marshal sends every message through protobuf encoding, as the wire would: slower, and it
	// catches code that shares or mutates sent messages.
	Marshal bool
	// Logger receives the nodes' logs; nil means none.
	Logger *zap.Logger
	// Rendezvous, when positive, is the period at which a node that is alone (every node it
	// knew failed) is given a random live node to call on, as the libp2p runtime's rendezvous
	// through the DHT does (overlay/p2p): without it, a node whose every link and remembered
	// peer crashed at once (30% of 500 nodes) held the whole circle for ever beside the ring.
	Rendezvous time.Duration
	// RingCheck, when positive, is how often on average each node serving a range is given
	// another such node at random to cross-check (Node.CrossCheck), as the libp2p runtime gives
	// it one found through the DHT: rings that formed apart during a cut longer than a day, the
	// time a node calls on the successors it declared dead, merge through it.
	RingCheck time.Duration
	// Refuse: a message to a node that is not running is refused, as a dial to a process that
	// died is, and its sender is told a round trip later (Node.Undeliverable, which the libp2p
	// runtime calls when a dial fails). Off, such a message is lost without a word, as to a host
	// that went away with its network; the faults tables were measured so.
	Refuse bool
}

// FitTimeouts raises the nodes' probe timeout to the longest round trip plus one hop, so that
// latency and jitter alone never make a healthy node look dead.
func (c *Config) FitTimeouts() {
	if min := 2*(c.Latency+c.Jitter) + c.Latency; c.Node.SkipGraph.ProbeTimeout < min {
		c.Node.SkipGraph.ProbeTimeout = min
	}
}

// DefaultConfig returns a lossless network with one time unit per hop.
func DefaultConfig() Config {
	return Config{Seed: 1, Latency: time.Second, Node: node.DefaultConfig(), Rendezvous: 10 * time.Second, RingCheck: 10 * time.Minute}
}

// Network is a simulated network of nodes.
type Network struct {
	cfg    Config
	epoch  time.Time
	now    time.Duration
	agenda schedule
	seq    uint64
	rng    *rand.Rand
	// ringRng draws the ring checks (Config.RingCheck) apart from rng, whose draws (loss,
	// jitter, the workloads') stay as they were without them.
	ringRng *rand.Rand
	nodes   map[overlay.NodeID]*simNode
	order   []*simNode // creation order, for deterministic iteration
	groups  map[overlay.NodeID]int
	log     *zap.Logger

	// OnResult receives the results of client requests (as events of their own, after the call
	// that started them returns); OnEvent receives the nodes' reported events.
	OnResult func(at overlay.NodeID, r overlay.Result)
	OnEvent  func(at overlay.NodeID, e overlay.Event)
	// OnDeliver sees every message just before its receiver handles it (tests that check the
	// order of a protocol's steps read it).
	OnDeliver func(to, from overlay.NodeID, m *pb.Envelope)

	Stats Stats

	retired [skipgraph.NumCauses]uint64 // messages sent by nodes since restarted
}

// SentByCause sums, over every node that ever ran, the messages sent for each pb.Cause.
func (nw *Network) SentByCause() [skipgraph.NumCauses]uint64 {
	total := nw.retired
	for _, s := range nw.order {
		for c, v := range s.node.Stats.Sent {
			total[c] += v
		}
	}
	return total
}

// Stats counts the network's traffic.
type Stats struct {
	Delivered uint64
	Dropped   uint64 // lost, partitioned, or addressed to a dead node
	Sent      [numKinds]uint64
	Bytes     uint64 // encoded bytes, when Config.Marshal is on
	Events    uint64
}

// simNode is a node slot: the node, its store and environment, and whether it runs.
type simNode struct {
	id          overlay.NodeID
	index       uint64
	node        *node.Node
	store       overlay.Store
	env         *env
	alive       bool
	gone        bool // left gracefully
	incarnation uint32
	// crashedItems is what the node held when it crashed (for loss accounting).
	crashedItems int
	// paused nodes are frozen (Pause): held are their timers and the messages sent to them,
	// in arrival order, for when they resume.
	paused bool
	held   []event
}

// New creates an empty network.
func New(cfg Config) (*Network, error) {
	if cfg.Latency <= 0 {
		return nil, fmt.Errorf("latency must be positive")
	}
	if cfg.Jitter < 0 || cfg.Loss < 0 || cfg.Loss >= 1 {
		return nil, fmt.Errorf("jitter must be >= 0 and loss in [0, 1)")
	}
	if err := cfg.Node.SkipGraph.Validate(); err != nil {
		return nil, err
	}
	if rtt := 2 * (cfg.Latency + cfg.Jitter); cfg.Node.SkipGraph.ProbeTimeout < rtt {
		return nil, fmt.Errorf("probe timeout %s is shorter than the longest round trip %s: healthy nodes would be declared dead (see Config.FitTimeouts)", cfg.Node.SkipGraph.ProbeTimeout, rtt)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	nw := &Network{
		cfg:     cfg,
		epoch:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		ringRng: rand.New(rand.NewPCG(cfg.Seed, 0x21c6)),
		nodes:   map[overlay.NodeID]*simNode{},
		groups:  map[overlay.NodeID]int{},
		log:     log,
	}
	if cfg.Rendezvous > 0 {
		nw.At(cfg.Rendezvous, nw.rendezvous)
	}
	if cfg.RingCheck > 0 {
		nw.At(ringCheckTick, nw.ringChecks)
	}
	return nw, nil
}

// ringCheckTick is the period at which the simulator draws the ring checks of Config.RingCheck.
const ringCheckTick = 10 * time.Second

// ringChecks gives each running, unpaused node serving a range, with the probability that
// makes one check per Config.RingCheck on average, another such node at random to cross-check;
// and comes again after ringCheckTick.
func (nw *Network) ringChecks() {
	defer nw.At(nw.now+ringCheckTick, nw.ringChecks)
	var owners []*simNode
	for _, s := range nw.order {
		if s.alive && !s.paused && s.node.Owns() {
			owners = append(owners, s)
		}
	}
	if len(owners) < 2 {
		return
	}
	p := float64(ringCheckTick) / float64(nw.cfg.RingCheck)
	for _, s := range owners {
		if nw.ringRng.Float64() >= p {
			continue
		}
		other := owners[nw.ringRng.IntN(len(owners)-1)]
		if other == s {
			other = owners[len(owners)-1]
		}
		s.node.CrossCheck(other.id)
	}
}

// rendezvous gives every running node that is alone a random other node that runs and owns a
// range (Config.Rendezvous), and comes again after the period.
func (nw *Network) rendezvous() {
	defer nw.At(nw.now+nw.cfg.Rendezvous, nw.rendezvous)
	var alone []*simNode
	for _, s := range nw.order {
		if s.alive && s.node.Alone() {
			alone = append(alone, s)
		}
	}
	if len(alone) == 0 {
		return
	}
	var owners []*simNode
	for _, s := range nw.order {
		if s.alive && s.node.Owns() {
			owners = append(owners, s)
		}
	}
	for _, s := range alone {
		if len(owners) < 2 {
			break
		}
		other := owners[nw.rng.IntN(len(owners))]
		for other == s {
			other = owners[nw.rng.IntN(len(owners))]
		}
		s.node.Rediscover(other.id)
	}
}

// Now returns the virtual time elapsed since the start.
func (nw *Network) Now() time.Duration { return nw.now }

// Add creates a node with identity id and an empty in-memory store. It does nothing until
// Bootstrap or Join is called on it.
func (nw *Network) Add(id overlay.NodeID) (*node.Node, error) {
	if _, ok := nw.nodes[id]; ok {
		return nil, fmt.Errorf("node %s exists", id)
	}
	s := &simNode{id: id, index: uint64(len(nw.order))}
	nw.nodes[id] = s
	nw.order = append(nw.order, s)
	return nw.start(s)
}

func (nw *Network) start(s *simNode) (*node.Node, error) {
	if s.node != nil {
		for c, v := range s.node.Stats.Sent {
			nw.retired[c] += v
		}
	}
	h := fnv.New64a()
	h.Write([]byte(s.id))
	s.incarnation++
	s.env = &env{nw: nw, node: s, incarnation: s.incarnation,
		rng: rand.New(rand.NewPCG(nw.cfg.Seed^h.Sum64(), uint64(s.incarnation))),
		log: nw.log.With(zap.String("node", string(s.id)))}
	s.store = store.NewMemory()
	cfg := nw.cfg.Node
	if nw.cfg.NodeConfig != nil {
		cfg = nw.cfg.NodeConfig(int(s.index))
	}
	n, err := node.New(s.env, s.store, s.id, cfg)
	if err != nil {
		return nil, err
	}
	s.node, s.alive, s.gone = n, true, false
	return n, nil
}

// Node returns the node with identity id (nil if unknown).
func (nw *Network) Node(id overlay.NodeID) *node.Node {
	if s := nw.nodes[id]; s != nil {
		return s.node
	}
	return nil
}

// Alive reports whether node id runs.
func (nw *Network) Alive(id overlay.NodeID) bool {
	s := nw.nodes[id]
	return s != nil && s.alive
}

// Live returns the running nodes in creation order.
func (nw *Network) Live() []*node.Node {
	var out []*node.Node
	for _, s := range nw.order {
		if s.alive {
			out = append(out, s.node)
		}
	}
	return out
}

// Crash stops node id at once: no leave, pending messages to it are lost. It returns how many
// items the node held.
func (nw *Network) Crash(id overlay.NodeID) (int, error) {
	s := nw.nodes[id]
	if s == nil || !s.alive {
		return 0, fmt.Errorf("node %s is not running", id)
	}
	s.alive, s.paused, s.held = false, false, nil
	s.incarnation++ // outstanding timers and messages of the old incarnation die with it
	s.crashedItems = s.store.Len()
	return s.crashedItems, nil
}

// Restart brings a crashed node back under its identity with an empty store and a new
// incarnation; it rejoins through the introducers at position. Its old items were counted lost
// at the crash.
func (nw *Network) Restart(id overlay.NodeID, position overlay.Key, introducer overlay.NodeID, others ...overlay.NodeID) error {
	s := nw.nodes[id]
	if s == nil || s.alive {
		return fmt.Errorf("node %s is not crashed", id)
	}
	n, err := nw.start(s)
	if err != nil {
		return err
	}
	return n.Join(introducer, position, others...)
}

// Pause freezes node id as a SIGSTOP freezes a process: none of its timers fire and nothing is
// delivered to it, while what is sent to it waits (a connection's buffers) and its timers stay
// due. Resume lets it go on.
func (nw *Network) Pause(id overlay.NodeID) error {
	s := nw.nodes[id]
	if s == nil || !s.alive || s.paused {
		return fmt.Errorf("node %s is not running or already paused", id)
	}
	s.paused = true
	return nil
}

// Resume unfreezes a paused node: the timers that fell due meanwhile fire and the messages held
// for it arrive at once, in the order they came, as after a SIGCONT.
func (nw *Network) Resume(id overlay.NodeID) error {
	s := nw.nodes[id]
	if s == nil || !s.paused {
		return fmt.Errorf("node %s is not paused", id)
	}
	s.paused = false
	for _, e := range s.held {
		e.at = nw.now
		nw.schedule(e)
	}
	s.held = nil
	return nil
}

// Paused reports whether node id is paused.
func (nw *Network) Paused(id overlay.NodeID) bool {
	s := nw.nodes[id]
	return s != nil && s.paused
}

// Partition puts nodes in numbered groups; messages between different groups are dropped.
// Nodes not named are in group 0. Heal removes every partition.
func (nw *Network) Partition(groups map[overlay.NodeID]int) {
	nw.groups = groups
}

// Heal ends all partitions.
func (nw *Network) Heal() { nw.groups = map[overlay.NodeID]int{} }

// partitioned reports whether a and b are in different groups. Without a partition, the common
// case, it looks nothing up: it runs twice for every message.
func (nw *Network) partitioned(a, b overlay.NodeID) bool {
	return len(nw.groups) > 0 && nw.groups[a] != nw.groups[b]
}

// At schedules fn to run at virtual time t (or now, if t has passed).
func (nw *Network) At(t time.Duration, fn func()) {
	nw.schedule(event{at: max(t, nw.now), call: fn})
}

func (nw *Network) schedule(e event) {
	nw.seq++
	e.seq = nw.seq
	nw.agenda.heap.push(e)
}

// scheduleMessage queues a message delivery: under a fixed latency every delivery falls after
// the ones already queued, so it can skip the heap.
func (nw *Network) scheduleMessage(e event) {
	if nw.cfg.Jitter > 0 {
		nw.schedule(e)
		return
	}
	nw.seq++
	e.seq = nw.seq
	nw.agenda.fifo.push(e)
}

// RunUntil processes events up to virtual time t; the clock ends at t.
func (nw *Network) RunUntil(t time.Duration) {
	for nw.agenda.len() > 0 && nw.agenda.next().at <= t {
		nw.step()
	}
	nw.now = max(nw.now, t)
}

// RunFor processes events for d of virtual time.
func (nw *Network) RunFor(d time.Duration) { nw.RunUntil(nw.now + d) }

// RunWhile processes events while cond holds and virtual time stays at most limit. It reports
// whether cond became false.
func (nw *Network) RunWhile(cond func() bool, limit time.Duration) bool {
	for cond() {
		if nw.agenda.len() == 0 || nw.agenda.next().at > limit {
			nw.now = max(nw.now, limit)
			return !cond()
		}
		nw.step()
	}
	return true
}

func (nw *Network) step() {
	e := nw.agenda.pop()
	nw.now = e.at
	nw.Stats.Events++
	if e.call != nil {
		e.call()
		return
	}
	s := e.to
	if !s.alive || s.incarnation != e.incarnation {
		if e.msg != nil {
			nw.Stats.Dropped++
		}
		return
	}
	if e.msg != nil && nw.partitioned(e.from, s.id) {
		nw.Stats.Dropped++
		return
	}
	if s.paused {
		s.held = append(s.held, e)
		return
	}
	if e.msg == nil {
		s.node.HandleTimer(e.timer)
		return
	}
	nw.Stats.Delivered++
	if nw.OnDeliver != nil {
		nw.OnDeliver(s.id, e.from, e.msg)
	}
	s.node.Handle(e.from, e.msg)
}

func (nw *Network) send(from *simNode, to overlay.NodeID, m *pb.Envelope) {
	nw.Stats.Sent[kindOf(m)]++
	if nw.cfg.Marshal {
		buf, err := proto.Marshal(m)
		if err != nil {
			panic(fmt.Sprintf("sim: marshal %T: %v", m.Body, err)) // a protocol bug, not input
		}
		nw.Stats.Bytes += uint64(len(buf))
		m = &pb.Envelope{}
		if err := proto.Unmarshal(buf, m); err != nil {
			panic(fmt.Sprintf("sim: unmarshal: %v", err))
		}
	}
	dst := nw.nodes[to]
	if dst != nil && !dst.alive && nw.cfg.Refuse {
		nw.Stats.Dropped++
		nw.refused(from, to, m)
		return
	}
	if dst == nil || !dst.alive || (nw.cfg.Loss > 0 && nw.rng.Float64() < nw.cfg.Loss) || nw.partitioned(from.id, to) {
		nw.Stats.Dropped++
		return
	}
	delay := nw.cfg.Latency
	if nw.cfg.Jitter > 0 {
		delay += time.Duration(nw.rng.Int64N(int64(nw.cfg.Jitter)))
	}
	nw.scheduleMessage(event{at: nw.now + delay, to: dst, incarnation: dst.incarnation, from: from.id, msg: m})
}

// refused tells from, a round trip later, that m could not be handed to to (Config.Refuse) —
// unless from stopped or is paused by then (its runtime would not be told).
func (nw *Network) refused(from *simNode, to overlay.NodeID, m *pb.Envelope) {
	incarnation := from.incarnation
	nw.At(nw.now+2*nw.cfg.Latency, func() {
		if from.alive && !from.paused && from.incarnation == incarnation {
			from.node.Undeliverable(to, m)
		}
	})
}

// owners returns the running nodes that own a range, sorted by range start.
func (nw *Network) owners() []*simNode {
	type owner struct {
		start overlay.Key
		s     *simNode
	}
	var byStart []owner // starts read once: sorting 50,000 nodes by Self() reads each many times
	for _, s := range nw.order {
		if s.alive && s.node.Owns() {
			byStart = append(byStart, owner{s.node.Self().Start, s})
		}
	}
	slices.SortStableFunc(byStart, func(a, b owner) int { return cmp.Compare(a.start, b.start) })
	out := make([]*simNode, len(byStart))
	for i, o := range byStart {
		out[i] = o.s
	}
	return out
}

// Owner returns the node whose range contains k, by global knowledge (for checks).
func (nw *Network) Owner(k overlay.Key) *node.Node {
	owners := nw.owners()
	if len(owners) == 0 {
		return nil
	}
	return ownerIn(owners, k).node
}

// ownerIn finds the owner of k among owners sorted by start.
func ownerIn(owners []*simNode, k overlay.Key) *simNode {
	i := sort.Search(len(owners), func(i int) bool { return owners[i].node.Self().Start > k })
	if i == 0 {
		return owners[len(owners)-1] // the seam owner holds the keys below the first start
	}
	return owners[i-1]
}

// env is one node's overlay.Env.
type env struct {
	nw          *Network
	node        *simNode
	incarnation uint32
	rng         *rand.Rand
	log         *zap.Logger
}

func (e *env) Now() time.Time { return e.nw.epoch.Add(e.nw.now) }

func (e *env) Send(to overlay.NodeID, m *pb.Envelope) {
	if e.stale() {
		return
	}
	e.nw.send(e.node, to, m)
}

func (e *env) SetTimer(after time.Duration, t overlay.Timer) {
	if e.stale() {
		return
	}
	e.nw.schedule(event{at: e.nw.now + after, to: e.node, incarnation: e.incarnation, timer: t})
}

func (e *env) Rand() *rand.Rand    { return e.rng }
func (e *env) Logger() *zap.Logger { return e.log }

// Complete hands the result to OnResult as a separate event at the current time, so that a
// request answered inside the call that started it reaches the client after that call returns.
func (e *env) Complete(r overlay.Result) {
	if e.nw.OnResult == nil || e.stale() {
		return
	}
	id := e.node.id
	e.nw.schedule(event{at: e.nw.now, call: func() { e.nw.OnResult(id, r) }})
}

func (e *env) Report(ev overlay.Event) {
	if e.stale() {
		return
	}
	if ev.Kind == overlay.EventLeft {
		e.node.alive, e.node.gone = false, true
		e.node.incarnation++
	}
	if e.nw.OnEvent != nil {
		e.nw.OnEvent(e.node.id, ev)
	}
}

// stale reports whether this env belongs to a crashed incarnation.
func (e *env) stale() bool { return e.incarnation != e.node.incarnation || !e.node.alive }
