package skipgraph

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// State is where a node is in its life.
type State uint8

const (
	// StateNew: created, owns nothing, not linked.
	StateNew State = iota
	// StateJoining: asked to join, waiting for a piece of range.
	StateJoining
	// StateActive: owns a range and is linked.
	StateActive
	// StateLeaving: still owns its range, handing it to its predecessor.
	StateLeaving
	// StateLeft: handed its range over; forwards stray messages for a while.
	StateLeft
)

func (s State) String() string {
	return [...]string{"new", "joining", "active", "leaving", "left"}[s]
}

// Timer kinds owned by this package (block 1–31).
const (
	timerTick overlay.TimerKind = iota + 1
	timerPing
	timerRequest
	timerJoin
	timerOut
	timerIn
	timerLeave
	timerLinger
	// LastTimerKind is the last kind this package uses; other packages number theirs above it.
	LastTimerKind overlay.TimerKind = 31
)

// link holds a node's two neighbours on one level's ring. A zero Peer means "unknown, to be
// repaired"; a node alone on a ring has itself on both sides.
type link struct {
	pred, succ overlay.Peer
}

// Node is one node's skip graph state machine.
type Node struct {
	env   overlay.Env
	store overlay.Store
	cfg   Config

	self    overlay.Peer
	selfRef *pb.NodeRef // wire form of self, rebuilt (never mutated) when self changes
	state   State

	// levels[0] always exists once the node owns a range; levels[ℓ] exists while the node has
	// company on its level-ℓ ring. The node is alone on level len(levels).
	levels   []link
	succList []overlay.Peer
	// unreachable are nodes a message could not be handed to lately (Undeliverable): routing
	// passes them over while it can.
	unreachable []unreachablePeer

	lost lostSet // parts of the range whose items were lost with failed nodes
	// covered are the parts of this range that re-admissions' copies came to (coveredParts).
	covered coveredParts
	// owed are the re-admission batches this node sent and has no answer to yet; taken, those
	// it stored while it waited to be confirmed (claim.go, "Re-admission copies in flight").
	owed  copiesOwed
	taken copiesTaken
	// copiesOut are pieces another node may still hold copies of and write back here, as writes
	// that leave what this node holds: of a handoff this node aborted, or one it received whose
	// giver may never have heard it commit (expectCopiesBack).
	copiesOut []copiesOutPiece
	// settled are the handoffs this node settled lately while the other side may not know it:
	// given up on its own account, or received and committed (settledXfer).
	settled []settledXfer
	// tombs are the keys deleted in the lost parts and in copiesOut (tombstone.go).
	tombs tombstones
	// recentDeletes are the deletes made here within recentDeleteFor, wherever they fell
	// (stamp.go).
	recentDeletes tombstones
	// storeWritten is when the store last took a value (a write, a batch, a handoff's chunk),
	// or when the node was made: a store it restores holds nothing newer. Pongs report how long
	// ago, so that a node settling an overlap with this one knows which of its writes and
	// deletes are newer than every copy here (claim.go).
	storeWritten time.Time
	// hlc is the latest write stamp issued or seen here (stamp.go).
	hlc uint64

	out        *outXfer            // the handoff this node gives, until it flips
	committing map[uint64]*outXfer // flipped handoffs waiting for their commit's confirmation
	in         *inXfer
	held       []*pb.Envelope // routed messages for keys of the incoming piece

	// strays is set when copies written to their owners (pushCopies) were not all delivered,
	// or the successor's start moved down into the range (learn): items outside the range may
	// be held here, the only copies perhaps, and no read or handoff would ever find them. The
	// tick writes them out again (pushStrays).
	strays bool
	// strayDeletes are the deletes of such writes that were not delivered: unlike an item, a
	// delete leaves nothing in the store to be found outside the range and written again, and
	// the sender's tombstone of it went with the write (a re-admission's, forgetLost). Lost, a
	// value older than the delete came back from the copies of a node that had stood still.
	strayDeletes []overlay.Item

	join     joinState
	leave    leaveState
	maintain maintainState

	// unconfirmedSince is set while a node that may have been replaced waits for its neighbours
	// to vouch for its range (checkConfirmed): after a restart (Restore), or after its
	// predecessor fell silent for long enough to have declared it dead (a pause, a partition).
	// Until then it holds the requests for its range rather than answer from copies that may be
	// stale.
	unconfirmedSince time.Time
	// confirmedBy names the predecessor and the successor whose pongs vouched for this node's
	// range during the wait (checkConfirmed).
	confirmedBy [2]overlay.NodeID
	// liveHeard is set when a node that waits for nobody answered a ping of this wait: the ring
	// has live nodes, and a waiting predecessor's word no longer vouches (checkConfirmed).
	liveHeard bool
	// readmitters are the nodes whose re-admission batches this waiting node stored, and
	// whether each has since answered it listing none it did not store (checkConfirmed).
	readmitters map[overlay.NodeID]readmitter
	// predHeard is when the level-0 predecessor (predHeardID) was last heard from.
	predHeard   time.Time
	predHeardID overlay.NodeID
	// heardAny is when any other node was last heard from.
	heardAny time.Time

	// clock is the node's Lamport clock (raised to every message's); claim is the boundary
	// version of its range, stamped from the clock when the range last changed (claimed is the
	// range it was stamped for). Where two ranges overlap, these decide (claim.go).
	clock   uint64
	claim   uint64
	claimed overlay.Range

	nextReq uint64
	pending map[uint64]*request
	// awaitingJoin are client requests started while the node was joining (a migrant between
	// its two places, or a node's first join): they start once it has joined, or fail at their
	// deadline (awaitJoin).
	awaitingJoin []*request

	senders senderCache
	obs     Observer

	// handling is the cause of the message being handled (or of the local request being
	// started); messages sent on its behalf inherit it.
	handling pb.Cause

	Stats Stats
}

// Stats counts what a node did; runtimes export them as metrics.
type Stats struct {
	Invalid    int // messages rejected as malformed
	HopLimit   int // routed messages dropped at the hop limit
	Undeliver  int // routed messages dropped for want of a next hop
	RangesLost int // ranges taken over from failed successors
	ItemsLost  int // items those successors held, as they last said
	// Vouched counts successors whose missed pings were forgiven because the node after them
	// had them answer its own ping meanwhile (askVouch).
	Vouched int
	// WrittenOut counts copies this node held but did not own any more that it wrote to their
	// owners (pushCopies: re-admissions, joining again, handoffs never settled).
	WrittenOut int
	// CopiesOlder counts copies written to this node that it dropped: written no later than
	// the value or the delete of the key it held (stamp.go).
	CopiesOlder int
	// TombstonesEvicted counts tombstones dropped beyond MaxTombstones: each of those keys may
	// come back from an older copy.
	TombstonesEvicted int
	HandoffsOut       int            // handoffs this node gave, flipped
	HandoffsIn        int            // handoffs this node received, committed
	ItemsOut          [NumCauses]int // items given in flipped handoffs, by the cause they served
	// BalanceItemsOut splits ItemsOut[BALANCE] by pb.HandoffKind: NIX pieces, migrants' leaves,
	// and (JOIN, JOIN_BELOW) the pieces migrants take from their targets, whose side SmartRNP
	// chooses.
	BalanceItemsOut [NumHandoffKinds]int
	Aborts          int // handoffs aborted
	Retries         int // client requests sent again after a timeout
	// Superseded counts client writes (a put, a delete, an item or delete of a client batch)
	// not applied here because this node held the key stamped at or after the write's issue
	// stamp: mostly a late attempt of a write whose origin had tried again (stamp.go).
	Superseded int
	// Reissued counts client writes this node issued again, stamped later, after an owner
	// answered that it held their key stamped as late.
	Reissued int
	// Rerouted counts routed messages the runtime could not hand to the next node that went on
	// by another link at once (Undeliverable).
	Rerouted int
	// Sent counts messages sent, by cause.
	Sent [NumCauses]uint64
}

// NumCauses bounds pb.Cause values, for per-cause counters.
const NumCauses = int(pb.Cause_CAUSE_BALANCE) + 1

// NumHandoffKinds bounds pb.HandoffKind values, for per-kind counters.
const NumHandoffKinds = int(pb.HandoffKind_HANDOFF_JOIN_BELOW) + 1

// New creates a node with identity id. It owns nothing until Bootstrap or a Join completes.
func New(env overlay.Env, store overlay.Store, id overlay.NodeID, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("skipgraph config: %w", err)
	}
	if id == "" {
		return nil, fmt.Errorf("skipgraph: empty node id")
	}
	n := &Node{env: env, store: store, cfg: cfg, pending: map[uint64]*request{}, committing: map[uint64]*outXfer{},
		storeWritten: env.Now()}
	n.self = overlay.Peer{ID: id, MVec: overlay.MVecFor(id), Incarnation: env.Rand().Uint64() | 1}
	n.maintain.init()
	n.refreshSelfRef()
	return n, nil
}

// SetAddrs sets the listen addresses advertised with this node's descriptor.
func (n *Node) SetAddrs(addrs [][]byte) {
	n.self = n.self.WithAddrs(addrs)
	n.refreshSelfRef()
}

// Bootstrap makes the node the first of a new network: it owns the whole circle.
func (n *Node) Bootstrap() error {
	if n.state != StateNew {
		return fmt.Errorf("bootstrap: node is %s", n.state)
	}
	n.self = n.self.WithStart(overlay.MinKey, n.self.Version+1)
	n.refreshSelfRef()
	n.levels = []link{{pred: n.self, succ: n.self}}
	n.state = StateActive
	n.stampClaim()
	n.env.Report(overlay.Event{Kind: overlay.EventJoined, Range: n.Range()})
	n.startMaintenance()
	return nil
}

// ID returns the node's identity.
func (n *Node) ID() overlay.NodeID { return n.self.ID }

// Self returns the node's current descriptor.
func (n *Node) Self() overlay.Peer { return n.self }

// State returns the node's life state.
func (n *Node) State() State { return n.state }

// Owns reports whether the node currently owns a range.
func (n *Node) Owns() bool { return n.state == StateActive || n.state == StateLeaving }

// Range returns the range the node owns; meaningful only when Owns.
func (n *Node) Range() overlay.Range {
	return overlay.Range{Start: n.self.Start, End: n.end()}
}

// end is the start of the level-0 successor, which is where this node's range ends.
func (n *Node) end() overlay.Key {
	if len(n.levels) == 0 {
		return n.self.Start // owns nothing (not joined yet, or gone)
	}
	s := n.levels[0].succ
	if n.isSelf(s) {
		return n.self.Start
	}
	return s.Start
}

// isSelf reports whether p names this node.
func (n *Node) isSelf(p overlay.Peer) bool { return p.SameNode(n.self) }

// Responsible reports whether the node is the one holder of key k: it owns k, or it has
// acknowledged a piece holding k whose giver may already have flipped ownership to it.
func (n *Node) Responsible(k overlay.Key) bool {
	if n.in != nil && n.in.acked && n.in.piece.Contains(k) {
		return true
	}
	return n.Owns() && n.Range().Contains(k)
}

// LostRanges returns the parts of the node's range whose items were lost with failed nodes.
func (n *Node) LostRanges() []overlay.Range { return n.lost.ranges() }

// Height returns how many levels the node is linked on (it is alone on level Height()).
func (n *Node) Height() int { return len(n.levels) }

// Neighbors returns the node's predecessor and successor on level ℓ (zero when unknown).
func (n *Node) Neighbors(level int) (pred, succ overlay.Peer) {
	if level >= len(n.levels) {
		return overlay.Peer{}, overlay.Peer{}
	}
	return n.levels[level].pred, n.levels[level].succ
}

// SuccessorList returns the level-0 successor list.
func (n *Node) SuccessorList() []overlay.Peer { return n.succList }

// Busy reports whether a handoff involves the node.
func (n *Node) Busy() bool { return n.out != nil || n.in != nil }

// HandedOver reports whether a node that left is done with its range: the handoff flipped and
// the receiver confirmed the commit (or stopped answering). What follows — lingering to forward
// stray messages — a process that exits may skip.
func (n *Node) HandedOver() bool { return n.state == StateLeft && len(n.committing) == 0 }

// FlippedPieces calls f for each piece this node gave whose ownership flipped away from it and
// whose receiver has not confirmed taking it in, with the transfer's identity, the receiver and
// the piece's load statistics. Until the receiver's commit, those statistics are counted at
// neither node: a runtime that measures load over all nodes adds them to the receiver's while
// the receiver is still AwaitingCommit. Pieces come in the order of their transfer identities,
// not the map's, so that a runtime summing their loads gets the same sum on every replay.
func (n *Node) FlippedPieces(f func(xfer uint64, to overlay.NodeID, loads []*pb.KeyLoad)) {
	if len(n.committing) == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(n.committing)) {
		x := n.committing[id]
		f(x.id, x.to.ID, x.loads)
	}
}

// AwaitingCommit reports whether this node has acknowledged transfer xfer from node from and not
// yet committed it: the piece is its own, but its items and load statistics are not in yet.
func (n *Node) AwaitingCommit(from overlay.NodeID, xfer uint64) bool {
	return n.in != nil && n.in.id == xfer && n.in.acked && n.in.from.ID == from
}

// Store returns the node's item store.
func (n *Node) Store() overlay.Store { return n.store }

func (n *Node) refreshSelfRef() {
	n.selfRef = n.self.ToPB()
	n.self = overlay.PeerFromPB(n.selfRef)
	// Links that point at the node itself (alone on a ring) follow its descriptor.
	for i := range n.levels {
		if n.levels[i].pred.ID == n.self.ID {
			n.levels[i].pred = n.self
		}
		if n.levels[i].succ.ID == n.self.ID {
			n.levels[i].succ = n.self
		}
	}
}

// send stamps m with this node's descriptor and cause, counts it, and hands it to the runtime.
func (n *Node) send(to overlay.NodeID, m *pb.Envelope, cause pb.Cause) {
	n.stampClaim()
	m.From = n.selfRef
	m.Cause = cause
	m.Clock = n.clock
	n.Stats.Sent[cause]++
	n.env.Send(to, m)
}

// forward sends on a message this node is handling, keeping its cause.
func (n *Node) forward(to overlay.NodeID, m *pb.Envelope) {
	n.send(to, m, n.handling)
}

// debug logs a protocol event at debug level; the fields are built only when it is enabled.
func (n *Node) debug(msg string, fields func() []zap.Field) {
	if ce := n.env.Logger().Check(zap.DebugLevel, msg); ce != nil {
		ce.Write(fields()...)
	}
}

func (n *Node) reject(from overlay.NodeID, err error) {
	n.Stats.Invalid++
	n.env.Report(overlay.Event{Kind: overlay.EventInvalidMessage, Peer: from, Detail: err.Error()})
}

// Accept checks a message from a peer and takes in what every message tells (the sender's
// descriptor, that it is alive). It returns the sender, or false when the message was rejected.
// Handle calls it; a component above the skip graph calls it for its own messages.
func (n *Node) Accept(from overlay.NodeID, m *pb.Envelope) (overlay.Peer, bool) {
	if err := n.validate(m); err != nil {
		n.reject(from, err)
		return overlay.Peer{}, false
	}
	sender := n.senders.decode(m.From)
	n.handling = m.Cause
	n.observeClock(m.Clock)
	n.learn(sender, !n.fromJoiner(sender, m))
	n.maintain.heardFrom(sender, m.GetPong() != nil, n.env.Now())
	if !n.isSelf(sender) {
		n.heardAny = n.env.Now()
	}
	if len(n.levels) > 0 && sender.SameNode(n.levels[0].pred) {
		n.predHeard, n.predHeardID = n.env.Now(), sender.ID
	}
	return sender, true
}

// fromJoiner reports whether m comes from a node that does not hold a place yet: one asking to
// join, or the receiver of a join this node is handing a piece.
func (n *Node) fromJoiner(sender overlay.Peer, m *pb.Envelope) bool {
	if m.GetJoinRequest() != nil {
		return true
	}
	x := n.out
	return x != nil && x.to.ID == sender.ID &&
		(x.kind == pb.HandoffKind_HANDOFF_JOIN || x.kind == pb.HandoffKind_HANDOFF_JOIN_BELOW)
}

// Reject counts and reports a message found invalid by a component above the skip graph.
func (n *Node) Reject(from overlay.NodeID, err error) { n.reject(from, err) }

// Handle processes one message from a peer.
func (n *Node) Handle(from overlay.NodeID, m *pb.Envelope) {
	sender, ok := n.Accept(from, m)
	if !ok {
		return
	}
	defer n.stampClaim()
	switch b := m.Body.(type) {
	case *pb.Envelope_Lookup:
		n.onLookup(m, b.Lookup)
	case *pb.Envelope_LookupReply:
		n.onLookupReply(b.LookupReply)
	case *pb.Envelope_RangeQuery:
		n.onRangeQuery(m, b.RangeQuery)
	case *pb.Envelope_RangeReply:
		n.onRangeReply(b.RangeReply)
	case *pb.Envelope_BatchPut:
		n.onBatchPut(b.BatchPut)
	case *pb.Envelope_BatchPutReply:
		n.onBatchPutReply(b.BatchPutReply)
	case *pb.Envelope_JoinRequest:
		n.onJoinRequest(b.JoinRequest)
	case *pb.Envelope_JoinRefused:
		n.onJoinRefused(b.JoinRefused)
	case *pb.Envelope_Handoff:
		n.onHandoff(sender, b.Handoff)
	case *pb.Envelope_HandoffAck:
		n.onHandoffAck(sender, b.HandoffAck)
	case *pb.Envelope_HandoffCommit:
		n.onHandoffCommit(sender, b.HandoffCommit)
	case *pb.Envelope_HandoffCommitAck:
		n.onHandoffCommitAck(sender, b.HandoffCommitAck)
	case *pb.Envelope_HandoffAbort:
		n.onHandoffAbort(sender, b.HandoffAbort)
	case *pb.Envelope_NeighborUpdate:
		n.onNeighborUpdate(sender, b.NeighborUpdate)
	case *pb.Envelope_LevelScan:
		n.onLevelScan(b.LevelScan)
	case *pb.Envelope_LevelFound:
		n.onLevelFound(b.LevelFound)
	case *pb.Envelope_Ping:
		n.onPing(sender, b.Ping)
	case *pb.Envelope_Pong:
		n.onPong(sender, b.Pong)
	case *pb.Envelope_CopiesWhole:
		n.onCopiesWhole(b.CopiesWhole)
	}
}

// HandleTimer processes a timer this package set. Kinds above LastTimerKind are not its own.
func (n *Node) HandleTimer(t overlay.Timer) {
	defer n.stampClaim()
	switch t.Kind {
	case timerTick:
		n.onTick()
	case timerPing:
		n.onPingTimeout(t.ID)
	case timerRequest:
		n.onRequestTimeout(t.ID)
	case timerJoin:
		n.onJoinTimer(t.ID)
	case timerOut:
		n.onOutTimer(t.ID)
	case timerIn:
		n.onInTimer(t.ID)
	case timerLeave:
		n.onLeaveTimer(t.ID)
	case timerLinger:
		n.onLingerEnd()
	}
}

// senderCache remembers the last descriptors decoded from message senders, by pointer: a
// sender stamps the same (never modified) descriptor on its messages until its start moves, so
// in-process runtimes decode each once. Under libp2p every message brings a fresh one and the
// cache simply misses.
type senderCache struct {
	refs  [8]*pb.NodeRef
	peers [8]overlay.Peer
}

func (c *senderCache) decode(r *pb.NodeRef) overlay.Peer {
	slot := int(r.Mvec % uint64(len(c.refs)))
	if c.refs[slot] == r {
		return c.peers[slot]
	}
	p := overlay.PeerFromPB(r)
	c.refs[slot], c.peers[slot] = r, p
	return p
}

// learn folds a descriptor just heard from its owner into every record of that node: a fresher
// start replaces the old one; another incarnation means the node this one linked to restarted
// without its state, which is handled as a failure (the new incarnation is a stranger until it
// joins). placed says the descriptor comes from a node that holds its place in the ring; a
// joiner's (a join request, or the acknowledgements of the piece it is being given) has no start
// yet, and must not be put in the successor list where its empty start would lie.
func (n *Node) learn(p overlay.Peer, placed bool) {
	if n.isSelf(p) || !n.Owns() {
		return
	}
	stale := false
	refresh := func(q *overlay.Peer) {
		// Membership vector and incarnation are 64 random bits each: equal pairs name the same
		// node, so the identity itself is compared only when the incarnations differ.
		switch {
		case q.MVec != p.MVec:
		case q.Incarnation != p.Incarnation:
			stale = stale || q.ID == p.ID
		case p.Version >= q.Version:
			*q = p
		}
	}
	// A node is linked at level i only to nodes whose membership vectors share i leading bits
	// with its own, so p can be a neighbour only up to their common prefix: most senders share
	// a bit or two, and the levels above (a dozen at 50,000 nodes) need not be read at all.
	top := min(len(n.levels)-1, overlay.CommonPrefix(n.self.MVec, p.MVec))
	end := n.end()
	// A start the level-0 successor link does not take, its entry in the successor list does
	// not take either: taken there alone, the list ran round the circle to a start below this
	// node's own, c's pongs passed it on, and the predecessor they reached, when c gave its
	// place up, took over up to such an entry — most of the ring — and served keys live nodes
	// held (500 nodes, --pause 0.1 --loss 0.02 --seed 4, while calls on the owners of lost parts
	// were tried; TestSuccessorListKeepsItsOrder).
	movedUp := n.succStartMovedUp(p)
	for i := 0; i <= top; i++ {
		refresh(&n.levels[i].pred)
		if i == 0 && movedUp {
			continue
		}
		refresh(&n.levels[i].succ)
	}
	for i := range n.succList {
		if movedUp && n.succList[i].SameNode(p) {
			continue
		}
		refresh(&n.succList[i])
	}
	if s := n.levels[0].succ; s.SameNode(p) && s.Start != end && overlay.StrictlyBetween(n.self.Start, s.Start, end) {
		// The successor's start moved down into this range, by no handoff of this node's: a
		// node overlapping this one, unknown to it, gave the successor that part (seen after
		// mass pauses: skipsim balance --pause 0.2 --pause-for 60s --seed 4). What this node
		// holds there are copies now, which no read finds: the tick writes them out to the
		// successor, whose values stand (pushStrays).
		n.strays = true
	}
	if stale && p.Incarnation != 0 {
		n.strangerSeen(p, placed)
	}
}

// succStartMovedUp reports a level-0 successor whose start moved clockwise, which would stretch
// this node's range over keys it was never given: the successor handed them to a node joining
// below it, which this node will link to when told (by the joiner, or a pong naming it). Only a
// piece the successor is handing to this node itself from its old start may stretch it: the same
// node may be handing one from below as the predecessor it has become (its start moved below
// this node's, by a NIX from the node that had taken this one's range over while it stood
// still), and its new start then stretched this range round the circle to it, where this node
// answered "not found" for keys all round the ring (TestPredecessorsNewStartLeavesTheSuccessorLinkAlone).
// And only to the piece's end: a giver whose handoff failed and who has moved below this node
// since (it took this node's range over while this one stood still, then a piece from below),
// named in its abort, stretched the range round the circle the same way, and this node, waiting
// to be confirmed, yielded it piece by piece to the live nodes there, each yield a word that it
// held every item of the piece — which dropped the lost marks of the nodes the piece passed, and
// one answered "not found" for a paused node's keys (500 nodes, --pause 0.1 --loss 0.02 --seed 25).
func (n *Node) succStartMovedUp(p overlay.Peer) bool {
	s := n.levels[0].succ
	// Membership vectors first: comparing them is cheaper than comparing identities.
	if s.MVec != p.MVec || s.ID != p.ID || s.Incarnation != p.Incarnation || s.Start == p.Start || s.ID == n.self.ID {
		return false // another node, or another incarnation of it (a stranger: see learn)
	}
	if n.in != nil && n.in.from.ID == p.ID && n.in.piece.Start == s.Start && n.in.piece.End == p.Start {
		return false
	}
	return overlay.StrictlyBetween(n.self.Start, s.Start, p.Start)
}
