package nixmig

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// hint is an underloaded node seen in a load hint (SPEC §7.1).
type hint struct {
	peer  overlay.Peer
	load  float64
	thres float64
	at    time.Time
}

// hintCache is SmartUNL's bounded cache of underloaded nodes: newest report per node, the
// oldest evicted when full, entries older than the load window ignored.
type hintCache struct {
	size   int
	maxAge time.Duration
	byID   map[overlay.NodeID]*hint
}

func (c *hintCache) init(size int, maxAge time.Duration) {
	c.size, c.maxAge, c.byID = size, maxAge, map[overlay.NodeID]*hint{}
}

func (c *hintCache) add(h hint) {
	if c.size == 0 {
		return
	}
	if old := c.byID[h.peer.ID]; old != nil {
		if h.at.After(old.at) {
			*old = h
		}
		return
	}
	if len(c.byID) >= c.size {
		var oldest *hint
		for _, e := range c.byID {
			if oldest == nil || e.at.Before(oldest.at) {
				oldest = e
			}
		}
		if !h.at.After(oldest.at) {
			return
		}
		delete(c.byID, oldest.peer.ID)
	}
	c.byID[h.peer.ID] = &h
}

// best removes and returns the least loaded fresh entry (relative to its thres; the fresher on
// a tie) that skip does not exclude.
func (c *hintCache) best(now time.Time, skip func(overlay.NodeID) bool) (overlay.Peer, bool) {
	var pick *hint
	for id, e := range c.byID {
		if now.Sub(e.at) > c.maxAge {
			delete(c.byID, id)
			continue
		}
		if skip(id) {
			continue
		}
		if pick == nil || e.load/e.thres < pick.load/pick.thres ||
			(e.load/e.thres == pick.load/pick.thres && e.at.After(pick.at)) {
			pick = e
		}
	}
	if pick == nil {
		return overlay.Peer{}, false
	}
	delete(c.byID, pick.peer.ID)
	return pick.peer, true
}

// Relayed merges the load hints a routed client message carries into the cache and, when this
// node is underloaded and idle, puts itself on the message (SPEC §7.1).
func (b *Balancer) Relayed(r *pb.Route) {
	if !b.cfg.SmartUNL || b.cfg.Algorithm == None {
		return
	}
	self := b.sg.ID()
	var mine int = -1
	for i, h := range r.Hints {
		if overlay.NodeID(h.Node.Id) == self {
			mine = i
			continue
		}
		b.unl.add(hint{peer: overlay.PeerFromPB(h.Node), load: h.Load, thres: h.Thres, at: time.Unix(0, h.At)})
	}
	now := b.env.Now()
	l := b.load.Load(now)
	if l >= b.cfg.Thres || !b.idle() {
		return
	}
	own := &pb.LoadHint{Node: b.sg.Self().ToPB(), Load: l, Thres: b.cfg.Thres, At: now.UnixNano()}
	switch {
	case mine >= 0:
		r.Hints[mine] = own
	case len(r.Hints) < b.cfg.UNLHints:
		r.Hints = append(r.Hints, own)
	case len(r.Hints) > 0:
		// Full: replace the most loaded hint if this node is lighter.
		worst := 0
		for i, h := range r.Hints {
			if h.Load/h.Thres > r.Hints[worst].Load/r.Hints[worst].Thres {
				worst = i
			}
		}
		if l/b.cfg.Thres < r.Hints[worst].Load/r.Hints[worst].Thres {
			r.Hints[worst] = own
		}
	}
}
