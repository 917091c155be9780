package nixmig

import (
	"bytes"
	"math"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// hint is an underloaded node seen in a load hint (SPEC §7.1). The node's descriptor stays in
// wire form until the hint is picked: most hints are overwritten before they are ever used.
type hint struct {
	idHash uint64 // of ref.Id, to find a node's entry without touching every descriptor
	ref    *pb.NodeRef
	load   float64
	thres  float64
	at     int64 // unix nanoseconds of the report
}

// hintCache is SmartUNL's bounded cache of underloaded nodes: newest report per node, the
// oldest evicted when full, entries older than the load window ignored. Hints are merged on
// every hop of every query, so adding must be cheap: a hint no fresher than the oldest entry of
// a full cache is dropped at once; otherwise one pass over the small, contiguous entry array
// finds the node's entry, or the oldest entry to evict and the next oldest.
type hintCache struct {
	size    int
	maxAge  time.Duration
	entries []hint
	oldest  int64 // the oldest entry's report time (MaxInt64 when empty)
}

func (c *hintCache) init(size int, maxAge time.Duration) {
	c.size, c.maxAge, c.entries, c.oldest = size, maxAge, make([]hint, 0, size), math.MaxInt64
}

// hashID is FNV-1a: deterministic and cheap for the short identities the cache compares.
func hashID(id []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range id {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h
}

// add merges one reported hint (at in unix nanoseconds).
func (c *hintCache) add(ref *pb.NodeRef, load, thres float64, at int64) {
	full := len(c.entries) == c.size
	// Every entry of a full cache is at least as old as c.oldest: a hint that is not fresher can
	// neither update its node's entry nor evict another.
	if c.size == 0 || (full && at <= c.oldest) {
		return
	}
	h := hint{idHash: hashID(ref.Id), ref: ref, load: load, thres: thres, at: at}
	evict, nextOldest := -1, int64(math.MaxInt64)
	for i := range c.entries {
		e := &c.entries[i]
		if e.idHash == h.idHash && bytes.Equal(e.ref.Id, ref.Id) {
			if at > e.at {
				wasOldest := e.at == c.oldest
				*e = h
				if wasOldest {
					c.refreshOldest()
				}
			}
			return
		}
		switch {
		case evict < 0 || e.at < c.entries[evict].at:
			if evict >= 0 {
				nextOldest = c.entries[evict].at
			}
			evict = i
		case e.at < nextOldest:
			nextOldest = e.at
		}
	}
	if !full {
		c.entries = append(c.entries, h)
		c.oldest = min(c.oldest, at)
		return
	}
	c.entries[evict] = h
	c.oldest = min(nextOldest, at)
}

func (c *hintCache) refreshOldest() {
	c.oldest = math.MaxInt64
	for i := range c.entries {
		c.oldest = min(c.oldest, c.entries[i].at)
	}
}

// removeAt drops entry i, moving the last entry into its place.
func (c *hintCache) removeAt(i int) {
	last := len(c.entries) - 1
	c.entries[i] = c.entries[last]
	c.entries[last] = hint{}
	c.entries = c.entries[:last]
	c.refreshOldest()
}

// best removes and returns the least loaded fresh entry (relative to its thres; the fresher on
// a tie) that skip does not exclude.
func (c *hintCache) best(now time.Time, skip func(overlay.NodeID) bool) (overlay.Peer, bool) {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if now.Sub(time.Unix(0, c.entries[i].at)) > c.maxAge {
			c.removeAt(i)
		}
	}
	pick := -1
	for i := range c.entries {
		e := &c.entries[i]
		if skip(overlay.NodeID(e.ref.Id)) {
			continue
		}
		if pick < 0 {
			pick = i
			continue
		}
		p := &c.entries[pick]
		if e.load/e.thres < p.load/p.thres || (e.load/e.thres == p.load/p.thres && e.at > p.at) {
			pick = i
		}
	}
	if pick < 0 {
		return overlay.Peer{}, false
	}
	peer := overlay.PeerFromPB(c.entries[pick].ref)
	c.removeAt(pick)
	return peer, true
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
