package skipgraph

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Maintenance, every ProbeInterval:
//   - level 0 is kept by pings: the successor's answer carries its predecessor and successor
//     list (Chord-style stabilization); ProbeMisses unanswered pings make a neighbour dead, and a
//     dead successor's range is taken over and reported lost;
//   - every higher level ℓ is kept by scans: in turn, ScanLevelsPerTick levels are re-derived by
//     walking level ℓ-1 clockwise to the first node sharing ℓ membership bits, which becomes the
//     successor and adopts this node as its predecessor. A ring of ℓ-1 that is right thus makes
//     ring ℓ right: dead nodes drop out, and rings split by racing joins merge. Scanning at the
//     node's height looks for company above its top level.
// Links found missing (a dead neighbour) are re-scanned at once.

type pingInfo struct {
	peer  overlay.NodeID
	level int
}

type maintainState struct {
	running bool
	ticks   uint64
	nextSeq uint64
	pings   map[uint64]pingInfo
	misses  map[overlay.NodeID]int
	turn    int // the higher level probed next
}

func (m *maintainState) init() {
	m.pings = map[uint64]pingInfo{}
	m.misses = map[overlay.NodeID]int{}
}

func (m *maintainState) heardFrom(id overlay.NodeID) {
	if m.misses[id] > 0 {
		delete(m.misses, id)
	}
}

func (n *Node) startMaintenance() {
	if n.maintain.running {
		return
	}
	n.maintain.running = true
	// Spread the first tick so that nodes started together do not probe in lockstep.
	first := time.Duration(n.env.Rand().Int64N(int64(n.cfg.ProbeInterval))) + 1
	n.env.SetTimer(first, overlay.Timer{Kind: timerTick})
}

func (n *Node) onTick() {
	if !n.Owns() {
		n.maintain.running = false
		return
	}
	n.env.SetTimer(n.cfg.ProbeInterval, overlay.Timer{Kind: timerTick})
	lk := n.levels[0]
	if lk.succ.ID == n.self.ID {
		return // alone: nothing to watch
	}
	n.ping(lk.succ, 0)
	if lk.pred.ID != lk.succ.ID {
		n.ping(lk.pred, 0)
	}
	if n.join.climb > 0 {
		if n.env.Now().Sub(n.join.climbSentAt) > 3*n.cfg.ProbeInterval {
			n.climbTo(n.join.climb)
		}
		return
	}
	n.repairLevels()
	for i := 0; i < n.cfg.ScanLevelsPerTick; i++ {
		// Levels 1..height in turn; height itself looks for company above the top.
		n.maintain.turn = n.maintain.turn%len(n.levels) + 1
		n.sendScan(n.maintain.turn, pb.Side_SIDE_SUCC)
	}
}

func (n *Node) ping(p overlay.Peer, level int) {
	if p.IsZero() || p.ID == n.self.ID {
		return
	}
	n.maintain.nextSeq++
	seq := n.maintain.nextSeq
	n.maintain.pings[seq] = pingInfo{peer: p.ID, level: level}
	n.send(p.ID, &pb.Envelope{Body: &pb.Envelope_Ping{Ping: &pb.Ping{Seq: seq, Level: uint32(level)}}})
	n.env.SetTimer(n.cfg.ProbeTimeout, overlay.Timer{Kind: timerPing, ID: seq})
}

func (n *Node) onPing(from overlay.Peer, p *pb.Ping) {
	if !n.Owns() {
		return // a node that left stays silent, so its neighbours repair around it
	}
	pong := &pb.Pong{Seq: p.Seq, Level: p.Level}
	if l := int(p.Level); l < len(n.levels) {
		pong.Pred, pong.Succ = n.levels[l].pred.ToPB(), n.levels[l].succ.ToPB()
		if l == 0 {
			for _, s := range n.succList {
				pong.SuccList = append(pong.SuccList, s.ToPB())
			}
		}
	}
	n.send(from.ID, &pb.Envelope{Body: &pb.Envelope_Pong{Pong: pong}})
}

func (n *Node) onPong(from overlay.Peer, p *pb.Pong) {
	info, ok := n.maintain.pings[p.Seq]
	if !ok || info.peer != from.ID {
		return
	}
	delete(n.maintain.pings, p.Seq)
	if !n.Owns() || info.level != 0 {
		return
	}
	if n.levels[0].succ.ID != from.ID {
		return
	}
	n.succList = n.trimSuccList(append([]overlay.Peer{from}, peersFromPB(p.SuccList)...))
	// Our successor must see us as its predecessor; tell it otherwise. (It keeps a closer one.)
	if theirPred := overlay.PeerFromPB(p.Pred); theirPred.ID != n.self.ID {
		n.updateNeighbor(from.ID, 0, pb.Side_SIDE_PRED, n.self, theirPred.ID)
	}
}

func (n *Node) updateNeighbor(to overlay.NodeID, l int, side pb.Side, node overlay.Peer, expect overlay.NodeID) {
	n.send(to, &pb.Envelope{Body: &pb.Envelope_NeighborUpdate{NeighborUpdate: &pb.NeighborUpdate{
		Level: uint32(l), Side: side, Node: node.ToPB(), Expect: []byte(expect),
	}}})
}

func peersFromPB(refs []*pb.NodeRef) []overlay.Peer {
	out := make([]overlay.Peer, len(refs))
	for i, r := range refs {
		out[i] = overlay.PeerFromPB(r)
	}
	return out
}

func (n *Node) onPingTimeout(seq uint64) {
	info, ok := n.maintain.pings[seq]
	if !ok {
		return
	}
	delete(n.maintain.pings, seq)
	n.maintain.misses[info.peer]++
	if n.maintain.misses[info.peer] >= n.cfg.ProbeMisses {
		delete(n.maintain.misses, info.peer)
		n.peerFailed(info.peer)
		return
	}
	// Ask again at once rather than wait a whole interval.
	if lk := n.levels[0]; lk.succ.ID == info.peer {
		n.ping(lk.succ, 0)
	} else if lk.pred.ID == info.peer {
		n.ping(lk.pred, 0)
	}
}

// peerFailed removes a dead node from every link. A dead level-0 successor's range is taken over
// and reported lost (its items are gone until replication exists).
func (n *Node) peerFailed(id overlay.NodeID) {
	if !n.Owns() {
		return
	}
	if x := n.out; x != nil && x.to.ID == id && !x.flipped {
		n.abortOut(x, "receiver failed")
	}
	if x := n.in; x != nil && x.from.ID == id && !x.acked {
		n.discardIn(x)
	}
	list := n.succList[:0]
	for _, p := range n.succList {
		if p.ID != id {
			list = append(list, p)
		}
	}
	n.succList = list
	if n.levels[0].succ.ID == id {
		oldEnd := n.end()
		if len(n.succList) == 0 {
			n.levels = []link{{pred: n.self, succ: n.self}}
		} else {
			n.levels[0].succ = n.succList[0]
		}
		lost := overlay.Range{Start: oldEnd, End: n.end()}
		n.Stats.RangesLost++
		n.env.Report(overlay.Event{Kind: overlay.EventRangeLost, Peer: id, Range: lost,
			Detail: "successor failed; its range was taken over without its items"})
		if s := n.levels[0].succ; s.ID != n.self.ID {
			n.updateNeighbor(s.ID, 0, pb.Side_SIDE_PRED, n.self, id)
			n.ping(s, 0)
		}
	}
	if n.levels[0].pred.ID == id {
		n.levels[0].pred = overlay.Peer{}
		if n.levels[0].succ.ID == n.self.ID {
			n.levels[0].pred = n.self
		}
	}
	for l := 1; l < len(n.levels); l++ {
		if n.levels[l].pred.ID == id {
			n.levels[l].pred = overlay.Peer{}
		}
		if n.levels[l].succ.ID == id {
			n.levels[l].succ = overlay.Peer{}
		}
	}
	n.repairLevels()
}

// repairLevels re-scans every level above 0 that misses a link, lowest first (a scan walks the
// level below, which must be whole).
func (n *Node) repairLevels() {
	for l := 1; l < len(n.levels); l++ {
		below := n.levels[l-1]
		if below.pred.IsZero() || below.succ.IsZero() {
			return
		}
		if n.levels[l].pred.IsZero() {
			n.sendScan(l, pb.Side_SIDE_PRED)
		}
		if n.levels[l].succ.IsZero() {
			n.sendScan(l, pb.Side_SIDE_SUCC)
		}
	}
}

// sendScan starts a scan for this node's neighbour on side at level l, walking level l-1.
func (n *Node) sendScan(l int, side pb.Side) {
	below := n.levels[l-1]
	first := below.pred
	if side == pb.Side_SIDE_SUCC {
		first = below.succ
	}
	if first.IsZero() {
		return
	}
	n.send(first.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: &pb.LevelScan{
		Origin: n.selfRef, Level: uint32(l), Side: side,
	}}})
}

func (n *Node) onLevelScan(s *pb.LevelScan) {
	if !n.Owns() {
		return
	}
	origin := overlay.PeerFromPB(s.Origin)
	l := int(s.Level)
	if origin.ID == n.self.ID {
		if !s.Found {
			n.onLevelFound(&pb.LevelFound{Level: s.Level, Side: s.Side, Alone: true})
		}
		return
	}
	if !s.Found {
		if !overlay.SameRing(n.self.MVec, origin.MVec, l) {
			if l-1 >= len(n.levels) || s.Hops >= n.cfg.MaxHops {
				return // broken below: the origin retries on a later tick
			}
			next := n.levels[l-1].pred
			if s.Side == pb.Side_SIDE_SUCC {
				next = n.levels[l-1].succ
			}
			if next.IsZero() {
				return
			}
			s.Hops++
			n.send(next.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: s}})
			return
		}
		s.Found = true
	}
	// This node is on the origin's level-l ring. Walk that ring to the origin's exact neighbour,
	// then link the origin in.
	for len(n.levels) <= l {
		n.levels = append(n.levels, link{})
	}
	lk := &n.levels[l]
	alone := lk.pred.IsZero() && lk.succ.IsZero() || lk.succ.ID == n.self.ID
	if alone {
		lk.pred, lk.succ = origin, origin
		n.replyFound(origin, l, s.Side, n.self)
		return
	}
	if s.Side == pb.Side_SIDE_PRED {
		// We are a predecessor candidate: the origin goes right after us unless our successor
		// lies between us and the origin.
		cur := lk.succ
		if !cur.IsZero() && cur.ID != origin.ID && overlay.StrictlyBetween(n.self.Start, cur.Start, origin.Start) && s.Hops < n.cfg.MaxHops {
			s.Hops++
			n.send(cur.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: s}})
			return
		}
		lk.succ = origin
		if cur.ID == origin.ID {
			cur = overlay.Peer{}
		}
		n.replyFound(origin, l, s.Side, cur)
		return
	}
	cur := lk.pred
	if !cur.IsZero() && cur.ID != origin.ID && overlay.StrictlyBetween(origin.Start, cur.Start, n.self.Start) && s.Hops < n.cfg.MaxHops {
		s.Hops++
		n.send(cur.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: s}})
		return
	}
	lk.pred = origin
	if cur.ID == origin.ID {
		cur = overlay.Peer{}
	}
	n.replyFound(origin, l, s.Side, cur)
}

func (n *Node) replyFound(origin overlay.Peer, l int, side pb.Side, other overlay.Peer) {
	n.send(origin.ID, &pb.Envelope{Body: &pb.Envelope_LevelFound{LevelFound: &pb.LevelFound{
		Level: uint32(l), Side: side, Node: n.selfRef, Other: other.ToPB(),
	}}})
}

func (n *Node) onLevelFound(f *pb.LevelFound) {
	if !n.Owns() {
		return
	}
	l := int(f.Level)
	if f.Alone {
		if l < len(n.levels) {
			lk := n.levels[l]
			if (!lk.pred.IsZero() && lk.pred.ID != n.self.ID) || (!lk.succ.IsZero() && lk.succ.ID != n.self.ID) {
				return // company arrived meanwhile
			}
			n.levels = n.levels[:l]
		}
		if n.join.climb == l {
			n.join.climb = 0
		}
		return
	}
	if l > len(n.levels) {
		return // a level below is missing: stale answer
	}
	if l == len(n.levels) {
		n.levels = append(n.levels, link{})
	}
	node, other := overlay.PeerFromPB(f.Node), overlay.PeerFromPB(f.Other)
	lk := &n.levels[l]
	if f.Side == pb.Side_SIDE_PRED {
		lk.pred = node
		if lk.succ.IsZero() && !other.IsZero() {
			if other.ID == node.ID {
				lk.succ = node
			} else {
				lk.succ = other
				n.updateNeighbor(other.ID, l, pb.Side_SIDE_PRED, n.self, node.ID)
			}
		}
	} else {
		lk.succ = node
		if lk.pred.IsZero() && !other.IsZero() {
			if other.ID == node.ID {
				lk.pred = node
			} else {
				lk.pred = other
				n.updateNeighbor(other.ID, l, pb.Side_SIDE_SUCC, n.self, node.ID)
			}
		}
	}
	if n.join.climb == l {
		n.climbTo(l + 1)
	}
}

func (n *Node) onNeighborUpdate(from overlay.Peer, u *pb.NeighborUpdate) {
	if !n.Owns() {
		return
	}
	l := int(u.Level)
	node := overlay.PeerFromPB(u.Node)
	if node.IsZero() || (l > 0 && !overlay.SameRing(node.MVec, n.self.MVec, l)) {
		return
	}
	if l > len(n.levels) {
		return // the levels below are not linked yet; repair reaches this one later
	}
	if l == len(n.levels) {
		if node.ID == n.self.ID {
			return
		}
		n.levels = append(n.levels, link{})
	}
	lk := &n.levels[l]
	cur := &lk.succ
	if u.Side == pb.Side_SIDE_PRED {
		cur = &lk.pred
	}
	expected := cur.ID == overlay.NodeID(u.Expect)
	switch {
	case cur.ID == node.ID:
		if node.Version >= cur.Version {
			*cur = node
		}
		return
	case l == 0 && u.Side == pb.Side_SIDE_SUCC:
		// The level-0 successor decides where our range ends; it changes only through handoffs
		// and take-overs, never on a neighbour's word.
		if !expected || node.ID != n.self.ID {
			n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: from.ID, Detail: "refused level-0 successor update"})
			return
		}
	case expected || cur.IsZero():
	case u.Side == pb.Side_SIDE_PRED && overlay.StrictlyBetween(cur.Start, node.Start, n.self.Start):
	case u.Side == pb.Side_SIDE_SUCC && overlay.StrictlyBetween(n.self.Start, node.Start, cur.Start):
	default:
		return
	}
	if node.ID == n.self.ID {
		// Alone on this ring now.
		if l == 0 {
			n.levels = []link{{pred: n.self, succ: n.self}}
			n.succList = nil
		} else {
			n.levels = n.levels[:l]
		}
		return
	}
	*cur = node
	if l == 0 && lk.succ.ID == n.self.ID {
		// A node that was alone gets company through its predecessor link only via its own
		// handoff; keep the ring closed on both sides.
		lk.succ = n.self
	}
}
