package skipgraph

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// A handoff moves a piece of range with its items from a giver to a receiver (SPEC §4):
//
//	giver                                   receiver
//	Handoff chunks 0..k (last marks k)  →   persists them in order
//	late chunks k+1.. for writes that   →   (writes to the piece while it streams)
//	arrived meanwhile
//	                                    ←   HandoffAck(upto): all chunks through upto persisted
//	flip when upto covers every chunk sent: ownership moves
//	HandoffCommit(chunks), repeated     →   applies the piece once all chunks are in
//	                                    ←   HandoffCommitAck
//	deletes its copy
//
// Before the flip either side may abort; the giver then still owns everything and the receiver
// discards what it got. A receiver that acknowledged waits for the verdict and asks for it again.
// A receiver still missing chunks after HandoffRetry sends a partial HandoffAck (upto: the last
// chunk it has in order, all ones when it has none), and the giver sends the chunks after it
// again: one lost chunk costs a retry interval, not the whole lease.

// outXfer is a handoff this node gives.
type outXfer struct {
	id    uint64
	kind  pb.HandoffKind
	cause pb.Cause // the activity the handoff serves, stamped on its messages
	to    overlay.Peer
	piece overlay.Range
	loads []*pb.KeyLoad // the piece's load statistics, taken at the flip
	sent  uint32        // chunks sent so far
	// bulk is how many chunks carried the piece as it was when the handoff began; the chunks
	// after them carry the writes made in it since (forwardWrite). holding is set once the
	// receiver has acknowledged the bulk: from then on requests for the piece wait here
	// (nextHop) until the flip or the abort, so that the acknowledgement of the last chunk can
	// catch up with the writes. Forwarded on, each write that came within a round trip of the
	// last acknowledgement was one more chunk to wait for, and a leave of a range of 14,000
	// keys taking writes from clients went out 25 times, each aborted when its lease ran out
	// with every chunk but the last few acknowledged (500 nodes, a fifth paused, seed 9).
	bulk    uint32
	holding bool
	chunks  []*pb.Handoff // every chunk sent, by seq, for a receiver that missed some (never changed once made, so resends share them)
	// lostSince is when this node took over each lost part the first chunk names (zero: not
	// known); each send of that chunk gives their ages then.
	lostSince []time.Time
	items     int
	deadline  time.Time
	retries   int
	// resent is when chunks were last sent again for a receiver that missed some (zero: never).
	resent time.Time
	// onFlip applies the kind-specific change of ownership and links at the giver.
	onFlip func()
	// onFlipped runs once the flip is applied and the commit is on its way: the receiver has
	// acknowledged every item, so the giver's part is done.
	onFlipped func()
	// onDone runs after the receiver confirmed the commit (or the giver gave up asking).
	onDone func()
	// onAbort runs when the handoff aborts before the flip.
	onAbort func(reason string)
}

// inXfer is a handoff this node receives.
type inXfer struct {
	id       uint64
	kind     pb.HandoffKind
	cause    pb.Cause
	from     overlay.Peer
	piece    overlay.Range
	pred     overlay.Peer // a joiner below its giver: its new level-0 predecessor
	succ     overlay.Peer
	succList []overlay.Peer
	lost     lostSet                   // parts of the piece lost with failed nodes
	tombs    map[overlay.Key]tombstone // keys deleted in those parts
	recent   map[overlay.Key]tombstone // keys deleted lately anywhere in the piece (stamp.go)
	early    map[uint32]*pb.Handoff    // chunks that arrived ahead of their turn
	next     uint32                    // next chunk to apply
	checked  uint32                    // next as of the last retry timer (progress check)
	lastSeen bool                      // the chunk marked last has been applied
	acked    bool
	commit   int // chunk count announced by the commit, -1 before it
	loads    []*pb.KeyLoad
	deadline time.Time
	retries  int
	// received are the keys the applied chunks brought: what goes if the piece does not commit.
	received []overlay.Key
}

const maxCommitRetries = 8

// dropCopy deletes this node's copy of a piece that is not its own (handed over, or received and
// aborted), except the parts that came back to it meanwhile: a confirmation that arrives late
// must not delete what a later handoff brought back (found by the property test, with a join
// handed over and at once given back by the joiner's leave).
func (n *Node) dropCopy(piece overlay.Range) {
	parts := []overlay.Range{piece}
	keep := func(r overlay.Range) {
		var rest []overlay.Range
		for _, p := range parts {
			rest = append(rest, p.Subtract(r)...)
		}
		parts = rest
	}
	if n.Owns() {
		keep(n.Range())
	}
	if n.in != nil {
		keep(n.in.piece)
	}
	for _, p := range parts {
		if err := n.store.DeleteRange(p); err != nil {
			n.env.Logger().Warn("delete a piece that is not this node's", zap.Error(err))
		}
	}
}

// dropReceived deletes what the chunks of x, a piece that will not commit, brought — not what
// this node held in the piece before: a joiner back at its former place may still hold copies
// from there that it has not yet written out (dropping the whole piece lost 112 such items after
// mass pauses: skipsim balance --pause 0.2 --pause-for 60s --seed 12) — nor keys that are this
// node's own again.
func (n *Node) dropReceived(x *inXfer) {
	for _, k := range x.received {
		if n.Owns() && n.Range().Contains(k) {
			continue
		}
		if err := n.store.Delete(k); err != nil {
			n.env.Logger().Warn("delete an item of a piece that did not commit", zap.Error(err))
		}
	}
}

// neighbours is the level-0 neighbourhood a handoff tells its receiver about: for a join or a
// leave, the receiver's new successor and successor list; for a join below the giver, its new
// predecessor too.
type neighbours struct {
	pred, succ overlay.Peer
	succList   []overlay.Peer
}

// give starts a handoff of piece to peer to, on behalf of cause. The caller has checked that
// this node is not busy.
func (n *Node) give(kind pb.HandoffKind, cause pb.Cause, to overlay.Peer, piece overlay.Range, nb neighbours) (*outXfer, error) {
	x := &outXfer{id: n.env.Rand().Uint64(), kind: kind, cause: cause, to: to, piece: piece}
	var chunk []overlay.Item
	var chunks [][]overlay.Item
	err := n.store.Ascend(piece, func(it overlay.Item) bool {
		chunk = append(chunk, it)
		if len(chunk) == n.cfg.ChunkItems {
			chunks = append(chunks, chunk)
			chunk = nil
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read piece %s: %w", piece, err)
	}
	if len(chunk) > 0 || len(chunks) == 0 {
		chunks = append(chunks, chunk)
	}
	// The tombstones and the recent deletes go ChunkItems to a chunk each, in chunks of their
	// own past the items if need be.
	tombs, recent := n.tombs.within(piece), n.recentDeletes.within(piece)
	for len(chunks)*n.cfg.ChunkItems < max(len(tombs), len(recent)) {
		chunks = append(chunks, nil)
	}
	n.out = x
	for i, c := range chunks {
		h := &pb.Handoff{
			XferId: x.id, Kind: kind, Start: []byte(piece.Start), End: []byte(piece.End),
			Items: overlay.ItemsToPB(c), Seq: uint32(i), Last: i == len(chunks)-1,
		}
		if from := i * n.cfg.ChunkItems; from < len(tombs) {
			h.Tombstones = tombs[from:min(len(tombs), from+n.cfg.ChunkItems)]
		}
		if from := i * n.cfg.ChunkItems; from < len(recent) {
			h.RecentDeletes = recent[from:min(len(recent), from+n.cfg.ChunkItems)]
		}
		if i == 0 {
			for _, r := range n.lost.in(piece) {
				h.Lost = append(h.Lost, r.ToPB())
				x.lostSince = append(x.lostSince, r.since)
			}
			if !nb.succ.IsZero() {
				h.Succ = nb.succ.ToPB()
			}
			if !nb.pred.IsZero() {
				h.Pred = nb.pred.ToPB()
			}
			for _, p := range nb.succList {
				h.SuccList = append(h.SuccList, p.ToPB())
			}
		}
		x.items += len(c)
		x.chunks = append(x.chunks, h)
		n.send(to.ID, &pb.Envelope{Body: &pb.Envelope_Handoff{Handoff: n.withAges(x, h)}}, cause)
	}
	x.sent = uint32(len(chunks))
	x.bulk = x.sent
	x.deadline = n.env.Now().Add(n.cfg.HandoffLease)
	n.env.SetTimer(n.cfg.HandoffLease, overlay.Timer{Kind: timerOut, ID: x.id})
	return x, nil
}

// withAges returns a copy of chunk h stamped with the ages, as of now, of the tombstones and
// recent deletes it carries and (the first chunk) of the lost parts it names: durations, so that
// the receiver need not share this node's clock, stamped at every send, so that a chunk sent
// again does not make them look younger than they are. A chunk with none goes as it is.
func (n *Node) withAges(x *outXfer, h *pb.Handoff) *pb.Handoff {
	lost := h.Seq == 0 && slices.ContainsFunc(x.lostSince, func(t time.Time) bool { return !t.IsZero() })
	if !lost && len(h.Tombstones) == 0 && len(h.RecentDeletes) == 0 {
		return h
	}
	now := n.env.Now()
	age := func(since time.Time) uint64 { return uint64(max(now.Sub(since), 1)) } // 0 says "not known"
	h = proto.Clone(h).(*pb.Handoff)
	if lost {
		for _, since := range x.lostSince {
			var a uint64 // not known
			if !since.IsZero() {
				a = age(since)
			}
			h.LostAgesNanos = append(h.LostAgesNanos, a)
		}
	}
	for _, t := range slices.Concat(h.Tombstones, h.RecentDeletes) {
		_, d := tombstoneFromPB(t)
		t.AgeNanos = age(d.at)
	}
	return h
}

// forwardWrite sends a write that landed in a piece being handed over to the receiver, so that
// its copy ends identical.
func (n *Node) forwardWrite(it overlay.Item) {
	x := n.out
	if x == nil || !x.piece.Contains(it.Key) {
		return
	}
	h := &pb.Handoff{XferId: x.id, Kind: x.kind, Start: []byte(x.piece.Start), End: []byte(x.piece.End), Seq: x.sent}
	if it.Deleted {
		h.Deletes, h.DeletesWritten = [][]byte{[]byte(it.Key)}, []uint64{it.Written}
	} else {
		h.Items = []*pb.Item{{Key: []byte(it.Key), Value: it.Value, Written: it.Written}}
	}
	x.sent++
	x.chunks = append(x.chunks, h)
	n.send(x.to.ID, &pb.Envelope{Body: &pb.Envelope_Handoff{Handoff: h}}, x.cause)
}

func (n *Node) onHandoffAck(from overlay.Peer, a *pb.HandoffAck) {
	x := n.out
	if x == nil || x.id != a.XferId || x.to.ID != from.ID {
		n.answerAborted(from.ID, a.XferId)
		return
	}
	next := a.Upto + 1 // wraps to 0 for "none yet"
	if next != 0 && next >= x.bulk {
		x.holding = true
	}
	if next < x.sent {
		// The receiver misses chunk next: send it and those after it again — once every half
		// retry interval at most (a receiver asks after a whole one without progress). A receiver
		// that has seen the last chunk answers every chunk, a duplicate too, with what it has
		// applied, and each answer sent the rest again, duplicates that drew more answers: a leave
		// of 5,500 chunks to a receiver back from a pause took two million messages (skipsim
		// balance --pause 0.1 --pause-for 120s --seed 16).
		if now := n.env.Now(); x.resent.IsZero() || now.Sub(x.resent) >= n.cfg.HandoffRetry/2 {
			x.resent = now
			for _, h := range x.chunks[next:] {
				n.send(x.to.ID, &pb.Envelope{Body: &pb.Envelope_Handoff{Handoff: n.withAges(x, h)}}, x.cause)
			}
		}
		return
	}
	if a.Upto+1 != x.sent {
		return
	}
	if n.mayBeReplaced() {
		// The node stood still or went unheard in the middle of the handoff (a pause): its
		// predecessor may have taken its range over, writes included, and the piece's copies here
		// may be stale. Ownership must not move on them.
		n.giveUpOut(x, "giver may have been replaced")
		return
	}
	n.debug("handoff flipped", func() []zap.Field {
		return []zap.Field{zap.String("kind", x.kind.String()), zap.String("to", string(x.to.ID)), zap.Stringer("piece", x.piece)}
	})
	n.Stats.HandoffsOut++
	n.Stats.ItemsOut[x.cause] += x.items
	if x.cause == pb.Cause_CAUSE_BALANCE {
		n.Stats.BalanceItemsOut[x.kind] += x.items
	}
	n.forgetLost(x.piece) // what was lost there is the receiver's to report now
	if n.obs != nil {
		x.loads = heaviest(n.obs.PieceLeaving(x.piece), n.cfg.MaxKeyLoads)
	}
	// Ownership moved: the node is free for its next handoff while the commit goes out; the
	// flipped transfer waits for its confirmation on the side.
	n.out = nil
	n.committing[x.id] = x
	start, end := n.self.Start, n.end()
	x.onFlip()
	n.sendCommit(x)
	if top := x.piece.Start != start || x.kind == pb.HandoffKind_HANDOFF_LEAVE; top && x.piece.End != end {
		n.writeOutTakenMeanwhile(overlay.Range{Start: x.piece.End, End: end}, x)
	}
	if x.onFlipped != nil {
		x.onFlipped()
	}
	n.releaseHeldFor(x)
	n.becameIdle()
}

// releaseHeldFor re-dispatches the requests held while x closed (outXfer.holding), once it
// flipped or aborted: to the receiver, or served here.
func (n *Node) releaseHeldFor(x *outXfer) {
	if x.holding {
		n.releaseHeld()
	}
}

// writeOutTakenMeanwhile writes out the items held in r after a piece at the top of the range
// flipped: r lies from the piece's end to where the range ended at the flip — a take-over
// stretched the range while the piece was in flight (its successor, silent, declared dead).
// The receiver now owns r too, as it owns up to this node's former successor, but was handed
// the items only up to the piece's end; what was written in r meanwhile stayed here, outside
// the range, and no read found it (found by skipsim balance --pause 0.1 --pause-for 120s
// --seed 9: a joiner's piece, and a re-admission's batch write into the part taken over). A
// leave's piece is the whole range as planned; the leaver, out of the ring once it flipped,
// sends them through its receiver (TestPartTakenOverDuringALeaveWrittenOut).
func (n *Node) writeOutTakenMeanwhile(r overlay.Range, x *outXfer) {
	via := overlay.NodeID("")
	if x.kind == pb.HandoffKind_HANDOFF_LEAVE {
		via = x.to.ID
	}
	const why = "items of a part taken over during a handoff"
	items := n.writeOutCopies(r, via, handoffCopies{}, why)
	// The deletes made there since the take-over go too, with their stamps: left behind with
	// the leaver, the older copies of those keys that reached the new owner later (a
	// re-admission's) stood, and a delete acknowledged in the part read undone (small runs with
	// a fifth of the nodes paused, seed 49). Older deletes this node remembers there stay: the
	// key may have been written again where this node never saw it, and such a delete, sent,
	// read "not found" where the key was lost (small pause runs, seed 59, tried first).
	var deletes []overlay.Item
	n.deletesWithin(r, func(del overlay.Item, at time.Time) {
		if n.lost.deletedAfterTakeOver(del.Key, at) {
			deletes = append(deletes, del)
		}
	})
	if items += n.pushDeletes(deletes, r.Start, via, why); items > 0 {
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Range: r, Items: items,
			Detail: fmt.Sprintf("%d items of a part taken over while a piece was handed on written to its new owner", items)})
	}
}

func (n *Node) sendCommit(x *outXfer) {
	n.send(x.to.ID, &pb.Envelope{Body: &pb.Envelope_HandoffCommit{HandoffCommit: &pb.HandoffCommit{XferId: x.id, Chunks: x.sent, Loads: x.loads}}}, x.cause)
	n.env.SetTimer(n.cfg.HandoffRetry, overlay.Timer{Kind: timerOut, ID: x.id})
}

func (n *Node) onHandoffCommitAck(from overlay.Peer, a *pb.HandoffCommitAck) {
	if x := n.committing[a.XferId]; x != nil && x.to.ID == from.ID {
		n.finishOut(x)
	}
}

// finishOut ends a flipped handoff whose commit was confirmed: the copy of the piece goes.
func (n *Node) finishOut(x *outXfer) {
	delete(n.committing, x.id)
	n.dropCopy(x.piece)
	if x.onDone != nil {
		x.onDone()
	}
}

func (n *Node) onOutTimer(id uint64) {
	if x := n.committing[id]; x != nil {
		x.retries++
		if x.retries > maxCommitRetries {
			// The receiver never confirmed: it may have crashed with the piece, whose range its
			// neighbour then took over as lost, and this copy is the only one left. It goes to
			// whoever owns the piece now, as writes that leave what the owner holds (a value
			// written since wins); kept here, it was a copy outside this node's range that no
			// read would ever find.
			delete(n.committing, id)
			n.writeOut(x.piece, x.to.ID, "", x.copiesOf(), "receiver never confirmed the commit; the piece's items held here written to its owner")
			if x.onDone != nil {
				x.onDone()
			}
			return
		}
		n.sendCommit(x)
		return
	}
	x := n.out
	if x == nil || x.id != id {
		return
	}
	if n.env.Now().Before(x.deadline) {
		return
	}
	n.giveUpOut(x, "lease expired")
}

// giveUpOut aborts x on this node's own account and tells the receiver. The receiver may have
// acknowledged the piece and never hear the abort: it then keeps asking for the verdict and, if
// this node seems gone meanwhile, writes its copies out to their owner — to this node — as writes
// that leave what the owner holds (writeOutIn, writeOutJoin).
func (n *Node) giveUpOut(x *outXfer, reason string) {
	n.send(x.to.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: x.id, Reason: reason}}}, x.cause)
	n.expectCopiesBack(x.piece)
	n.rememberSettled(settledXfer{id: x.id, peer: x.to.ID, until: n.env.Now().Add(n.cfg.TombstoneTTL)})
	n.abortOut(x, reason)
}

// settledXfer is a handoff with peer that this node settled while peer may not know it,
// remembered until until: one it gave up on its own account as the giver (giveUpOut; the abort
// may never have arrived), or one it received and committed (commitIn; the confirmation may
// never have arrived). Peer, not knowing the verdict, may write its copies of the piece back
// to this node long after — past the time this node notes the piece for deletes (copiesOutFor)
// if either of them stood still — and they are older than what this node holds: it stores none
// of them (onBatchPut, BatchPut.copies_of_xfer). An ask for the verdict of one it gave up is
// answered with the abort (answerAborted).
type settledXfer struct {
	id       uint64
	peer     overlay.NodeID
	received bool
	until    time.Time
}

// maxSettled bounds the handoffs remembered as settled; the oldest go first.
const maxSettled = 128

// rememberSettled notes a settled handoff, dropping those remembered long enough.
func (n *Node) rememberSettled(a settledXfer) {
	now := n.env.Now()
	n.settled = slices.DeleteFunc(n.settled, func(a settledXfer) bool { return !now.Before(a.until) })
	if over := len(n.settled) + 1 - maxSettled; over > 0 {
		n.settled = slices.Delete(n.settled, 0, over)
	}
	n.settled = append(n.settled, a)
}

// settledWith returns the handoff id with peer if this node remembers settling it.
func (n *Node) settledWith(peer overlay.NodeID, id uint64) (settledXfer, bool) {
	now := n.env.Now()
	i := slices.IndexFunc(n.settled, func(a settledXfer) bool { return a.id == id && a.peer == peer && now.Before(a.until) })
	if i < 0 {
		return settledXfer{}, false
	}
	return n.settled[i], true
}

// answerAborted tells from, which asks for the verdict of handoff id by sending its
// acknowledgement again, that this node gave that handoff up, if it did so on its own account
// within TombstoneTTL: the abort sent then may never have arrived, and a receiver whose asks run
// out writes its copies out to this node, which notes the piece for deletes only so long
// (copiesOutFor) — a receiver that stood still past that brought back keys deleted here since.
func (n *Node) answerAborted(from overlay.NodeID, id uint64) {
	if a, ok := n.settledWith(from, id); ok && !a.received {
		n.send(from, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: id, Reason: "given up before the acknowledgement came"}}}, n.handling)
	}
}

func (n *Node) abortOut(x *outXfer, reason string) {
	defer n.becameIdle()
	n.debug("handoff aborted", func() []zap.Field {
		return []zap.Field{zap.String("kind", x.kind.String()), zap.String("to", string(x.to.ID)), zap.String("reason", reason), zap.Uint32("chunks_sent", x.sent)}
	})
	n.out = nil
	n.Stats.Aborts++
	if x.onAbort != nil {
		x.onAbort(reason)
	}
	n.releaseHeldFor(x)
}

// onHandoff receives one chunk.
func (n *Node) onHandoff(from overlay.Peer, h *pb.Handoff) {
	x := n.in
	if x == nil {
		piece := overlay.Range{Start: overlay.Key(h.Start), End: overlay.Key(h.End)}
		if reason := n.refuseIncoming(h.Kind, from, piece); reason != "" {
			n.debug("handoff refused", func() []zap.Field {
				return []zap.Field{zap.String("kind", h.Kind.String()), zap.String("from", string(from.ID)), zap.String("reason", reason)}
			})
			n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: h.XferId, Reason: reason}}}, n.handling)
			return
		}
		x = &inXfer{id: h.XferId, kind: h.Kind, cause: n.handling, from: from, piece: piece, early: map[uint32]*pb.Handoff{}, commit: -1}
		x.deadline = n.env.Now().Add(n.cfg.HandoffLease)
		n.in = x
		n.env.SetTimer(n.cfg.HandoffRetry, overlay.Timer{Kind: timerIn, ID: x.id})
	}
	if x.id != h.XferId {
		n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: h.XferId, Reason: "busy with another handoff"}}}, n.handling)
		return
	}
	if h.Seq < x.next {
		if x.acked {
			// A resend: the ack that ended the stream was lost.
			n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAck{HandoffAck: &pb.HandoffAck{XferId: x.id, Upto: x.next - 1}}}, x.cause)
		}
		return // duplicate
	}
	x.early[h.Seq] = h
	for {
		c := x.early[x.next]
		if c == nil {
			break
		}
		delete(x.early, x.next)
		if err := n.applyChunk(x, c); err != nil {
			n.env.Logger().Warn("persist handoff chunk failed; aborting")
			n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: x.id, Reason: "receiver cannot persist"}}}, x.cause)
			n.discardIn(x)
			return
		}
		x.next++
	}
	if x.lastSeen {
		x.acked = true
		n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAck{HandoffAck: &pb.HandoffAck{XferId: x.id, Upto: x.next - 1}}}, x.cause)
	}
	if x.commit >= 0 && int(x.next) >= x.commit {
		n.commitIn(x)
	}
}

func (n *Node) applyChunk(x *inXfer, c *pb.Handoff) error {
	if c.Seq == 0 {
		x.lost = x.lost[:0]
		for i, r := range c.Lost {
			var since time.Time // not known
			if i < len(c.LostAgesNanos) && c.LostAgesNanos[i] > 0 {
				since = n.agoOnArrival(c.LostAgesNanos[i])
			}
			x.lost.add(overlay.RangeFromPB(r), since)
		}
		x.tombs, x.recent = nil, nil // made when the first comes: most pieces have none
		x.succ, x.pred = overlay.Peer{}, overlay.Peer{}
		if c.Succ != nil {
			x.succ = overlay.PeerFromPB(c.Succ)
		}
		if c.Pred != nil {
			x.pred = overlay.PeerFromPB(c.Pred)
		}
		x.succList = x.succList[:0]
		for _, p := range c.SuccList {
			x.succList = append(x.succList, overlay.PeerFromPB(p))
		}
	}
	if c.Last {
		x.lastSeen = true
	}
	// A copy held here written later than the giver's — a stray from the other side of a cut —
	// stands, as it would against any other copy (stamp.go); it is not one the chunk brought.
	items := make([]overlay.Item, 0, len(c.Items))
	for _, it := range c.Items {
		key := overlay.Key(it.Key)
		delete(x.tombs, key) // written at the giver after its tombstone went
		if !n.copyStands(key, it.Written, false) {
			n.Stats.CopiesOlder++
			continue
		}
		items = append(items, overlay.Item{Key: key, Value: it.Value, Written: it.Written})
		x.received = append(x.received, key)
	}
	if err := n.store.PutBatch(items, c.Last); err != nil {
		return err
	}
	if len(items) > 0 {
		n.storeWritten = n.env.Now()
	}
	for _, deletes := range []struct {
		of  []*pb.Tombstone
		add func(overlay.Key, tombstone)
	}{{c.Tombstones, x.addTombstone}, {c.RecentDeletes, x.addRecent}} {
		for _, t := range deletes.of {
			k, d := n.receivedTombstone(t)
			if err := n.dropOlder(k, d.written); err != nil {
				return err
			}
			deletes.add(k, d)
		}
	}
	for i, k := range c.Deletes {
		written := stampAt(c.DeletesWritten, i)
		if n.copyStands(overlay.Key(k), written, false) {
			if err := n.store.Delete(overlay.Key(k)); err != nil {
				return err
			}
		} else {
			n.Stats.CopiesOlder++
		}
		d := tombstone{at: n.env.Now(), written: written}
		x.addRecent(overlay.Key(k), d)
		if x.lost.contains(overlay.Key(k)) {
			x.addTombstone(overlay.Key(k), d)
		}
	}
	return nil
}

// dropOlder deletes what this node holds of key where a delete stamped written came after it: a
// copy it held in a piece coming in (a joiner's from its former place, a stray) that the giver
// has deleted since, and which would otherwise stand as the owner's value once the piece commits.
func (n *Node) dropOlder(key overlay.Key, written uint64) error {
	held, found, err := n.store.Get(key)
	if err != nil || !found || !supersedes(written, held.Written, true) {
		return err
	}
	return n.store.Delete(key)
}

// unconfirmedReceiver refuses a NIX or a leave to a node that waits for its neighbours'
// confirmation: if the ring replaced it, a live node will meet it inside its range and it will
// drop its copies there as stale (cede), fresh items from the handoff with them (30% of 500
// nodes crashing, seed 1: a NIX taken while waiting, then dropped, 10 items lost).
const unconfirmedReceiver = "receiver waits for its neighbours to confirm its place"

// refuseIncoming says why this node cannot take a piece now ("" when it can).
func (n *Node) refuseIncoming(kind pb.HandoffKind, from overlay.Peer, piece overlay.Range) string {
	switch kind {
	case pb.HandoffKind_HANDOFF_JOIN, pb.HandoffKind_HANDOFF_JOIN_BELOW:
		if n.state != StateJoining {
			return "not joining"
		}
	case pb.HandoffKind_HANDOFF_NIX:
		switch {
		case n.state != StateActive:
			return "receiver is " + n.state.String()
		case n.Busy():
			return "receiver busy"
		case n.unconfirmed():
			return unconfirmedReceiver
		case n.levels[0].pred.ID == from.ID && piece.End == n.self.Start:
			// A piece from below: the receiver's start moves down to the piece's start.
		case n.levels[0].succ.ID == from.ID && piece.Start == n.end():
			// A piece from above: the receiver's range grows when the giver's start moves up.
		default:
			return "not adjacent"
		}
	case pb.HandoffKind_HANDOFF_LEAVE:
		switch {
		case n.state != StateActive:
			return "receiver is " + n.state.String()
		case n.Busy():
			return "receiver busy"
		case n.unconfirmed():
			return unconfirmedReceiver
		case n.levels[0].succ.ID != from.ID || piece.Start != n.end():
			return "not adjacent"
		}
	default:
		return "unsupported handoff kind"
	}
	return ""
}

func (n *Node) onHandoffCommit(from overlay.Peer, c *pb.HandoffCommit) {
	x := n.in
	if x == nil || x.id != c.XferId {
		// Already committed (a repeated commit whose ack was lost): confirm again.
		n.forward(from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffCommitAck{HandoffCommitAck: &pb.HandoffCommitAck{XferId: c.XferId}}})
		return
	}
	x.commit = int(c.Chunks)
	x.loads = c.Loads
	if int(x.next) >= x.commit {
		n.commitIn(x)
	}
}

func (n *Node) commitIn(x *inXfer) {
	defer n.becameIdle()
	n.in = nil
	n.Stats.HandoffsIn++
	n.takeLost(x)
	n.send(x.from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffCommitAck{HandoffCommitAck: &pb.HandoffCommitAck{XferId: x.id}}}, x.cause)
	// Should every confirmation be lost, the giver writes its copies out to their owner, this
	// node, as writes that leave what it holds (onOutTimer): deletes in the piece leave
	// tombstones for a while, and copies of this handoff are not stored at all.
	n.expectCopiesBack(x.piece)
	n.rememberSettled(settledXfer{id: x.id, peer: x.from.ID, received: true, until: n.env.Now().Add(n.cfg.TombstoneTTL)})
	switch x.kind {
	case pb.HandoffKind_HANDOFF_JOIN, pb.HandoffKind_HANDOFF_JOIN_BELOW:
		n.joined(x)
	case pb.HandoffKind_HANDOFF_LEAVE:
		n.tookOverLeaver(x)
	case pb.HandoffKind_HANDOFF_NIX:
		n.tookNIX(x)
	}
	if n.obs != nil {
		n.obs.PieceArrived(x.piece, x.loads)
	}
	n.releaseHeld()
}

func (n *Node) onHandoffAbort(from overlay.Peer, a *pb.HandoffAbort) {
	if x := n.out; x != nil && x.id == a.XferId && x.to.ID == from.ID {
		n.abortOut(x, a.Reason)
		return
	}
	if x := n.in; x != nil && x.id == a.XferId && x.from.ID == from.ID {
		n.discardIn(x)
	}
}

// discardIn drops an incoming piece that will not commit.
func (n *Node) discardIn(x *inXfer) {
	defer n.becameIdle()
	n.debug("incoming handoff discarded", func() []zap.Field {
		return []zap.Field{zap.String("kind", x.kind.String()), zap.String("from", string(x.from.ID)), zap.Bool("acked", x.acked), zap.Uint32("chunks_applied", x.next)}
	})
	n.in = nil
	n.Stats.Aborts++
	n.dropReceived(x)
	if n.state == StateJoining {
		n.retryJoinLater()
	}
	n.releaseHeld()
}

// disown outdates, when x is an acknowledged piece from below that this node gives up while its
// giver is silent, the start the giver may have announced for it: a giver that flipped learned this
// node's start at the piece's start, one version up, and told others so (its leave names this node
// as the successor), though this node never moved there. The piece's giver, paused past the
// receiver's asks, then took a late confirmation of its commit for its own: its leave gave its
// predecessor a successor starting at the piece's start, and no word of this node, at a lower
// version, ever corrected it — the piece was nobody's for good (a random case of
// TestBalancePauseProperties, kept as -known-commit-confirmed-for-a-piece-given-up). Its start, two
// versions up, now outranks that announcement wherever it went: a predecessor that took it, hearing
// this node named as its successor at the older start, takes the part between over (succMovedUp).
func (n *Node) disown(x *inXfer) {
	if x.acked && x.piece.End == n.self.Start {
		n.self = n.self.WithStart(n.self.Start, n.self.Version+2)
		n.refreshSelfRef()
	}
}

// adoptFromDead keeps the piece of an incoming handoff that this node acknowledged when its
// giver — this node's level-0 successor, whose range this node is taking over — died before the
// commit arrived. Whether or not the giver flipped, this node now holds the only copy, and the
// piece lies in the range it takes over (a piece from above starts where this range ends), so
// keeping it is the only way not to lose it (discarding it later would even delete items of
// this node's own range, once it heard of the giver's new start). It returns the piece; the caller subtracts it from
// what it reports lost, then releases the held messages.
func (n *Node) adoptFromDead(dead overlay.NodeID) (overlay.Range, bool) {
	x := n.in
	// The piece starts where this range ends, or ends there if this node already heard of the
	// giver's new start.
	if x == nil || x.from.ID != dead || !x.acked || (x.piece.Start != n.end() && x.piece.End != n.end()) ||
		(x.kind != pb.HandoffKind_HANDOFF_NIX && x.kind != pb.HandoffKind_HANDOFF_LEAVE) {
		return overlay.Range{}, false
	}
	n.keepPiece(x)
	return x.piece, true
}

// keepPiece ends x, an incoming piece this node acknowledged whose giver died before the commit
// arrived, as if the commit had come (the kind-specific change of range is the caller's).
func (n *Node) keepPiece(x *inXfer) {
	n.in = nil
	n.Stats.HandoffsIn++
	n.takeLost(x)
	if n.obs != nil {
		n.obs.PieceArrived(x.piece, x.loads)
	}
	n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: x.from.ID, Range: x.piece,
		Detail: "giver died after this node acknowledged its piece; the piece is kept"})
}

// addTombstone records a tombstone of the piece.
func (x *inXfer) addTombstone(k overlay.Key, d tombstone) {
	if x.tombs == nil {
		x.tombs = map[overlay.Key]tombstone{}
	}
	x.tombs[k] = d
}

// hasTombstone reports whether x is not nil and holds a tombstone of key in its piece.
func (x *inXfer) hasTombstone(key overlay.Key) bool {
	if x == nil {
		return false
	}
	_, ok := x.tombs[key]
	return ok
}

// addRecent records a recent delete in the piece.
func (x *inXfer) addRecent(k overlay.Key, d tombstone) {
	if x.recent == nil {
		x.recent = map[overlay.Key]tombstone{}
	}
	x.recent[k] = d
}

// takeLost makes the lost parts of x's piece, their tombstones and the piece's recent deletes
// this node's own.
func (n *Node) takeLost(x *inXfer) {
	n.lost = append(n.lost, x.lost...)
	for k, d := range x.tombs {
		n.tombs.set(k, d)
	}
	n.evictTombstones()
	for k, d := range x.recent {
		n.recentDeletes.set(k, d)
	}
	n.recentDeletes.evictOldest(n.cfg.MaxTombstones)
}

// ackedFromBelow returns the incoming piece this node acknowledged from its level-0
// predecessor by a NIX (its start moves down when the piece commits), nil if there is none.
func (n *Node) ackedFromBelow() *inXfer {
	x := n.in
	if x == nil || !x.acked || x.kind != pb.HandoffKind_HANDOFF_NIX || x.piece.End != n.self.Start {
		return nil
	}
	return x
}

// askTakerOfGiver starts the settling of an acknowledged piece from below when a neighbour
// update made taker the level-0 predecessor in place of its giver (was: the predecessor before,
// zero when this node had found it gone). While the piece is pending its giver is busy with it
// and neither joins nor leaves: a new predecessor means that the giver died and taker took its
// range over. Whether or not the giver flipped, the copies here may be the only ones; where they
// belong depends on where taker's take-over stopped — at this node's start as taker knew it,
// which is the piece's start if the giver flipped and told taker of it before it died, and the
// old start otherwise. Taker is asked (a ping: its answer names its successor as it knows it)
// and settleOrphan acts on the answer. Discarded once the commit never came, as before, the
// piece's items were lost though no node responsible for them had crashed (a migrant's split
// leave gave the top of its range to its successor by a NIX, and the migrant and the leave's
// receiver crashed before the commit: TestBalanceCrashProperties).
func (n *Node) askTakerOfGiver(was, taker overlay.Peer) {
	x := n.ackedFromBelow()
	if x == nil || !(was.IsZero() || was.ID == x.from.ID) || taker.ID == x.from.ID {
		return
	}
	n.maintain.orphanSeq = n.ping(taker, 0, false)
}

// maxOrphanRetries bounds the asks for the commit of a piece from below whose giver has fallen
// silent (awaitTakerOfGiver).
const maxOrphanRetries = 4 * maxCommitRetries

// awaitTakerOfGiver reports whether the asks for x's commit, run out, go on: x is a piece from
// below whose giver — this node's predecessor, or gone from that link — has not been heard from
// lately. A dead giver's range is taken over by its own predecessor, which then tells this node
// (askTakerOfGiver settles the piece on that word), and finding the giver dead and asking
// before the take-over can take longer than the asks last: a receiver gave up on its piece a
// moment before the word came (TestBalanceCrashProperties). They also go on while the taker is
// asked. A giver heard lately is alive, and its silence about the commit means it aborted: the
// piece is discarded. One still silent when the asks run out is given up as giverSilent says.
func (n *Node) awaitTakerOfGiver(x *inXfer) bool {
	if x.retries > maxOrphanRetries || n.ackedFromBelow() != x {
		return false
	}
	if _, asking := n.maintain.pings[n.maintain.orphanSeq]; asking {
		return true
	}
	return n.giverSilent(x)
}

// giverSilent reports whether x is the acknowledged piece from below whose giver — this node's
// predecessor, or gone from that link with no other node in its place — has not been heard from
// lately. When the asks for its commit run out so, this node cannot tell a giver that died after
// the flip (its range taken over by a node whose word never came) from one that aborted and lost
// touch: the piece's items are written to their owner, as writes that leave what the owner
// holds (TestNIXGiverDiesAndTheTakerIsNeverHeard). Discarded, as before, they were lost in the
// first case; the second brings back a key deleted meanwhile, the joiner's trade (writeOutJoin).
func (n *Node) giverSilent(x *inXfer) bool {
	pred := n.levels[0].pred
	return n.ackedFromBelow() == x && (pred.IsZero() || pred.ID == x.from.ID) && !n.predHeardLately()
}

// settleOrphan acts on the answer of taker (see askTakerOfGiver), which names succ as its
// level-0 successor. If its range ends at the piece's start, this node keeps the piece: its start
// moves down as if the commit had come, and the two ranges meet. If it ends at this node's start,
// the piece lies in taker's range now: its items go to taker as writes that leave what it holds
// (a value written since the take-over wins), as a giver's copies go to the owner when its
// receiver never confirms the commit (onOutTimer), and are dropped here. Moving the start down
// in that case would make the two own the piece at once until they settled (a first form did;
// the balancing property test checks at every quarter time unit that no two nodes do). An answer
// that names another successor settles nothing: the piece is discarded after the asks for the
// commit run out, as before.
func (n *Node) settleOrphan(taker, succ overlay.Peer) {
	x := n.ackedFromBelow()
	if x == nil || x.from.ID == taker.ID || succ.ID != n.self.ID ||
		(succ.Start != x.piece.Start && succ.Start != n.self.Start) {
		return
	}
	if succ.Start != x.piece.Start {
		n.writeOutIn(x, "giver died after this node acknowledged its piece; the piece's items written to the node that took its range over")
		return
	}
	defer n.becameIdle()
	n.keepPiece(x)
	n.tookNIX(x)
	n.releaseHeld()
}

// writeOutIn gives up x, an acknowledged incoming piece whose commit will not come, writing its
// items to their owner (writeOut).
func (n *Node) writeOutIn(x *inXfer, why string) {
	defer n.becameIdle()
	n.in = nil
	n.Stats.Aborts++
	n.disown(x)
	n.writeOut(x.piece, x.from.ID, "", x.copiesOf(), why)
	// The piece's deletes go too, each with its stamp: the owner's older copy of such a key
	// (a node back from a pause holds its value from before the delete) stood against the
	// items' writes, which leave what the owner holds, and the delete, acknowledged at the
	// giver, was undone (skipsim balance --pause 0.1 --clients 20, small runs).
	n.pushDeletes(x.deletes(n.store), x.piece.Start, "", why)
	n.releaseHeld()
}

// deletes returns the deletes the piece brought — its tombstones and recent deletes — of keys
// store does not hold again.
func (x *inXfer) deletes(store overlay.Store) []overlay.Item {
	var out []overlay.Item
	seen := map[overlay.Key]bool{}
	for _, set := range []map[overlay.Key]tombstone{x.tombs, x.recent} {
		for k, d := range set {
			if !x.piece.Contains(k) {
				continue
			}
			if del, ok := unheldDelete(store, seen, k, d); ok {
				out = append(out, del)
			}
		}
	}
	return out
}

// writeOutJoin gives up the piece of a join that this joiner acknowledged and whose giver never
// sent the commit: the giver flipped and died, most likely, and the node that took its range over
// took the piece with it, never having heard of this joiner. The copies here are then the only
// ones; they go to whoever owns the piece now, as writes that leave what the owner holds, through
// the node the giver named as this joiner's successor (or predecessor) — live a moment ago, and
// in the ring where this joiner is not — and the join is tried again. Discarded, as before, they
// were lost though no node responsible for them had crashed. If instead the giver aborted and all
// its word of it was lost, the writes reach the giver, whose deletes in the piece since left
// tombstones (giveUpOut): what it deleted stays deleted.
func (n *Node) writeOutJoin(x *inXfer) {
	defer n.becameIdle()
	n.in = nil
	n.Stats.Aborts++
	via := x.succ.ID
	if x.succ.IsZero() || x.succ.ID == x.from.ID {
		via = x.pred.ID
	}
	if via == "" || via == x.from.ID {
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: x.from.ID, Range: x.piece, Items: len(n.copiesIn(x.piece)),
			Detail: "giver never confirmed an acknowledged join and named no other node; piece discarded"})
		n.dropReceived(x)
	} else {
		n.writeOut(x.piece, x.from.ID, via, x.copiesOf(), "giver never confirmed an acknowledged join; the piece's items written to its owner through "+string(via))
	}
	n.retryJoinLater()
	n.releaseHeld()
}

// writeOut gives up the copies this node holds in piece, a handoff's that the other side, peer,
// never settled as far as this node knows: they go to whoever owns them now as writes that leave
// what the owner holds (a value written since wins), through via when this node is outside the
// ring, and are dropped once stored (pushCopies). Those the handoff carried name it (of), so
// that peer, if it settled it after all, stores none of them (settledXfer). The conflict event
// says why.
func (n *Node) writeOut(piece overlay.Range, peer, via overlay.NodeID, of handoffCopies, why string) {
	items := n.writeOutCopies(piece, via, of, "unsettled handoff")
	n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: peer, Range: piece, Items: items, Detail: why})
}

// handoffCopies names a handoff (xfer; 0: none) and the keys it carried: of the copies written
// out, only those came with it, and only those are its copies. Others in its piece came from
// elsewhere (a joiner back at its former place, copies a failed write left to be written again)
// and may be the only ones.
type handoffCopies struct {
	xfer uint64
	keys map[overlay.Key]bool
}

// copiesOf names this handoff and the keys its chunks carried.
func (x *outXfer) copiesOf() handoffCopies {
	of := handoffCopies{xfer: x.id, keys: map[overlay.Key]bool{}}
	for _, h := range x.chunks {
		for _, it := range h.Items {
			of.keys[overlay.Key(it.Key)] = true
		}
	}
	return of
}

// copiesOf names this handoff and the keys its applied chunks brought.
func (x *inXfer) copiesOf() handoffCopies {
	of := handoffCopies{xfer: x.id, keys: map[overlay.Key]bool{}}
	for _, k := range x.received {
		of.keys[k] = true
	}
	return of
}

// writeOutCopies writes the copies this node holds in r, and is not responsible for, to their
// owners as writes that leave what those hold, through via when this node is outside the ring,
// those handoff of carried naming it (pushCopies); it returns how many.
func (n *Node) writeOutCopies(r overlay.Range, via overlay.NodeID, of handoffCopies, why string) int {
	items := n.copiesIn(r)
	var carried, others []overlay.Item
	for _, it := range items {
		if of.keys[it.Key] {
			carried = append(carried, it)
		} else {
			others = append(others, it)
		}
	}
	if len(carried) > 0 {
		n.pushCopies(carried, true, of.xfer, via, nil, why, nil)
	}
	if len(others) > 0 {
		n.pushCopies(others, true, 0, via, nil, why, nil)
	}
	return len(items)
}

func (n *Node) onInTimer(id uint64) {
	x := n.in
	if x == nil || x.id != id {
		return
	}
	if !x.acked {
		if n.env.Now().Before(x.deadline) {
			if x.next == x.checked {
				// No chunk applied since the last look: ask for those after the last in order.
				n.send(x.from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAck{HandoffAck: &pb.HandoffAck{XferId: x.id, Upto: x.next - 1}}}, x.cause)
			}
			x.checked = x.next
			n.env.SetTimer(min(n.cfg.HandoffRetry, x.deadline.Sub(n.env.Now())), overlay.Timer{Kind: timerIn, ID: x.id})
			return
		}
		n.send(x.from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: x.id, Reason: "lease expired"}}}, x.cause)
		n.discardIn(x)
		return
	}
	// Acknowledged: the giver may have flipped. Ask again rather than discard.
	x.retries++
	if x.retries > maxCommitRetries && !n.awaitTakerOfGiver(x) {
		if n.state == StateJoining {
			n.writeOutJoin(x)
			return
		}
		if n.giverSilent(x) {
			n.writeOutIn(x, "giver silent and the node that took its range over never heard from after this node acknowledged its piece; the piece's items written to their owner")
			return
		}
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: x.from.ID, Range: x.piece,
			Detail: "giver never confirmed an acknowledged handoff; piece discarded"})
		n.discardIn(x)
		return
	}
	n.send(x.from.ID, &pb.Envelope{Body: &pb.Envelope_HandoffAck{HandoffAck: &pb.HandoffAck{XferId: x.id, Upto: x.next - 1}}}, x.cause)
	n.env.SetTimer(n.cfg.HandoffRetry, overlay.Timer{Kind: timerIn, ID: x.id})
}

// heaviest keeps the limit most loaded of loads (by their summed counts), in their order.
func heaviest(loads []*pb.KeyLoad, limit int) []*pb.KeyLoad {
	if len(loads) <= limit {
		return loads
	}
	sum := func(l *pb.KeyLoad) (t uint64) {
		for _, c := range l.Counts {
			t += uint64(c)
		}
		return t
	}
	byLoad := slices.Clone(loads)
	slices.SortStableFunc(byLoad, func(a, b *pb.KeyLoad) int { return cmp.Compare(sum(b), sum(a)) })
	keep := map[*pb.KeyLoad]bool{}
	for _, l := range byLoad[:limit] {
		keep[l] = true
	}
	return slices.DeleteFunc(loads, func(l *pb.KeyLoad) bool { return !keep[l] })
}
