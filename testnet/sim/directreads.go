package sim

import (
	"slices"
	"sort"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/testnet/workload"
)

// traceLead is how long before the balancers start direct queries begin to show their routes.
// SmartUNL's hints only matter to running balancers, and a node's cache keeps the freshest
// UNLCache reports (32): routes pass a node several times a second, so a minute of them fills
// every cache on the paths as all the warm-up's would, at a fraction of the cost (the warm-up is
// 70% of a thesis run).
const traceLead = 60 * time.Second

// QueryModel says how the queries of a balancing run reach the nodes.
type QueryModel int

const (
	// QueriesRouted sends each query as a client range scan from a random node, routed hop by
	// hop and walked over level 0 like any client's. SmartUNL's load hints ride on it, and the
	// nodes that serve it count its reads in their load. Every message is simulated, so the cost
	// of a run grows with queries × hops × keys read.
	QueriesRouted QueryModel = iota
	// QueriesDirect counts each query's reads in the load of the nodes responsible for its keys
	// at once, from the simulator's global view, without messages: the same arrivals, ranges and
	// per-key loads as routed queries, at a cost per key read. From traceLead before the balancers
	// start, each query's route is traced through the nodes' own routing decisions so that
	// SmartUNL's hints travel as on routed queries; no read is counted twice by a retry. It is
	// what lets 50,000-node balancing runs be done at all (JOURNAL.md, "Direct queries").
	QueriesDirect
)

func (m QueryModel) String() string {
	if m == QueriesDirect {
		return "direct"
	}
	return "routed"
}

// directReads counts the reads of QueriesDirect queries. Queries are gathered as they arrive and
// counted when the simulated second ends, one batch per load-tracker slot: within a batch each key
// is credited once with the number of the batch's queries that read it, stamped with the time of
// the batch's last query (a time inside the same slot, so the load is exactly what per-read hits
// would give).
type directReads struct {
	keys    []overlay.Key // every stored key, in order: a query reads the keys of its range
	slotLen int64         // the load trackers' slot length, in nanoseconds
	epoch   time.Time     // the network's virtual epoch
	pending []directQuery
	edges   []edge // scratch for one batch
	starts  []overlay.Key
	owners  []*simNode
	// joiners are the nodes that own no range yet but acknowledged a piece whose giver flipped
	// it to them: responsible for its keys, and in no owner's place.
	joiners []*simNode
}

type directQuery struct {
	at time.Duration // virtual time of arrival
	q  workload.Query
}

// edge is where a batch's count of readers changes: +1 where a query's keys begin, −1 after them.
type edge struct {
	at    int // key index
	delta int32
}

func newDirectReads(keys []overlay.Key, window time.Duration, slots int, epoch time.Time) *directReads {
	return &directReads{keys: keys, slotLen: int64(window) / int64(slots), epoch: epoch}
}

func (d *directReads) add(at time.Duration, q workload.Query) {
	d.pending = append(d.pending, directQuery{at, q})
}

// forget drops the keys no node stores any more (lost with crashed nodes, no replication yet):
// a routed scan returns only stored keys, so nobody counts a read of them. Counted, they were
// load their owner could never hand on (its NIX pieces carry the keys it stores), and the
// faults experiment's crash runs with direct queries never completed.
func (d *directReads) forget(lost map[overlay.Key]bool) {
	d.keys = slices.DeleteFunc(slices.Clone(d.keys), func(k overlay.Key) bool { return lost[k] })
}

// flush counts every pending query's reads at the nodes that own its keys now. With origin, it
// first shows each query's route to the nodes it would pass, from a node that origin picks.
func (d *directReads) flush(nw *Network, origin func() overlay.NodeID) {
	if len(d.pending) == 0 {
		return
	}
	if origin != nil {
		for _, dq := range d.pending {
			trace(nw, origin(), dq.q.Start)
		}
	}
	d.owners = nw.owners()
	if len(d.owners) == 0 { // every node crashed: nobody serves
		d.pending = d.pending[:0]
		return
	}
	d.starts, d.joiners = d.starts[:0], d.joiners[:0]
	for _, s := range d.owners {
		d.starts = append(d.starts, s.node.Self().Start)
		s.node.FlippedPieces(func(xfer uint64, to overlay.NodeID, _ []*pb.KeyLoad) {
			if r := nw.nodes[to]; r != nil && r.alive && !r.node.Owns() && r.node.AwaitingCommit(s.id, xfer) {
				d.joiners = append(d.joiners, r)
			}
		})
	}
	slot := func(at time.Duration) int64 { return d.epoch.Add(at).UnixNano() / d.slotLen }
	for lo := 0; lo < len(d.pending); {
		hi := lo + 1
		for hi < len(d.pending) && slot(d.pending[hi].at) == slot(d.pending[lo].at) {
			hi++
		}
		d.count(d.pending[lo:hi])
		lo = hi
	}
	d.pending = d.pending[:0]
}

// trace takes a client message's route to key from node origin without messages, showing it to
// every node it passes (skipgraph's TraceHop), and returns the node where it ended (nil if it
// would have been lost, or waits at a paused node: a frozen process handles nothing). A route longer than the hop limit, which the nodes enforce on routed
// messages, cannot come about; maxTraceHops only guards this loop.
func trace(nw *Network, origin overlay.NodeID, key overlay.Key) *simNode {
	r := &pb.Route{Key: key.WireBytes()}
	at := nw.nodes[origin]
	var from overlay.Peer
	for range maxTraceHops {
		next, ok := at.node.TraceHop(r, from)
		if !ok {
			return at
		}
		from = at.node.Self()
		if at = nw.nodes[next]; at == nil || !at.alive || at.paused {
			return nil
		}
	}
	return nil
}

const maxTraceHops = 10_000

// count credits one batch of queries of the same slot.
func (d *directReads) count(batch []directQuery) {
	n := len(d.keys)
	d.edges = d.edges[:0]
	for _, dq := range batch {
		lo, read := d.span(dq.q)
		for read > 0 { // a range past the last key wraps round to the first
			hi := min(lo+read, n)
			d.edges = append(d.edges, edge{lo, 1}, edge{hi, -1})
			read -= hi - lo
			lo = 0
		}
	}
	slices.SortFunc(d.edges, func(a, b edge) int { return a.at - b.at })
	at := d.epoch.Add(batch[len(batch)-1].at)
	var readers int32
	for i, e := range d.edges {
		readers += e.delta
		if readers > 0 && i+1 < len(d.edges) && d.edges[i+1].at > e.at {
			d.credit(e.at, d.edges[i+1].at, uint32(readers), at)
		}
	}
}

// span returns the index of the first key q reads and how many it reads: the keys of [Start,
// End) round the circle, at most the Keys+16 a routed scan asks for (balancerun's issue).
func (d *directReads) span(q workload.Query) (lo, read int) {
	n := len(d.keys)
	lo = sort.Search(n, func(i int) bool { return d.keys[i] >= q.Start }) % n
	hi := sort.Search(n, func(i int) bool { return d.keys[i] >= q.End }) % n
	read = (hi - lo + n) % n
	if read == 0 && q.End <= q.Start { // wraps round with no key left out (start == end: the whole circle)
		read = n
	}
	return lo, min(read, q.Keys+16)
}

// credit counts readers reads of each key with index in [lo, hi) at the node responsible for it:
// the owner by the nodes' starts, or next to it the receiver of a piece in flight, which a routed
// query would wait for (skipgraph's Responsible). The giver of that piece has handed its load
// statistics over already; reads counted there would stay on as load it cannot give away.
func (d *directReads) credit(lo, hi int, readers uint32, at time.Time) {
	owner := -1
	var bound overlay.Key // the owner's range ends before bound, if bounded
	bounded := false
	for i := lo; i < hi; i++ {
		k := d.keys[i]
		if owner < 0 || (bounded && k >= bound) {
			owner, bound, bounded = d.ownerOf(k)
		}
		d.responsible(owner, k).node.Balancer.Tracker().HitN(k, at, readers)
	}
}

// responsible returns the node of owners[i] and its two neighbours in ring order that is
// responsible for k, or else the joiner that is, owners[i] when none is. Without the joiners, a
// key of a piece flipped to one was read at the owner by start — the piece's giver, or the node
// before it — which had handed the key's statistics over already, or never held it: load it
// could not give away (2 to 3 reads in every join, until the node's range next changed).
func (d *directReads) responsible(i int, k overlay.Key) *simNode {
	n := len(d.owners)
	for _, j := range [...]int{i, (i + 1) % n, (i + n - 1) % n} {
		if d.owners[j].node.Responsible(k) {
			return d.owners[j]
		}
	}
	for _, j := range d.joiners {
		if j.node.Responsible(k) {
			return j
		}
	}
	return d.owners[i]
}

// ownerOf returns the index of the owner of k among the owners sorted by start, and the start
// that ends its range above k (bounded is false when its range runs to the top of the key space).
func (d *directReads) ownerOf(k overlay.Key) (owner int, bound overlay.Key, bounded bool) {
	j := sort.Search(len(d.starts), func(j int) bool { return d.starts[j] > k })
	switch j {
	case 0: // below the first start: the last node's range wraps round to it
		return len(d.owners) - 1, d.starts[0], true
	case len(d.starts):
		return j - 1, "", false
	}
	return j - 1, d.starts[j], true
}
