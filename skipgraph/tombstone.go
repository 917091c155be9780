package skipgraph

import (
	"bytes"
	"slices"
	"strings"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Tombstones. A node holding a lost part of its range (taken over without its items: see
// lostSet) cannot tell a key deleted there from one never written, yet the node that held the
// items may come back with its copies — restarted from its store, back from a pause or a
// partition — and its copies reach the ring again: as the overlap a re-admission settles
// (claim.go), or written to their owners as writes that leave what those hold (a node giving its
// place up, a joiner whose giver went silent). A key deleted while the part was lost came back
// from such a copy. So a delete of a key in a lost part leaves a tombstone, kept as long as the
// part stays lost (or until TombstoneTTL, or until MaxTombstones evicts the oldest):
//
//   - reads of the key answer "not found" rather than STATUS_LOST;
//   - a write that leaves what the owner holds does not bring the key back;
//   - a re-admission sends the deletes with its items — all of them where the taker's claim
//     wins, else those made since the returning node's store last took a value (claim.go), its
//     recent deletes of keys it does not hold too (a piece it adopted had no lost mark) — so
//     that the returning node drops its copies of those keys, and keeps them as tombstones of
//     its own (a receiver that acknowledged a piece from it before it stood still may write its
//     copies out to it later);
//   - tombstones travel with the lost parts in handoffs and snapshots, and go when their part
//     stops being lost or the key is written again.
//
// A piece handed off is the other place older copies come from: a receiver that acknowledged it
// and never heard its giver abort writes its copies out later, to the giver as their owner, and
// a giver that never heard its commit confirmed writes its copies out to the receiver. So a
// delete in the piece of a handoff under way, or of one this node aborted or received lately,
// leaves a tombstone too (copiesMayBeOut); a flip drops those of its piece, which the receiver
// now holds. Snapshots keep those pieces (the handoff under way as one given up), so a restart
// forgets none of them. Such copies also name their handoff, and the side that settled it stores
// none of them however late they come (settledXfer); the tombstones still cover copies that
// reach a node which did not settle that handoff (one the piece was handed on to since), for
// as long as it notes the piece.
//
// Other deletes need none: the copies that come back are those of a part taken over without
// them. Tombstones go with their keys' range when it moves on (a handoff carries those of its
// piece), and the ones a re-admission left outside lost parts last until TombstoneTTL. (What
// this leaves open is in PROTOCOL.md, "Deletes undone after an outage".)
type tombstones struct {
	at map[overlay.Key]tombstone
	// sorted holds every tombstone in key order, built when asked for after a change: a runtime
	// takes the node's snapshot after every step.
	sorted []*pb.Tombstone
	// version counts the changes, so that a runtime persists the tombstones only when they
	// changed.
	version uint64
}

// tombstone is one delete remembered: when, by this node's clock (its age says how long it is
// kept and, in a re-admission, whether it came after the other node's last write), and its write
// stamp, which copies of the key are compared with (stamp.go).
type tombstone struct {
	at      time.Time
	written uint64
}

func (t *tombstones) changed() {
	t.sorted = nil
	t.version++
}

func (t *tombstones) set(k overlay.Key, d tombstone) {
	if t.at == nil {
		t.at = map[overlay.Key]tombstone{}
	}
	t.at[k] = d
	t.changed()
}

func (t *tombstones) get(k overlay.Key) (tombstone, bool) {
	d, ok := t.at[k]
	return d, ok
}

func (t *tombstones) has(k overlay.Key) bool {
	_, ok := t.at[k]
	return ok
}

func (t *tombstones) remove(k overlay.Key) {
	if t.has(k) {
		delete(t.at, k)
		t.changed()
	}
}

func (t *tombstones) len() int { return len(t.at) }

func (t *tombstones) clear() {
	if len(t.at) > 0 {
		t.at = nil
		t.changed()
	}
}

// all returns every tombstone in key order; the caller must not change the slice.
func (t *tombstones) all() []*pb.Tombstone {
	if t.sorted == nil && len(t.at) > 0 {
		t.sorted = make([]*pb.Tombstone, 0, len(t.at))
		for k, d := range t.at {
			t.sorted = append(t.sorted, &pb.Tombstone{Key: []byte(k), DeletedUnixNano: d.at.UnixNano(), Written: d.written})
		}
		slices.SortFunc(t.sorted, func(a, b *pb.Tombstone) int { return bytes.Compare(a.Key, b.Key) })
	}
	return t.sorted
}

// within returns the tombstones in r, in key order.
func (t *tombstones) within(r overlay.Range) []*pb.Tombstone {
	if r.IsFull() {
		return t.all()
	}
	var out []*pb.Tombstone
	for _, x := range t.all() {
		if r.Contains(overlay.Key(x.Key)) {
			out = append(out, x)
		}
	}
	return out
}

// dropIf removes the tombstones that match.
func (t *tombstones) dropIf(match func(k overlay.Key, d tombstone) bool) {
	n := len(t.at)
	for k, d := range t.at {
		if match(k, d) {
			delete(t.at, k)
		}
	}
	if len(t.at) != n {
		t.changed()
	}
}

// evictOldest drops the oldest tombstones (ties by key, for a deterministic choice) down to a
// tenth under max when there are more than max, and returns how many it dropped: evicting a
// tenth at once spares a flood of deletes a sort at every one.
func (t *tombstones) evictOldest(max int) int {
	if len(t.at) <= max {
		return 0
	}
	type entry struct {
		key overlay.Key
		at  time.Time
	}
	all := make([]entry, 0, len(t.at))
	for k, d := range t.at {
		all = append(all, entry{k, d.at})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(string(a.key), string(b.key))
	})
	evict := len(t.at) - max*9/10
	for _, e := range all[:evict] {
		delete(t.at, e.key)
	}
	t.changed()
	return evict
}

// receivedTombstone converts a tombstone a handoff brought: by its age where the giver gave one
// (agoOnArrival), so that the two nodes' clocks need not agree; else by the giver's clock.
func (n *Node) receivedTombstone(t *pb.Tombstone) (overlay.Key, tombstone) {
	k, d := tombstoneFromPB(t)
	if t.AgeNanos > 0 {
		d.at = n.agoOnArrival(t.AgeNanos)
	}
	n.observeStamp(d.written)
	return k, d
}

// agoOnArrival turns an age a message brought into a time by this node's clock, less
// ProbeTimeout for the message's delay on the way: earlier errs towards the copies of a
// returning node (claim.go). An age past TombstoneTTL counts as TombstoneTTL: a re-admission
// looks back no further, and a tombstone that old goes at the next tick.
func (n *Node) agoOnArrival(ageNanos uint64) time.Time {
	return n.env.Now().Add(-time.Duration(min(ageNanos, uint64(n.cfg.TombstoneTTL))) - n.cfg.ProbeTimeout)
}

// tombstoneFromPB converts a tombstone from the wire or a snapshot.
func tombstoneFromPB(t *pb.Tombstone) (overlay.Key, tombstone) {
	return overlay.Key(t.Key), tombstone{at: time.Unix(0, t.DeletedUnixNano), written: t.Written}
}

// deleted records that key was deleted here just now, by a delete stamped written: a tombstone
// when the key lies in a lost part, or where another node may hold a copy it will write back
// (copiesMayBeOut).
func (n *Node) deleted(key overlay.Key, written uint64) {
	n.recentDeletes.set(key, tombstone{at: n.env.Now(), written: written})
	n.recentDeletes.evictOldest(n.cfg.MaxTombstones)
	if n.markedLost(key) || n.copiesMayBeOut(key) {
		n.tombs.set(key, tombstone{at: n.env.Now(), written: written})
		n.evictTombstones()
	}
}

// copiesOutPiece is a piece of which another node may hold copies and write them back here until
// `until` (expectCopiesBack).
type copiesOutPiece struct {
	piece overlay.Range
	until time.Time
}

// expectCopiesBack notes that another node may hold copies of piece and, not knowing how its
// handoff ended, write them back to this node as writes that leave what it holds: a receiver
// that acknowledged a piece whose abort it never heard, a giver that never heard its commit
// confirmed. Until it can no longer do so, deletes here in the piece leave tombstones, or such a
// write would bring the deleted keys back.
func (n *Node) expectCopiesBack(piece overlay.Range) {
	now := n.env.Now()
	n.copiesOut = slices.DeleteFunc(n.copiesOut, func(p copiesOutPiece) bool { return !now.Before(p.until) })
	n.copiesOut = append(n.copiesOut, copiesOutPiece{piece: piece, until: now.Add(n.copiesOutFor())})
}

// copiesMayBeOut reports whether key lies in a piece another node may hold copies of and write
// back: the piece of the handoff under way (its receiver keeps them if the handoff aborts), or
// one of copiesOut.
func (n *Node) copiesMayBeOut(key overlay.Key) bool {
	if n.out != nil && n.out.piece.Contains(key) {
		return true
	}
	now := n.env.Now()
	return slices.ContainsFunc(n.copiesOut, func(p copiesOutPiece) bool { return now.Before(p.until) && p.piece.Contains(key) })
}

// copiesOutFor is how long the other side of a handoff may still write its copies back: a
// receiver asks for the verdict every HandoffRetry, at most maxOrphanRetries+1 times from its
// acknowledgement (before an abort), then writes; a giver sends its commit at most
// maxCommitRetries+1 times from its flip (before the commit arrives); a lease more allows for
// the write's way here.
func (n *Node) copiesOutFor() time.Duration {
	return time.Duration(maxOrphanRetries+2)*n.cfg.HandoffRetry + n.cfg.HandoffLease
}

// evictTombstones keeps at most MaxTombstones, counting those it drops: each of those keys may
// come back from an older copy.
func (n *Node) evictTombstones() {
	n.Stats.TombstonesEvicted += n.tombs.evictOldest(n.cfg.MaxTombstones)
}

// written forgets key's tombstone: the key holds a value again.
func (n *Node) written(key overlay.Key) {
	n.tombs.remove(key)
	n.storeWritten = n.env.Now()
}

// forgetLost takes r out of the lost parts, with the tombstones there: r's items are back, or r
// is not this node's any more.
func (n *Node) forgetLost(r overlay.Range) {
	n.lost.remove(r)
	n.tombs.dropIf(func(k overlay.Key, _ tombstone) bool { return r.Contains(k) })
}

// markTakenLost records part, just taken over without its items, as lost from now. A tombstone
// this node holds there is older than the take-over: the part was another node's in between, and
// the key may have been written again there, unseen here. Left to answer reads, it made a read of
// an acknowledged value answer "not found" rather than LOST. It keeps older copies out as a
// recent delete instead (stamp.go), which answers no read.
func (n *Node) markTakenLost(part overlay.Range) {
	n.lost.add(part, n.env.Now())
	n.tombs.dropIf(func(k overlay.Key, d tombstone) bool {
		if !part.Contains(k) {
			return false
		}
		if held, ok := n.recentDeletes.get(k); !ok || held.written < d.written {
			n.recentDeletes.set(k, d)
		}
		return true
	})
}

// expireTombstones drops the tombstones older than TombstoneTTL, and the recent deletes older
// than recentDeleteFor; the tick runs it.
func (n *Node) expireTombstones() {
	for _, t := range []struct {
		set *tombstones
		ttl time.Duration
	}{{&n.tombs, n.cfg.TombstoneTTL}, {&n.recentDeletes, recentDeleteFor}} {
		if t.set.len() > 0 {
			cutoff := n.env.Now().Add(-t.ttl)
			t.set.dropIf(func(_ overlay.Key, d tombstone) bool { return d.at.Before(cutoff) })
		}
	}
}

// Tombstones returns how many deletes the node remembers.
func (n *Node) Tombstones() int { return n.tombs.len() }

// TombstoneVersion changes whenever the node's tombstones do: a runtime that persists the
// snapshot need not compare them otherwise.
func (n *Node) TombstoneVersion() uint64 { return n.tombs.version }

// RecentDeletes returns the deletes the node remembers from the last hour (stamp.go), in key
// order. They are not in Snapshot: they change with every delete, and the runtime adds them
// (NodeSnapshot.recent_deletes) when it writes the snapshot, every few seconds at most; Restore
// takes them back. The caller must not change the slice.
func (n *Node) RecentDeletes() []*pb.Tombstone { return n.recentDeletes.all() }

// RecentDeleteVersion changes whenever the node's recent deletes do.
func (n *Node) RecentDeleteVersion() uint64 { return n.recentDeletes.version }
