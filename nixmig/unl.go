package nixmig

import (
	"math"
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
// oldest evicted when full, entries older than the load window ignored. Hints are merged on
// every hop of every query, so adding is cheap: a map lookup, and a scan of the small entry
// array only when a fresher hint must evict the oldest.
type hintCache struct {
	size    int
	maxAge  time.Duration
	byID    map[overlay.NodeID]*hint
	entries []*hint
	oldest  int64 // the oldest entry's report time, valid when the cache is full
}

func (c *hintCache) init(size int, maxAge time.Duration) {
	c.size, c.maxAge, c.byID = size, maxAge, map[overlay.NodeID]*hint{}
}

// add merges one reported hint (at in unix nanoseconds).
func (c *hintCache) add(ref *pb.NodeRef, load, thres float64, at int64) {
	if c.size == 0 {
		return
	}
	if old := c.byID[overlay.NodeID(ref.Id)]; old != nil {
		if at > old.at.UnixNano() {
			old.peer, old.load, old.thres, old.at = overlay.PeerFromPB(ref), load, thres, time.Unix(0, at)
		}
		return
	}
	h := &hint{peer: overlay.PeerFromPB(ref), load: load, thres: thres, at: time.Unix(0, at)}
	if len(c.entries) < c.size {
		c.entries = append(c.entries, h)
		c.byID[h.peer.ID] = h
		c.refreshOldest()
		return
	}
	if at <= c.oldest {
		return
	}
	for i, e := range c.entries {
		if e.at.UnixNano() == c.oldest {
			delete(c.byID, e.peer.ID)
			c.entries[i] = h
			c.byID[h.peer.ID] = h
			break
		}
	}
	c.refreshOldest()
}

func (c *hintCache) refreshOldest() {
	c.oldest = math.MaxInt64
	for _, e := range c.entries {
		c.oldest = min(c.oldest, e.at.UnixNano())
	}
}

func (c *hintCache) remove(id overlay.NodeID) {
	delete(c.byID, id)
	for i, e := range c.entries {
		if e.peer.ID == id {
			c.entries = append(c.entries[:i], c.entries[i+1:]...)
			break
		}
	}
	c.refreshOldest()
}

// best removes and returns the least loaded fresh entry (relative to its thres; the fresher on
// a tie) that skip does not exclude.
func (c *hintCache) best(now time.Time, skip func(overlay.NodeID) bool) (overlay.Peer, bool) {
	var pick *hint
	for _, e := range append([]*hint(nil), c.entries...) {
		if now.Sub(e.at) > c.maxAge {
			c.remove(e.peer.ID)
			continue
		}
		if skip(e.peer.ID) {
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
	c.remove(pick.peer.ID)
	return pick.peer, true
}

// Relayed merges the load hints a routed client message carries into the cache and, when this
// node is underloaded and idle, puts itself on the message (SPEC §7.1).
func (b *Balancer) Relayed(r *pb.Route) {
	if !b.cfg.SmartUNL || (b.cfg.Algorithm != NIXMIG && b.cfg.Algorithm != MIGOnly) {
		return
	}
	self := b.sg.ID()
	var mine int = -1
	for i, h := range r.Hints {
		if overlay.NodeID(h.Node.Id) == self {
			mine = i
			continue
		}
		b.unl.add(h.Node, h.Load, h.Thres, h.At)
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
