package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/client/clienttest"
	"github.com/skiprange/skiprange/overlay/pb"
)

// fakeRing starts n fake nodes linked into a level-0 ring, node i owning [bounds[i], bounds[i+1]).
func fakeRing(t *testing.T, n int) []*clienttest.Node {
	t.Helper()
	nodes := make([]*clienttest.Node, n)
	for i := range nodes {
		nodes[i] = clienttest.NewNode(t)
	}
	bounds := []string{"", "g", "p", "w", "z"}
	for i, nd := range nodes {
		pred, succ := nodes[(i+n-1)%n], nodes[(i+1)%n]
		nd.SetStatus(&pb.NodeStatus{
			State:     "active",
			Range:     &pb.KeyRange{Start: []byte(bounds[i]), End: []byte(bounds[(i+1)%n])},
			Items:     uint64(10 * (i + 1)),
			LostItems: uint64(i),
			Load:      float64(i),
			Thres:     1.5,
			Levels:    []*pb.LevelLinks{{Pred: pred.Ref(), Succ: succ.Ref()}},
		})
	}
	return nodes
}

// status runs f on a node's status.
func status(nd *clienttest.Node, f func(*pb.NodeStatus)) { nd.UpdateStatus(f) }

func issues(r *client.Ring) string {
	var s []string
	for _, i := range r.Issues {
		s = append(s, i.String())
	}
	return strings.Join(s, "; ")
}

func TestRingHealthy(t *testing.T) {
	nodes := fakeRing(t, 3)
	c := newClient(t)
	r, err := c.Ring(ctx(t), nodes[1].AddrInfo(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Closed || len(r.Issues) != 0 || len(r.Nodes) != 3 {
		t.Fatalf("closed %v, %d nodes, issues: %s", r.Closed, len(r.Nodes), issues(r))
	}
	for i, want := range []int{1, 2, 0} {
		if r.Nodes[i].Peer.ID != nodes[want].Host.ID() {
			t.Errorf("ring position %d is not node %d", i, want)
		}
	}
	if r.TotalItems() != 60 || r.TotalLost() != 3 {
		t.Errorf("totals: items %d lost %d, want 60 and 3", r.TotalItems(), r.TotalLost())
	}
}

func TestRingProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, nodes []*clienttest.Node)
		max     int
		closed  bool
		nodes   int
		sev     client.Severity
		msg     string
	}{
		{"unreachable successor", func(t *testing.T, nodes []*clienttest.Node) {
			dead := clienttest.NewNode(t)
			ref := dead.Ref()
			_ = dead.Host.Close()
			status(nodes[2], func(s *pb.NodeStatus) { s.Levels[0].Succ = ref })
		}, 0, false, 3, client.SevError, "unreachable"},
		{"predecessor mismatch", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[1], func(s *pb.NodeStatus) { s.Levels[0].Pred = nodes[2].Ref() })
		}, 0, true, 3, client.SevWarning, "level-0 predecessor is"},
		{"loop", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[2], func(s *pb.NodeStatus) { s.Levels[0].Succ = nodes[1].Ref() })
		}, 0, false, 3, client.SevError, "loop"},
		{"bound", nil, 2, false, 2, client.SevError, "stopped after 2 nodes"},
		{"range gap", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[1], func(s *pb.NodeStatus) { s.Range.Start = []byte("h") })
		}, 0, true, 3, client.SevWarning, "gap or overlap"},
		{"no successor", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[1], func(s *pb.NodeStatus) { s.Levels = nil })
		}, 0, false, 2, client.SevError, "no level-0 successor"},
		{"successor without ID", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[1], func(s *pb.NodeStatus) { s.Levels[0].Succ = &pb.NodeRef{Id: []byte("junk")} })
		}, 0, false, 2, client.SevError, "without a valid peer ID"},
		{"successor without address", func(t *testing.T, nodes []*clienttest.Node) {
			status(nodes[1], func(s *pb.NodeStatus) { s.Levels[0].Succ.Addrs = nil })
		}, 0, false, 2, client.SevError, "no usable address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := fakeRing(t, 3)
			if tc.breakIt != nil {
				tc.breakIt(t, nodes)
			}
			c := newClient(t)
			r, err := c.Ring(ctx(t), nodes[0].AddrInfo(), tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if r.Closed != tc.closed || len(r.Nodes) != tc.nodes {
				t.Errorf("closed %v with %d nodes, want %v with %d; issues: %s", r.Closed, len(r.Nodes), tc.closed, tc.nodes, issues(r))
			}
			var found bool
			for _, i := range r.Issues {
				if i.Severity == tc.sev && strings.Contains(i.Msg, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s mentioning %q; issues: %s", tc.sev, tc.msg, issues(r))
			}
			if tc.sev == client.SevWarning && len(r.Errors()) != 0 {
				t.Errorf("unexpected errors: %s", issues(r))
			}
		})
	}
}

func TestRingSingleNode(t *testing.T) {
	n := clienttest.NewNode(t)
	n.SetStatus(&pb.NodeStatus{State: "active", Range: &pb.KeyRange{}})
	c := newClient(t)
	r, err := c.Ring(ctx(t), n.AddrInfo(), 0)
	if err != nil || !r.Closed || len(r.Nodes) != 1 || len(r.Issues) != 0 {
		t.Fatalf("alone without links: %v closed %v issues %s", err, r.Closed, issues(r))
	}
	n.SetStatus(&pb.NodeStatus{State: "active", Range: &pb.KeyRange{}, Levels: []*pb.LevelLinks{{Pred: n.Ref(), Succ: n.Ref()}}})
	r, err = c.Ring(ctx(t), n.AddrInfo(), 0)
	if err != nil || !r.Closed || len(r.Nodes) != 1 || len(r.Issues) != 0 {
		t.Fatalf("alone linked to itself: %v closed %v issues %s", err, r.Closed, issues(r))
	}
}

func TestRingEntryUnreachable(t *testing.T) {
	n := clienttest.NewNode(t)
	dead := n.AddrInfo()
	_ = n.Host.Close()
	c := newClient(t)
	if _, err := c.Ring(ctx(t), dead, 0); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}
