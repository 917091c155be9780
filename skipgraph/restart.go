package skipgraph

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Snapshot returns what the node must keep across a restart to take its place back, or nil when
// it owns nothing (a node that has not joined or has left starts afresh). A leaving node's
// snapshot is that of an active one: until its handoff flips, the range is still its own.
// Runtimes persist it whenever it changes, before the messages of the same step go out, with
// the recent deletes (RecentDeletes) added now and then.
func (n *Node) Snapshot() *pb.NodeSnapshot {
	if !n.Owns() {
		return nil
	}
	s := &pb.NodeSnapshot{Self: n.selfRef, Claim: n.claim}
	for _, l := range n.levels {
		s.Levels = append(s.Levels, &pb.LevelLinks{Pred: l.pred.ToPB(), Succ: l.succ.ToPB()})
	}
	for _, p := range n.succList {
		s.Successors = append(s.Successors, p.ToPB())
	}
	for _, p := range n.lost {
		s.Lost = append(s.Lost, p.ToPB())
		var since int64
		if !p.since.IsZero() {
			since = p.since.UnixNano()
		}
		s.LostSinceUnixNano = append(s.LostSinceUnixNano, since)
	}
	s.Tombstones = n.tombs.all()
	// What answers the other sides of handoffs after a restart as before it: the pieces others
	// may write copies back to (deletes there leave tombstones) and the handoffs settled (a late
	// ask for the verdict is told, late copies are not stored). A restart forgets the handoff
	// under way: it counts as given up at its lease's end.
	now := n.env.Now()
	copiesOut, settled := n.copiesOut, n.settled
	if x := n.out; x != nil {
		copiesOut = append(slices.Clip(copiesOut), copiesOutPiece{piece: x.piece, until: x.deadline.Add(n.copiesOutFor())})
		settled = append(slices.Clip(settled), settledXfer{id: x.id, peer: x.to.ID, until: x.deadline.Add(n.cfg.TombstoneTTL)})
	}
	for _, p := range copiesOut {
		if now.Before(p.until) {
			s.CopiesOut = append(s.CopiesOut, p.piece.ToPB())
			s.CopiesOutUntilUnixNano = append(s.CopiesOutUntilUnixNano, p.until.UnixNano())
		}
	}
	for _, a := range settled {
		if now.Before(a.until) {
			s.Settled = append(s.Settled, &pb.SettledHandoff{XferId: a.id, Peer: []byte(a.peer), UntilUnixNano: a.until.UnixNano(), Received: a.received})
		}
	}
	return s
}

// Restore puts a restarted node back in the place its snapshot describes: the same start,
// version and incarnation, the same neighbours, active at once. Its store must hold the items
// it had. Neighbours that have not yet declared it dead see no change; if they have, the
// predecessor took its range over and re-admits it. Until both level-0 neighbours vouch for its
// range (checkConfirmed), the node holds the requests for its range rather than answer from
// copies that writes made meanwhile may have superseded. It replaces Bootstrap and Join for a
// node with a snapshot.
func (n *Node) Restore(s *pb.NodeSnapshot) error {
	if n.state != StateNew {
		return fmt.Errorf("restore: node is %s", n.state)
	}
	self := overlay.PeerFromPB(s.GetSelf())
	switch {
	case self.ID != n.self.ID:
		return fmt.Errorf("restore: snapshot is of node %q, not %q", self.ID, n.self.ID)
	case self.MVec != n.self.MVec:
		return fmt.Errorf("restore: snapshot's membership vector %x is not the node's %x", uint64(self.MVec), uint64(n.self.MVec))
	case len(s.Levels) == 0 || s.Levels[0].GetPred() == nil || s.Levels[0].GetSucc() == nil:
		return fmt.Errorf("restore: snapshot has no level-0 neighbours")
	case len(s.Levels) > overlay.MaxLevel:
		return fmt.Errorf("restore: snapshot has %d levels, more than %d", len(s.Levels), overlay.MaxLevel)
	case len(s.LostSinceUnixNano) > len(s.Lost):
		return fmt.Errorf("restore: snapshot has %d times for %d lost parts", len(s.LostSinceUnixNano), len(s.Lost))
	case len(s.CopiesOutUntilUnixNano) != len(s.CopiesOut):
		return fmt.Errorf("restore: snapshot has %d times for %d pieces copies may come back from", len(s.CopiesOutUntilUnixNano), len(s.CopiesOut))
	case slices.ContainsFunc(s.Settled, func(a *pb.SettledHandoff) bool { return len(a.Peer) == 0 }):
		return fmt.Errorf("restore: snapshot has a settled handoff with nobody")
	}
	if err := n.checkKey(self.Start); err != nil {
		return fmt.Errorf("restore: start: %w", err)
	}
	// Keep the addresses the runtime set for this run: they may have changed since the snapshot.
	n.self = self.WithAddrs(n.self.Addrs)
	n.levels = make([]link, len(s.Levels))
	for i, l := range s.Levels {
		n.levels[i] = link{pred: overlay.PeerFromPB(l.GetPred()), succ: overlay.PeerFromPB(l.GetSucc())}
	}
	n.succList = n.succList[:0]
	for _, p := range s.Successors {
		n.succList = append(n.succList, overlay.PeerFromPB(p))
	}
	n.lost = nil
	for i, r := range s.Lost {
		var since time.Time
		if i < len(s.LostSinceUnixNano) && s.LostSinceUnixNano[i] > 0 {
			since = time.Unix(0, s.LostSinceUnixNano[i])
		}
		n.lost.add(overlay.RangeFromPB(r), since)
	}
	n.tombs.clear()
	for _, t := range s.Tombstones {
		n.tombs.set(tombstoneFromPB(t))
	}
	n.evictTombstones()
	n.recentDeletes.clear()
	for _, t := range s.RecentDeletes {
		n.recentDeletes.set(tombstoneFromPB(t))
	}
	n.recentDeletes.evictOldest(n.cfg.MaxTombstones)
	n.copiesOut = nil
	for i, r := range s.CopiesOut {
		n.copiesOut = append(n.copiesOut, copiesOutPiece{piece: overlay.RangeFromPB(r), until: time.Unix(0, s.CopiesOutUntilUnixNano[i])})
	}
	n.settled = nil
	for _, a := range s.Settled {
		n.rememberSettled(settledXfer{id: a.XferId, peer: overlay.NodeID(a.Peer), received: a.Received, until: time.Unix(0, a.UntilUnixNano)})
	}
	n.refreshSelfRef()
	n.state = StateActive
	// The claim keeps the version it had: the range is the one it was stamped for.
	n.claim, n.clock, n.claimed = s.Claim, s.Claim, n.Range()
	n.env.Report(overlay.Event{Kind: overlay.EventJoined, Range: n.Range(), Detail: "restored from snapshot"})
	if n.levels[0].pred.ID != n.self.ID {
		n.startWait()
	}
	n.startMaintenance()
	return nil
}

// mayBeReplaced reports whether the node must not answer for its range from its own store:
// it waits for its neighbours' confirmation (after a restart), or its predecessor has been
// silent for long enough that it may have declared this node dead and taken its range over —
// which then starts such a wait. A node paused or cut off for that long resumes holding
// requests, not serving values its predecessor may have superseded.
func (n *Node) mayBeReplaced() bool {
	if !n.unconfirmedSince.IsZero() {
		return true
	}
	pred := n.levels[0].pred
	if n.isSelf(pred) {
		return false
	}
	limit := n.silenceLimit()
	now := n.env.Now()
	// The node itself stood still (a paused process: its ticks did not run; messages buffered
	// meanwhile, old pings among them, may be read before the late tick), or its predecessor
	// stopped reaching it, or nobody did (a partition; the second check also covers a
	// predecessor linked so recently that it was never heard from). A node linked to no
	// predecessor, having heard none since it joined, is not met by a silence: nobody's.
	frozen := !n.maintain.lastTick.IsZero() && now.Sub(n.maintain.lastTick) > limit
	silent := (!pred.IsZero() && pred.ID == n.predHeardID && now.Sub(n.predHeard) > limit) ||
		(!n.heardAny.IsZero() && now.Sub(n.heardAny) > limit)
	if !frozen && !silent {
		return false
	}
	n.startWait()
	n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: pred.ID, Range: n.Range(),
		Detail: "stood still or unheard long enough to have been declared dead; holding requests until its neighbours confirm"})
	return true
}

// predHeardLately reports whether the level-0 predecessor was heard from within the last probe
// interval, in which it pings this node once: it was alive after any node found it dead.
func (n *Node) predHeardLately() bool {
	pred := n.levels[0].pred
	return !pred.IsZero() && pred.ID == n.predHeardID && n.env.Now().Sub(n.predHeard) < n.cfg.ProbeInterval
}

// unconfirmed reports whether the node waits for its neighbours' confirmation. Its copies may
// be stale meanwhile, so it gives none of them away: no NIX, no leave, no re-admission push.
func (n *Node) unconfirmed() bool { return !n.unconfirmedSince.IsZero() }

// StoreWritten returns when the node's store last took a value, as far as it knows.
func (n *Node) StoreWritten() time.Time { return n.storeWritten }

// RestoreStoreWritten tells a node restored from its snapshot that its store took no value after
// t, a bound its runtime kept beside the store. Without one the node counts its store as written
// at its restart, and the writes the ring made in its range while it was down cannot be told
// newer than its copies where an overlap keeps them (claim.go).
func (n *Node) RestoreStoreWritten(t time.Time) {
	if t.Before(n.storeWritten) {
		n.storeWritten = t
	}
}

// Unconfirmed reports whether the node waits for its neighbours to confirm its range (see
// unconfirmed): until then it holds the requests for it, and copies on their way to it (a
// re-admission's items and deletes) may still replace what it holds.
func (n *Node) Unconfirmed() bool { return n.Owns() && n.unconfirmed() }

// silenceLimit is the earliest a predecessor can declare this node dead: ProbeMisses
// unanswered pings after the last exchange, less one interval of margin (a predecessor that has
// seen losses waits for lossyMisses more, but this node cannot know that it has).
func (n *Node) silenceLimit() time.Duration {
	return time.Duration(max(n.cfg.ProbeMisses-1, 1))*n.cfg.ProbeInterval + n.cfg.ProbeTimeout
}

// waitedLong reports whether the node has waited for its neighbours' word for three quarters of
// maxUnconfirmed probe intervals: long enough for a live node that took its range over to have
// found it and re-admitted it, so that a predecessor that waits itself may now vouch for it
// (checkConfirmed). Half, as it once was, was too short where the live node was busy with
// handoffs meanwhile: with a fifth of the nodes paused at once, three back side by side
// confirmed one another seconds before the live node found them, and the middle one served
// values older than writes the live node had taken (6 of 100 small runs; 1 with three
// quarters).
func (n *Node) waitedLong() bool {
	return n.env.Now().Sub(n.unconfirmedSince) > maxUnconfirmed*3/4*n.cfg.ProbeInterval
}

// maxUnconfirmed bounds, in probe intervals of hearing from others, how long a waiting node waits
// for its neighbours' word before it gives its place up and joins again.
const maxUnconfirmed = 20

// startWait starts (or starts again) a wait for both level-0 neighbours' word.
func (n *Node) startWait() {
	n.unconfirmedSince = n.env.Now()
	n.confirmedBy = [2]overlay.NodeID{}
	n.liveHeard = false
	for id, r := range n.readmitters {
		r.answered = false
		n.readmitters[id] = r
	}
}

// checkConfirmed ends a waiting node's wait once both level-0 neighbours vouch for its range:
// its predecessor's pong names it as successor — nobody took its range over, or the
// predecessor re-admitted it and sent the items written meanwhile (on the same ordered path,
// before that pong) — and its successor's pong names it as predecessor, so no live node starts
// inside what it holds. The second half matters to a node that was cut off: it took its silent
// neighbours' ranges over, and the first node to link to it again on its return would otherwise
// confirm a range that still covers live nodes, which it would then serve beside them (found by
// the docker chaos test: an acknowledged write taken by such a node, and a stale read from the
// real owner).
func (n *Node) checkConfirmed(from overlay.Peer, p *pb.Pong, sent time.Time) {
	if !n.unconfirmed() || sent.Before(n.unconfirmedSince) {
		return // an answer to a ping from before the wait (one held while the node stood still) says nothing of now
	}
	lk := n.levels[0]
	// A predecessor that waits itself (it stood still too) vouches only once this node has
	// waited long: the two, paused side by side, may both have been replaced by a live node that
	// holds their ranges and took writes there, and confirmed on each other's stale links at
	// once, the second served its older values until that node found it (the checked clients
	// of skipsim balance --pause: 19 of 40 small runs answered wrong). Never, two nodes that
	// are all the ring has (or a ring restored whole from snapshots) would wait for each other
	// until both gave their places up. And only while no live node has answered this node
	// during its wait (liveHeard): where the ring has live nodes, one of them holds this range
	// if the predecessor was taken for dead, and only its re-admission confirms. Three nodes
	// paused side by side came back inside the range of a live holder that changed every ten to
	// forty seconds (NIXes, a join, a leave), which found none of them in time; after waitedLong
	// the two outer ones confirmed the middle one, which served values older than writes the
	// holder had taken (small runs, a fifth paused, seed 87).
	// Nor does a predecessor that re-admitted this node vouch before its copies are here: the
	// pong lists those it has no answer to (claim.go, "Re-admission copies in flight"); and
	// whoever vouches, every re-admitter must have answered so (readmittersAnswered).
	// Only the incarnations linked here vouch: a neighbour that migrated meanwhile answers from
	// its new place, where a word meant for its former one may have linked it to this node. A
	// node back from a pause had taken its stale successors' ranges over — migrants, joined
	// again elsewhere, one beside the other — and its update naming itself the predecessor of
	// one of them, expected there by name (the one before it was the other), was taken; that
	// node's answer confirmed a range over the live node holding it, which acknowledged a delete
	// the live node's older value outlived (skipsim balance --nodes 50 ... --pause 0.1 --pause-for
	// 120s --loss 0.05 --seed 61).
	if n.isPred(from) && overlay.PeerFromPB(p.Succ).ID == n.self.ID && (!p.Unconfirmed || n.waitedLong() && !n.liveHeard) &&
		n.taken.all(from.ID, p.CopiesUnanswered) {
		n.confirmedBy[0] = from.ID
	}
	if n.isSucc(from) && overlay.PeerFromPB(p.Pred).ID == n.self.ID {
		n.confirmedBy[1] = from.ID
	}
	if r, ok := n.readmitters[from.ID]; ok && n.taken.all(from.ID, p.CopiesUnanswered) {
		r.answered = true
		n.readmitters[from.ID] = r
	}
	// A node that knows no predecessor (it found the one it had gone: a migrant that left the
	// place next to it while it stood still) has nobody's word for the start of its range yet,
	// however its successor answers: it waits for a predecessor to link to it. Confirmed by the
	// successor alone, two nodes paused side by side served their stale values, acknowledged
	// writes made meanwhile unread (the checked clients of skipsim balance found it).
	if !lk.pred.IsZero() && !lk.succ.IsZero() && n.confirmedBy[0] == lk.pred.ID && n.confirmedBy[1] == lk.succ.ID &&
		n.readmittersAnswered() {
		n.endWait()
	}
}

// announceToHolder makes this waiting node known to the holder of its start, as x, its level-0
// successor, shows it in a confirmed answer to a ping of this wait: x's predecessor, where that
// starts behind this node (the range up to x holds this node's start), or x itself, where x
// starts behind this node with its own successor past it (a NIX from below moved x's start down
// past this one's while this node stood still). The holder does not know this node is there:
// x names the holder, not this node, its predecessor, and nobody else names this node to it.
// Only the holder's re-admission can confirm this node, and it re-admits a node it checks as an
// intruder; the search for this node's start that announceVia sends through the holder ends
// there, and the holder finds the origin inside its range and checks it. Without it the node
// waited out maxUnconfirmed and gave its place up (500 nodes, a fifth paused, seed 8: both its
// links named x). Only what the successor's answer shows counts: told by a node back from a
// pause beside others, its own predecessor (which had taken all their ranges over) re-admitted
// it with a piece up to the end of the run of waiting nodes, before the node past them, whose
// start it knew stale; its copies past that start went round unanswered, and five nodes in a
// row gave their places up (the same runs, seed 1, while the rule was being written). Told
// through the successor's answer, the holder's piece ends at the successor: this node's own
// range, or, where x itself holds the start, x's successor, which growToReadmittersEnd takes.
func (n *Node) announceToHolder(x overlay.Peer, p *pb.Pong, sent time.Time) {
	if !n.unconfirmed() || sent.Before(n.unconfirmedSince) || p.Unconfirmed || !n.isSucc(x) {
		return
	}
	holder := overlay.PeerFromPB(p.Pred)
	if !n.holdsStart(holder, x) {
		if holder = x; !n.holdsStart(x, overlay.PeerFromPB(p.Succ)) {
			return
		}
	}
	n.debug("announced to the holder of this waiting node's start", func() []zap.Field {
		return []zap.Field{zap.String("holder", string(holder.ID)), zap.String("succ", string(x.ID))}
	})
	n.announceVia(holder.ID)
}

// holdsStart reports whether a range from a's start up to b's, as an answer shows them, holds
// this node's start (another node's range: a is not this node and does not share its start).
func (n *Node) holdsStart(a, b overlay.Peer) bool {
	return !a.IsZero() && !b.IsZero() && !n.isSelf(a) && !n.isSelf(b) && a.Start != n.self.Start &&
		overlay.StrictlyBetween(a.Start, n.self.Start, b.Start)
}

// readmitter is a node that sent a waiting node re-admission batches: its peer, to call it, and
// whether it has answered a call of this wait listing no batch the node did not store.
type readmitter struct {
	peer     overlay.Peer
	answered bool
	missed   int // calls unanswered in a row
}

// readmitterMisses is how many calls in a row a re-admitter may leave unanswered before its
// word is no longer waited for: a node that left, or joins again elsewhere, answers none, and
// the node it re-admitted waited until it gave its own place up (small runs, a fifth paused,
// seed 129: four nodes in a row).
const readmitterMisses = 3

// readmitterSilent counts a call on re-admitter id unanswered, and stops waiting for its word
// after readmitterMisses of them.
func (n *Node) readmitterSilent(id overlay.NodeID) {
	r, ok := n.readmitters[id]
	if !ok {
		return
	}
	if r.missed++; r.missed >= readmitterMisses {
		delete(n.readmitters, id)
		return
	}
	n.readmitters[id] = r
}

// readmittedBy records p as a re-admitter of this waiting node: its word on the copies it sent
// is waited for, whoever vouches. Confirmed by a predecessor that had not re-admitted it, with a
// re-admitter's batch lost on the way, a node served a value whose delete that batch carried
// (small runs, a fifth paused, 2% loss, seed 15, once waiting chains were confirmed at the pace
// of messages).
func (n *Node) readmittedBy(p overlay.Peer) {
	if p.ID == n.self.ID {
		return
	}
	if n.readmitters == nil {
		n.readmitters = map[overlay.NodeID]readmitter{}
	}
	n.readmitters[p.ID] = readmitter{peer: p}
}

// readmittersAnswered reports whether every re-admitter has answered during this wait listing
// no batch this node did not store.
func (n *Node) readmittersAnswered() bool {
	for _, r := range n.readmitters {
		if !r.answered {
			return false
		}
	}
	return true
}

// callReadmitters pings, once a tick, the re-admitters that have not answered: their level-0
// pongs list the batches they sent this node and have no answer to.
func (n *Node) callReadmitters() {
	for _, r := range n.readmitters {
		if r.answered {
			continue
		}
		seq := n.ping(r.peer, 0, false)
		if info, ok := n.maintain.pings[seq]; ok {
			info.readmitter = true
			n.maintain.pings[seq] = info
		}
	}
}

// checkWait runs on every tick: it starts a wait when the node stood still or its predecessor
// fell silent (before anything asks for its range: a node cut off hears no requests either),
// and ends a wait that lasted maxUnconfirmed probe intervals of hearing from others without the
// neighbours' word: the node then joins again afresh (rejoinAfresh).
func (n *Node) checkWait() {
	if !n.unconfirmed() {
		n.mayBeReplaced()
		return
	}
	now := n.env.Now()
	if now.Sub(n.heardAny) > n.silenceLimit() {
		// Cut off: nobody can confirm it, and its copies may be growing older. The wait runs
		// only while other nodes are heard (a node left alone by the death of every other
		// holds its range until one joins). What its neighbours said before no longer counts.
		n.startWait()
		return
	}
	if now.Sub(n.unconfirmedSince) > maxUnconfirmed*n.cfg.ProbeInterval {
		n.rejoinAfresh()
		return
	}
	n.callReadmitters()
}

// rejoinAfresh gives up a place that no predecessor confirmed in maxUnconfirmed probe intervals
// of hearing from other nodes: the live ring does not link to it, so others hold its range and
// counted its items lost when they took it over. Serving its copies anyway answered stale values
// beside the real owner (found by the docker chaos test after a pause), so it joins again, as a
// new incarnation, through the nodes it knows. Its copies go first to whoever owns their keys
// now, as writes that leave what the owner holds: they may be older than the ring's values
// (those stand), but they may also be the only ones — a node cut off by a partition took
// handoffs from its own side meanwhile — and dropping them, as we once did, lost items that no
// crash took. The trade is the joiner's (writeOutJoin): a key deleted in the ring meanwhile comes
// back. The deletes it remembers go with the copies and stand where newer: dropped with its
// tombstones, an acknowledged delete it had taken alone would be lost
// (TestNodeGivingItsPlaceUpSendsItsDeletes). A node that knows nobody keeps waiting.
func (n *Node) rejoinAfresh() {
	n.joinAgain(n.linkedIDs(), "never confirmed by a predecessor")
}

// joinAgain gives up this node's place: its copies go to whoever owns their keys, through the
// first of intro, as writes that leave what the owners hold, and it joins again as a new
// incarnation through intro, near its old start. why says what made it.
func (n *Node) joinAgain(intro []overlay.NodeID, why string) {
	if len(intro) == 0 || n.Busy() || len(n.committing) > 0 {
		return // tried again later: a handoff under way needs the node's links
	}
	whole := overlay.Range{Start: n.self.Start, End: n.self.Start}
	if n.obs != nil {
		n.obs.PieceLeaving(whole) // its load statistics go with the copies
	}
	pred, position := n.levels[0].pred.ID, n.self.Start
	// The deletes it remembers go with its copies, as copies too: some may be acknowledged
	// deletes it took alone (cut off, holding its neighbours' ranges), which nobody else has.
	deletes := n.deleteItemsIn(whole)
	n.lost = nil
	n.tombs.clear()
	n.unconfirmedSince, n.readmitters = time.Time{}, nil
	n.becomeNew()
	// Once it owns nothing, every item it holds is a copy to write out (copiesIn).
	n.writeOut(whole, pred, intro[0], handoffCopies{}, why+"; joining again, its items written to their owners through "+string(intro[0]))
	n.pushDeletes(deletes, position, intro[0], why+"; joining again, its deletes")
	n.join = joinState{}
	if err := n.Join(intro[0], position, intro[1:]...); err != nil {
		n.env.Logger().Warn("could not join again", zap.Error(err))
	}
	n.releaseHeld() // the requests it held go on, or fail, as a joining node's do
}

// linkedIDs returns the nodes this node links to, level by level and then its successor list,
// each once: the introducers of a node that joins again.
func (n *Node) linkedIDs() []overlay.NodeID {
	var ids []overlay.NodeID
	seen := map[overlay.NodeID]bool{n.self.ID: true}
	add := func(p overlay.Peer) {
		if !p.IsZero() && !seen[p.ID] {
			seen[p.ID] = true
			ids = append(ids, p.ID)
		}
	}
	for _, lk := range n.levels {
		add(lk.pred)
		add(lk.succ)
	}
	for _, p := range n.succList {
		add(p)
	}
	return ids
}

// endWait ends the wait and releases the held requests. Held batch writes go first, so that no
// held read sees a value older than one acknowledged meanwhile.
func (n *Node) endWait() {
	waited := n.env.Now().Sub(n.unconfirmedSince)
	n.debug("confirmed by both level-0 neighbours", func() []zap.Field {
		return []zap.Field{zap.Stringer("range", n.Range()), zap.String("pred", string(n.levels[0].pred.ID)),
			zap.String("succ", string(n.levels[0].succ.ID)), zap.Duration("waited", waited)}
	})
	n.unconfirmedSince = time.Time{}
	n.taken, n.readmitters = nil, nil
	if s := n.levels[0].succ; !n.isSelf(s) {
		n.ping(s, 0, false) // a successor that waits asks for this node's word in return (onPing)
	}
	// Copies beyond the range it holds now (its successor's start may have moved down while it
	// was away) are not its own any more; they go to their owners as writes that leave what
	// those hold. Dropped, as they once were, they took with them copies a failed write-out had
	// left here to be written again (a re-admission's, while this node waited: found by
	// TestPartitionProperties).
	if r := n.Range(); !r.IsFull() {
		n.writeOutCopies(overlay.Range{Start: r.End, End: r.Start}, "", handoffCopies{}, "copies outside the range once confirmed")
	}
	slices.SortStableFunc(n.held, func(a, b *pb.Envelope) int {
		return cmp.Compare(batchFirst(a), batchFirst(b))
	})
	n.releaseHeld()
	n.leaveNow()
}

func batchFirst(m *pb.Envelope) int {
	if m.GetBatchPut() != nil {
		return 0
	}
	return 1
}
