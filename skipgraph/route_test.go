package skipgraph

import (
	"fmt"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// TestJoinerSendsKeysBehindItsPieceToItsPredecessor: a joiner whose piece is acknowledged but
// not yet committed is already its giver's predecessor, so a walk back from the giver reaches it
// with keys just behind the piece. It must pass them to its predecessor-to-be: a migrant sent
// them to the node it had handed its old range to, far away, whence a stale link brought them
// back to the giver, in a circle until the commit; a new node dropped them.
func TestJoinerSendsKeysBehindItsPieceToItsPredecessor(t *testing.T) {
	for _, c := range []struct {
		migrant  bool
		joiner   overlay.NodeID
		key      int
		wantNext overlay.NodeID
	}{
		{migrant: true, joiner: "b", key: 2500, wantNext: "c"},  // below d: c is its predecessor
		{migrant: false, joiner: "f", key: 3200, wantNext: "d"}, // above d: d is its predecessor
	} {
		t.Run(fmt.Sprintf("migrant=%v", c.migrant), func(t *testing.T) {
			nw := fiveNodes(t)
			nw.drop = func(s sentMsg) bool { return s.m.GetHandoffCommit() != nil && s.to == c.joiner }
			if c.migrant {
				if err := nw.nodes["b"].Migrate("d", k(3500), true); err != nil {
					t.Fatal(err)
				}
			} else if err := nw.add("f").Join("a", k(3500)); err != nil {
				t.Fatal(err)
			}
			nw.run()
			j := nw.nodes[c.joiner]
			if j.State() != StateJoining || j.in == nil || !j.in.acked {
				t.Fatalf("joiner %s: %s, incoming %+v", c.joiner, j.State(), j.in)
			}
			r := &pb.Route{Key: []byte(k(c.key)), WalkCcw: true, HasPrev: true, PrevStart: []byte(nw.nodes["d"].Self().Start)}
			if h, to := j.nextHop(r, true); h != hopForward || to != c.wantNext {
				t.Fatalf("key %d at the joiner: hop %d to %q, want a forward to %s", c.key, h, to, c.wantNext)
			}
			if h, to := nw.nodes[c.wantNext].nextHop(r, true); h != hopLocal {
				t.Fatalf("key %d at %s: hop %d to %q, want it served there", c.key, c.wantNext, h, to)
			}
		})
	}
}

// TestKeyInPredecessorsRangeGoesToPredecessor: a node that finds the key in its predecessor's
// range sends it there even when one of its links claims a start between that key and itself:
// such a link is stale (its node is elsewhere now), and following it sent routes round in a circle.
func TestKeyInPredecessorsRangeGoesToPredecessor(t *testing.T) {
	const nodes, spacing = 32, 1000
	nw := evenlySpaced(t, nodes, spacing)
	n := nw.nodes["n010"]
	pred, _ := n.Neighbors(0)
	if pred.ID != "n009" {
		t.Fatalf("n010's predecessor is %s", pred.ID)
	}
	staled := false
	for l := 1; l < len(n.levels) && !staled; l++ {
		if p := &n.levels[l].succ; !p.IsZero() && p.ID != pred.ID && p.ID != n.ID() {
			*p = p.WithStart(k(9800), p.Version) // "between n009's keys and n010"
			staled = true
		}
	}
	if !staled {
		t.Fatal("n010 has no link above level 0 to make stale")
	}
	r := &pb.Route{Key: []byte(k(9500))}
	if h, to := n.nextHop(r, true); h != hopForward || to != pred.ID || !r.WalkCcw {
		t.Fatalf("key 9500 at n010: hop %d to %s (walk back %v), want a walk back to %s", h, to, r.WalkCcw, pred.ID)
	}
}

// TestTraceHopLearnsTheSender: a traced route, like a routed message, tells each node the
// descriptor of the node it came from, so a stale start for that node is corrected on the way.
func TestTraceHopLearnsTheSender(t *testing.T) {
	const nodes, spacing = 32, 1000
	nw := evenlySpaced(t, nodes, spacing)
	n, sender := nw.nodes["n010"], nw.nodes["n009"]
	link := &n.levels[0].pred
	truth := link.Start
	*link = link.WithStart(k(9300), link.Version-1)
	r := &pb.Route{Key: []byte(k(10500))}
	if _, ok := n.TraceHop(r, sender.Self()); ok {
		t.Fatal("the owner of key 10500 sent its route on")
	}
	if link.Start != truth {
		t.Fatalf("n010 still has n009 at %x after a route from it, want %x", link.Start, truth)
	}
}

// TestKeyBehindANodeWithoutPredecessorIsNotAnswered: a message for a key behind a node whose
// predecessor was found dead, before the node taking that range over makes itself known, is
// dropped without an answer, so that its origin tries again after the take-over. The error it
// was answered with before was final for the client: in routed balancing runs with crashes,
// every query that failed was one of these.
func TestKeyBehindANodeWithoutPredecessorIsNotAnswered(t *testing.T) {
	nw := evenlySpaced(t, 32, 1000)
	n := nw.nodes["n010"]
	nw.crash("n009")
	n.levels[0].pred = overlay.Peer{} // n009 found dead; n008 has not taken its range over yet
	// The route as n008 sent it on: it still links to n010 past the key.
	behind := func() *pb.Route {
		return &pb.Route{Key: []byte(k(9500)), HasPrev: true, PrevStart: []byte(k(8000))}
	}
	if h, _ := n.nextHop(behind(), true); h != hopLost {
		t.Fatalf("hop %d for a key behind a node without predecessor, want it lost (%d)", h, hopLost)
	}
	r := behind()
	m := &pb.Envelope{Body: &pb.Envelope_Lookup{Lookup: &pb.Lookup{ReqId: 1, Route: r}}}
	answered := false
	if local := n.route(m, r, func(pb.Status) { answered = true }); local || answered || len(n.held) > 0 {
		t.Fatalf("served here %v, answered %v, held %d: want it dropped without an answer", local, answered, len(n.held))
	}
	// Once n008 took the range over, a read is answered: the key went down with n009 (there is
	// no replication), which n008 knows.
	nw.advance(time.Minute)
	if res := nw.getFrom("n010", 9500); res.Status != pb.Status_STATUS_LOST {
		t.Errorf("after the take-over, a read of key 9500 from n010: %v, want %v", res.Status, pb.Status_STATUS_LOST)
	}
}
