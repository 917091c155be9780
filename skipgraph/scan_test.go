package skipgraph

import (
	"slices"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// TestScanPassesNodeStillClimbing checks that a level scan walking through a node not yet linked
// on the ring the scan walks (a node that joined a moment ago and is still climbing) goes on below
// instead of being dropped, and ends at the right node: for every node x in turn cut down to level
// 0, every other node scans every level, and the answer must name the first node clockwise that
// shares that level's bits with the scanning node.
func TestScanPassesNodeStillClimbing(t *testing.T) {
	nw := newTestNet(t, DefaultConfig())
	nw.bootstrap("n00")
	for i := 1; i < 24; i++ {
		nw.join(overlay.NodeID([]byte{'n', byte('0' + i/10), byte('0' + i%10)}), "n00", k(i*1000))
	}
	nw.advance(3 * time.Minute)
	nw.checkLevels()

	var ring []*Node // level-0 order
	for cur := nw.live()[0]; len(ring) < len(nw.live()); {
		ring = append(ring, cur)
		_, s := cur.Neighbors(0)
		cur = nw.nodes[s.ID]
	}
	through := 0 // scans whose walk had to pass the climbing node
	for _, x := range ring {
		saved := slices.Clone(x.levels)
		for oi, o := range ring {
			if o == x {
				continue
			}
			for l := 1; l < o.Height(); l++ {
				var want *Node
				passes := false
				for j := 1; j < len(ring) && want == nil; j++ {
					y := ring[(oi+j)%len(ring)]
					if overlay.SameRing(o.Self().MVec, y.Self().MVec, l) {
						want = y
					} else if y == x && l >= 2 && overlay.SameRing(o.Self().MVec, x.Self().MVec, l-1) {
						passes = true
					}
				}
				if want == nil {
					continue // alone on level l: answered by the node itself
				}
				if passes {
					through++
				}
				x.levels = slices.Clone(saved[:1])
				sent := map[overlay.NodeID]int{}
				for id, e := range nw.envs {
					sent[id] = len(e.outbox)
				}
				o.sendScan(l, pb.Cause_CAUSE_MAINTAIN)
				nw.run()
				var got overlay.NodeID
				for id, e := range nw.envs {
					for _, s := range e.outbox[sent[id]:] {
						if f := s.m.GetLevelFound(); f != nil && s.to == o.ID() && int(f.Level) == l {
							got = overlay.NodeID(f.Node.Id)
						}
					}
				}
				if got != want.ID() {
					t.Fatalf("with %s climbing, %s's scan of level %d found %q, want %s", x.ID(), o.ID(), l, got, want.ID())
				}
			}
		}
		x.levels = saved
	}
	if through == 0 {
		t.Fatal("no scan had to pass a climbing node: the test checks nothing")
	}
	t.Logf("%d scans passed a node still climbing", through)
}

// TestLateScanSentAgainBeforeUrgency checks what a node does when the scan of its refresh pass
// goes unanswered: the first time it sends the same scan again, and only when that one goes
// unanswered too does it take a dead node for the cause and re-scan every level each tick.
func TestLateScanSentAgainBeforeUrgency(t *testing.T) {
	nw := fourNodes(t)
	a := nw.nodes["a"]
	lost := 0
	nw.drop = func(s sentMsg) bool {
		if sc := s.m.GetLevelScan(); sc != nil && s.from == "a" && overlay.NodeID(sc.Origin.Id) == "a" && lost < 2 {
			lost++
			return true
		}
		return false
	}
	urgent := func() bool { return nw.clock.now.Before(a.maintain.urgentUntil) }
	// The next pass starts within one refresh interval; its first scan is lost.
	for i := 0; lost == 0 && i < 100; i++ {
		nw.advance(time.Second)
	}
	if lost != 1 || a.maintain.pass != 1 {
		t.Fatalf("no pass started: %d scans lost, pass at level %d", lost, a.maintain.pass)
	}
	for i := 0; lost == 1 && i < 20; i++ {
		nw.advance(time.Second)
		if urgent() {
			t.Fatal("urgent after one unanswered scan")
		}
	}
	if lost != 2 || a.maintain.pass != 1 {
		t.Fatalf("the late scan was not sent again: %d scans lost, pass at level %d", lost, a.maintain.pass)
	}
	for i := 0; !urgent() && i < 20; i++ {
		nw.advance(time.Second)
	}
	if !urgent() {
		t.Fatal("not urgent after the scan went unanswered twice")
	}
	nw.drop = nil
	nw.advance(2 * time.Minute)
	nw.checkLevels()
}
