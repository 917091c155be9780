package skipgraph

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// deleteAll deletes the keys from, from+100, … below to through node via, and takes them out of
// want.
func (nw *testNet) deleteAll(t *testing.T, want map[int]string, via overlay.NodeID, from, to int) {
	t.Helper()
	var reqs []uint64
	for i := from; i < to; i += 100 {
		delete(want, i)
		reqs = append(reqs, nw.nodes[via].Delete(k(i)))
	}
	nw.run()
	for _, r := range reqs {
		if res := nw.envs[via].result(t, r); res.Status != pb.Status_STATUS_OK {
			t.Fatalf("delete through %s: %+v", via, res)
		}
	}
}

// checkDeleted reads the keys from, from+100, … below to through every live node and fails
// unless each answers "not found".
func (nw *testNet) checkDeleted(t *testing.T, from, to int) {
	t.Helper()
	for _, n := range nw.live() {
		for i := from; i < to; i += 100 {
			get := n.Get(k(i))
			nw.run()
			if r := nw.envs[n.ID()].result(t, get); r.Status != pb.Status_STATUS_NOT_FOUND {
				t.Fatalf("get %d through %s after it was deleted: %s %q from %s, want not found", i, n.ID(), r.Status, r.Value, r.Owner)
			}
		}
	}
}

// checkAfterReturn lets b's return settle, then checks the ring, that the keys 1000, 1100, …,
// 1400 deleted while b was away stay deleted, and the values of want.
func (nw *testNet) checkAfterReturn(t *testing.T, want map[int]string) {
	t.Helper()
	nw.advance(3 * time.Minute)
	nw.checkRing()
	nw.checkDeleted(t, 1000, 1500)
	nw.checkAllValues(t, want)
}

// bPausedAndDeleted stands b still until a takes its range over without its items, then deletes
// the keys 1000, 1100, …, 1400 through d.
func bPausedAndDeleted(t *testing.T) (*testNet, map[int]string) {
	t.Helper()
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	want := initialValues()
	nw.pause("b")
	nw.advance(2 * time.Minute)
	if len(nw.nodes["a"].LostRanges()) == 0 {
		t.Fatal("a did not take b's range over: the test tests nothing")
	}
	nw.deleteAll(t, want, "d", 1000, 1500)
	return nw, want
}

// TestDeletesDuringAnOutageStayDeleted: keys of b's range are deleted while b is out of the ring
// and its predecessor a holds b's range without b's items. When b is back, its older copies
// must not bring the keys back, whichever way it returns.
func TestDeletesDuringAnOutageStayDeleted(t *testing.T) {
	t.Run("restart", func(t *testing.T) {
		nw, want, snap := bDeclaredDead(t)
		nw.deleteAll(t, want, "d", 1000, 1500)
		if _, err := nw.restart("b", snap); err != nil {
			t.Fatal(err)
		}
		nw.checkAfterReturn(t, want)
	})
	t.Run("pause", func(t *testing.T) {
		nw, want := bPausedAndDeleted(t)
		nw.resume("b")
		nw.checkAfterReturn(t, want)
	})
	t.Run("gives its place up", func(t *testing.T) {
		nw, want, snap := bDeclaredDead(t)
		nw.deleteAll(t, want, "d", 1000, 1500)
		b, err := nw.restart("b", snap)
		if err != nil {
			t.Fatal(err)
		}
		// Never confirmed: b writes its copies out to their owners, leaving what those hold.
		b.unconfirmedSince = nw.clock.now.Add(-time.Duration(maxUnconfirmed+1) * nw.cfg.ProbeInterval)
		b.heardAny = nw.clock.now
		b.onTick()
		if b.State() != StateJoining {
			t.Fatalf("b is %s, not joining again: the test tests nothing", b.State())
		}
		nw.checkAfterReturn(t, want)
	})
}

// TestTombstonesTravelWithTheLostPart: the node holding b's range without b's items hands it on
// — by a leave, its tombstones spread over several chunks, or by restarting from its snapshot —
// and b, back, still finds its deleted keys deleted.
func TestTombstonesTravelWithTheLostPart(t *testing.T) {
	t.Run("leave", func(t *testing.T) {
		nw, want, snap := bDeclaredDead(t)
		nw.deleteAll(t, want, "d", 1000, 1500)
		a := nw.nodes["a"]
		a.cfg.ChunkItems = 2 // a's five items and five tombstones in several chunks
		if err := a.Leave(); err != nil {
			t.Fatal(err)
		}
		nw.advance(2 * time.Minute)
		if a.State() != StateLeft || nw.nodes["e"].tombs.len() != 5 {
			t.Fatalf("a is %s; e, which took its range, holds %d tombstones, want 5", a.State(), nw.nodes["e"].tombs.len())
		}
		if _, err := nw.restart("b", snap); err != nil {
			t.Fatal(err)
		}
		nw.checkAfterReturn(t, want)
		if n := nw.nodes["e"].tombs.len(); n != 0 {
			t.Fatalf("e keeps %d tombstones after b's re-admission", n)
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		nw, want, snapB := bDeclaredDead(t)
		nw.deleteAll(t, want, "d", 1000, 1500)
		snapA := proto.Clone(nw.nodes["a"].Snapshot()).(*pb.NodeSnapshot)
		if len(snapA.Tombstones) != 5 {
			t.Fatalf("a's snapshot holds %d tombstones, want 5", len(snapA.Tombstones))
		}
		nw.crash("a")
		if _, err := nw.restart("a", snapA); err != nil {
			t.Fatal(err)
		}
		nw.advance(time.Minute)
		if _, err := nw.restart("b", snapB); err != nil {
			t.Fatal(err)
		}
		nw.checkAfterReturn(t, want)
	})
}

// TestTombstoneReads: a read of a key deleted in a lost part answers "not found" (it did exist,
// and is deleted), one of a key never written there STATUS_LOST (it may have existed); a put
// forgets the tombstone.
func TestTombstoneReads(t *testing.T) {
	nw, want, _ := bDeclaredDead(t)
	nw.deleteAll(t, want, "d", 1000, 1100)
	d := nw.nodes["d"]
	get := func(i int) overlay.Result {
		r := d.Get(k(i))
		nw.run()
		return nw.envs["d"].result(t, r)
	}
	if r := get(1000); r.Status != pb.Status_STATUS_NOT_FOUND {
		t.Fatalf("get of a key deleted in a lost part: %s", r.Status)
	}
	if r := get(1050); r.Status != pb.Status_STATUS_LOST {
		t.Fatalf("get of a key never written in a lost part: %s", r.Status)
	}
	d.Put(k(1000), []byte("again"))
	nw.run()
	if nw.nodes["a"].tombs.has(k(1000)) {
		t.Fatal("the tombstone outlived a put of its key")
	}
	if r := get(1000); r.Status != pb.Status_STATUS_OK || string(r.Value) != "again" {
		t.Fatalf("get after the put: %s %q", r.Status, r.Value)
	}
}

// TestTombstoneOlderThanATakeOverAnswersNoRead: a tombstone a node holds outside its range (one
// kept until TombstoneTTL) is older than its take-over of that part: the key was written again
// meanwhile by the node that held it. A read there answers LOST, not "not found" (the docker
// chaos test saw "not found" for an acknowledged value, read from the node that took over a
// paused one's range), and the newer value comes back with the paused node.
func TestTombstoneOlderThanATakeOverAnswersNoRead(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) …
	want := initialValues()
	a := nw.nodes["a"]
	a.tombs.set(k(1500), tombstone{at: nw.clock.now.Add(-time.Minute), written: 1}) // older than b's value
	nw.pause("b")
	nw.advance(2 * time.Minute)
	if !slices.ContainsFunc(a.LostRanges(), func(r overlay.Range) bool { return r.Contains(k(1500)) }) {
		t.Fatalf("a did not take b's range over (lost: %v): the test tests nothing", a.LostRanges())
	}
	get := a.Get(k(1500))
	nw.run()
	if r := nw.envs["a"].result(t, get); r.Status != pb.Status_STATUS_LOST {
		t.Fatalf("read of a key written after a's tombstone, in the part a took over: %s, want LOST", r.Status)
	}
	nw.resume("b")
	nw.advance(3 * time.Minute)
	nw.checkRing()
	nw.checkAllValues(t, want)
}

// TestTombstoneLimits: tombstones expire after TombstoneTTL, and beyond MaxTombstones the oldest
// tenth goes, counted.
func TestTombstoneLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTombstones = 10
	nw := newTestNet(t, cfg)
	a := nw.bootstrap("a")
	for i := 0; i < 11; i++ {
		a.tombs.set(k(i), tombstone{at: nw.clock.now.Add(time.Duration(i) * time.Second)})
		a.evictTombstones()
	}
	if a.tombs.len() != 9 || a.tombs.has(k(0)) || a.tombs.has(k(1)) || !a.tombs.has(k(2)) || a.Stats.TombstonesEvicted != 2 {
		t.Fatalf("after 11 tombstones with room for 10: %d kept, evicted %d, 0 kept %v, 2 kept %v",
			a.tombs.len(), a.Stats.TombstonesEvicted, a.tombs.has(k(0)), a.tombs.has(k(2)))
	}
	nw.clock.now = nw.clock.now.Add(cfg.TombstoneTTL + 5*time.Second + time.Millisecond)
	a.expireTombstones()
	if a.tombs.len() != 5 || a.tombs.has(k(5)) || !a.tombs.has(k(6)) {
		t.Fatalf("after the lifetime of the first six: %d kept", a.tombs.len())
	}
}

// TestBatchDeletesWalkTheirOwners: a batch write mixing values and deletes (a re-admission's)
// walks every owner of its keys, each storing and deleting its share.
func TestBatchDeletesWalkTheirOwners(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	want := initialValues()
	var batch []overlay.Item
	for i := 500; i < 4900; i += 400 {
		batch = append(batch, overlay.Item{Key: k(i), Deleted: true})
		delete(want, i)
		want[i+50] = fmt.Sprint("b", i)
		batch = append(batch, overlay.Item{Key: k(i + 50), Value: []byte(want[i+50])})
	}
	a := nw.nodes["a"]
	var res overlay.Result
	a.putBatch(batch, false, false, 0, "", nil, func(r overlay.Result) { res = r })
	nw.run()
	if res.Status != pb.Status_STATUS_OK || res.Stored != len(batch) {
		t.Fatalf("batch of %d: %s, %d stored", len(batch), res.Status, res.Stored)
	}
	nw.checkAllValues(t, want)
	for i := 500; i < 4900; i += 400 {
		nw.checkDeleted(t, i, i+1)
	}
}

// TestReadmittedNodeKeepsTheDeletesItWasSent: b, back from a pause, is re-admitted and drops its
// copies of the keys deleted meanwhile; older copies of them written out to b later (as a
// receiver that acknowledged a piece from b before it stood still would) stay out.
func TestReadmittedNodeKeepsTheDeletesItWasSent(t *testing.T) {
	nw, want := bPausedAndDeleted(t)
	nw.resume("b")
	nw.checkAfterReturn(t, want)
	b := nw.nodes["b"]
	if !b.tombs.has(k(1000)) {
		t.Fatal("b keeps no tombstone for a key its re-admission deleted")
	}
	var res overlay.Result
	late := []overlay.Item{{Key: k(1000), Value: []byte("older")}, {Key: k(1100), Value: []byte("older")}}
	nw.nodes["c"].putBatch(late, true, true, 0, "", nil, func(r overlay.Result) { res = r })
	nw.run()
	if res.Status != pb.Status_STATUS_OK {
		t.Fatalf("the late write-out: %s", res.Status)
	}
	nw.checkDeleted(t, 1000, 1500)
}

// TestNeitherConfirmedOverlapTakesNewerWrites: a took b's range over while b stood still, and
// keys there were deleted and written again; a then waits for its own neighbours' word when b,
// back and waiting too, meets it. Neither claim is confirmed, so b keeps its values — but not
// where a's are newer than every copy of b, whose store has taken no value since before a's
// take-over: a's values there and a's deletes stand. Once b's store took a value after them,
// b's copies stand.
func TestNeitherConfirmedOverlapTakesNewerWrites(t *testing.T) {
	outage := func(t *testing.T) (*testNet, map[int]string) {
		nw, want := bPausedAndDeleted(t)
		for i := 1500; i < 2000; i += 100 {
			want[i] = fmt.Sprint("again", i)
			nw.nodes["d"].Put(k(i), []byte(want[i]))
		}
		nw.run()
		return nw, want
	}
	// meet resumes b with the taker waiting for its neighbours' word, and checks that the two
	// met so.
	meet := func(t *testing.T, nw *testNet, taker overlay.NodeID) {
		nw.nodes[taker].unconfirmedSince = nw.clock.now
		nw.resume("b")
		nw.advance(3 * time.Minute)
		for _, ev := range nw.envs[taker].eventsOf(overlay.EventConflict) {
			if strings.Contains(ev.Detail, "neither claim confirmed") {
				return
			}
		}
		t.Fatalf("%s and b did not meet with neither claim confirmed: the test tests nothing", taker)
	}
	for _, c := range []struct {
		name string
		// handOn moves the lost part on from a, or not, and names the node that holds it.
		handOn func(t *testing.T, nw *testNet) overlay.NodeID
	}{
		{"writes newer than b's copies", func(*testing.T, *testNet) overlay.NodeID { return "a" }},
		{"the lost part handed on", func(t *testing.T, nw *testNet) overlay.NodeID {
			// a leaves: e takes b's range over from it, the lost part with its age.
			if err := nw.nodes["a"].Leave(); err != nil {
				t.Fatal(err)
			}
			nw.advance(time.Minute)
			if nw.nodes["a"].State() != StateLeft || len(nw.nodes["e"].LostRanges()) == 0 {
				t.Fatalf("a is %s, e holds lost parts %v: the test tests nothing", nw.nodes["a"].State(), nw.nodes["e"].LostRanges())
			}
			return "e"
		}},
		{"the taker restarted from its snapshot", func(t *testing.T, nw *testNet) overlay.NodeID {
			snap := proto.Clone(nw.nodes["a"].Snapshot()).(*pb.NodeSnapshot)
			nw.crash("a")
			if _, err := nw.restart("a", snap); err != nil {
				t.Fatal(err)
			}
			return "a"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw, want := outage(t)
			meet(t, nw, c.handOn(t, nw))
			nw.checkRing()
			nw.checkDeleted(t, 1000, 1500)
			nw.checkAllValues(t, want)
		})
	}
	for _, c := range []struct {
		name   string
		handOn func(t *testing.T, nw *testNet) overlay.NodeID
	}{
		{"a copy newer than the writes", func(*testing.T, *testNet) overlay.NodeID { return "a" }},
		{"a copy newer than the writes handed on from a clock an hour ahead", func(t *testing.T, nw *testNet) overlay.NodeID {
			// a's tombstones, stamped by its clock, would look an hour newer than b's copies.
			a := nw.nodes["a"]
			a.env.(*fakeEnv).skew = time.Hour
			for k, d := range a.tombs.at {
				a.tombs.set(k, tombstone{at: d.at.Add(time.Hour), written: d.written})
			}
			if err := a.Leave(); err != nil {
				t.Fatal(err)
			}
			nw.advance(time.Minute)
			if a.State() != StateLeft || nw.nodes["e"].Tombstones() == 0 {
				t.Fatalf("a is %s, e holds %d tombstones: the test tests nothing", a.State(), nw.nodes["e"].Tombstones())
			}
			return "e"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw, want := outage(t)
			taker := c.handOn(t, nw)
			b := nw.nodes["b"]
			// b's store took values after a's writes (say write-outs of the keys 1000 and 1500
			// written later than a's delete and value reached it): those stand, and a's newer
			// writes and deletes of the other keys replace b's older copies, key by key.
			for _, i := range []int{1000, 1500} {
				want[i] = "newer"
				if err := b.store.Put(overlay.Item{Key: k(i), Value: []byte(want[i]), Written: nw.nodes[taker].hlc + 1}); err != nil {
					t.Fatal(err)
				}
			}
			b.storeWritten = nw.clock.now
			meet(t, nw, taker)
			nw.checkRing()
			nw.checkAllValues(t, want)
		})
	}
	t.Run("a copy older than the take-over written out to a", func(t *testing.T) {
		nw, want := outage(t)
		// b held 1650 before it stood still; c writes out a copy of unknown age of it (a
		// receiver of a piece from b whose commit it never heard, say), which a takes into the
		// lost part: a can no longer tell its values there newer than b's by their time, and b's
		// own copy of 1650 stands; the writes made there during the outage replace b's older
		// copies all the same, key by key, as the deletes do.
		if err := nw.nodes["b"].store.Put(overlay.Item{Key: k(1650), Value: []byte("b1650")}); err != nil {
			t.Fatal(err)
		}
		var res overlay.Result
		nw.nodes["c"].putBatch([]overlay.Item{{Key: k(1650), Value: []byte("older")}}, true, true, 0, "", nil, func(r overlay.Result) { res = r })
		nw.run()
		if res.Status != pb.Status_STATUS_OK || !nw.nodes["a"].lost.contains(k(1650)) {
			t.Fatalf("the write-out: %s; into a's lost part: %v", res.Status, nw.nodes["a"].lost.contains(k(1650)))
		}
		want[1650] = "b1650"
		meet(t, nw, "a")
		nw.checkRing()
		nw.checkDeleted(t, 1000, 1500)
		nw.checkAllValues(t, want)
	})
	t.Run("b restarted, with when its store last took a value", func(t *testing.T) {
		nw, want := outage(t)
		b := nw.nodes["b"]
		snap := proto.Clone(b.Snapshot()).(*pb.NodeSnapshot)
		written := b.storeWritten // what b's runtime kept beside its store
		nw.crash("b")
		delete(nw.paused, "b")
		b, err := nw.restart("b", snap)
		if err != nil {
			t.Fatal(err)
		}
		b.RestoreStoreWritten(written)
		if !b.Unconfirmed() {
			t.Fatal("the restored b does not wait for its neighbours' word: the test tests nothing")
		}
		// a, waiting too, meets b (as its next pong from b would have it).
		a := nw.nodes["a"]
		a.unconfirmedSince = nw.clock.now
		a.settleOverlap(b.Self(), &pb.Pong{Claim: b.claim, Unconfirmed: true, UnwrittenForNanos: uint64(nw.clock.now.Sub(b.storeWritten))})
		nw.advance(3 * time.Minute)
		nw.checkRing()
		nw.checkDeleted(t, 1000, 1500)
		nw.checkAllValues(t, want)
	})
}

// joinAcknowledged has a new node id join through via at key at, and fails unless it
// acknowledged its piece (whatever nw.drop lets through afterwards).
func (nw *testNet) joinAcknowledged(t *testing.T, id, via overlay.NodeID, at int) *Node {
	t.Helper()
	n := nw.add(id)
	if err := n.Join(via, k(at)); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if n.in == nil || !n.in.acked {
		t.Fatalf("%s did not acknowledge its piece: the case tests nothing", id)
	}
	return n
}

// checkDeletesOutliveWriteOut lets f, which never heard how its join ended, give its piece up
// and write its copies out, and fails unless 1600 and 1700 stay deleted and the ring holds want.
func (nw *testNet) checkDeletesOutliveWriteOut(t *testing.T, want map[int]string) {
	t.Helper()
	nw.advance(3 * time.Minute) // f gives its piece up, writes the copies out and joins again
	if len(nw.envs["f"].eventsOf(overlay.EventConflict)) == 0 {
		t.Fatal("f never gave its piece up: the case tests nothing")
	}
	nw.checkRing()
	nw.checkDeleted(t, 1600, 1800)
	nw.checkAllValues(t, want)
}

// TestDeletesAfterAnAbortUnheardStayDeleted: b's handoff of [1500, 2000) to f, joining there,
// is acknowledged, but the acknowledgements and b's abort are all lost, and so are b's answers
// to f's asks for the verdict. b keeps the piece and deletes 1600 and 1700, while the handoff is
// under way (the deletes it sends on to f lost too) or after its abort; f, never hearing the
// verdict, writes its copies out to their owner, b, as writes that leave what the owner holds.
// The deleted keys must not come back.
func TestDeletesAfterAnAbortUnheardStayDeleted(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "after the abort", true: "while the handoff is under way"}[during], func(t *testing.T) {
			nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
			want := initialValues()
			nw.drop = func(s sentMsg) bool { return s.m.GetHandoffAck() != nil || s.m.GetHandoffAbort() != nil }
			nw.joinAcknowledged(t, "f", "b", 1500)
			b := nw.nodes["b"]
			if during {
				unheard := nw.drop
				nw.drop = func(s sentMsg) bool { return unheard(s) || (s.to == "f" && s.m.GetHandoff() != nil) }
				nw.deleteAll(t, want, "d", 1600, 1800)
				if b.out == nil {
					t.Fatal("the handoff ended before the deletes: the case tests nothing")
				}
			}
			nw.advance(nw.cfg.HandoffLease + time.Second) // b's lease runs out: it aborts, unheard
			nw.drop = func(s sentMsg) bool { return s.to == "f" && s.m.GetHandoffAbort() != nil }
			if b.Busy() || b.Range() != (overlay.Range{Start: k(1000), End: k(2000)}) {
				t.Fatalf("b is busy %v and owns %s: it did not abort", b.Busy(), b.Range())
			}
			if !during {
				nw.deleteAll(t, want, "d", 1600, 1800)
			}
			nw.checkDeletesOutliveWriteOut(t, want)
		})
	}
}

// TestDeletesAfterARestartStayDeleted: the abort unheard of
// TestDeletesAfterAnAbortUnheardStayDeleted, with b restarted from its snapshot after it
// aborted, or while the handoff is under way (the restart forgets it, and f never hears a
// verdict either way). b deletes 1600 and 1700 once back; f writes its copies out to b. The
// deleted keys must not come back: the snapshot keeps the pieces copies may come back from.
func TestDeletesAfterARestartStayDeleted(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "restarted after the abort", true: "restarted during the handoff"}[during], func(t *testing.T) {
			nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
			// The pieces of the joins that built the ring, received lately, are b's alone now.
			nw.advance(nw.nodes["b"].copiesOutFor())
			want := initialValues()
			// Nothing of f's join after its first chunk gets through either way: f never hears
			// a verdict (nor learns b forgot the handoff), b never hears f's acknowledgements.
			var first uint64
			nw.drop = func(s sentMsg) bool {
				m := s.m
				id := m.GetHandoffAck().GetXferId() | m.GetHandoffAbort().GetXferId() | m.GetHandoffCommit().GetXferId() |
					m.GetHandoffCommitAck().GetXferId() | m.GetHandoff().GetXferId()
				if first == 0 && m.GetHandoff() != nil {
					first = id
					return false
				}
				return id != 0 && id == first
			}
			nw.joinAcknowledged(t, "f", "b", 1500)
			b := nw.nodes["b"]
			if !during {
				nw.advance(nw.cfg.HandoffLease + time.Second) // b's lease runs out: it aborts, unheard
			}
			if b.Busy() != during || b.Range() != (overlay.Range{Start: k(1000), End: k(2000)}) {
				t.Fatalf("b is busy %v and owns %s before its restart", b.Busy(), b.Range())
			}
			snap := proto.Clone(b.Snapshot()).(*pb.NodeSnapshot)
			nw.crash("b")
			nw.advance(time.Second)
			b, err := nw.restart("b", snap)
			if err != nil {
				t.Fatal(err)
			}
			nw.advance(nw.cfg.ProbeInterval) // its neighbours confirm it
			nw.deleteAll(t, want, "d", 1600, 1800)
			nw.checkDeletesOutliveWriteOut(t, want)
		})
	}
}

// TestReceiverThatStoodStill: f acknowledges its join piece from b and stands still at once; b
// gives the join up at its lease's end, the abort lost. Long after — past the time b notes the
// piece for deletes (copiesOutFor), so without tombstones — b deletes 1600 and 1700; then f runs
// again and asks for the verdict. b remembers the handoff it gave up and answers with the abort:
// f discards its copies instead of writing them out to b, which brought the deleted keys back.
// And when every answer to f is lost too, f writes its copies out to b naming the handoff for
// the keys the join brought, and b, remembering it gave it up, stores none of those; a copy f
// held in the piece besides still reaches b.
func TestReceiverThatStoodStill(t *testing.T) {
	for _, answered := range []bool{true, false} {
		t.Run(map[bool]string{true: "learns of the abort", false: "writes copies b does not store"}[answered], func(t *testing.T) {
			nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
			want := initialValues()
			nw.drop = func(s sentMsg) bool { return s.m.GetHandoffAck() != nil && s.to == "b" }
			f := nw.joinAcknowledged(t, "f", "b", 1500)
			nw.pause("f")
			b := nw.nodes["b"]
			nw.advance(nw.cfg.HandoffLease + time.Second) // b's lease runs out: it gives the join up
			if b.Busy() {
				t.Fatal("b did not abort: the case tests nothing")
			}
			nw.drop = nil
			if !answered {
				nw.drop = func(s sentMsg) bool { return s.to == "f" && s.m.GetHandoffAbort() != nil }
				// A copy f holds in the piece that the join did not carry may be the only one: it
				// must still reach b.
				if err := f.Store().Put(overlay.Item{Key: k(1550), Value: []byte("stray")}); err != nil {
					t.Fatal(err)
				}
				want[1550] = "stray"
			}
			// The abort waits for f with the messages of its standstill: lost, it never arrives.
			nw.held = slices.DeleteFunc(nw.held, func(s sentMsg) bool { return s.to == "f" && s.m.GetHandoffAbort() != nil })
			nw.advance(b.copiesOutFor() + time.Minute)
			nw.deleteAll(t, want, "d", 1600, 1800)
			if b.Tombstones() != 0 {
				t.Fatalf("b keeps %d tombstones: the deletes came inside the window the case is about", b.Tombstones())
			}
			nw.resume("f")
			nw.advance(5 * time.Minute)
			wrote := f.Stats.WrittenOut > 0 || len(nw.envs["f"].eventsOf(overlay.EventConflict)) > 0
			if wrote == answered {
				t.Fatalf("f wrote %d copies out (events %v), answers heard %v", f.Stats.WrittenOut, nw.envs["f"].eventsOf(overlay.EventConflict), answered)
			}
			nw.drop = nil
			nw.advance(time.Minute)
			nw.checkRing()
			nw.checkDeleted(t, 1600, 1800)
			nw.checkAllValues(t, want)
		})
	}
}

// nixUnconfirmed has b hand [1500, 2000) to c by a NIX whose commit c applies while every
// confirmation of it is lost, and stay so (nw.drop): b holds its copies, awaiting one.
func (nw *testNet) nixUnconfirmed(t *testing.T) (b, c *Node) {
	t.Helper()
	b, c = nw.nodes["b"], nw.nodes["c"]
	nw.drop = func(s sentMsg) bool { return s.m.GetHandoffCommitAck() != nil }
	if err := b.GiveNIX(true, k(1500), pb.Cause_CAUSE_BALANCE, func(bool, int) {}); err != nil {
		t.Fatal(err)
	}
	nw.run()
	if c.Range() != (overlay.Range{Start: k(1500), End: k(3000)}) || len(b.committing) != 1 {
		t.Fatalf("c owns %s after the NIX, b awaits %d confirmations: want [1500, 3000) and one", c.Range(), len(b.committing))
	}
	return b, c
}

// TestDeletesAfterACommitUnconfirmedStayDeleted: b hands [1500, 2000) to c by a NIX and c
// applies the commit, but every confirmation of it is lost. c, the owner now, deletes 1600 and
// 1700; b, never hearing the commit confirmed, writes its copies out to the piece's owner, c, as
// writes that leave what the owner holds. The deleted keys must not come back.
func TestDeletesAfterACommitUnconfirmedStayDeleted(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	want := initialValues()
	nw.nixUnconfirmed(t)
	nw.deleteAll(t, want, "d", 1600, 1800)
	nw.advance(3 * time.Minute)
	nw.drop = nil
	if len(nw.envs["b"].eventsOf(overlay.EventConflict)) == 0 {
		t.Fatal("b never wrote its copies out: the case tests nothing")
	}
	nw.checkRing()
	nw.checkDeleted(t, 1600, 1800)
	nw.checkAllValues(t, want)
}

// TestGiverThatStoodStillWritesNoCopiesBack: b hands [1500, 2000) to c by a NIX, every
// confirmation of c's commit is lost, and b stands still at once, past the time c notes the
// piece for deletes (copiesOutFor). c deletes 1600 and 1700, leaving no tombstones (and in the
// second case restarts from its snapshot); b, back, writes its copies out to their owner, c,
// once its commits stay unconfirmed. The write names the handoff for the keys it carried, which
// c remembers committing: it stores none of those, and the deleted keys stay deleted; a copy in
// the piece the NIX did not carry still reaches c.
func TestGiverThatStoodStillWritesNoCopiesBack(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "receiver running", true: "receiver restarted"}[restart], func(t *testing.T) {
			nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
			want := initialValues()
			b, c := nw.nixUnconfirmed(t)
			// A copy b holds in the piece that the NIX did not carry (left by a failed write, say)
			// may be the only one: it must still reach c.
			if err := b.Store().Put(overlay.Item{Key: k(1550), Value: []byte("stray")}); err != nil {
				t.Fatal(err)
			}
			want[1550] = "stray"
			nw.pause("b")
			nw.advance(c.copiesOutFor() + time.Minute)
			nw.deleteAll(t, want, "d", 1600, 1800)
			if c.Tombstones() != 0 {
				t.Fatalf("c keeps %d tombstones: the deletes came inside the window the case is about", c.Tombstones())
			}
			if restart {
				snap := proto.Clone(c.Snapshot()).(*pb.NodeSnapshot)
				nw.crash("c")
				nw.advance(time.Second)
				var err error
				if c, err = nw.restart("c", snap); err != nil {
					t.Fatal(err)
				}
				nw.advance(nw.cfg.ProbeInterval) // its neighbours confirm it
			}
			nw.resume("b")
			nw.advance(5 * time.Minute)
			nw.drop = nil
			if b.Stats.WrittenOut == 0 {
				t.Fatal("b never wrote its copies out: the case tests nothing")
			}
			nw.advance(time.Minute)
			nw.checkRing()
			nw.checkDeleted(t, 1600, 1800)
			nw.checkAllValues(t, want)
		})
	}
}

// TestRecentDeletesKeepOlderCopiesOut: b deletes a key of the range it held all along (no
// tombstone: no copy is expected back), and a copy written before the delete arrives later (a
// node on the other side of a partition wrote it in a part it took over): it stays out while the
// delete is remembered, for recentDeleteFor, at b, at the node b handed the key on to, or at b
// restarted from its snapshot with the recent deletes its runtime wrote, and comes back after
// that.
func TestRecentDeletesKeepOlderCopiesOut(t *testing.T) {
	for _, then := range []string{"kept", "handed on", "restarted"} {
		t.Run(then, func(t *testing.T) {
			nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
			b := nw.nodes["b"]
			nw.advance(b.copiesOutFor() + time.Minute) // the joins' pieces are b's alone by now
			nw.nodes["d"].Delete(k(1500))
			nw.run()
			d, ok := b.recentDeletes.get(k(1500))
			if !ok || b.tombs.has(k(1500)) {
				t.Fatalf("b remembers the delete recently %v, as a tombstone %v; want recently only", ok, b.tombs.has(k(1500)))
			}
			holder := b
			switch then {
			case "handed on":
				nw.nix(t, "b", true, k(1400)) // c takes [1400, 2000)
				holder = nw.nodes["c"]
				if !holder.Range().Contains(k(1500)) {
					t.Fatalf("c owns %s after b's NIX", holder.Range())
				}
			case "restarted":
				snap := proto.Clone(b.Snapshot()).(*pb.NodeSnapshot)
				snap.RecentDeletes = b.RecentDeletes()
				nw.crash("b")
				var err error
				if holder, err = nw.restart("b", snap); err != nil {
					t.Fatal(err)
				}
				nw.advance(time.Minute) // confirmed by its neighbours
				if holder.unconfirmed() || !holder.Range().Contains(k(1500)) {
					t.Fatalf("b restarted: unconfirmed %v, range %s", holder.unconfirmed(), holder.Range())
				}
			}
			writeOlderCopy := func() {
				t.Helper()
				var res overlay.Result
				older := []overlay.Item{{Key: k(1500), Value: []byte("older"), Written: d.written - 1}}
				nw.nodes["e"].putBatch(older, true, true, 0, "", nil, func(r overlay.Result) { res = r })
				nw.run()
				if res.Status != pb.Status_STATUS_OK {
					t.Fatalf("the write of the older copy: %s", res.Status)
				}
			}
			writeOlderCopy()
			nw.checkDeleted(t, 1500, 1501)
			if holder.Stats.CopiesOlder != 1 {
				t.Errorf("the holder counts %d copies dropped as older, want 1", holder.Stats.CopiesOlder)
			}

			nw.advance(recentDeleteFor + time.Minute)
			if _, ok := holder.recentDeletes.get(k(1500)); ok {
				t.Fatal("the delete is still remembered after recentDeleteFor")
			}
			writeOlderCopy()
			if got := value(t, holder, 1500); got != "older" {
				t.Fatalf("1500 after the delete was forgotten: %q, want the older copy back", got)
			}
		})
	}
}

// TestCopiesWholeDropsLostMarksButInItsHoles: a CopiesWhole over [1500, 2500) with a hole at
// [2200, 2300), arriving at d, is routed to b, which owns [1000, 2000): b drops its marks in
// [1500, 2000) and passes [2000, 2500) on to c, which drops its marks there but in the hole. Marks outside the range, and
// in the hole, stay; tombstones stay with them all.
func TestCopiesWholeDropsLostMarksButInItsHoles(t *testing.T) {
	nw := fourNodes(t)
	b, c := nw.nodes["b"], nw.nodes["c"]
	b.lost.add(overlay.Range{Start: k(1000), End: k(2000)}, time.Time{})
	c.lost.add(overlay.Range{Start: k(2000), End: k(3000)}, time.Time{})
	c.tombs.set(k(2100), tombstone{at: c.env.Now()})
	nw.nodes["d"].Handle("a", &pb.Envelope{From: nw.nodes["a"].selfRef, Body: &pb.Envelope_CopiesWhole{CopiesWhole: &pb.CopiesWhole{
		Route: &pb.Route{Key: []byte(k(1500))}, Range: overlay.Range{Start: k(1500), End: k(2500)}.ToPB(),
		Holes: []*pb.KeyRange{overlay.Range{Start: k(2200), End: k(2300)}.ToPB()}}}})
	nw.run()
	for _, want := range []struct {
		n    *Node
		lost []overlay.Range
	}{
		{b, []overlay.Range{{Start: k(1000), End: k(1500)}}},
		{c, []overlay.Range{{Start: k(2200), End: k(2300)}, {Start: k(2500), End: k(3000)}}},
	} {
		got := want.n.LostRanges()
		slices.SortFunc(got, func(x, y overlay.Range) int { return cmp.Compare(x.Start, y.Start) })
		if !slices.Equal(got, want.lost) {
			t.Errorf("%s marks %v lost, want %v", want.n.ID(), got, want.lost)
		}
	}
	if c.Tombstones() != 1 {
		t.Errorf("c holds %d tombstones, want its one", c.Tombstones())
	}
}

// TestReadmissionDeletesGoFirst: the deletes a re-admission sends go out with the items in key
// order from the piece's start, in the first batch for the keys they precede. Left after the
// items, deletes of keys before the first item were cut into the last batch, which went out as
// if past the seam and walked the ring, reaching the returning node after it had served the
// keys (skipsim balance --pause 0.1 --pause-for 120s --clients 50 --seed 9).
func TestReadmissionDeletesGoFirst(t *testing.T) {
	nw, want := bPausedAndDeleted(t) // a holds b's range, 1000…1400 deleted there
	var reqs []uint64
	for i := 1501; i < 1700; i++ { // written while b is away: a holds them after the deletes
		want[i] = "new"
		reqs = append(reqs, nw.nodes["d"].Put(k(i), []byte("new")))
	}
	nw.run()
	for _, r := range reqs {
		if res := nw.envs["d"].result(t, r); res.Status != pb.Status_STATUS_OK {
			t.Fatalf("put through d: %+v", res)
		}
	}
	sent := len(nw.envs["a"].outbox)
	nw.resume("b")
	var first *pb.BatchPut
	nw.advanceWith(time.Minute, func(string) {
		for _, m := range nw.envs["a"].outbox[sent:] {
			if b := m.m.GetBatchPut(); first == nil && b != nil && b.Copies {
				first = proto.Clone(b).(*pb.BatchPut) // as sent: its receivers take items off it
			}
		}
	})
	if first == nil || len(first.Deletes) != 5 || overlay.Key(first.Route.Key) != k(1000) {
		t.Fatalf("a's first batch of copies to b: %v; want it to start with the deletes of 1000…1400", first)
	}
	nw.checkAfterReturn(t, want)
}

// TestDeleteInAnAdoptedPieceOutlivesTheGiversReturn: b stands still in the middle of a NIX of
// [1000, 1500) to a, the piece acknowledged by a; a takes b's range over and keeps the piece
// (its items are all there: no lost mark, so a delete there leaves no tombstone); key 1200 is
// deleted. When b comes back, its NIX given up, a re-admits it, and the delete, which a
// remembers only among its recent deletes, must go with the re-admission, or b's older copy of
// the key stands again (skipsim balance --pause 0.1 --pause-for 120s --clients 50 --seed 9).
func TestDeleteInAnAdoptedPieceOutlivesTheGiversReturn(t *testing.T) {
	nw := fiveNodes(t) // a [0,1000) b [1000,2000) c [2000,3000) d [3000,4000) e [4000,"")
	want := initialValues()
	a, b := nw.nodes["a"], nw.nodes["b"]
	var done nixDone
	if err := b.GiveNIX(false, k(1500), pb.Cause_CAUSE_BALANCE, done.fn()); err != nil {
		t.Fatal(err)
	}
	for a.in == nil || !a.in.acked {
		if !nw.step() {
			t.Fatal("b's NIX to a stopped before a acknowledged it")
		}
	}
	nw.pause("b")
	nw.advance(2 * time.Minute)
	if !a.Responsible(k(1200)) || slices.ContainsFunc(a.LostRanges(), func(r overlay.Range) bool { return r.Contains(k(1200)) }) {
		t.Fatalf("a owns %s, lost %v: want b's range taken over with the piece kept", a.Range(), a.LostRanges())
	}
	nw.deleteAll(t, want, "d", 1200, 1201)
	if a.tombs.has(k(1200)) {
		t.Fatal("a keeps a tombstone of 1200: the test does not test the recent deletes")
	}
	nw.resume("b")
	nw.advance(3 * time.Minute)
	nw.checkRing()
	nw.checkDeleted(t, 1200, 1201)
	nw.checkAllValues(t, want)
}
