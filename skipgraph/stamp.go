package skipgraph

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
)

// Write stamps. Two copies of a key meet whenever a node writes out items it holds but may not
// own — the overlap of a re-admission, a joiner's or receiver's copies of a handoff whose other
// side went silent, strays — and the claims that settle who owns a range say nothing about
// which copy of a key is newer: a node cut off alone takes the rest of the circle over piece by
// piece, each take-over a new claim version, and its claim outranks at the heal a ring that went
// on taking writes (the docker chaos test saw it). So every value and every delete carries the
// stamp of its write, and a copy stands only where it was written later than the one it meets.
//
// A stamp is a hybrid logical clock in nanoseconds: the node's clock reading, raised past every
// stamp it has issued or received and past the value it replaces, so that a write here is
// later than every copy of the key this node knows of, whatever the skew between the clocks.
// Between copies written on two sides of a partition the later clock reading wins (last writer
// wins, as in Cassandra): clocks that disagree by more than the time between two such writes
// may keep the earlier one. Copies of unknown age carry 0 and lose to any stamped write.

// newStamp returns a stamp at least atLeast, later than every stamp issued or seen here, and
// not earlier than the clock.
func (n *Node) newStamp(atLeast uint64) uint64 {
	s := max(uint64(max(n.env.Now().UnixNano(), 0)), n.hlc+1, atLeast)
	n.hlc = s
	return s
}

// Issue stamps. A client write's origin stamps it when the request starts, and every attempt
// carries that stamp (Lookup.issued, BatchPut.issued). An attempt may wait a long time on its
// way — in the buffers of a frozen node, or at a node holding requests for a piece it awaits the
// commit of — while the origin, its answer overdue, tries again, succeeds, and the client writes
// the key anew; arriving then, stamped by its owner as it arrives, the late attempt undid the
// newer write (the checked clients of skipsim balance found it, paused or not). So an owner
// applies a client write only where what it holds of the key (heldStamp: a value, a tombstone, a
// recent delete) is stamped earlier than the write's issue stamp — and then stores it with that
// stamp, so that where its copy meets one of a write issued later, the later stands — and
// otherwise answers that the write was superseded, naming its own stamp. The origin, if it still waits for the request,
// issues it again stamped past that one (reissue): the held write may be older in real time,
// stamped ahead by a faster clock, or the request's own earlier attempt; a request the origin
// has finished takes the answer nowhere, and the late attempt is simply not applied. What this
// leaves open: a late attempt to a key its owner holds nothing of, and knows no delete of, is
// still applied (a key deleted more than recentDeleteFor ago, or never written); and clocks
// that disagree by more than a request's time-out can still let a late attempt through.

// stampClientWrite returns the stamp of a client's write of key here, issued at issued (0: not
// stamped). A write stamped at its issue is stamped with that: later than what this node holds
// of the key (heldStamp), or superseded — it returns 0 and the held stamp. Stamped as it arrived
// instead (the clock here, raised past every stamp seen), a late attempt that reached a node
// holding an older copy of the key (a node back from a pause, claiming the range beside the
// live node that took the newer write) outranked that newer write where the two copies met,
// and the key lost an acknowledged value for good (skipsim balance --pause 0.1 --clients 20,
// small runs: TestPausesWithCheckedClients). A write without an issue stamp gets a new stamp
// here, later than what this node holds and than every stamp issued or seen here.
func (n *Node) stampClientWrite(key overlay.Key, issued uint64) (written, supersededBy uint64) {
	held := n.heldStamp(key)
	if issued == 0 {
		return n.newStamp(held + 1), 0
	}
	n.observeStamp(issued)
	if held >= issued {
		n.Stats.Superseded++
		return 0, held
	}
	return issued, 0
}

// observeStamp raises the stamp clock past a stamp that arrived with a copy.
func (n *Node) observeStamp(s uint64) { n.hlc = max(n.hlc, s) }

// supersedes reports whether a copy stamped w replaces one stamped held: written later, or as
// late where keepHeld does not ask for the held one to stand (a tie is a copy of the same write,
// or two copies of unknown age).
func supersedes(w, held uint64, keepHeld bool) bool {
	return w > held || (w == held && !keepHeld)
}

// Tombstones cover the deletes made where copies are expected back (tombstone.go). A node on the
// other side of a partition may also hold a copy of a key deleted in a range its owner held all
// along: it took that range over as lost during the cut and took a write of the key there, and
// the owner deleted the key later. So every delete is remembered for recentDeleteFor as well,
// and a copy written before it stays out. They are not in Snapshot, which the runtime writes at
// every change — every delete of a busy node would rewrite them all — but beside it, every few
// seconds at most and when the runtime stops (RecentDeletes): a crash forgets the last seconds'.
// A partition longer than recentDeleteFor brings such a key back.
const recentDeleteFor = time.Hour

// stampAt is the i-th of a message's delete stamps, 0 (unknown age) where it has none.
func stampAt(stamps []uint64, i int) uint64 {
	if i < len(stamps) {
		return stamps[i]
	}
	return 0
}

// heldStamp is the stamp of what this node holds of key: its value, or the latest delete it
// remembers, a tombstone or a recent one (0 for none).
func (n *Node) heldStamp(key overlay.Key) uint64 {
	var s uint64
	if it, found, _ := n.store.Get(key); found {
		s = it.Written
	}
	for _, t := range []*tombstones{&n.tombs, &n.recentDeletes} {
		if d, ok := t.get(key); ok {
			s = max(s, d.written)
		}
	}
	return s
}

// copyStands reports whether a copy of key stamped written — a value or a delete — replaces
// what this node holds of the key (supersedes), and raises the stamp clock past it.
func (n *Node) copyStands(key overlay.Key, written uint64, keepHeld bool) bool {
	n.observeStamp(written)
	if d, ok := n.tombs.get(key); ok && !supersedes(written, d.written, keepHeld) {
		return false
	}
	if d, ok := n.recentDeletes.get(key); ok && !supersedes(written, d.written, true) {
		return false // a delete remembered stands on a tie, like a value kept
	}
	held, found, _ := n.store.Get(key)
	return !found || supersedes(written, held.Written, keepHeld)
}
