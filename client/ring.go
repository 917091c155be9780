package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/overlay/pb"
)

// DefaultRingMax bounds the nodes Ring visits when its caller gives no bound.
const DefaultRingMax = 1024

// Severity of a RingIssue.
type Severity string

const (
	// SevError: the walk could not go on, or the ring is broken (it does not close, a successor
	// is unreachable or unknown).
	SevError Severity = "error"
	// SevWarning: the ring closes but something is inconsistent (a predecessor link that does not
	// point back, a gap or overlap between consecutive ranges) — stale state, a join or a repair
	// in progress, or a fault.
	SevWarning Severity = "warning"
)

// RingIssue is something Ring found wrong. Node is the node it is about (its position in
// Ring.Nodes is At, or -1 for a node not in the list, such as an unreachable successor); Err is
// the underlying error when a request failed.
type RingIssue struct {
	Severity Severity
	Node     peer.ID
	At       int
	Msg      string
	Err      error
}

func (i RingIssue) String() string {
	return fmt.Sprintf("%s: %s", i.Severity, i.Msg)
}

// RingNode is one node of the ring: where it was reached and what it said about itself.
type RingNode struct {
	Peer   peer.AddrInfo
	Status *pb.NodeStatus
}

// Ring is the result of a walk along level 0.
type Ring struct {
	// Nodes in clockwise order, the entry node first.
	Nodes []RingNode
	// Closed: the walk came back to the entry node.
	Closed bool
	Issues []RingIssue
}

// Errors returns the issues of severity SevError.
func (r *Ring) Errors() []RingIssue { return r.filter(SevError) }

// Warnings returns the issues of severity SevWarning.
func (r *Ring) Warnings() []RingIssue { return r.filter(SevWarning) }

func (r *Ring) filter(s Severity) []RingIssue {
	var out []RingIssue
	for _, i := range r.Issues {
		if i.Severity == s {
			out = append(out, i)
		}
	}
	return out
}

// TotalItems sums the items of the nodes visited.
func (r *Ring) TotalItems() uint64 {
	var n uint64
	for _, x := range r.Nodes {
		n += x.Status.GetItems()
	}
	return n
}

// TotalLost sums the items the nodes visited know to be lost.
func (r *Ring) TotalLost() uint64 {
	var n uint64
	for _, x := range r.Nodes {
		n += x.Status.GetLostItems()
	}
	return n
}

func (r *Ring) issue(sev Severity, id peer.ID, at int, err error, format string, args ...any) {
	r.Issues = append(r.Issues, RingIssue{Severity: sev, Node: id, At: at, Err: err, Msg: fmt.Sprintf(format, args...)})
}

// level0 returns a node's level-0 links, or nil.
func level0(st *pb.NodeStatus) *pb.LevelLinks {
	if len(st.GetLevels()) == 0 {
		return nil
	}
	return st.GetLevels()[0]
}

// Ring walks the level-0 ring clockwise from the entry node: it asks each node for its status and
// dials its level-0 successor from the NodeRef the node gives (peer ID and addresses), until it is
// back at the entry node or has visited maxNodes nodes (≤ 0: DefaultRingMax). Every request is
// bounded by ctx or the client's timeout, so a dead node cannot hang the walk.
//
// Only a failure to reach the entry node is returned as an error. What the walk finds wrong is in
// Ring.Issues: errors — a successor unreachable or unknown, a loop that does not come back to the
// entry node, the bound reached — end the walk; warnings — a successor whose level-0 predecessor
// is not the node that points to it, a gap or overlap between consecutive ranges, a node whose
// peer ID is not the one it was dialled as — do not.
func (c *Client) Ring(ctx context.Context, entry peer.AddrInfo, maxNodes int) (*Ring, error) {
	if maxNodes <= 0 {
		maxNodes = DefaultRingMax
	}
	st, err := c.Status(ctx, entry)
	if err != nil {
		return nil, err
	}
	r := &Ring{Nodes: []RingNode{{Peer: entry, Status: st}}}
	visited := map[peer.ID]int{entry.ID: 0}
	if self := RefID(st.GetSelf()); self != entry.ID {
		r.issue(SevWarning, entry.ID, 0, nil, "entry node %s describes itself as %s", ShortID(entry.ID), ShortID(self))
	}
	for cur := 0; ; cur++ {
		here := r.Nodes[cur]
		hereID := here.Peer.ID
		links := level0(here.Status)
		if links.GetSucc() == nil {
			if cur == 0 && wholeCircle(here.Status.GetRange()) {
				r.Closed = true // a ring of one node
				return r, nil
			}
			r.issue(SevError, hereID, cur, nil, "node %s has no level-0 successor", ShortID(hereID))
			return r, nil
		}
		succ, err := PeerFromRef(links.GetSucc())
		succID := RefID(links.GetSucc())
		if succID == "" {
			r.issue(SevError, hereID, cur, err, "node %s names a level-0 successor without a valid peer ID", ShortID(hereID))
			return r, nil
		}
		if at, seen := visited[succID]; seen {
			if at != 0 {
				r.issue(SevError, succID, at, nil,
					"loop: the successor of %s (#%d) is %s (#%d), visited already; the ring does not come back to the entry node",
					ShortID(hereID), cur, ShortID(succID), at)
				return r, nil
			}
			r.Closed = true
			start := r.Nodes[0]
			r.checkLink(here, start, 0)
			return r, nil
		}
		if len(r.Nodes) >= maxNodes {
			r.issue(SevError, hereID, cur, nil, "stopped after %d nodes without getting back to the entry node (raise the bound if the ring is larger)", len(r.Nodes))
			return r, nil
		}
		if err != nil {
			r.issue(SevError, succID, -1, err, "successor %s of node %s: %s", ShortID(succID), ShortID(hereID), reason(err))
			return r, nil
		}
		next, err := c.Status(ctx, succ)
		if err != nil {
			if ctx.Err() != nil {
				return r, err // the caller gave up; no point in reporting the ring
			}
			r.issue(SevError, succID, -1, err, "successor %s of node %s (%s): %s", ShortID(succID), ShortID(hereID), PeerString(succ), reason(err))
			return r, nil
		}
		r.Nodes = append(r.Nodes, RingNode{Peer: succ, Status: next})
		visited[succID] = len(r.Nodes) - 1
		if self := RefID(next.GetSelf()); self != succID {
			r.issue(SevWarning, succID, cur+1, nil, "node %s describes itself as %s", ShortID(succID), ShortID(self))
		}
		r.checkLink(here, r.Nodes[cur+1], cur+1)
	}
}

// checkLink warns when b, the successor of a, does not have a as its predecessor, or when their
// ranges do not meet.
func (r *Ring) checkLink(a, b RingNode, bi int) {
	aID, bID := a.Peer.ID, b.Peer.ID
	if pred := RefID(level0(b.Status).GetPred()); pred != aID {
		r.issue(SevWarning, bID, bi, nil, "node %s follows %s, but its level-0 predecessor is %s",
			ShortID(bID), ShortID(aID), ShortID(pred))
	}
	ar, br := a.Status.GetRange(), b.Status.GetRange()
	if ar != nil && br != nil && !bytes.Equal(ar.GetEnd(), br.GetStart()) {
		r.issue(SevWarning, bID, bi, nil, "range of %s ends at %q but range of its successor %s starts at %q (gap or overlap)",
			ShortID(aID), ar.GetEnd(), ShortID(bID), br.GetStart())
	}
}

func wholeCircle(kr *pb.KeyRange) bool {
	return kr != nil && bytes.Equal(kr.GetStart(), kr.GetEnd())
}

// reason is an error's message without the operation and peer the caller names itself.
func reason(err error) string {
	var te *TransportError
	var se *StatusError
	switch {
	case errors.As(err, &te):
		return te.Reason()
	case errors.As(err, &se):
		return se.Reason()
	}
	return err.Error()
}
