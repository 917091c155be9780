package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"go.uber.org/zap"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// handleClient serves one client stream: one request, one reply. The node is the client's entry
// point and routes the request through the overlay on its behalf.
func (r *Runtime) handleClient(st network.Stream) {
	begin := time.Now()
	_ = st.SetDeadline(begin.Add(r.cfg.ClientTimeout + r.cfg.WriteTimeout))
	req := new(pb.ClientRequest)
	if err := NewFrameReader(st).ReadMsg(req); err != nil {
		r.stats.badFrames.Add(1)
		r.log.Debug("bad client frame: stream reset", zap.Stringer("peer", st.Conn().RemotePeer()), zap.Error(err))
		_ = st.Reset()
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.ClientTimeout)
	reply := r.serve(ctx, req)
	cancel()
	if r.metrics != nil {
		r.metrics.served(req.Op, reply, time.Since(begin))
	}
	if FrameTooLarge(reply) {
		reply = &pb.ClientReply{Status: pb.Status_STATUS_INVALID, Error: fmt.Sprintf("the answer exceeds %d bytes: ask for fewer items", MaxFrameSize)}
	}
	if err := NewFrameWriter(st).WriteMsg(reply); err != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// serve answers one client request.
func (r *Runtime) serve(ctx context.Context, req *pb.ClientRequest) *pb.ClientReply {
	if req.Version != ClientVersion {
		return invalid("client protocol version %d is not supported: this node speaks version %d", req.Version, ClientVersion)
	}
	key := overlay.Key(req.Key)
	var start func(n *node.Node) uint64
	switch req.Op {
	case pb.ClientOp_CLIENT_OP_GET:
		start = func(n *node.Node) uint64 { return n.Get(key) }
	case pb.ClientOp_CLIENT_OP_PUT:
		start = func(n *node.Node) uint64 { return n.Put(key, req.Value) }
	case pb.ClientOp_CLIENT_OP_DELETE:
		start = func(n *node.Node) uint64 { return n.Delete(key) }
	case pb.ClientOp_CLIENT_OP_SCAN:
		start = func(n *node.Node) uint64 { return n.Scan(key, overlay.Key(req.End), int(req.Limit), 0) }
	case pb.ClientOp_CLIENT_OP_PUT_BATCH:
		items := make([]overlay.Item, len(req.Items))
		for i, it := range req.Items {
			items[i] = overlay.Item{Key: overlay.Key(it.Key), Value: it.Value}
		}
		start = func(n *node.Node) uint64 { return n.PutBatch(items) }
	case pb.ClientOp_CLIENT_OP_STATUS:
		var st *pb.NodeStatus
		if err := r.call(ctx, func() error { st = r.status(); return nil }); err != nil {
			return failure(err)
		}
		return &pb.ClientReply{Status: pb.Status_STATUS_OK, Node: st}
	default:
		return invalid("unknown operation %d", req.Op)
	}
	res, err := r.Request(ctx, start)
	if err != nil {
		return failure(err)
	}
	return resultReply(res)
}

func invalid(format string, args ...any) *pb.ClientReply {
	return &pb.ClientReply{Status: pb.Status_STATUS_INVALID, Error: fmt.Sprintf(format, args...)}
}

func failure(err error) *pb.ClientReply {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "the overlay did not answer in time (nodes may be failing or overloaded): try again"
	}
	return &pb.ClientReply{Status: pb.Status_STATUS_ERROR, Error: msg}
}

func resultReply(res overlay.Result) *pb.ClientReply {
	rep := &pb.ClientReply{
		Status: res.Status, Error: res.Err, Value: res.Value, Continuation: []byte(res.Continuation),
		More: res.More, Incomplete: res.Incomplete, Hops: uint32(res.Hops), Stored: uint32(res.Stored),
	}
	if res.Owner != "" {
		rep.Owner = &pb.NodeRef{Id: []byte(res.Owner)}
	}
	for _, it := range res.Items {
		rep.Items = append(rep.Items, &pb.Item{Key: []byte(it.Key), Value: it.Value})
	}
	for _, id := range res.ServedBy {
		rep.ServedBy = append(rep.ServedBy, []byte(id))
	}
	return rep
}

// status describes the node for skipctl status and ring. It runs on the loop.
func (r *Runtime) status() *pb.NodeStatus {
	n := r.node
	bc := n.Balancer.Config()
	st := &pb.NodeStatus{
		Self: n.Self().ToPB(), State: n.State().String(), Items: uint64(n.Store().Len()),
		Load: n.Balancer.Load(), Thres: bc.Thres, OverThres: bc.OverThres, Algorithm: bc.Algorithm.String(),
		Counters: r.counterValues(),
	}
	if n.Owns() {
		st.Range = n.Range().ToPB()
	}
	st.LockWave, st.Locked = n.Balancer.Locked()
	for l := 0; l < n.Height(); l++ {
		p, s := n.Neighbors(l)
		st.Levels = append(st.Levels, &pb.LevelLinks{Pred: p.ToPB(), Succ: s.ToPB()})
	}
	st.LostItems, st.Tombstones = uint64(n.Stats.ItemsLost), uint64(n.Tombstones())
	for _, lr := range n.LostRanges() {
		st.Lost = append(st.Lost, lr.ToPB())
	}
	return st
}

// counterValues gathers the node's counters by name. It runs on the loop.
func (r *Runtime) counterValues() map[string]uint64 {
	s := r.node.Stats
	b := r.node.Balancer.Stats
	var itemsOut uint64
	for _, v := range s.ItemsOut {
		itemsOut += uint64(v)
	}
	return map[string]uint64{
		"invalid_messages": uint64(s.Invalid), "hop_limit_drops": uint64(s.HopLimit), "undeliverable": uint64(s.Undeliver),
		"ranges_lost": uint64(s.RangesLost), "items_lost": uint64(s.ItemsLost), "copies_written_out": uint64(s.WrittenOut), "copies_older": uint64(s.CopiesOlder), "tombstones_evicted": uint64(s.TombstonesEvicted), "handoffs_out": uint64(s.HandoffsOut), "handoffs_in": uint64(s.HandoffsIn),
		"handoff_aborts": uint64(s.Aborts), "request_retries": uint64(s.Retries), "writes_superseded": uint64(s.Superseded), "writes_reissued": uint64(s.Reissued), "rerouted": uint64(s.Rerouted), "items_moved": itemsOut, "items_moved_balance": uint64(s.ItemsOut[pb.Cause_CAUSE_BALANCE]),
		"waves_started": uint64(b.WavesStarted), "waves_ok": uint64(b.WavesOK), "waves_failed": uint64(b.WavesFailed),
		"nix": uint64(b.NIX), "mig": uint64(b.MIG), "lock_refusals": uint64(b.LockRefusals), "lock_frees": uint64(b.LockFrees), "leases_expired": uint64(b.LeasesExpired),
		"balance_numbered": uint64(b.Numbered), "balance_resent": uint64(b.Resent),
		"lock_seconds":  uint64(b.Locked / time.Second),
		"frames_in":     r.stats.framesIn.Load(),
		"frames_out":    r.stats.framesOut.Load(),
		"bad_frames":    r.stats.badFrames.Load(),
		"bad_protocols": r.stats.badProtocol.Load(),
		"dropped":       r.stats.dropped.Load(),
		"send_errors":   r.stats.sendErrors.Load(),
	}
}
