package nixmig

import (
	"bytes"
	"math"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"google.golang.org/protobuf/proto"
)

// hint is an underloaded node seen in a load hint (SPEC §7.1). The node's descriptor stays in
// wire form until the hint is picked: most hints are overwritten before they are ever used.
type hint struct {
	// mvec is ref.Mvec, a hash of the identity (overlay.MVecFor): it finds a node's entry
	// without reading identities. A hint naming a node with a vector not its own can give that
	// node a second entry, no worse than any other false hint.
	mvec      uint64
	ref       *pb.NodeRef
	load      float64
	thres     float64
	succItems uint64 // what the node's successor, the migrant if it is chosen, would move
	at        int64  // unix nanoseconds of the report
}

// rank orders candidates for M: the lighter (load relative to thres) first; on a tie the one
// whose successor holds fewer items, because that successor leaves its whole range to M when it
// migrates. (Among equal ranks the cache picks the fresher report.) Ties are the rule on a
// pulse, where every node outside it has load 0: without the second key, a node that took in the
// ranges of earlier migrants is as likely to be sent away as any other, its accumulated range
// with it.
type rank struct {
	relLoad   float64
	succItems uint64
}

func (r rank) before(o rank) bool {
	if r.relLoad != o.relLoad {
		return r.relLoad < o.relLoad
	}
	return r.succItems < o.succItems
}

// rank of a hint; the successor's items count only when the cache ranks by them.
func (c *hintCache) rank(load, thres float64, succItems uint64) rank {
	if !c.bySuccItems {
		succItems = 0
	}
	return rank{load / thres, succItems}
}

func (c *hintCache) hintRank(h *pb.LoadHint) rank {
	return c.rank(h.Load, h.Thres, successorItems(h))
}

// successorItems reads a hint's successor items; an unknown count ranks last among equal loads,
// since the successor may be the largest range around.
func successorItems(h *pb.LoadHint) uint64 {
	if h.SuccessorItems == nil {
		return math.MaxUint64
	}
	return *h.SuccessorItems
}

// hintCache is SmartUNL's bounded cache of underloaded nodes: newest report per node, the
// oldest evicted when full, entries older than the load window ignored. Hints are merged on
// every hop of every query, so adding must be cheap: a hint no fresher than the oldest entry of
// a full cache is dropped at once; otherwise one pass over the small, contiguous entry array
// finds the node's entry, or the oldest entry to evict and the next oldest.
type hintCache struct {
	// bySuccItems: rank equally light candidates by their successor's items (not with
	// Config.FaithfulMigrants).
	bySuccItems bool
	size        int
	maxAge      time.Duration
	entries     []hint
	oldest      int64 // the oldest entry's report time (MaxInt64 when empty)
}

func (c *hintCache) init(size int, maxAge time.Duration, bySuccItems bool) {
	c.size, c.maxAge, c.entries, c.oldest = size, maxAge, make([]hint, 0, size), math.MaxInt64
	c.bySuccItems = bySuccItems
}

// add merges one reported hint.
func (c *hintCache) add(r *pb.LoadHint) {
	ref, at := r.Node, r.At
	full := len(c.entries) == c.size
	// Every entry of a full cache is at least as old as c.oldest: a hint that is not fresher can
	// neither update its node's entry nor evict another.
	if c.size == 0 || (full && at <= c.oldest) {
		return
	}
	h := hint{mvec: ref.Mvec, ref: ref, load: r.Load, thres: r.Thres, succItems: successorItems(r), at: at}
	evict, nextOldest := -1, int64(math.MaxInt64)
	for i := range c.entries {
		e := &c.entries[i]
		if e.mvec == h.mvec && bytes.Equal(e.ref.Id, ref.Id) {
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

// best removes and returns the first fresh entry by rank that skip does not exclude.
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
		if r, pr := c.rank(e.load, e.thres, e.succItems), c.rank(p.load, p.thres, p.succItems); r.before(pr) || (r == pr && e.at > p.at) {
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
// node is idle and has room to be M (hasRoom), puts itself on the message (SPEC §7.1).
func (b *Balancer) Relayed(r *pb.Route) {
	if !b.cfg.SmartUNL || (b.cfg.Algorithm != NIXMIG && b.cfg.Algorithm != MIGOnly) {
		return
	}
	self := b.sg.Self()
	var mine int = -1
	for i, h := range r.Hints {
		// Membership vectors first: reading another node's identity is a cache miss.
		if h.Node.Mvec == uint64(self.MVec) && overlay.NodeID(h.Node.Id) == self.ID {
			mine = i
			continue
		}
		b.unl.add(h)
	}
	now := b.env.Now()
	l := b.load.Load(now)
	if !b.hasRoom(l) || !b.idle() {
		return
	}
	own := &pb.LoadHint{Node: self.ToPB(), Load: l, Thres: b.cfg.Thres, At: now.UnixNano()}
	if items, ok := b.sg.SuccessorItems(); ok {
		own.SuccessorItems = proto.Uint64(uint64(items))
	}
	switch {
	case mine >= 0:
		r.Hints[mine] = own
	case len(r.Hints) < b.cfg.UNLHints:
		r.Hints = append(r.Hints, own)
	case len(r.Hints) > 0:
		// Full: replace the last hint by rank if this node ranks before it.
		worst := 0
		for i, h := range r.Hints {
			if b.unl.hintRank(r.Hints[worst]).before(b.unl.hintRank(h)) {
				worst = i
			}
		}
		if b.unl.hintRank(own).before(b.unl.hintRank(r.Hints[worst])) {
			r.Hints[worst] = own
		}
	}
}
