package skipgraph

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// request is a client request started at this node and not yet answered.
type request struct {
	id       uint64
	kind     overlay.ResultKind
	op       pb.Op
	key      overlay.Key
	attempt  int
	deadline time.Time
	issue    func() // sends the request (again, on retry)
	// onDone, when set, takes the result instead of the runtime: requests the node makes for
	// itself (re-admission's batch writes).
	onDone func(overlay.Result)
	// copies marks a batch write of copies held here, which keep their stamps and stand only
	// where written later than their owners' (BatchPut.copies); keepExisting makes them stand
	// only where strictly later (claim.go); copiesOf names the handoff they are copies of
	// (BatchPut.copies_of_xfer).
	copies       bool
	keepExisting bool
	copiesOf     uint64
	// covers, for copies of a re-admission, is the part of their range this batch accounts for
	// (BatchPut.covers); nil for others.
	covers *overlay.Range
	// issued is a client write's issue stamp, carried by every attempt (stamp.go); reissues
	// counts the times it was issued again after being superseded.
	issued   uint64
	reissues int
	// via, when set, is the live node a batch write enters the ring at, for a node outside it (a
	// joiner writing out a piece whose giver never confirmed it).
	via overlay.NodeID
}

// Get starts an exact-match read of key and returns the request id its Result will carry.
func (n *Node) Get(key overlay.Key) uint64 { return n.lookup(pb.Op_OP_GET, key, nil) }

// Put starts a write of key.
func (n *Node) Put(key overlay.Key, value []byte) uint64 { return n.lookup(pb.Op_OP_PUT, key, value) }

// Delete starts a delete of key.
func (n *Node) Delete(key overlay.Key) uint64 { return n.lookup(pb.Op_OP_DELETE, key, nil) }

// Find starts a search for the owner of key.
func (n *Node) Find(key overlay.Key) uint64 { return n.lookup(pb.Op_OP_FIND, key, nil) }

// Scan starts a range query over [start, end) on the circle (start == end: the whole circle),
// returning at most limitKeys items and about limitBytes bytes (0: no limit).
func (n *Node) Scan(start, end overlay.Key, limitKeys int, limitBytes int) uint64 {
	id := n.newReqID()
	req := &request{id: id, kind: overlay.ResultRange, key: start}
	if err := n.checkKey(start); err != nil {
		n.failNow(req, pb.Status_STATUS_INVALID, err)
		return id
	}
	if err := n.checkKey(end); err != nil {
		n.failNow(req, pb.Status_STATUS_INVALID, err)
		return id
	}
	if limitKeys < 0 || limitBytes < 0 || limitKeys > n.cfg.MaxItemsPerMessage {
		n.failNow(req, pb.Status_STATUS_INVALID, fmt.Errorf("scan limits must be in [0, %d] keys and >= 0 bytes", n.cfg.MaxItemsPerMessage))
		return id
	}
	if limitKeys == 0 {
		limitKeys = n.cfg.MaxItemsPerMessage
	}
	req.issue = func() {
		q := &pb.RangeQuery{
			ReqId: id, Origin: n.selfRef, Route: &pb.Route{Key: []byte(start)},
			Start: []byte(start), End: []byte(end), LimitKeys: uint32(limitKeys), LimitBytes: uint64(limitBytes),
		}
		n.onRangeQuery(&pb.Envelope{Body: &pb.Envelope_RangeQuery{RangeQuery: q}}, q)
	}
	n.startRequest(req)
	return id
}

// PutBatch starts a write of many items: it travels to the owner of the smallest key and walks
// clockwise, each node storing its share; more than batchPiece items go as pieces at once. Bulk
// loads use it.
func (n *Node) PutBatch(items []overlay.Item) uint64 {
	return n.putBatch(items, false, false, 0, "", nil, nil)
}

// putBatch starts a batch write whose result goes to onDone, or to the runtime when nil. A
// batch of copies keeps the items' stamps: each stands where written later than its owner's
// copy, or, with keepExisting, strictly later; the owners of other batches stamp them anew.
func (n *Node) putBatch(items []overlay.Item, copies, keepExisting bool, copiesOf uint64, via overlay.NodeID, covers *overlay.Range, onDone func(overlay.Result)) uint64 {
	id := n.newReqID()
	req := &request{id: id, kind: overlay.ResultBatchPut, onDone: onDone, copies: copies, keepExisting: keepExisting, copiesOf: copiesOf, via: via, covers: covers}
	if len(items) == 0 || len(items) > n.cfg.MaxItemsPerMessage {
		n.failNow(req, pb.Status_STATUS_INVALID, fmt.Errorf("a batch holds 1 to %d items, not %d", n.cfg.MaxItemsPerMessage, len(items)))
		return id
	}
	for _, it := range items {
		err := n.checkItem(it.Key, it.Value)
		if err == nil && it.Deleted && len(it.Value) > 0 {
			err = fmt.Errorf("a delete of %x carries a value", it.Key)
		}
		if err != nil {
			n.failNow(req, pb.Status_STATUS_INVALID, err)
			return id
		}
	}
	// In clockwise order: a client's batch from the smallest key, copies from their first item,
	// which their writer puts first (pushCopies: they come in clockwise order from the start of
	// the range they were read from), so that copies of a piece that wraps the seam go out in
	// pieces that each cover consecutive owners from its start on. Sorted by key, the keys just
	// past the seam came first, and the piece that joined them to those at the range's start
	// was routed to the far side of the seam and walked the whole ring back, reaching the node
	// that waited for them last (the checked clients of skipsim balance --pause found it).
	from := overlay.MinKey
	if copies {
		from = items[0].Key
	}
	sorted := append([]overlay.Item(nil), items...)
	sortClockwise(sorted, from)
	req.key = sorted[0].Key
	if !copies {
		req.issued = n.newStamp(0)
	}
	if len(sorted) > batchPiece {
		n.putPieces(req, sorted)
	} else {
		n.sendBatch(req, sorted)
	}
	return id
}

// cutCovers cuts r, the range that items (in clockwise order from r's start) were read from,
// into the parts that their consecutive batches of at most size items account for: each from
// just past the previous batch's last key (r's start, for the first) to just past its own last
// key (r's end, for the last). Every key of r lies in exactly one part.
func cutCovers(r overlay.Range, items []overlay.Item, size int) []overlay.Range {
	var parts []overlay.Range
	start := r.Start
	for i := size; i < len(items); i += size {
		next := overlay.Key(string(items[i-1].Key) + "\x00") // the first key after the batch's last
		parts = append(parts, overlay.Range{Start: start, End: next})
		start = next
	}
	return append(parts, overlay.Range{Start: start, End: r.End})
}

// sortClockwise sorts items by key in clockwise order from `from`: the keys at or after it
// first, then those past the seam.
func sortClockwise(items []overlay.Item, from overlay.Key) {
	sort.Slice(items, func(i, j int) bool {
		if a, b := items[i].Key >= from, items[j].Key >= from; a != b {
			return a
		}
		return items[i].Key < items[j].Key
	})
}

// sendBatch starts req as the write of sorted, checked items.
func (n *Node) sendBatch(req *request, sorted []overlay.Item) {
	if req.readmission() {
		n.oweCopies(req) // sent to the node re-admitted, which waits for it
	}
	req.issue = func() {
		b := &pb.BatchPut{
			ReqId: req.id, Origin: n.selfRef, Route: &pb.Route{Key: []byte(sorted[0].Key)},
			Copies: req.copies, KeepExisting: req.keepExisting, CopiesOfXfer: req.copiesOf, Issued: req.issued,
		}
		if req.covers != nil {
			b.Covers = req.covers.ToPB()
		}
		for _, it := range sorted {
			written := it.Written
			if !req.copies {
				written = 0 // the owner stamps the write
			}
			if it.Deleted {
				b.Deletes, b.DeletesWritten = append(b.Deletes, []byte(it.Key)), append(b.DeletesWritten, written)
			} else {
				b.Items = append(b.Items, &pb.Item{Key: []byte(it.Key), Value: it.Value, Written: written})
			}
		}
		if !req.copies {
			b.DeletesWritten = nil
		}
		if req.via != "" {
			n.send(req.via, &pb.Envelope{Body: &pb.Envelope_BatchPut{BatchPut: b}}, pb.Cause_CAUSE_CLIENT)
			return
		}
		n.onBatchPut(b)
	}
	n.startRequest(req)
}

// batchPiece is the most items a batch write sends as one message. A batch walks its owners one
// after the other, so a large one is cut into pieces of consecutive keys that go out at once,
// each its own request (with its own retries), and answered as one: loading 5,000,000 keys into
// 50,000 nodes in batches of 1,000 took 59 units walking, most of it the slowest batches' walks.
const batchPiece = 128

// putPieces writes sorted (more than batchPiece items) as pieces sent at once, and completes req
// when every piece has: stored is their sum, hops their most, and the status the first failure's.
func (n *Node) putPieces(req *request, sorted []overlay.Item) {
	total := overlay.Result{ReqID: req.id, Kind: req.kind, Key: req.key, Status: pb.Status_STATUS_OK}
	left := (len(sorted) + batchPiece - 1) / batchPiece
	var covers []overlay.Range
	if req.covers != nil {
		covers = cutCovers(*req.covers, sorted, batchPiece)
	}
	for i := 0; len(sorted) > 0; i++ {
		piece := sorted[:min(len(sorted), batchPiece)]
		sorted = sorted[len(piece):]
		var pieceCovers *overlay.Range
		if covers != nil {
			pieceCovers = &covers[i]
		}
		done := func(r overlay.Result) {
			total.Stored += r.Stored
			total.Hops = max(total.Hops, r.Hops)
			if r.Status != pb.Status_STATUS_OK && total.Status == pb.Status_STATUS_OK {
				total.Status, total.Err = r.Status, r.Err
			}
			if left--; left == 0 {
				n.complete(req, total)
			}
		}
		// Checked and sorted already: each piece is a request of its own, sent as it is.
		n.sendBatch(&request{id: n.newReqID(), kind: overlay.ResultBatchPut, key: piece[0].Key, onDone: done, copies: req.copies, keepExisting: req.keepExisting, copiesOf: req.copiesOf, via: req.via, issued: req.issued, covers: pieceCovers}, piece)
	}
}

func (n *Node) lookup(op pb.Op, key overlay.Key, value []byte) uint64 {
	id := n.newReqID()
	req := &request{id: id, kind: overlay.ResultLookup, op: op, key: key}
	if err := n.checkItem(key, value); err != nil {
		n.failNow(req, pb.Status_STATUS_INVALID, err)
		return id
	}
	if op == pb.Op_OP_PUT || op == pb.Op_OP_DELETE {
		req.issued = n.newStamp(0)
	}
	req.issue = func() {
		m := &pb.Lookup{ReqId: id, Origin: n.selfRef, Route: &pb.Route{Key: []byte(key)}, Op: op, Value: value, Issued: req.issued}
		n.onLookup(&pb.Envelope{Body: &pb.Envelope_Lookup{Lookup: m}}, m)
	}
	n.startRequest(req)
	return id
}

// announceVia sends a search for the owner of this node's start into the ring at via, a node
// this node declared dead that answered from outside its range: via may be in another ring that
// formed while the two were cut off from each other. The owner of this node's start there finds
// it inside its own range (onLookup) and settles the overlap, which begins the merge of
// the two rings. In the same ring the search ends at this node itself, and nothing happens. It
// returns the search's request id.
func (n *Node) announceVia(via overlay.NodeID) uint64 {
	id := n.newReqID()
	req := &request{id: id, kind: overlay.ResultLookup, op: pb.Op_OP_FIND, key: n.self.Start, via: via, onDone: func(overlay.Result) {}}
	req.issue = func() {
		m := &pb.Lookup{ReqId: id, Origin: n.selfRef, Route: &pb.Route{Key: []byte(req.key)}, Op: pb.Op_OP_FIND}
		n.send(via, &pb.Envelope{Body: &pb.Envelope_Lookup{Lookup: m}}, pb.Cause_CAUSE_MAINTAIN)
	}
	n.startRequest(req)
	return id
}

func (n *Node) newReqID() uint64 {
	n.nextReq++
	return n.nextReq
}

func (n *Node) checkKey(k overlay.Key) error {
	if len(k) > n.cfg.MaxKeyLen {
		return fmt.Errorf("key of %d bytes exceeds the limit of %d", len(k), n.cfg.MaxKeyLen)
	}
	return nil
}

func (n *Node) checkItem(k overlay.Key, v []byte) error {
	if err := n.checkKey(k); err != nil {
		return err
	}
	if len(v) > n.cfg.MaxValueLen {
		return fmt.Errorf("value of %d bytes exceeds the limit of %d", len(v), n.cfg.MaxValueLen)
	}
	return nil
}

func (n *Node) failNow(req *request, status pb.Status, err error) {
	n.complete(req, overlay.Result{ReqID: req.id, Kind: req.kind, Op: req.op, Key: req.key, Status: status, Err: err.Error()})
}

// complete hands a request's result to whoever waits for it.
func (n *Node) complete(req *request, r overlay.Result) {
	if req.onDone != nil {
		req.onDone(r)
		return
	}
	n.env.Complete(r)
}

func (n *Node) startRequest(req *request) {
	switch {
	case n.state == StateJoining && req.via == "":
		n.awaitJoin(req)
		return
	case !n.Owns() && n.state != StateLeft && req.via == "":
		n.failNow(req, pb.Status_STATUS_ERROR, fmt.Errorf("node %s is %s, not part of the overlay", n.self.ID, n.state))
		return
	}
	n.pending[req.id] = req
	n.attempt(req)
}

// awaitJoin holds a client request started while the node is joining — for a migrant, the
// moment between handing its old range over and taking its new one — until it has joined
// (startAwaitingJoin), for at most RequestTimeout. Failed at once, as it once was, a read from a
// node the balancer was moving failed although nothing was wrong (TestLiveBalancing, once in a
// while on a busy machine).
func (n *Node) awaitJoin(req *request) {
	req.deadline = n.env.Now().Add(n.cfg.RequestTimeout)
	n.awaitingJoin = append(n.awaitingJoin, req)
	n.env.SetTimer(n.cfg.RequestTimeout, overlay.Timer{Kind: timerRequest, ID: req.id})
}

// startAwaitingJoin starts the requests held while the node was joining; it runs once the node
// has joined.
func (n *Node) startAwaitingJoin() {
	held := n.awaitingJoin
	n.awaitingJoin = nil
	for _, req := range held {
		n.startRequest(req)
	}
}

func (n *Node) attempt(req *request) {
	req.attempt++
	n.sendAttempt(req)
}

// sendAttempt sends one attempt of req, with its own deadline.
func (n *Node) sendAttempt(req *request) {
	t := n.attemptTimeout(req)
	req.deadline = n.env.Now().Add(t)
	n.env.SetTimer(t, overlay.Timer{Kind: timerRequest, ID: req.id})
	n.handling = pb.Cause_CAUSE_CLIENT
	req.issue()
}

// maxReissues bounds how often a client write is issued again after being superseded: once is
// the rule (its new stamp is later than what its owner held), more only where other writes of
// the key keep coming in between.
const maxReissues = 3

// reissue handles an owner's answer that a write of pending request id was superseded by a
// write stamped held: the origin still waits for it, so the write was not the late attempt of a
// finished request; it goes again, stamped past held, without counting as an attempt (a batch
// goes again whole: the keys written already take the same values anew). It reports whether
// the answer was taken so; false when the request is finished, or was issued again
// maxReissues times, each superseded by other writes of the key that came in between — the
// answer then completes it, the write ordered before those concurrent ones.
func (n *Node) reissue(id, held uint64) bool {
	req := n.pending[id]
	if req == nil || req.reissues >= maxReissues {
		return false
	}
	req.reissues++
	req.issued = n.newStamp(held + 1)
	n.Stats.Reissued++
	n.sendAttempt(req)
	return true
}

func (n *Node) onRequestTimeout(id uint64) {
	if i := slices.IndexFunc(n.awaitingJoin, func(r *request) bool { return r.id == id }); i >= 0 {
		req := n.awaitingJoin[i]
		n.awaitingJoin = slices.Delete(n.awaitingJoin, i, i+1)
		n.failNow(req, pb.Status_STATUS_ERROR, fmt.Errorf("node %s did not join the overlay within %s", n.self.ID, n.cfg.RequestTimeout))
		return
	}
	req := n.pending[id]
	if req == nil || n.env.Now().Before(req.deadline) {
		return
	}
	if req.attempt < n.attempts(req) {
		n.Stats.Retries++
		n.attempt(req)
		return
	}
	delete(n.pending, id)
	n.failNow(req, pb.Status_STATUS_ERROR, fmt.Errorf("no answer after %d attempts of %s", req.attempt, n.attemptTimeout(req)))
}

// readmission reports whether req is a batch of a re-admission's copies, the only kind that
// says which part of its range it accounts for (covers).
func (r *request) readmission() bool { return r.covers != nil }

// attemptTimeout is how long one attempt of req waits for its answer. A batch of copies sent
// through a node (via) — a re-admission's, straight to the node re-admitted; a leaver's part
// taken over meanwhile, through its receiver; a range shrunk to a live node, through that node
// — is a hop or two from the owner it is for, and carries the only copies of writes someone
// acknowledged: its attempts are short, and as many more as fit in the same time. A
// re-admission's batch lost on the way waited a whole RequestTimeout for its next attempt while
// the node it was for, confirmed by the next pong that named it a successor, served its older
// values (skipsim balance --pause 0.1 --pause-for 120s --loss 0.02 --clients 50). A leaver's
// write-out went through its receiver before the receiver had found the dead successor whose
// range it was for, into that node, paused; the next attempt came two minutes later, after the
// node was back, re-admitted without the value and serving its older one (skipsim balance
// --nodes 50 ... --pause 0.1 --pause-for 120s --loss 0.05 --seed 44).
func (n *Node) attemptTimeout(req *request) time.Duration {
	if req.sentThrough() {
		return viaAttemptProbes * n.cfg.ProbeTimeout
	}
	return n.cfg.RequestTimeout
}

// attempts is how many attempts req makes (attemptTimeout).
func (n *Node) attempts(req *request) int {
	if req.sentThrough() {
		return max(n.cfg.RequestAttempts, int(time.Duration(n.cfg.RequestAttempts)*n.cfg.RequestTimeout/n.attemptTimeout(req)))
	}
	return n.cfg.RequestAttempts
}

// sentThrough reports whether req is a batch of copies sent through a node (attemptTimeout).
func (r *request) sentThrough() bool { return r.copies && r.via != "" }

// viaAttemptProbes is an attempt of a batch of copies sent through a node, in probe time-outs:
// a round trip to a neighbour and the store of a batch take far less.
const viaAttemptProbes = 2

// finish completes a pending request with r, once.
func (n *Node) finish(r overlay.Result) {
	req := n.pending[r.ReqID]
	if req == nil {
		return
	}
	delete(n.pending, r.ReqID)
	r.Kind, r.Op, r.Key = req.kind, req.op, req.key
	n.complete(req, r)
}

// replyTo sends m to the origin of a request, or handles it here when the origin is this node.
func (n *Node) replyTo(origin *pb.NodeRef, m *pb.Envelope) {
	if overlay.NodeID(origin.Id) == n.self.ID {
		m.From, m.Cause = n.selfRef, n.handling
		n.Handle(n.self.ID, m)
		return
	}
	n.forward(overlay.NodeID(origin.Id), m)
}

// onLookup handles lookup m, carried by e: a routed message goes on in the envelope it came in.
func (n *Node) onLookup(e *pb.Envelope, m *pb.Lookup) {
	drop := func(st pb.Status) {
		n.replyTo(m.Origin, &pb.Envelope{Body: &pb.Envelope_LookupReply{LookupReply: &pb.LookupReply{
			ReqId: m.ReqId, Status: st, Hops: m.Route.Hops, Error: "no route to the owner",
		}}})
	}
	if !n.route(e, m.Route, drop) {
		return
	}
	key := overlay.Key(m.Route.Key)
	reply := &pb.LookupReply{ReqId: m.ReqId, Owner: n.selfRef, Hops: m.Route.Hops}
	var err error
	switch m.Op {
	case pb.Op_OP_GET:
		var held overlay.Item
		var found bool
		held, found, err = n.store.Get(key)
		reply.Value = held.Value
		switch {
		case found:
			if n.obs != nil {
				n.obs.Served(key)
			}
		case n.readsLost(key):
			reply.Status, reply.Error = pb.Status_STATUS_LOST, "the key lies in a range whose holder failed; it may have existed"
		default:
			reply.Status = pb.Status_STATUS_NOT_FOUND
			n.debug("read answered not found", func() []zap.Field { return n.keyFields(key) })
		}
	case pb.Op_OP_PUT, pb.Op_OP_DELETE:
		written, by := n.stampClientWrite(key, m.Issued)
		if by != 0 {
			reply.Superseded = by
			break
		}
		if m.Op == pb.Op_OP_DELETE {
			del := overlay.Item{Key: key, Deleted: true, Written: written}
			if err = n.store.Delete(key); err == nil {
				n.deleted(key, del.Written)
				n.forwardWrite(del)
				n.debug("delete", func() []zap.Field { return n.keyFields(key) })
			}
			break
		}
		it := overlay.Item{Key: key, Value: m.Value, Written: written}
		if err = n.store.Put(it); err == nil {
			n.written(key)
			n.forwardWrite(it)
			n.debug("put", func() []zap.Field { return n.keyFields(key) })
		}
	case pb.Op_OP_FIND:
		// A search whose origin starts inside this node's range comes from a node that takes
		// part of it for its own (another ring's, after a partition: announceVia).
		n.checkIntruder(overlay.PeerFromPB(m.Origin), n.levels[0].succ)
	default:
		reply.Status, reply.Error = pb.Status_STATUS_INVALID, fmt.Sprintf("unknown operation %v", m.Op)
	}
	if err != nil {
		reply.Status, reply.Error = pb.Status_STATUS_ERROR, err.Error()
	}
	n.replyTo(m.Origin, &pb.Envelope{Body: &pb.Envelope_LookupReply{LookupReply: reply}})
}

// keyFields describes what this node knows of key, for a debug log of a client's write or of a
// read answered "not found": a key's history across the nodes is then in their logs.
func (n *Node) keyFields(key overlay.Key) []zap.Field {
	f := []zap.Field{zap.String("key", overlay.FormatKey(key)), zap.Stringer("range", n.Range()),
		zap.Uint64("stamp", n.heldStamp(key)), zap.Bool("marked_lost", n.markedLost(key))}
	if d, ok := n.tombs.get(key); ok {
		f = append(f, zap.Uint64("tombstone", d.written), zap.Duration("tombstone_age", n.env.Now().Sub(d.at)))
	}
	if n.in != nil && n.in.piece.Contains(key) {
		f = append(f, zap.Stringer("incoming_piece", n.in.piece), zap.Bool("incoming_acked", n.in.acked))
	}
	if n.out != nil && n.out.piece.Contains(key) {
		f = append(f, zap.Stringer("outgoing_piece", n.out.piece))
	}
	return f
}

func (n *Node) onLookupReply(r *pb.LookupReply) {
	if r.Superseded != 0 && n.reissue(r.ReqId, r.Superseded) {
		return
	}
	n.finish(overlay.Result{
		ReqID: r.ReqId, Status: r.Status, Value: r.Value, Owner: overlay.NodeID(r.GetOwner().GetId()),
		Hops: int(r.Hops), Err: r.Error,
	})
}

// onRangeQuery handles range query q, carried by e: a routed or walking query goes on in the
// envelope it came in.
func (n *Node) onRangeQuery(e *pb.Envelope, q *pb.RangeQuery) {
	drop := func(st pb.Status) {
		n.replyTo(q.Origin, &pb.Envelope{Body: &pb.Envelope_RangeReply{RangeReply: &pb.RangeReply{
			ReqId: q.ReqId, Status: st, Hops: q.Route.Hops, Items: q.Items, ServedBy: q.ServedBy,
			Continuation: q.Route.Key, More: true,
		}}})
	}
	if !n.route(e, q.Route, drop) {
		return
	}
	cursor, qEnd, mine := overlay.Key(q.Route.Key), overlay.Key(q.End), n.Range()
	stop, last := mine.End, false
	if mine.IsFull() || overlay.Between(cursor, qEnd, mine.End) {
		stop, last = qEnd, true
	}
	q.ServedBy = append(q.ServedBy, []byte(n.self.ID))
	if n.lostWithin(overlay.Range{Start: cursor, End: stop}) {
		q.Incomplete = true
	}
	var more bool
	var cont overlay.Key
	err := n.store.Ascend(overlay.Range{Start: cursor, End: stop}, func(it overlay.Item) bool {
		k, v := it.Key, it.Value
		size := uint64(len(k) + len(v))
		if len(q.Items) >= int(q.LimitKeys) || (q.LimitBytes > 0 && len(q.Items) > 0 && q.Bytes+size > q.LimitBytes) {
			more, cont = true, k
			return false
		}
		q.Items = append(q.Items, &pb.Item{Key: k.WireBytes(), Value: v})
		q.Bytes += size
		if n.obs != nil {
			n.obs.Served(k)
		}
		return true
	})
	if err != nil || more || last {
		reply := &pb.RangeReply{ReqId: q.ReqId, Items: q.Items, ServedBy: q.ServedBy, Hops: q.Route.Hops, More: more, Incomplete: q.Incomplete}
		if more {
			reply.Continuation = []byte(cont)
		}
		if err != nil {
			reply.Status, reply.More, reply.Continuation = pb.Status_STATUS_ERROR, true, []byte(cursor)
		}
		n.replyTo(q.Origin, &pb.Envelope{Body: &pb.Envelope_RangeReply{RangeReply: reply}})
		return
	}
	// Walk on clockwise: the rest starts where this range ends.
	q.Walking = true
	q.Route.Key = []byte(mine.End)
	q.Route.PrevStart, q.Route.HasPrev, q.Route.WalkCcw = []byte(n.self.Start), true, false
	q.Route.Hops++
	n.forward(n.levels[0].succ.ID, e)
}

func (n *Node) onRangeReply(r *pb.RangeReply) {
	served := make([]overlay.NodeID, len(r.ServedBy))
	for i, id := range r.ServedBy {
		served[i] = overlay.NodeID(id)
	}
	n.finish(overlay.Result{
		ReqID: r.ReqId, Status: r.Status, Items: overlay.ItemsFromPB(r.Items), ServedBy: served,
		Continuation: overlay.Key(r.Continuation), More: r.More, Hops: int(r.Hops), Incomplete: r.Incomplete,
	})
}

func (n *Node) onBatchPut(b *pb.BatchPut) {
	drop := func(st pb.Status) {
		n.replyTo(b.Origin, &pb.Envelope{Body: &pb.Envelope_BatchPutReply{BatchPutReply: &pb.BatchPutReply{
			ReqId: b.ReqId, Status: st, Stored: b.Stored, Hops: b.Route.Hops,
		}}})
	}
	// Copies reach a node that waits for its neighbours' word at once, not held with the other
	// requests: they are what it waits for (a re-admission's writes), and stand only where
	// stamped later than what it holds, so taking them serves nothing stale. Held, they reached
	// it, or the node past it they were for, only after the node was confirmed, which then
	// served its older values meanwhile (the checked clients of skipsim balance --pause). So
	// do those of a batch that walks towards keys before them: a batch goes by its first key,
	// and copies for this node behind keys that nobody owned for a while (a gap that stabilization
	// closes) were held here with it, and reached the node only after it was confirmed
	// (skipsim balance --pause 0.1 --pause-for 120s --clients 50 --seed 9, 500 nodes).
	copiesHere := b.Copies && n.unconfirmed() && n.Owns() && batchTouches(b, n.Range())
	if !copiesHere && !n.route(&pb.Envelope{Body: &pb.Envelope_BatchPut{BatchPut: b}}, b.Route, drop) {
		return
	}
	mine, rest := n.Range(), b.Items[:0]
	var restDeletes [][]byte
	var restWritten []uint64
	// Copies of a handoff's piece that this node settled with their sender (settledXfer): what
	// it holds there is newer.
	stale := false
	if b.KeepExisting && b.CopiesOfXfer != 0 {
		_, stale = n.settledWith(overlay.NodeID(b.Origin.GetId()), b.CopiesOfXfer)
	}
	var local, deletes []overlay.Item
	for i, k := range b.Deletes {
		key, written := overlay.Key(k), stampAt(b.DeletesWritten, i)
		switch {
		case !mine.Contains(key):
			restDeletes, restWritten = append(restDeletes, k), append(restWritten, written)
		case !b.Copies:
			if w, ok := n.stampBatchWrite(b, key); ok {
				deletes = append(deletes, overlay.Item{Key: key, Deleted: true, Written: w})
			}
		case n.copyStands(key, written, b.KeepExisting):
			deletes = append(deletes, overlay.Item{Key: key, Deleted: true, Written: written})
		default:
			b.Stored++ // handled: the value here was written after the delete
			n.Stats.CopiesOlder++
		}
	}
	for _, it := range b.Items {
		key := overlay.Key(it.Key)
		switch {
		case !mine.Contains(key):
			rest = append(rest, it)
		case stale:
			b.Stored++ // handled: a copy older than what this node holds of the piece
		case !b.Copies:
			if w, ok := n.stampBatchWrite(b, key); ok {
				local = append(local, overlay.Item{Key: key, Value: it.Value, Written: w})
			}
		case !n.copyStands(key, it.Written, b.KeepExisting):
			b.Stored++ // handled: the value or the delete here stands, written as late or later
			n.Stats.CopiesOlder++
		default:
			local = append(local, overlay.Item{Key: key, Value: it.Value, Written: it.Written})
			if b.KeepExisting {
				n.lost.copyArrived(key)
			}
		}
	}
	err := n.store.PutBatch(local, false)
	for _, d := range deletes {
		if err == nil {
			err = n.store.Delete(d.Key)
		}
	}
	if err == nil && b.Copies && b.Covers != nil {
		for _, part := range mine.Intersect(overlay.RangeFromPB(b.Covers)) {
			n.covered.add(overlay.NodeID(b.Origin.GetId()), part, n.env.Now())
		}
		if n.unconfirmed() {
			n.taken.add(overlay.NodeID(b.Origin.GetId()), b.ReqId)
			n.readmittedBy(overlay.PeerFromPB(b.Origin))
		}
	}
	if err != nil {
		n.replyTo(b.Origin, &pb.Envelope{Body: &pb.Envelope_BatchPutReply{BatchPutReply: &pb.BatchPutReply{
			ReqId: b.ReqId, Status: pb.Status_STATUS_ERROR, Stored: b.Stored, Hops: b.Route.Hops,
		}}})
		return
	}
	for _, it := range local {
		n.written(it.Key)
		n.forwardWrite(it)
	}
	if b.Copies && len(local) > 0 {
		n.debug("copies stored", func() []zap.Field {
			return []zap.Field{zap.Int("items", len(local)), zap.String("first", overlay.FormatKey(local[0].Key)),
				zap.String("last", overlay.FormatKey(local[len(local)-1].Key)), zap.String("from", string(b.Origin.GetId()))}
		})
	}
	// A batch's deletes are a re-admission's: other copies of those keys may still come back
	// (a receiver that acknowledged a piece from this node before it stood still writes it out
	// late), so each leaves a tombstone, in a lost part or not.
	for _, d := range deletes {
		n.tombs.set(d.Key, tombstone{at: n.env.Now(), written: d.Written})
		n.forwardWrite(d)
		n.debug("delete copied", func() []zap.Field { return n.keyFields(d.Key) })
	}
	n.evictTombstones()
	b.Stored += uint32(len(local) + len(deletes))
	b.Items, b.Deletes, b.DeletesWritten = rest, restDeletes, restWritten
	if len(rest) == 0 && len(restDeletes) == 0 {
		n.replyTo(b.Origin, &pb.Envelope{Body: &pb.Envelope_BatchPutReply{BatchPutReply: &pb.BatchPutReply{
			ReqId: b.ReqId, Stored: b.Stored, Hops: b.Route.Hops, Superseded: b.Superseded,
		}}})
		return
	}
	b.Walking = true
	switch { // the smallest key left, as the batch went out
	case len(rest) == 0:
		b.Route.Key = restDeletes[0]
	case len(restDeletes) == 0 || string(rest[0].Key) < string(restDeletes[0]):
		b.Route.Key = rest[0].Key
	default:
		b.Route.Key = restDeletes[0]
	}
	b.Route.HasPrev, b.Route.WalkCcw = false, false
	n.onBatchPut(b)
}

// batchTouches reports whether batch b holds an item or a delete in r.
func batchTouches(b *pb.BatchPut, r overlay.Range) bool {
	for _, it := range b.Items {
		if r.Contains(overlay.Key(it.Key)) {
			return true
		}
	}
	for _, k := range b.Deletes {
		if r.Contains(overlay.Key(k)) {
			return true
		}
	}
	return false
}

// stampBatchWrite stamps the write of key in client batch b (stampClientWrite), or reports it
// superseded (false): it is then handled, counted stored, and b names the stamp that
// superseded it.
func (n *Node) stampBatchWrite(b *pb.BatchPut, key overlay.Key) (uint64, bool) {
	written, by := n.stampClientWrite(key, b.Issued)
	if by != 0 {
		b.Stored++
		b.Superseded = max(b.Superseded, by)
		return 0, false
	}
	return written, true
}

func (n *Node) onBatchPutReply(r *pb.BatchPutReply) {
	if r.Superseded != 0 && n.reissue(r.ReqId, r.Superseded) {
		return
	}
	n.finish(overlay.Result{ReqID: r.ReqId, Status: r.Status, Stored: int(r.Stored), Hops: int(r.Hops)})
}
