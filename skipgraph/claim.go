package skipgraph

import (
	"fmt"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Overlapping claims. A node's claim on its range carries a boundary version: a Lamport
// timestamp (every message carries its sender's clock, receivers raise theirs to it) stamped
// whenever the range changes — a join, a handoff's flip on either side, a take-over after a
// failure, a re-admission. Two nodes claim overlapping ranges when a node x answers from inside
// what another node n takes for its own range: n declared x dead and took its range over (a
// false suspicion, a pause, a partition, a restart), or n took over a dead successor's range
// without knowing that x had just joined it. n finds x by the intruder check (onPong) and
// settles the overlap [x.start, n.end) by comparing the two claims:
//
//   - the claim of a node that waits for its neighbours' confirmation (restored from a
//     snapshot, or back from standing still long enough to have been replaced) ranks below
//     every confirmed claim: it predates whatever the ring did meanwhile, although its number
//     alone cannot show it (the node may have moved a boundary just before it stopped, unheard
//     by the node that took its range over);
//   - between two claims of the same rank, the higher version wins, then the greater node ID.
//
// The winner's items stand in the overlap. In every case x keeps its start (it answers for it:
// the piece goes back to it as a fresh boundary move) and n's range ends there:
//
//   - n's claim wins: n sends x the items it holds there (writes made under its take-over),
//     which overwrite x's older copies (readmit);
//   - x's claim wins over a confirmed n: n sends its items with keep_existing, x's values stand
//     and only keys x lacks are added (readmit);
//   - x's claim wins over an unconfirmed n: the same. n's copies there were counted lost when
//     its range was taken over, and may be older than the ring's values (a node restored from
//     its store, or back from a pause), which keep_existing leaves standing; but they may also
//     be the only copies: a node cut off by a partition took handoffs from its own side
//     meanwhile, and dropping them, as we once did, lost items that no crash took (a random
//     case of TestPartitionProperties). The trade is the joiner's (writeOutJoin): a key that
//     the ring deleted meanwhile comes back;
//   - neither claim is confirmed: readmit with keep_existing, whatever the versions. Neither
//     node took writes while unconfirmed (it holds requests), so the newest values in the
//     overlap are mostly those written where x answered from before: n took x's range over
//     without its items, and a node cut off from the others stamps new versions as it goes, so
//     the higher version would favour n's older copies. Nothing is dropped either: waiting for
//     one of the two to be confirmed, as we once did, could wait for ever — after crashes
//     around them, each may need the other as its neighbour to be confirmed at all — and the
//     one that gave up first dropped items that were nowhere else (TestOverlayProperties found
//     it).
//
// Where x's values stand, n's still win where they are newer than every copy x holds: x's pong
// says how long its store has taken no value (Pong.unwritten_for_nanos, measured on x's own
// clock, so no clocks need agree), and the values in the lost parts n took over after that —
// each arrived at n since — overwrite x's, and n's deletes made after it go to x as deletes. n
// may have been confirmed for a while between two waits and taken writes then (a random
// TestPauseProperties case found a delete undone so). Lost parts come with their age when
// handed on, and with their time in snapshots; a part that took in another node's copies
// (keep-existing writes, which may be older than the take-over) forgets its time.
//
// Each decision is reported as an EventConflict that names both claims.

// claim is one side of an overlap, as the rule compares them.
type claim struct {
	confirmed bool
	version   uint64
	id        overlay.NodeID
}

// outranks reports whether c wins over o: a confirmed claim over an unconfirmed one, then the
// higher version, then the greater node ID. For two distinct nodes exactly one outranks the other.
func (c claim) outranks(o claim) bool {
	if c.confirmed != o.confirmed {
		return c.confirmed
	}
	if c.version != o.version {
		return c.version > o.version
	}
	return c.id > o.id
}

// String names the claim without its node (events name the peer apart; node IDs are bytes).
func (c claim) String() string {
	if c.confirmed {
		return fmt.Sprintf("v%d (confirmed)", c.version)
	}
	return fmt.Sprintf("v%d (unconfirmed)", c.version)
}

// decide says which claim won and why, for the conflict event.
func decide(winner, loser claim, ours bool) string {
	s := fmt.Sprintf("their claim %s outranks ours %s", winner, loser)
	if ours {
		s = fmt.Sprintf("our claim %s outranks theirs %s", winner, loser)
	}
	if winner.confirmed == loser.confirmed && winner.version == loser.version {
		s += ", equal versions: the greater node ID wins"
	}
	return s
}

// ownClaim is this node's side of an overlap.
func (n *Node) ownClaim() claim {
	return claim{confirmed: !n.unconfirmed(), version: n.claim, id: n.self.ID}
}

// observeClock raises the clock to a received message's.
func (n *Node) observeClock(c uint64) { n.clock = max(n.clock, c) }

// stampClaim gives the range a new boundary version if it changed since the last stamp. It runs
// before every message goes out and after every step, so a message sent after a change carries
// a clock at least the new version.
func (n *Node) stampClaim() {
	if !n.Owns() {
		return
	}
	r := n.Range()
	if r != n.claimed {
		n.clock++
		n.claim = n.clock
	}
	// Equal or not, keep the range's own strings: every message sent stamps the claim, and a
	// comparison of strings that share their bytes is a pointer check, not a read of the
	// successor's start from wherever the message that brought it was allocated.
	n.claimed = r
}

// settleOverlap decides, by the rule above, the overlap between this node's range and that of
// x, a live node answering from inside it; p is x's level-0 pong.
func (n *Node) settleOverlap(x overlay.Peer, p *pb.Pong) {
	if n.Busy() {
		// A handoff under way was planned on the range as it is: a NIX to the predecessor
		// whose split lies past x's start would, once committed, move this node's start past
		// its new end — a range wrapping round the circle, over x's (found by skipsim balance
		// --pause 0.05 --pause-for 30s --seed 11). The check comes again with the successor's
		// next answer naming x, or x's next ping, once the handoff is settled.
		return
	}
	mine := n.ownClaim()
	theirs := claim{confirmed: !p.Unconfirmed, version: p.Claim, id: x.ID}
	// x's store has taken no value since xWrittenBefore. Measured at the pong's arrival, the
	// span is if anything too short by the pong's delay, which errs towards x's copies; a span
	// beyond TombstoneTTL reaches past every tombstone anyway.
	xWrittenBefore := n.env.Now().Add(-min(time.Duration(min(p.UnwrittenForNanos, math.MaxInt64)), n.cfg.TombstoneTTL))
	switch {
	case mine.confirmed && mine.outranks(theirs):
		n.readmit(x, true, xWrittenBefore, decide(mine, theirs, true))
	case !mine.confirmed && !theirs.confirmed:
		n.readmit(x, false, xWrittenBefore, fmt.Sprintf("neither claim confirmed (ours %s, theirs %s): the node answering from its start keeps its values but for newer ones here", mine, theirs))
	default:
		n.readmit(x, false, xWrittenBefore, decide(theirs, mine, false))
	}
	// An unconfirmed node held the requests for its range: those for the piece go on to x.
	n.releaseHeld()
}

// readmit gives the overlap [x.start, end) to x, which answers from there: x's place is kept,
// this node's range ends at x. The items this node holds there follow as batch writes to x.
// Where our claim won (ours) they overwrite x's copies — writes made under our take-over, which
// would otherwise be lost — and every tombstone there goes as a delete. Otherwise x's values
// stand (the writes keep what x holds), except where ours are newer than every copy of x, whose
// store has taken no value since xWrittenBefore: the values in the lost parts this node took
// over after that (every one arrived since) overwrite, and the deletes made since go.
func (n *Node) readmit(x overlay.Peer, ours bool, xWrittenBefore time.Time, why string) {
	piece := overlay.Range{Start: x.Start, End: n.end()}
	newer := []overlay.Range{piece}
	if !ours {
		newer = n.lost.takenOverAfter(piece, xWrittenBefore)
	}
	var overwrite, keep []overlay.Item
	_ = n.store.Ascend(piece, func(it overlay.Item) bool {
		if slices.ContainsFunc(newer, func(r overlay.Range) bool { return r.Contains(it.Key) }) {
			overwrite = append(overwrite, it)
		} else {
			keep = append(keep, it)
		}
		return true
	})
	// Every delete this node remembers in the piece goes too: its tombstones, and the deletes of
	// the last hour made where it kept none — a part it held whole, such as a piece a leaving
	// node had handed it before standing still, which it adopted when it took that node's range
	// over. x's copy of such a key, older than the delete, came back otherwise (skipsim balance
	// --pause 0.1 --pause-for 120s --clients 50 --seed 9). Each stands at x only where written
	// later than x's copy. A key written again since its delete goes as its value alone: a batch
	// applies its deletes after its items.
	n.deletesWithin(piece, func(del overlay.Item, at time.Time) {
		if ours || at.After(xWrittenBefore) {
			overwrite = append(overwrite, del)
		} else {
			keep = append(keep, del)
		}
	})
	// Clockwise from the piece's start, the tombstones among the items: the batches cut from
	// the lists go to their owners in that order (putBatch), the first to x. Left after the
	// items, deletes of keys before the first item went out last, as if past the seam, on a
	// walk round the ring, and a key x served meanwhile stayed undeleted (skipsim balance
	// --pause 0.1 --pause-for 120s --clients 50 --seed 9).
	sortClockwise(overwrite, piece.Start)
	sortClockwise(keep, piece.Start)
	if old := n.levels[0].succ; old.ID != n.self.ID {
		// x gets everything up to this node's successor as it is now; its own view of that
		// successor may be older (a restored snapshot), with a lower start, which would leave
		// the keys in between to nobody. Tell it, and that this node re-admitted it: x, waiting,
		// then waits for this node's word on the batches below whoever vouches for it, even
		// where they are all lost. It learnt of its re-admitter only from a batch once, and
		// with the one batch of its piece lost, the node before it — re-admitted a moment
		// later by the same holder, and no longer waiting — vouched for it before the retry
		// came; it served a value older than an acknowledged write (skipsim balance --nodes
		// 50 ... --pause 0.1 --pause-for 120s --loss 0.02 --clients 50 --seed 302).
		n.sendFailureUpdate(x.ID, &pb.NeighborUpdate{Side: pb.Side_SIDE_SUCC, Node: old.ToPB(), Expect: []byte(old.ID), Readmission: true})
	}
	n.linkSuccessor(x)
	n.maintain.former = nil // not alone any more
	holes := n.lost.within(piece)
	n.forgetLost(piece) // x still has its items
	n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: x.ID, Range: piece, Items: len(overwrite) + len(keep),
		Detail: fmt.Sprintf("overlapping claims: %s; re-admitted, %d items and deletes held here sent overwriting, %d keeping what it holds",
			why, len(overwrite), len(keep))})
	// Once both writes are stored, the piece's items are all at x but in the parts lost here:
	// x's own lost marks elsewhere in the piece (from take-overs while it was cut off) go, and
	// so do this node's, should the piece be back here by then (x left at once).
	written, pushed := 0, len(overwrite)+len(keep) > 0
	whole := func() {
		if written++; written == 2 {
			n.sendCopiesWhole(piece, holes, pushed)
		}
	}
	// Sent to x itself, not routed: x owns the whole piece now, and on a link that keeps the
	// order of messages every batch reaches it before the pong that names it this node's
	// successor, which confirms it if it waits (checkConfirmed). Routed, a batch once went
	// round by other nodes and came six seconds after that pong, x meanwhile serving its
	// older values (the checked clients of skipsim balance --pause found it).
	n.pushCopies(overwrite, false, 0, x.ID, &piece, "re-admission", whole)
	n.pushCopies(keep, true, 0, x.ID, &piece, "re-admission", whole)
}

// deletesWithin calls f with every delete this node remembers in r, its tombstones and its recent
// deletes, as a delete item with its stamp, and when it was made; a key written again since is
// left out (its value goes with the items).
func (n *Node) deletesWithin(r overlay.Range, f func(del overlay.Item, at time.Time)) {
	seen := map[overlay.Key]bool{}
	for _, set := range []*tombstones{&n.tombs, &n.recentDeletes} {
		for _, t := range set.within(r) {
			k, d := tombstoneFromPB(t)
			if del, ok := unheldDelete(n.store, seen, k, d); ok {
				f(del, d.at)
			}
		}
	}
}

// deleteItemsIn returns every delete this node remembers in r as a delete item with its stamp
// (deletesWithin): what a node that gives a part up sends with its copies, to stand where newer.
func (n *Node) deleteItemsIn(r overlay.Range) []overlay.Item {
	var dels []overlay.Item
	n.deletesWithin(r, func(del overlay.Item, _ time.Time) { dels = append(dels, del) })
	return dels
}

// pushDeletes writes dels, deletes with their stamps, to their owners through via (pushCopies),
// in clockwise order from from, as copies that stand only where newer than what the owners
// hold; it returns how many.
func (n *Node) pushDeletes(dels []overlay.Item, from overlay.Key, via overlay.NodeID, why string) int {
	sortClockwise(dels, from)
	n.pushCopies(dels, true, 0, via, nil, why, nil)
	return len(dels)
}

// unheldDelete returns key's delete d as a delete item with its stamp, or false when store holds
// key again (its value goes instead) or seen has it already (one delete a key); it marks key seen.
func unheldDelete(store overlay.Store, seen map[overlay.Key]bool, key overlay.Key, d tombstone) (overlay.Item, bool) {
	if _, held, _ := store.Get(key); held || seen[key] {
		return overlay.Item{}, false
	}
	seen[key] = true
	return overlay.Item{Key: key, Deleted: true, Written: d.written}, true
}

// pushCopies writes items this node holds but may not own to their owners, in batches, and
// drops each batch's copies once it is stored, except the keys it is responsible for again or
// may be soon (a piece coming in: found with the answer overtaken by the piece's chunks). A
// batch that fails leaves its copies here: those in the range a later handoff or re-admission can
// still find, the others the tick writes out again (strays). With keepExisting the owners' own
// values stand. A node outside the ring sends them through via, a live node; so does a node
// whose items belong first to via, to reach it before anything it sends via later. from, if
// not nil, is the range the items were read from (in clockwise order from its start): each
// batch says which part of it it accounts for (cutCovers, BatchPut.covers), for a CopiesWhole.
// stored, if not nil, runs once every batch is stored (at once when there are none).
func (n *Node) pushCopies(items []overlay.Item, keepExisting bool, copiesOf uint64, via overlay.NodeID, from *overlay.Range, why string, stored func()) {
	for _, it := range items {
		if !it.Deleted {
			n.Stats.WrittenOut++
		}
	}
	pending := (len(items) + n.cfg.MaxItemsPerMessage - 1) / n.cfg.MaxItemsPerMessage
	if pending == 0 && stored != nil {
		stored()
	}
	var covers []overlay.Range
	if from != nil && len(items) > 0 {
		covers = cutCovers(*from, items, n.cfg.MaxItemsPerMessage)
	}
	for i := 0; len(items) > 0; i++ {
		batch := items[:min(len(items), n.cfg.MaxItemsPerMessage)]
		items = items[len(batch):]
		var batchCovers *overlay.Range
		if covers != nil {
			batchCovers = &covers[i]
		}
		n.putBatch(batch, true, keepExisting, copiesOf, via, batchCovers, func(r overlay.Result) {
			if r.Status != pb.Status_STATUS_OK {
				n.env.Logger().Warn(why+": items held here not delivered; copies kept",
					zap.Int("items", len(batch)), zap.String("error", r.Err))
				n.strays = true
				n.keepStrayDeletes(batch)
				return
			}
			for _, it := range batch {
				switch {
				case n.Responsible(it.Key):
				case n.in != nil && n.in.piece.Contains(it.Key):
					// The owner is handing the piece here: a chunk may have brought its copy of
					// the key, stored over this one, and the piece may yet commit. If it does not,
					// what the chunks brought goes (dropReceived) and the rest is written again.
					n.strays = true
				default:
					_ = n.store.Delete(it.Key)
				}
			}
			if pending--; pending == 0 && stored != nil {
				stored()
			}
		})
	}
}

// pushStrays writes the items held outside this node's range to their owners again, after a
// write of copies failed (a migrant's after a mass crash: no answer in three attempts). Not
// while a handoff is under way or the node waits to be confirmed: its copies outside the range
// may then be a piece in transit, or older than what the ring holds.
func (n *Node) pushStrays() {
	if n.state != StateActive || n.unconfirmed() || n.Busy() || len(n.committing) > 0 {
		return
	}
	n.strays = false
	r := n.Range()
	if r.Start == r.End {
		return // the whole circle is this node's
	}
	items := n.writeOutCopies(overlay.Range{Start: r.End, End: r.Start}, "", handoffCopies{}, "stray copies")
	dels := n.strayDeletes
	n.strayDeletes = nil
	if items += n.pushDeletes(dels, r.End, "", "stray deletes"); items > 0 {
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Items: items,
			Detail: fmt.Sprintf("%d copies held outside the range after a failed write to their owners; written again", items)})
	}
}

// keepStrayDeletes keeps the deletes of batch, a write of copies that was not delivered, to be
// written again with the stray copies (strayDeletes), as copies that stand only where newer
// than what their owners hold. At most MaxTombstones are kept, the latest.
func (n *Node) keepStrayDeletes(batch []overlay.Item) {
	for _, it := range batch {
		if it.Deleted {
			n.strayDeletes = append(n.strayDeletes, it)
		}
	}
	if over := len(n.strayDeletes) - n.cfg.MaxTombstones; over > 0 {
		n.Stats.TombstonesEvicted += over
		n.strayDeletes = slices.Delete(n.strayDeletes, 0, over)
	}
}

// copiesIn returns the items this node holds in r outside the range it is responsible for,
// except those of a piece it handed on whose commit awaits confirmation: that handoff settles
// them (dropped once confirmed, else written out naming the handoff: onOutTimer). Written out
// with the other copies outside the range — by a node confirmed after standing still, which
// had stood still while its commit went unconfirmed — they reached the receiver unnamed and
// brought back keys it had deleted since (TestGiverThatStoodStillWritesNoCopiesBack).
func (n *Node) copiesIn(r overlay.Range) []overlay.Item {
	var items []overlay.Item
	_ = n.store.Ascend(r, func(it overlay.Item) bool {
		if !n.Responsible(it.Key) && !n.committingHolds(it.Key) {
			items = append(items, it)
		}
		return true
	})
	return items
}

// committingHolds reports whether k lies in the piece of a flipped handoff whose commit awaits
// confirmation.
func (n *Node) committingHolds(k overlay.Key) bool {
	for _, x := range n.committing {
		if x.piece.Contains(k) {
			return true
		}
	}
	return false
}

// Re-admission copies in flight. A re-admitted node that waits is confirmed by its
// re-admitter's pong naming it the successor, and the re-admission's batches go before that pong
// on the same link — but a batch can be lost, and the node, confirmed on the next pong, served
// the values the batch would have replaced until its next attempt came (skipsim balance --pause
// 0.1 --pause-for 120s --loss 0.02 --clients 50 --seed 63). So the re-admitter lists in its
// level-0 pongs to the node the batches it has no answer to (copiesOwed), and the node counts
// the pong's word only once it has stored each of them (copiesTaken). On a link that loses
// nothing the batch is always stored first, and the confirmation comes as soon as before.

// maxCopiesListed bounds the batches a pong lists, and those a waiting node remembers a sender.
const maxCopiesListed = 64

// copiesOwed are, per re-admitted node, the request IDs of the re-admission batches sent to it
// that have no answer yet.
type copiesOwed map[overlay.NodeID][]uint64

// oweCopies records req, a re-admission batch sent to req.via, until it is answered.
func (n *Node) oweCopies(req *request) {
	to, id, done := req.via, req.id, req.onDone
	if n.owed == nil {
		n.owed = copiesOwed{}
	}
	n.owed[to] = append(n.owed[to], id)
	req.onDone = func(r overlay.Result) {
		left := slices.DeleteFunc(n.owed[to], func(o uint64) bool { return o == id })
		if len(left) == 0 {
			delete(n.owed, to)
		} else {
			n.owed[to] = left
		}
		if done != nil {
			done(r)
		}
	}
}

// listFor returns the batches owed to id, at most maxCopiesListed of them, for a pong.
func (o copiesOwed) listFor(id overlay.NodeID) []uint64 {
	owed := o[id]
	return slices.Clone(owed[:min(len(owed), maxCopiesListed)])
}

// copiesTaken are, per sender, the request IDs of the re-admission batches a waiting node has
// stored since its wait began, the latest maxCopiesListed of each.
type copiesTaken map[overlay.NodeID][]uint64

// add records batch id of from as stored.
func (t *copiesTaken) add(from overlay.NodeID, id uint64) {
	if *t == nil {
		*t = copiesTaken{}
	}
	ids := append((*t)[from], id)
	if len(ids) > maxCopiesListed {
		ids = ids[len(ids)-maxCopiesListed:]
	}
	(*t)[from] = ids
}

// all reports whether every batch of ids from from is stored here.
func (t copiesTaken) all(from overlay.NodeID, ids []uint64) bool {
	for _, id := range ids {
		if !slices.Contains(t[from], id) {
			return false
		}
	}
	return true
}
