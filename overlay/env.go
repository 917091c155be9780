package overlay

import (
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay/pb"
)

// Env is everything protocol code may ask of the runtime that drives it. Calls never block.
// A runtime calls a node from one goroutine at a time, and the node calls Env only from inside
// those calls.
type Env interface {
	// Now is the runtime's clock: virtual in the simulator, wall time under libp2p.
	Now() time.Time
	// Send queues m for delivery to node to. Delivery is not guaranteed. The sender must not
	// touch m afterwards.
	Send(to NodeID, m *pb.Envelope)
	// SetTimer asks for t to be handed back to the node after the given delay. Timers cannot be
	// cancelled; protocol code ignores the ones it no longer expects.
	SetTimer(after time.Duration, t Timer)
	// Rand is the node's source of randomness, seeded by the runtime.
	Rand() *rand.Rand
	// Logger is the node's logger (a no-op logger in large simulations).
	Logger() *zap.Logger
	// Complete hands the runtime the outcome of a client request started at this node.
	Complete(r Result)
	// Report tells the runtime of an event that operators and checkers must see (lost ranges,
	// rejected messages, ownership changes).
	Report(e Event)
}

// Timer is a timer's payload: which component set it, what kind it is, and an identifier.
type Timer struct {
	Kind TimerKind
	ID   uint64
}

// TimerKind names a timer. Each protocol package owns a block of kinds.
type TimerKind uint16

// ResultKind says which client operation a Result answers.
type ResultKind uint8

const (
	ResultLookup ResultKind = iota + 1
	ResultRange
	ResultBatchPut
)

// Result is the outcome of a client request.
type Result struct {
	ReqID  uint64
	Kind   ResultKind
	Op     pb.Op
	Key    Key
	Status pb.Status
	Value  []byte
	Items  []Item
	// Continuation is the first key not returned when a limit cut a range answer short.
	Continuation Key
	More         bool
	// Incomplete: part of the range was lost with a failed node; keys there may be missing.
	Incomplete bool
	ServedBy   []NodeID
	Owner      NodeID
	Stored     int
	Hops       int
	// Err explains a failure (timeout, hop limit, invalid request).
	Err string
}

// EventKind classifies reported events.
type EventKind uint8

const (
	// EventRangeLost: the node took over Range from a failed neighbour whose items there are lost
	// (until replication exists).
	EventRangeLost EventKind = iota + 1
	// EventInvalidMessage: a message was rejected (Detail says why).
	EventInvalidMessage
	// EventJoined: the node owns its first range and is linked at level 0.
	EventJoined
	// EventLeft: the node handed its whole range over and unlinked.
	EventLeft
	// EventConflict: the node saw links or ranges that contradict its own (Detail says how).
	EventConflict
)

// Event is a reported protocol event.
type Event struct {
	Kind   EventKind
	Peer   NodeID
	Range  Range
	Detail string
	// Items (EventRangeLost): how many items the failed node held there, as it last said.
	Items int
}

// PeerFromPB converts a wire descriptor. A nil ref gives the zero Peer.
func PeerFromPB(r *pb.NodeRef) Peer {
	if r == nil {
		return Peer{}
	}
	start := Key(aliasString(r.Start))
	return Peer{ID: NodeID(aliasString(r.Id)), Start: start, Version: r.Version, MVec: MVec(r.Mvec), Incarnation: r.Incarnation, Addrs: r.Addrs, wire: r,
		startPrefix: KeyUint64(start)}
}

// ToPB converts p to its wire descriptor; the zero Peer gives nil. The result is shared and must
// not be modified.
func (p Peer) ToPB() *pb.NodeRef {
	if p.IsZero() {
		return nil
	}
	if p.wire != nil {
		return p.wire
	}
	return &pb.NodeRef{Id: aliasBytes(string(p.ID)), Start: aliasBytes(string(p.Start)), Version: p.Version, Mvec: uint64(p.MVec), Incarnation: p.Incarnation, Addrs: p.Addrs}
}

// PeersFromPB converts wire descriptors to peers (nil entries to zero peers).
func PeersFromPB(refs []*pb.NodeRef) []Peer {
	out := make([]Peer, len(refs))
	for i, r := range refs {
		out[i] = PeerFromPB(r)
	}
	return out
}

// PeersToPB converts peers to their (shared, not to be modified) wire descriptors.
func PeersToPB(peers []Peer) []*pb.NodeRef {
	out := make([]*pb.NodeRef, len(peers))
	for i, p := range peers {
		out[i] = p.ToPB()
	}
	return out
}

// ItemsToPB converts items to wire form (keys and values are shared, not copied).
func ItemsToPB(items []Item) []*pb.Item {
	out := make([]*pb.Item, len(items))
	for i, it := range items {
		out[i] = &pb.Item{Key: []byte(it.Key), Value: it.Value, Written: it.Written}
	}
	return out
}

// ItemsFromPB converts wire items.
func ItemsFromPB(items []*pb.Item) []Item {
	out := make([]Item, len(items))
	for i, it := range items {
		out[i] = Item{Key: Key(it.Key), Value: it.Value, Written: it.Written}
	}
	return out
}
