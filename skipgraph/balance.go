package skipgraph

import (
	"errors"
	"fmt"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Observer lets a component above the skip graph — the balancer — see what the node serves and
// moves without the skip graph knowing it. Calls come from inside the node's own calls.
type Observer interface {
	// Served tells that a read was served for key k (once per key a range query returned).
	Served(k overlay.Key)
	// Relayed shows a routed client message's route to every node it passes, the owner included,
	// so that load hints can ride on it (SmartUNL).
	Relayed(r *pb.Route)
	// PieceLeaving is called at a giver when ownership of piece flipped away from it; the load
	// statistics it returns travel to the receiver with the commit.
	PieceLeaving(piece overlay.Range) []*pb.KeyLoad
	// PieceArrived is called at a receiver when a piece became its own, with the giver's
	// statistics.
	PieceArrived(piece overlay.Range, loads []*pb.KeyLoad)
}

// SetObserver installs the observer (nil removes it).
func (n *Node) SetObserver(o Observer) { n.obs = o }

// Send stamps m with this node's descriptor and cause and sends it to node to: components
// above the skip graph send their messages through it so that every message is counted and
// carries fresh range starts.
func (n *Node) Send(to overlay.NodeID, m *pb.Envelope, cause pb.Cause) {
	n.send(to, m, cause)
}

// ErrWaiting is GiveNIX's refusal while the node waits for its neighbours to confirm its place
// (after a restart, or a silence long enough to have been declared dead): its copies may be
// stale, so it gives none of them away.
var ErrWaiting = errors.New("nix: node waits for its neighbours to confirm its place")

// GiveNIX hands the piece of this node's range between split and the end touching a level-0
// neighbour to that neighbour (SPEC §4): toSucc gives [split, end) to the successor, otherwise
// [start, split) goes to the predecessor. The node keeps at least its key at the far end: split
// must lie strictly inside the range. done is called once: with the number of items moved when
// ownership flipped (the receiver acknowledged every item; the commit, which the giver repeats
// until it is confirmed, is on its way), or with ok=false when the handoff aborted before the
// flip. A message the giver sends from done reaches the receiver after the commit wherever
// messages between two nodes keep their order.
func (n *Node) GiveNIX(toSucc bool, split overlay.Key, cause pb.Cause, done func(ok bool, items int)) error {
	if n.state != StateActive {
		return fmt.Errorf("nix: node is %s", n.state)
	}
	if n.Busy() {
		return fmt.Errorf("nix: node is busy with another handoff")
	}
	if n.unconfirmed() {
		return ErrWaiting
	}
	mine := n.Range()
	if split == mine.Start || !mine.Contains(split) {
		return fmt.Errorf("nix: split %q does not lie strictly inside %s", split, mine)
	}
	lk := n.levels[0]
	to, piece := lk.succ, overlay.Range{Start: split, End: mine.End}
	if !toSucc {
		to, piece = lk.pred, overlay.Range{Start: mine.Start, End: split}
	}
	if to.IsZero() || to.ID == n.self.ID {
		return fmt.Errorf("nix: no neighbour on that side")
	}
	x, err := n.give(pb.HandoffKind_HANDOFF_NIX, cause, to, piece, neighbours{})
	if err != nil {
		return fmt.Errorf("nix to %s: %w", to.ID, err)
	}
	x.onFlip = func() {
		if toSucc {
			// The successor's start moves down to split: learn it as if it had told us.
			n.learn(to.WithStart(split, to.Version+1), true)
			return
		}
		n.self = n.self.WithStart(split, n.self.Version+1)
		n.refreshSelfRef()
	}
	x.onFlipped = func() { done(true, x.items) }
	x.onAbort = func(string) { done(false, 0) }
	return nil
}

// tookNIX runs at the receiver of a NIX piece when it committed. A piece from below moves this
// node's start down; a piece from above needs nothing: the giver's new start, learned from the
// commit itself, ends this node's range further up.
func (n *Node) tookNIX(x *inXfer) {
	if x.piece.End == n.self.Start {
		n.self = n.self.WithStart(x.piece.Start, n.self.Version+1)
		n.refreshSelfRef()
	}
}
