package skipgraph

import (
	"slices"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// unreachablePeer is a node a message could not be handed to, passed over by routing until
// the given time.
type unreachablePeer struct {
	id    overlay.NodeID
	until time.Time
}

// Undeliverable is told by the runtime that m, sent to node to, could not be handed over: the
// dial was refused or failed (a process that died, a host that went away). A lookup or a range
// query on its way to its key's owner goes on at once by another link that leads there, where
// before it was lost and its origin sent it again only after its request timeout (5 s on real
// nodes, for each request that met a node dead and not yet found so). It goes on only to
// another node: one with no other way on is dropped, as before, and its origin's retry finds
// the range taken over. Other messages are not sent again here — a batch write or a join may
// be meant for the very node that refused it (a write-out of copies to their owner, which a
// node that still holds them must not take for its own), and their senders retry. For as long
// as failure detection takes, routing passes to over where it has another link; it is not taken
// for dead by this: only missed pings do that.
func (n *Node) Undeliverable(to overlay.NodeID, m *pb.Envelope) {
	if to == n.self.ID || !n.Owns() {
		return
	}
	until := n.env.Now().Add(time.Duration(n.cfg.ProbeMisses) * n.cfg.ProbeInterval)
	if i := slices.IndexFunc(n.unreachable, func(u unreachablePeer) bool { return u.id == to }); i >= 0 {
		n.unreachable[i].until = until
	} else {
		n.unreachable = append(n.unreachable, unreachablePeer{id: to, until: until})
	}
	r := ownerRoute(m)
	if r == nil {
		return
	}
	// The route's state names this node as the one it came from (nextHop set it when it sent
	// the message): read again here, it would take every key for one behind this node and turn
	// the message into a counter-clockwise walk. It goes on from here as from a new start.
	r.WalkCcw, r.HasPrev, r.PrevStart = false, false, nil
	if h, next := n.nextHop(r, true); h == hopForward && !n.isUnreachable(next) {
		n.Stats.Rerouted++
		n.handling = m.Cause
		n.forward(next, m)
	}
}

// ownerRoute returns the route of m if it is a lookup or a range query — routed to whichever
// node owns its key, they may go round a node that refused a message (see nextHop) — and nil
// for any other message.
func ownerRoute(m *pb.Envelope) *pb.Route {
	switch b := m.Body.(type) {
	case *pb.Envelope_Lookup:
		return b.Lookup.GetRoute()
	case *pb.Envelope_RangeQuery:
		return b.RangeQuery.GetRoute()
	}
	return nil
}

// forgetUnreachable drops the entries whose time has passed; routing reads the list only while
// it is not empty.
func (n *Node) forgetUnreachable() {
	if len(n.unreachable) == 0 {
		return
	}
	now := n.env.Now()
	n.unreachable = slices.DeleteFunc(n.unreachable, func(u unreachablePeer) bool { return now.After(u.until) })
}

// isUnreachable reports whether a message to id failed lately (see Undeliverable).
func (n *Node) isUnreachable(id overlay.NodeID) bool {
	for _, u := range n.unreachable {
		if u.id == id {
			return true
		}
	}
	return false
}
