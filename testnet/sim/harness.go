package sim

import (
	"fmt"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
)

// Harness drives a Network as a client would: builds the overlay by joins, writes and reads keys
// through the protocol, and keeps the reference of what was written so that every answer and
// every stored item can be checked.
type Harness struct {
	Net *Network
	// Expected is every key written and not deleted, with its value.
	Expected map[overlay.Key]string
	// Lost are keys whose only holder crashed.
	Lost map[overlay.Key]bool
	// RangesLost counts ranges reported lost by the nodes.
	RangesLost int
	Joined     int
	Left       int

	waiting map[waitKey]func(overlay.Result)
	ids     []overlay.NodeID
}

type waitKey struct {
	node overlay.NodeID
	req  uint64
}

// NewHarness creates a network under cfg and a harness around it.
func NewHarness(cfg Config) (*Harness, error) {
	nw, err := New(cfg)
	if err != nil {
		return nil, err
	}
	h := &Harness{Net: nw, Expected: map[overlay.Key]string{}, Lost: map[overlay.Key]bool{}, waiting: map[waitKey]func(overlay.Result){}}
	nw.OnResult = func(at overlay.NodeID, r overlay.Result) {
		k := waitKey{at, r.ReqID}
		if fn := h.waiting[k]; fn != nil {
			delete(h.waiting, k)
			fn(r)
		}
	}
	nw.OnEvent = func(at overlay.NodeID, e overlay.Event) {
		switch e.Kind {
		case overlay.EventRangeLost:
			h.RangesLost++
		case overlay.EventJoined:
			h.Joined++
		case overlay.EventLeft:
			h.Left++
		}
	}
	return h, nil
}

// NodeName is the identity the harness gives node i.
func NodeName(i int) overlay.NodeID { return overlay.NodeID(fmt.Sprintf("n%05d", i)) }

// IDs returns the identities of every node the harness added, in order.
func (h *Harness) IDs() []overlay.NodeID { return h.ids }

// Do starts a client request at node at and calls done with its result.
func (h *Harness) Do(at overlay.NodeID, start func(n *node.Node) uint64, done func(overlay.Result)) {
	id := start(h.Net.Node(at))
	h.waiting[waitKey{at, id}] = done
}

// write puts v to k through node at, or deletes k when del, and hands the answer to done.
func (h *Harness) write(at overlay.NodeID, k overlay.Key, v string, del bool, done func(overlay.Result)) {
	h.Do(at, func(nd *node.Node) uint64 {
		if del {
			return nd.Delete(k)
		}
		return nd.Put(k, []byte(v))
	}, done)
}

// Pending returns the number of requests not answered yet.
func (h *Harness) Pending() int { return len(h.waiting) }

// Build starts node 0 and joins n-1 more, one every interval (Poisson arrivals when poisson),
// each through a random live node at position(i). It runs until every node joined or limit
// passes, and returns an error if some did not.
func (h *Harness) Build(n int, interval time.Duration, poisson bool, position func(i int) overlay.Key, limit time.Duration, progress func(joined int)) error {
	first := NodeName(len(h.ids))
	nd, err := h.Net.Add(first)
	if err != nil {
		return err
	}
	h.ids = append(h.ids, first)
	if err := nd.Bootstrap(); err != nil {
		return err
	}
	at := h.Net.Now()
	target := h.Joined + n - 1
	for i := 1; i < n; i++ {
		gap := interval
		if poisson {
			gap = time.Duration(h.Net.rng.ExpFloat64() * float64(interval))
		}
		at += gap
		id := NodeName(len(h.ids))
		h.ids = append(h.ids, id)
		pos := position(i)
		h.Net.At(at, func() {
			nd, err := h.Net.Add(id)
			if err != nil {
				return
			}
			_ = nd.Join(h.randomOwner(), pos, h.randomOwner(), h.randomOwner())
		})
	}
	deadline := h.Net.Now() + limit
	last := -1
	h.Net.RunWhile(func() bool {
		if progress != nil && h.Joined != last {
			last = h.Joined
			progress(h.Joined - (target - n + 1))
		}
		return h.Joined < target
	}, deadline)
	if h.Joined < target {
		return fmt.Errorf("only %d of %d joins completed by %s", h.Joined-(target-n+1), n-1, h.Net.Now())
	}
	return nil
}

// randomOwner returns a random running node that owns a range (not a paused one: it can
// neither issue a query nor be picked for a fault).
func (h *Harness) randomOwner() overlay.NodeID {
	for {
		s := h.Net.order[h.Net.rng.IntN(len(h.Net.order))]
		if s.alive && !s.paused && s.node.Owns() {
			return s.id
		}
	}
}

// RandomOwner returns a random live node that owns a range.
func (h *Harness) RandomOwner() overlay.NodeID { return h.randomOwner() }

// Crash stops node id at once and records the items it owned as lost.
func (h *Harness) Crash(id overlay.NodeID) error {
	n := h.Net.Node(id)
	if n == nil || !h.Net.Alive(id) {
		return fmt.Errorf("node %s is not running", id)
	}
	_ = n.Store().Ascend(overlay.FullRange, func(it overlay.Item) bool {
		k := it.Key
		if _, ok := h.Expected[k]; ok && n.Responsible(k) {
			h.Lost[k] = true
		}
		return true
	})
	_, err := h.Net.Crash(id)
	return err
}

// JoinNew adds the next node and has it join at pos through introducer (or the others).
func (h *Harness) JoinNew(introducer overlay.NodeID, pos overlay.Key, others ...overlay.NodeID) error {
	id := NodeName(len(h.ids))
	h.ids = append(h.ids, id)
	nd, err := h.Net.Add(id)
	if err != nil {
		return err
	}
	return nd.Join(introducer, pos, others...)
}
