package skipgraph

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Maintenance, every ProbeInterval:
//   - level 0 is kept by pings: the successor's answer carries its predecessor and successor
//     list (Chord-style stabilization) and its links on every level; ProbeMisses unanswered pings
//     make a neighbour dead (the successors after it are probed alongside, so that a run of dead
//     nodes is found together). A dead successor's range is taken over and reported lost, and its
//     neighbours on every level are relinked to each other on its behalf, as if it had left — by
//     its predecessor, which holds the links of its successors and so relinks a whole run;
//   - the higher levels are kept by refresh passes, at most one every RefreshInterval: a pass
//     re-derives level 1, then 2, and so on up to one above the top, each by a scan that walks the
//     level below clockwise to the first node sharing one more membership bit; that node becomes
//     the successor and adopts this node as its predecessor. Going bottom-up, a right ring ℓ-1
//     makes ring ℓ right: dead nodes drop out, rings split by racing joins merge, and a scan that
//     comes back alone trims levels that lost their company. A join's climb is such a pass, and a
//     failure seen at level 0 starts one at once; nodes near a failure re-scan every level each
//     tick for a while (see urgentUntil).

// linkTable is a node's links on every level, as it last reported them.
type linkTable struct {
	node         overlay.Peer
	preds, succs []overlay.Peer
}

// fallenKept is how many tables of nodes declared dead a node keeps to relink around runs of them.
const fallenKept = 8

// tableEvery is how many ticks apart a node asks its successor for its links on every level.
const tableEvery = 4

type pingInfo struct {
	peer        overlay.NodeID
	incarnation uint64
	start       overlay.Key // where this node believed peer's range to start
	level       int
	// beyond marks a probe of a successor past the level-0 successor, sent while the successor
	// does not answer (see probeBeyond).
	beyond bool
	// vouchFor, when set, is the node that asked this node to ping its predecessor (a
	// check_pred ping of sequence number vouchSeq): an answer is passed on to it, and silence
	// counts for nothing here (see askVouch).
	vouchFor overlay.NodeID
	vouchSeq uint64
	// cutOff marks a call on a node this node declared dead (callCutOff): its silence is
	// expected and counts for nothing.
	cutOff bool
	// readmitter marks a call on a node that re-admitted this one, for its word on the copies
	// it sent (callReadmitters): its silence counts for nothing.
	readmitter bool
	// sent is when the ping went out: an answer to one sent before a wait began confirms
	// nothing (checkConfirmed).
	sent time.Time
}

type maintainState struct {
	running  bool
	ticks    uint64
	lastTick time.Time
	nextSeq  uint64
	pings    map[uint64]pingInfo
	misses   map[overlay.NodeID]int
	// missedAt is where the last unanswered ping to each node went (kept past the misses, until
	// the node answers a ping or LossMemory has passed); lossSeen is when such a node last
	// answered from there (LossSeen).
	missedAt map[overlay.NodeID]missedPlace
	lossSeen time.Time
	// succTables are the links on every level of the level-0 successors, in successor-list order:
	// the successor's own, from its last pong that carried them, then its copies of those beyond
	// it. If the successor dies, this node relinks its neighbours on its behalf; if several
	// consecutive nodes die, it is the live node before them that relinks around each. They are
	// kept as received and passed on in pongs as they are: decoded only when one is used.
	succTables []*pb.LinkTable
	// fallen are the tables of the nodes this node declared dead lately: relinkAround looks
	// through them to the live nodes beyond a run of dead ones.
	fallen []linkTable
	// pass is the refresh pass under way: the level whose scan is awaited (0: none), when that
	// scan left, what caused the pass, and when the last pass ended.
	pass       int
	passSentAt time.Time
	passCause  pb.Cause
	passEnded  time.Time
	// passRetried: the scan of level pass was sent a second time after its answer was late.
	passRetried bool
	// predPinged is when the level-0 predecessor predPingedBy last pinged this node.
	predPinged   time.Time
	predPingedBy overlay.NodeID
	// urgentUntil: after a failure nearby, every level is re-scanned each tick until then, and
	// for up to urgentFor ticks more while some of those scans go unanswered (unanswered has a
	// bit per level, cleared by the answer): a dead node on a ring below still breaks them, and
	// this node's link on that ring is mended by the first scan that gets through.
	urgentUntil time.Time
	unanswered  uint64
	// former holds the nodes this node linked to before every successor it knew failed and it
	// took the whole circle; while alone it calls on them in turn (see callFormerPeers).
	former []overlay.Peer
	// intruder is a node that the successor names as its predecessor although it lies between
	// this node and the successor: pinged, it is re-admitted if it answers (see readmit).
	intruder    overlay.NodeID
	intruderSeq uint64
	// takeOver is a check under way before a take-over: the node it would go up to was asked
	// for its predecessor (see askBeforeTakeOver).
	takeOver takeOverCheck
	// orphanSeq is the ping that asks the node that took a dead giver's range over where that
	// range ends, for the acknowledged piece the giver left here (see askTakerOfGiver).
	orphanSeq uint64
	// beyondPreds are the predecessors named by nodes past the level-0 successor in answer to
	// probes sent while the successor was in doubt (probeBeyond, strangerSeen) or gone
	// (askBeforeTakeOver): a take-over stops at such a node if it lies before the node the
	// take-over would go up to (joinedBefore). Cleared whenever the successor answers.
	beyondPreds map[overlay.NodeID]beyondAnswer
	// vouchAsked maps the check_pred pings this node sent to the successor each asked about
	// (askVouch). Cleared whenever the successor answers.
	vouchAsked map[uint64]overlay.NodeID
	// succItems is what the level-0 successor last said it stores (succItemsOf is it): the
	// items lost with it if it fails, and what its leave would move (SuccessorItems); and
	// where it starts now, which a stale link may not know (see the intruder check in onPong).
	succItems   int
	succItemsOf overlay.Peer
	// succSucc is the level-0 successor that succItemsOf named as its own in the same answer
	// (namedBySucc).
	succSucc    overlay.Peer
	formerCalls map[overlay.NodeID]int
	// cutOff are the successors this node declared dead and took the range of, called on now
	// and then for a while (callCutOff): one that answers was cut off, not dead (a partition),
	// and the two rings that formed meanwhile merge through it.
	cutOff []cutOffPeer
	// crossCheck is the request of the last search sent through a node the runtime found
	// (CrossCheck): one at a time.
	crossCheck uint64
	// recent are the last nodes heard from in level scans, remembered too when the node finds
	// itself alone: its links may all have been dead while they were not.
	recent     [16]overlay.Peer
	recentNext int
}

// cutOffPeer is a successor declared dead: how often it was called on, when it is next, and
// until when.
type cutOffPeer struct {
	peer  overlay.Peer
	calls int
	next  time.Time
	until time.Time
}

// beyondAnswer is what a node past the successor, as described by from, named as its
// predecessors: on level 0 first, then on the levels above when its table was asked for.
type beyondAnswer struct {
	from  overlay.Peer
	preds []overlay.Peer
}

// answers reports whether the answer speaks for next as this node knows it: the same
// incarnation, at the same start or a later one. Given before next's start moved (a node joined
// below it, taking its lower part), it names no node in that part.
func (a beyondAnswer) answers(next overlay.Peer) bool {
	return a.from.Incarnation == next.Incarnation && a.from.Version >= next.Version
}

// urgentFor is how long, in probe intervals, a node re-scans all its levels every tick after a
// failure nearby; urgentAfterJoin, after it joined (its climb may have raced others).
const (
	urgentFor       = 6
	urgentAfterJoin = 2
)

func (m *maintainState) init() {
	m.pings = map[uint64]pingInfo{}
	m.misses = map[overlay.NodeID]int{}
	m.missedAt = map[overlay.NodeID]missedPlace{}
	m.formerCalls = map[overlay.NodeID]int{}
	m.beyondPreds = map[overlay.NodeID]beyondAnswer{}
	m.vouchAsked = map[uint64]overlay.NodeID{}
}

// missedPlace is the incarnation of a node whose ping went unanswered, the start the ping was
// sent to, and when it went unanswered.
type missedPlace struct {
	incarnation uint64
	start       overlay.Key
	at          time.Time
}

// heardFrom notes a message from sender at now: pings it missed no longer count. A pong from
// the incarnation and start where a ping went unanswered shows that messages were lost on the
// way (or the path was cut for a while) — the evidence of a lossy network that LossSeen reports.
// Only a pong shows it: a migrant is silent at the place it left (onPing) but routes lookups
// meanwhile with that start in its descriptor, and answers pings again only from its new place;
// when any message counted, a run that lost nothing numbered balancing messages.
func (m *maintainState) heardFrom(sender overlay.Peer, pong bool, now time.Time) {
	if m.misses[sender.ID] > 0 {
		delete(m.misses, sender.ID)
	}
	if !pong {
		return
	}
	if at, ok := m.missedAt[sender.ID]; ok {
		if at.incarnation == sender.Incarnation && at.start == sender.Start {
			m.lossSeen = now
		}
		delete(m.missedAt, sender.ID)
	}
}

// forgetMissed drops the unanswered pings older than LossMemory: an answer now would show no
// loss lately.
func (m *maintainState) forgetMissed(now time.Time) {
	for id, at := range m.missedAt {
		if now.Sub(at.at) > LossMemory {
			delete(m.missedAt, id)
		}
	}
}

func (m *maintainState) clearMisses(id overlay.NodeID) {
	delete(m.misses, id)
	delete(m.missedAt, id)
}

// LossSeen returns when a neighbour whose ping had gone unanswered last answered one from the
// same incarnation and start (the zero time if never): messages are being lost, or a path was
// cut for a while. Within LossMemory of it the node needs lossyMisses more missed pings to
// declare a neighbour dead, and the balancer acknowledges its messages.
func (n *Node) LossSeen() time.Time { return n.maintain.lossSeen }

// LossMemory is how long after the last sign of lost messages a node behaves as on a lossy
// network.
const LossMemory = 10 * time.Minute

// lossyMisses is how many more missed pings declare a neighbour dead on a lossy network. Under
// 5% loss each way a ping or its answer is lost one time in ten, and three in a row declared a
// live node dead about once in a thousand rounds: 137–220 times in a 500-node balancing run, each
// range then answering "lost" until its node was re-admitted. Five in a row happen a hundred
// times less often; a crashed node is found 6 s later.
const lossyMisses = 2

// probeMisses is how many consecutive missed pings declare a neighbour dead now.
func (n *Node) probeMisses() int {
	if seen := n.maintain.lossSeen; !seen.IsZero() && n.env.Now().Sub(seen) < LossMemory {
		return n.cfg.ProbeMisses + lossyMisses
	}
	return n.cfg.ProbeMisses
}

func (n *Node) startMaintenance() {
	if n.maintain.running {
		return
	}
	n.maintain.running = true
	// As if it ticked now: a node that stands still before its first tick (paused a moment
	// after its join) is found frozen by that tick, late, as by any other. Without a tick to
	// go by it served its values from before the pause when it resumed, the messages held for
	// it having made its neighbours heard (skipsim balance --pause 0.1 --clients 20, small runs).
	n.maintain.lastTick = n.env.Now()
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
	n.checkWait() // before lastTick moves: a late tick is how a paused node notices
	if !n.Owns() {
		return // the wait ran out and the node is joining again: it has no links to probe
	}
	n.maintain.ticks++
	n.expireTombstones()
	n.covered.expire(n.env.Now().Add(-coveredFor))
	n.maintain.forgetMissed(n.env.Now())
	n.maintain.lastTick = n.env.Now()
	if n.strays {
		n.pushStrays()
	}
	lk := n.levels[0]
	n.callFormerPeers()
	n.callCutOff()
	n.askAgainIfDue()
	if lk.succ.ID == n.self.ID {
		return
	}
	// The successor's tables of links are asked for every tableEvery ticks, and whenever the
	// successor is new: they only serve relinking on behalf of dead successors.
	due := n.maintain.ticks%tableEvery == 0
	n.ping(lk.succ, 0, due || len(n.maintain.succTables) == 0 || overlay.NodeID(n.maintain.succTables[0].Node.Id) != lk.succ.ID)
	now := n.env.Now()
	m := &n.maintain
	// The predecessor is probed only when it has not probed this node as its successor within
	// the last interval: its ping showed it alive and linked here, so a ping back would tell
	// nothing new (and was a quarter of all messages). A waiting node always asks, as the
	// predecessor's answer is what confirms it.
	if lk.pred.ID != lk.succ.ID && (n.unconfirmed() || m.predPingedBy != lk.pred.ID || now.Sub(m.predPinged) > n.cfg.ProbeInterval) {
		n.ping(lk.pred, 0, false)
	}
	urgent := now.Before(m.urgentUntil) ||
		m.unanswered != 0 && now.Before(m.urgentUntil.Add(urgentFor*n.cfg.ProbeInterval))
	if !urgent {
		m.unanswered = 0
	}
	switch {
	case urgent:
		// A failure nearby: re-derive every level at once, each tick. Ring ℓ comes right one
		// tick after ring ℓ-1 does, instead of one pass after (sooner where the answer from
		// ring ℓ-1 shows a new link: see onLevelFound).
		m.unanswered = 0
		for l := 1; l <= len(n.levels) && l < overlay.MaxLevel; l++ {
			if n.sendScan(l, pb.Cause_CAUSE_REPAIR) {
				m.unanswered |= 1 << l
			}
		}
	case m.pass > 0 && now.Sub(m.passSentAt) > 2*n.cfg.ProbeTimeout && !m.passRetried:
		// Late, but perhaps only slow: while many nodes join, one scan in forty walks more than
		// six hops. Send it once more before taking it for lost (making every late scan urgent
		// was half of all messages of a 10,000-node build).
		m.passRetried = true
		n.refreshFrom(m.pass, m.passCause)
	case m.pass > 0 && now.Sub(m.passSentAt) > 2*n.cfg.ProbeTimeout:
		// The scan or its answer was lost to a dead node on the ring below.
		n.urgent(urgentFor)
		n.refreshFrom(m.pass+1, m.passCause)
	case m.pass == 0 && now.Sub(m.passEnded) >= n.cfg.RefreshInterval:
		n.refreshFrom(1, pb.Cause_CAUSE_MAINTAIN)
	}
}

// urgent makes the node refresh its levels without pause for a while: a failure nearby may have
// left links that only passes mend.
func (n *Node) urgent(ticks int) {
	if until := n.env.Now().Add(time.Duration(ticks) * n.cfg.ProbeInterval); until.After(n.maintain.urgentUntil) {
		n.maintain.urgentUntil = until
	}
}

// refreshFrom continues (or starts) a refresh pass at level l.
func (n *Node) refreshFrom(l int, cause pb.Cause) {
	m := &n.maintain
	if l > len(n.levels) || l >= overlay.MaxLevel || n.levels[0].succ.ID == n.self.ID {
		m.pass, m.passEnded = 0, n.env.Now()
		return
	}
	if l != m.pass {
		m.passRetried = false
	}
	m.pass, m.passSentAt, m.passCause = l, n.env.Now(), cause
	n.sendScan(l, cause)
}

// ping probes p and returns the ping's sequence number (0 if p is nobody or this node).
func (n *Node) ping(p overlay.Peer, level int, table bool) uint64 {
	return n.sendPing(p, &pb.Ping{Level: uint32(level), Table: table})
}

// sendPing sends ping (its sequence number set here) to p and returns the number, 0 if p is
// nobody or this node.
func (n *Node) sendPing(p overlay.Peer, ping *pb.Ping) uint64 {
	if p.IsZero() || p.ID == n.self.ID {
		return 0
	}
	n.maintain.nextSeq++
	ping.Seq = n.maintain.nextSeq
	n.maintain.pings[ping.Seq] = pingInfo{peer: p.ID, incarnation: p.Incarnation, start: p.Start, level: int(ping.Level), sent: n.env.Now()}
	n.send(p.ID, &pb.Envelope{Body: &pb.Envelope_Ping{Ping: ping}}, pb.Cause_CAUSE_MAINTAIN)
	n.env.SetTimer(n.cfg.ProbeTimeout, overlay.Timer{Kind: timerPing, ID: ping.Seq})
	return ping.Seq
}

func (n *Node) onPing(from overlay.Peer, p *pb.Ping) {
	if !n.Owns() {
		return // a node that left stays silent, so its neighbours repair around it
	}
	if from.Start == n.self.Start {
		n.checkIntruder(from, n.levels[0].succ) // it is checking this node: check it too, and one yields
	}
	if p.Level == 0 && len(n.levels) > 0 && from.ID == n.levels[0].pred.ID {
		n.maintain.predPinged, n.maintain.predPingedBy = n.env.Now(), from.ID
		if n.unconfirmed() && n.confirmedBy[0] != from.ID {
			// A waiting node asks its predecessor for its word at once when pinged by it: a
			// predecessor just confirmed pings its successor (endWait), and a chain of nodes
			// back from a pause side by side is confirmed at the pace of messages, not of one
			// tick a node (eight in a row: the last three ran out of maxUnconfirmed and joined
			// afresh; small runs, a third paused, seed 10).
			n.ping(from, 0, false)
		}
	}
	n.stampClaim()
	pong := &pb.Pong{Seq: p.Seq, Level: p.Level, Claim: n.claim, Unconfirmed: n.unconfirmed()}
	if l := int(p.Level); l < len(n.levels) {
		pong.Pred, pong.Succ = n.levels[l].pred.ToPB(), n.levels[l].succ.ToPB()
		if l == 0 {
			for _, s := range n.succList {
				pong.SuccList = append(pong.SuccList, s.ToPB())
			}
			pong.Items = uint64(n.store.Len())
			pong.UnwrittenForNanos = uint64(max(n.env.Now().Sub(n.storeWritten), 0))
			pong.CopiesUnanswered = n.owed.listFor(from.ID)
		}
	}
	if p.Table {
		for _, lk := range n.levels {
			pong.Preds = append(pong.Preds, lk.pred.ToPB())
			pong.Succs = append(pong.Succs, lk.succ.ToPB())
		}
		pong.Beyond = n.maintain.succTables[:min(len(n.maintain.succTables), n.cfg.SuccessorListLen-1)]
	}
	n.forward(from.ID, &pb.Envelope{Body: &pb.Envelope_Pong{Pong: pong}})
	if p.CheckPred && p.Level == 0 && len(n.levels) > 0 {
		if pred := n.levels[0].pred; !pred.IsZero() && pred.ID != from.ID {
			seq := n.ping(pred, 0, false)
			if info, ok := n.maintain.pings[seq]; ok {
				info.vouchFor, info.vouchSeq = from.ID, p.Seq
				n.maintain.pings[seq] = info
			}
		}
	}
}

func (n *Node) onPong(from overlay.Peer, p *pb.Pong) {
	if p.PredAnswered {
		n.onVouch(p)
		return
	}
	info, ok := n.maintain.pings[p.Seq]
	if !ok || info.peer != from.ID {
		return
	}
	delete(n.maintain.pings, p.Seq)
	if info.vouchFor != "" {
		// Our predecessor answered the ping another node asked for: tell it.
		n.send(info.vouchFor, &pb.Envelope{Body: &pb.Envelope_Pong{Pong: &pb.Pong{
			Seq: info.vouchSeq, Pred: from.ToPB(), PredAnswered: true,
		}}}, pb.Cause_CAUSE_MAINTAIN)
		return
	}
	if !p.Unconfirmed && n.unconfirmed() && !info.sent.Before(n.unconfirmedSince) {
		n.liveHeard = true
	}
	if !n.Owns() || info.level != 0 {
		return
	}
	if p.Seq == n.maintain.orphanSeq {
		n.maintain.orphanSeq = 0
		n.settleOrphan(from, overlay.PeerFromPB(p.Succ))
		return
	}
	// A new incarnation of the successor (a migrant that rejoined elsewhere) speaks of its
	// new place: its links and load say nothing of the successor's.
	fromSucc := n.isSucc(from)
	if fromSucc {
		n.maintain.succItems, n.maintain.succItemsOf, n.maintain.succSucc = int(p.Items), from, overlay.PeerFromPB(p.Succ)
	}
	n.checkConfirmed(from, p, info.sent)
	n.announceToHolder(from, p, info.sent)
	if fromSucc {
		clear(n.maintain.beyondPreds)
		clear(n.maintain.vouchAsked)
	} else if info.beyond {
		a := beyondAnswer{from: from, preds: []overlay.Peer{overlay.PeerFromPB(p.Pred)}}
		for _, c := range p.Preds[min(1, len(p.Preds)):] {
			a.preds = append(a.preds, overlay.PeerFromPB(c))
		}
		n.maintain.beyondPreds[from.ID] = a
	}
	if c := n.maintain.takeOver; c.seq != 0 && c.seq == p.Seq {
		n.maintain.takeOver.seq = 0
		if !n.askAgainLater(c, overlay.PeerFromPB(p.Pred)) {
			n.takeOverChecked(c)
		}
		return
	}
	if fromSucc {
		n.succMovedUp(from, overlay.PeerFromPB(p.Pred))
	}
	if info.cutOff {
		n.cutOffAnswered(from, info.incarnation)
		return
	}
	if p.Seq == n.maintain.intruderSeq && from.ID == n.maintain.intruder {
		// Only the answer to the check itself counts: an older pong may have been sent before
		// the node handed its range over. A node that answers now still owns its range (a node
		// that left answers no pings); one that is leaving will hand it to this node next.
		n.maintain.intruder, n.maintain.intruderSeq = "", 0
		if s := n.levels[0].succ; s.SameNode(from) && s.Incarnation == from.Incarnation && from.Version < s.Version {
			// Sent before the node moved its start (a NIX of its lower part to this node, its
			// commit already here): it answers from where it no longer starts. Re-admitted from
			// there, it took back the piece just committed, and a later word of its new start
			// made the piece a range lost (a random case of TestBalanceCutProperties, kept as
			// -known-stale-answer-to-an-intruder-check).
			return
		}
		if from.Start == n.self.Start {
			n.settleSameStart(from, p)
			return
		}
		if from.Start == n.end() {
			if from.ID != n.levels[0].succ.ID {
				// It starts where this range ends: it joined below the successor, taking the
				// successor's lower part, and its word of it did not arrive. Link to it.
				n.linkSuccessor(from)
			}
			return
		}
		if overlay.StrictlyBetween(n.self.Start, from.Start, n.end()) {
			n.settleOverlap(from, p)
			// If a node before it starts inside this range too, settle with that one next, now
			// rather than a probe interval later when the successor's next pong would name it.
			// After a mass crash a node may take over a range that a hundred live nodes answer
			// from (migrants that joined there unseen by it), and one step a tick was slower
			// than the patience of a node waiting to be confirmed (checkWait).
			n.checkIntruder(n.nextIntruder(from, p), from)
			return
		}
		// It lies beyond this range's end: more than one node joined below the successor. Its
		// own predecessor is closer; check that one next. Only between this range's end and
		// the successor's start as the successor last answered: anywhere else it has moved
		// since it was named (a migrant that joined elsewhere) and says nothing of the gap. A
		// successor that starts at this range's end leaves no gap (Between would read the empty
		// interval as a full turn and take the successor's live range over). The successor's
		// start is the one it last answered from unless a handoff between the two moved it
		// since: the intruder's answer may name the successor at its start before that too,
		// and the gap read between the two old starts took the successor's new range over (the
		// 50,000-node run of seed 2, three times: TestStaleDescriptorsInAnIntrudersAnswerTakeNothing).
		s := n.maintain.succItemsOf
		if succ := n.levels[0].succ; succ.SameNode(s) && succ.Incarnation == s.Incarnation && succ.Version > s.Version {
			s = succ
		}
		if s.ID != n.levels[0].succ.ID || s.Start == n.end() || !overlay.StrictlyBetween(n.end(), from.Start, s.Start) {
			return
		}
		if n.checkIntruder(n.nextBeyond(from, p), from) {
			return
		}
		// It knows no node between this one and it: no predecessor (it found the node before it
		// dead), this node, or one before this node. The node that started at this range's end
		// (the last of those that joined below the successor, known here by its start only)
		// died, and the range up to it is nobody's. Without this, a node whose successor had
		// moved up from under three migrants, the first of which crashed, walked down to the
		// third every tick for ever (20% of 500 nodes crashing, seed 19); and one whose
		// successor's new predecessor was a node before it never met that node, which held the
		// range over both (seed 61).
		n.takeOverUpTo(from)
		return
	}
	if len(p.Preds) > 0 && len(p.Preds) == len(p.Succs) && fromSucc {
		tables := []*pb.LinkTable{{Node: from.ToPB(), Preds: p.Preds, Succs: p.Succs}}
		for _, t := range p.Beyond {
			if len(tables) == n.cfg.SuccessorListLen || len(t.Preds) != len(t.Succs) {
				break
			}
			tables = append(tables, t)
		}
		n.maintain.succTables = tables
	}
	if n.levels[0].pred.ID == from.ID && n.levels[0].succ.ID != from.ID {
		// Our predecessor's successor lies between it and us: two nodes joined in the same gap
		// at once, each told of the other too late. The closer one is our predecessor; it links
		// to us since we start where its range ends.
		theirSucc := overlay.PeerFromPB(p.Succ)
		if !theirSucc.IsZero() && theirSucc.ID != n.self.ID && overlay.StrictlyBetween(from.Start, theirSucc.Start, n.self.Start) {
			n.levels[0].pred = theirSucc
			n.updateNeighbor(theirSucc.ID, 0, pb.Side_SIDE_SUCC, n.self, from.ID, pb.Cause_CAUSE_MAINTAIN)
		}
		return
	}
	if !fromSucc {
		return
	}
	n.succList = n.trimSuccList(append([]overlay.Peer{from}, overlay.PeersFromPB(p.SuccList)...))
	// Our successor must see us as its predecessor; tell it otherwise. (It keeps a closer one.)
	theirPred := overlay.PeerFromPB(p.Pred)
	if theirPred.ID == n.self.ID {
		return
	}
	if n.checkIntruder(theirPred, from) {
		return
	}
	n.updateNeighbor(from.ID, 0, pb.Side_SIDE_PRED, n.self, theirPred.ID, pb.Cause_CAUSE_MAINTAIN)
}

// nextIntruder picks the node to check after settling with x, a live node inside this node's
// range whose table pong is p: x's predecessor, or, when this node holds none of the items
// between them, the one of x's predecessors on every level that starts nearest after this
// node's start — so that a range holding many live nodes is given up in a logarithmic number
// of steps, skipping nodes whose parts carry no items of ours to settle.
func (n *Node) nextIntruder(x overlay.Peer, p *pb.Pong) overlay.Peer {
	next := overlay.PeerFromPB(p.Pred)
	order := overlay.ClockwiseFrom(n.self.Start)
	for _, c := range p.Preds {
		y := overlay.PeerFromPB(c)
		if y.IsZero() || y.ID == n.self.ID || !overlay.StrictlyBetween(n.self.Start, y.Start, x.Start) ||
			(!next.IsZero() && !order.OfPeer(&y).Before(order.OfPeer(&next))) {
			continue
		}
		if held, err := n.store.Count(overlay.Range{Start: y.Start, End: x.Start}); err == nil && held == 0 {
			next = y
		}
	}
	return next
}

// nextBeyond picks the node to check after x, a live node between this range's end and the
// successor, whose table pong is p: of x's predecessors on every level, the one that starts
// nearest after this range's end, or x's own predecessor when none starts there — so that the
// walk down to the first node after the end takes a logarithmic number of steps. One
// predecessor at a time, a node whose successor's start had moved down behind it (a stale
// successor handed on after a pause: its start, read clockwise, seems to have moved up almost
// a full turn) walked down the whole ring, one node every two seconds, an hour at 2,000 nodes
// (skipsim balance --nodes 2000 --pause 0.1 --pause-for 60s --seed 2). A node that missed a
// ping is passed over: a dead one, chosen again at every new walk, would end each of them.
func (n *Node) nextBeyond(x overlay.Peer, p *pb.Pong) overlay.Peer {
	next := overlay.PeerFromPB(p.Pred)
	end := n.end()
	order := overlay.ClockwiseFrom(end)
	for _, c := range p.Preds {
		y := overlay.PeerFromPB(c)
		if y.IsZero() || y.ID == n.self.ID || n.maintain.misses[y.ID] > 0 || !overlay.StrictlyBetween(end, y.Start, x.Start) ||
			!next.IsZero() && !order.OfPeer(&y).Before(order.OfPeer(&next)) {
			continue
		}
		next = y
	}
	return next
}

// isSucc reports whether p is this node's level-0 successor: the same node, and the same
// incarnation of it.
func (n *Node) isSucc(p overlay.Peer) bool {
	s := n.levels[0].succ
	return s.ID == p.ID && s.Incarnation == p.Incarnation
}

// isPred reports whether p is this node's level-0 predecessor: the same node, and the same
// incarnation of it.
func (n *Node) isPred(p overlay.Peer) bool {
	s := n.levels[0].pred
	return s.ID == p.ID && s.Incarnation == p.Incarnation
}

// checkIntruder pings x, the predecessor that the node above (this node's successor, or a node
// past its range's end) names, if x starts strictly between this node's start and above's: a
// node inside what this node takes for its range — one it wrongly declared dead, or one that
// joined its dead successor just before it died. If it answers, it is alive (onPong settles
// with it). It reports whether x lies there. A check under way is let run: a new ping would make
// its answer look stale, and a walk down a chain of nodes past this range's end, started again
// from the successor every tick, never got further than two or three of them (30% of 500 nodes
// crashing, seed 21).
//
// A node that starts where this one does is checked too. Two nodes can only come to share a
// start in two rings that formed apart (each side of a partition let a node join, or move a
// boundary, at the same key); neither range can be cut at the other's start, so one of the two
// gives its place up (settleSameStart). The node checked checks this one in turn (onPing), so
// that each learns the other's claim and exactly one yields.
func (n *Node) checkIntruder(x, above overlay.Peer) bool {
	if x.IsZero() || x.ID == n.self.ID || x.Start != n.self.Start && !overlay.StrictlyBetween(n.self.Start, x.Start, above.Start) {
		return false
	}
	if _, checking := n.maintain.pings[n.maintain.intruderSeq]; checking {
		return true
	}
	n.maintain.intruder = x.ID
	n.maintain.intruderSeq = n.ping(x, 0, true)
	return true
}

// settleSameStart decides between this node and x, which answered from the same start: the
// node whose claim is outranked (claim.go) writes its items out to their owners and joins again
// (joinAgain) through x, whose range holds its start.
func (n *Node) settleSameStart(x overlay.Peer, p *pb.Pong) {
	theirs := claim{confirmed: !p.Unconfirmed, version: p.Claim, id: x.ID}
	if n.state != StateActive || n.Busy() || len(n.committing) > 0 || n.ownClaim().outranks(theirs) {
		return // a busy node yields at a later check, once its handoffs are settled
	}
	n.joinAgain(append([]overlay.NodeID{x.ID}, slices.DeleteFunc(n.linkedIDs(), func(id overlay.NodeID) bool { return id == x.ID })...),
		fmt.Sprintf("%s starts here too, and its claim %s outranks ours %s", x.ID, theirs, n.ownClaim()))
}

func (n *Node) updateNeighbor(to overlay.NodeID, l int, side pb.Side, node overlay.Peer, expect overlay.NodeID, cause pb.Cause) {
	n.send(to, &pb.Envelope{Body: &pb.Envelope_NeighborUpdate{NeighborUpdate: &pb.NeighborUpdate{
		Level: uint32(l), Side: side, Node: node.ToPB(), Expect: []byte(expect),
	}}}, cause)
}

// failureUpdate is a neighbour update made because a node failed or was wrongly taken for failed:
// it makes the receiver urgent (see pb.NeighborUpdate.after_failure). Routine updates, such as
// the links a scan's answer completes, do not: urgency spread by them from node to node was most
// of the re-scans during a mass join.
func (n *Node) failureUpdate(to overlay.NodeID, l int, side pb.Side, node overlay.Peer, expect overlay.NodeID) {
	n.sendFailureUpdate(to, &pb.NeighborUpdate{Level: uint32(l), Side: side, Node: node.ToPB(), Expect: []byte(expect)})
}

// sendFailureUpdate sends u to node to as a failure update (failureUpdate).
func (n *Node) sendFailureUpdate(to overlay.NodeID, u *pb.NeighborUpdate) {
	u.AfterFailure = true
	n.send(to, &pb.Envelope{Body: &pb.Envelope_NeighborUpdate{NeighborUpdate: u}}, pb.Cause_CAUSE_REPAIR)
}

func (n *Node) onPingTimeout(seq uint64) {
	info, ok := n.maintain.pings[seq]
	if !ok {
		return
	}
	delete(n.maintain.pings, seq)
	if info.readmitter {
		n.readmitterSilent(info.peer)
		return
	}
	if info.vouchFor != "" || info.cutOff {
		return // a ping asked for by another node, or a call on a node found dead before
	}
	if c := n.maintain.takeOver; c.seq != 0 && c.seq == seq {
		// The node asked did not answer: the take-over goes on without its word (askPastSilent).
		c.seq, c.silent = 0, append(c.silent, c.asked.ID)
		n.maintain.takeOver = c
		n.takeOverChecked(c)
		return
	}
	if lk := n.levels[0]; (lk.succ.ID == info.peer && lk.succ.Incarnation != info.incarnation) ||
		(lk.pred.ID == info.peer && lk.pred.Incarnation != info.incarnation) {
		return // the ping went to a former incarnation of today's neighbour
	}
	n.maintain.misses[info.peer]++
	n.maintain.missedAt[info.peer] = missedPlace{info.incarnation, info.start, n.env.Now()}
	lk := n.levels[0]
	if info.beyond && lk.succ.ID != info.peer {
		// Its misses count once it is the successor; probe it again while the successor is
		// still in doubt.
		if n.maintain.misses[lk.succ.ID] > 0 && n.maintain.misses[info.peer] < n.probeMisses() {
			n.probeBeyond(info.peer)
		}
		return
	}
	if n.maintain.misses[info.peer] >= n.probeMisses() {
		n.maintain.clearMisses(info.peer)
		n.peerFailed(info.peer)
		n.failSilentRun()
		return
	}
	// Ask again at once rather than wait a whole interval.
	if lk.succ.ID == info.peer {
		n.ping(lk.succ, 0, true)
		n.askVouch(lk.succ)
		for i := 1; i < len(n.succList); i++ {
			n.probeBeyond(n.succList[i].ID)
		}
	} else if lk.pred.ID == info.peer {
		n.ping(lk.pred, 0, false)
	}
}

// failSilentRun declares dead, at once, the successors after a failed one that were probed
// alongside it and missed as often: the run goes together rather than one node per ProbeMisses
// timeouts. A take-over put off for an ask (askBeforeTakeOver) stops the run; it goes on once
// the ask is answered or timed out (takeOverChecked).
func (n *Node) failSilentRun() {
	for s := n.levels[0].succ; s.ID != n.self.ID && n.missed(s, n.probeMisses()); s = n.levels[0].succ {
		n.maintain.clearMisses(s.ID)
		n.peerFailed(s.ID)
	}
}

// missed reports whether p, as this node knows it, has missed at least that many pings in a
// row. Misses are counted by name; those counted against another incarnation say nothing of
// p: a migrant that left, and so answered no more pings at its old place, is not silent at its
// new one (a random case of TestBalanceCrashProperties, kept as
// -known-migrant-silent-at-the-place-it-left: a take-over went up to the migrant's new start
// without asking it, over a node that had joined below it).
func (n *Node) missed(p overlay.Peer, pings int) bool {
	return n.maintain.misses[p.ID] >= pings && n.maintain.missedAt[p.ID].incarnation == p.Incarnation
}

// askVouch asks the node after suspect, this node's successor whose pings went unanswered, to
// ping suspect too and say if it answers (SWIM's indirect ping): a successor that answers it is
// alive, the path between it and this node losing messages, and must not be declared dead. The
// ask is itself a probe beyond the successor (probeBeyond), sent unless one to that node is
// under way. Without it, under 5% message loss a live node was declared dead about once in a
// thousand rounds — after a loss was seen, once in 100,000 — and its range answered "lost"
// until it was re-admitted.
func (n *Node) askVouch(suspect overlay.Peer) {
	if len(n.succList) < 2 {
		return
	}
	next := n.succList[1]
	if next.ID == suspect.ID || next.ID == n.self.ID {
		return
	}
	if n.pinging(next.ID) {
		return
	}
	if len(n.maintain.vouchAsked) >= maxVouchAsked {
		clear(n.maintain.vouchAsked)
	}
	n.maintain.vouchAsked[n.sendBeyond(next, &pb.Ping{Level: 0, CheckPred: true})] = suspect.ID
}

// maxVouchAsked bounds the indirect pings a node remembers having asked for.
const maxVouchAsked = 16

// onVouch takes in a node's word that its predecessor answered the ping this node asked for: if
// that is still this node's successor in doubt, its missed pings no longer count, and the path
// to it loses messages (LossSeen).
func (n *Node) onVouch(p *pb.Pong) {
	suspect, asked := n.maintain.vouchAsked[p.Seq]
	if !asked || p.Pred == nil || overlay.NodeID(p.Pred.Id) != suspect {
		return
	}
	delete(n.maintain.vouchAsked, p.Seq)
	if len(n.levels) == 0 || n.levels[0].succ.ID != suspect || n.maintain.misses[suspect] == 0 {
		return
	}
	n.maintain.clearMisses(suspect)
	n.maintain.lossSeen = n.env.Now()
	n.Stats.Vouched++
}

// probeBeyond pings a successor past the level-0 successor while the successor does not answer,
// unless a probe of it is under way: if several consecutive nodes failed, they are found dead
// together and relinked as a run.
func (n *Node) probeBeyond(id overlay.NodeID) {
	if n.pinging(id) {
		return
	}
	for _, p := range n.succList {
		if p.ID == id {
			n.pingBeyond(p)
			return
		}
	}
}

// pinging reports whether a ping to id is under way.
func (n *Node) pinging(id overlay.NodeID) bool {
	for _, p := range n.maintain.pings {
		if p.peer == id {
			return true
		}
	}
	return false
}

// pingBeyond pings p, a node past the level-0 successor, marked so that its answer's
// predecessor is kept (beyondPreds). It returns the ping's sequence number.
func (n *Node) pingBeyond(p overlay.Peer) uint64 {
	return n.sendBeyond(p, &pb.Ping{Level: 0})
}

// sendBeyond sends ping to p as pingBeyond does.
func (n *Node) sendBeyond(p overlay.Peer, ping *pb.Ping) uint64 {
	seq := n.sendPing(p, ping)
	info := n.maintain.pings[seq]
	info.beyond = true
	n.maintain.pings[seq] = info
	return seq
}

// peerFailed handles a neighbour that stopped answering: its handoffs with this node abort, and
// linksFailed removes it from every link.
func (n *Node) peerFailed(id overlay.NodeID) {
	if !n.Owns() {
		return
	}
	if x := n.out; x != nil && x.to.ID == id {
		n.send(id, &pb.Envelope{Body: &pb.Envelope_HandoffAbort{HandoffAbort: &pb.HandoffAbort{XferId: x.id, Reason: "giver gave up on the receiver"}}}, x.cause)
		n.abortOut(x, "receiver failed")
	}
	if x := n.in; x != nil && x.from.ID == id && !x.acked {
		n.discardIn(x)
	}
	n.linksFailed(id, 0)
}

// linksFailed removes a node that is gone (dead, or restarted as a stranger) from every link;
// keep, when not 0, is the incarnation of that name that is alive and whose links stay. A
// lost level-0 successor's range is taken over and reported lost (its items are gone until
// replication exists), and its neighbours on the levels above are relinked on its behalf.
func (n *Node) linksFailed(id overlay.NodeID, keep uint64) {
	if !n.Owns() {
		return
	}
	gone := func(p overlay.Peer) bool { return p.ID == id && (keep == 0 || p.Incarnation != keep) }
	// A take-over check that asked the node gone waits for an answer that will not come (its
	// ping is dropped below): once the links are updated, it ends as the ask's time-out would.
	check := n.maintain.takeOver
	askedGone := (check.seq != 0 || !check.due.IsZero()) && gone(check.asked)
	if askedGone {
		n.maintain.takeOver.seq, n.maintain.takeOver.due = 0, time.Time{}
	}
	if lk := n.levels[0]; (gone(lk.pred) || gone(lk.succ)) && !n.unconfirmed() {
		// If the predecessor too has been silent for long enough, it may as well have declared
		// this node dead (a partition looks the same from both sides): check before the links
		// change, and wait for the neighbours' word.
		n.mayBeReplaced()
	}
	// Pings to the node that is gone must not count against a later node of the same name.
	n.maintain.clearMisses(id)
	for seq, p := range n.maintain.pings {
		if p.peer == id && (keep == 0 || p.incarnation != keep) {
			delete(n.maintain.pings, seq)
		}
	}
	list := n.succList[:0]
	for _, p := range n.succList {
		if !gone(p) {
			list = append(list, p)
		}
	}
	n.succList = list
	n.forgetNamed(gone)
	if dead := n.levels[0].succ; gone(dead) {
		oldEnd := n.end()
		next := n.nextLive(gone)
		// The take-over stops at a node known to lie before next: named by next when probed,
		// then one linked on a level above.
		stopAt := func(b overlay.Peer) {
			if !b.IsZero() {
				next = b
				n.succList = n.trimSuccList(append([]overlay.Peer{b}, n.succList...))
			}
		}
		stopAt(n.joinedBefore(next, oldEnd, gone))
		stopAt(n.linkedBefore(next, oldEnd, gone))
		stopAt(n.namedBySucc(id, next, oldEnd, gone))
		stopAt(n.namedPastSilent(next, oldEnd, gone))
		stopAt(n.namedPastAskedSilent(next, oldEnd, gone))
		stopAt(n.answeredBefore(next, oldEnd, gone))
		if n.askBeforeTakeOver(keep, next, oldEnd, gone) {
			n.urgent(urgentFor)
			return
		}
		adopted, didAdopt := n.adoptFromDead(id)
		if next.IsZero() {
			n.rememberPeers(gone)
			n.levels = []link{{pred: n.self, succ: n.self}}
		} else {
			n.levels[0].succ = next
		}
		switch {
		case oldEnd == n.end():
			// The link was stale: the node that holds the range starts where this one ends.
			n.debug("successor gone; relinked to the node holding its range", func() []zap.Field {
				return []zap.Field{zap.String("gone", string(id)), zap.String("new_succ", string(next.ID))}
			})
		case !next.IsZero() && oldEnd != n.self.Start && overlay.StrictlyBetween(n.self.Start, next.Start, oldEnd):
			// The next live node starts inside this range (a node this one took for dead and
			// never re-admitted, after a partition): the range shrinks to it, nothing is lost,
			// and the copies beyond its new end go to their owners, leaving what those hold.
			// Kept, they stayed here outside the range, the only copies (a random case of
			// TestPartitionProperties). They go to that node itself, first of their owners: on
			// a link that keeps the order of messages they reach it before the pong that names
			// it this node's successor, which confirms it if it waits. Routed, they came seconds
			// after, the node meanwhile serving its older values where this one had taken writes
			// (the checked clients of skipsim balance --pause).
			n.writeOutCopies(overlay.Range{Start: n.end(), End: oldEnd}, next.ID, handoffCopies{}, "range shrunk to a live node inside it")
		default:
			lost := overlay.Range{Start: oldEnd, End: n.end()}
			items := 0
			if n.maintain.succItemsOf.ID == id {
				items = n.maintain.succItems
			}
			if didAdopt {
				kept, _ := n.store.Count(adopted)
				items = max(0, items-kept)
			}
			n.rangeLost(lost, id, items)
			n.rememberCutOff(dead)
			if didAdopt {
				n.forgetLost(adopted)
			}
		}
		if s := n.levels[0].succ; s.ID != n.self.ID {
			n.failureUpdate(s.ID, 0, pb.Side_SIDE_PRED, n.self, id)
			n.ping(s, 0, true)
		}
		n.relinkAround(dead)
		if didAdopt {
			n.releaseHeld()
			n.becameIdle()
		}
	}
	n.urgent(urgentFor)
	if gone(n.levels[0].pred) {
		n.levels[0].pred = overlay.Peer{}
		if n.levels[0].succ.ID == n.self.ID {
			n.levels[0].pred = n.self
		}
	}
	for l := 1; l < len(n.levels); l++ {
		if gone(n.levels[l].pred) {
			n.levels[l].pred = overlay.Peer{}
		}
		if gone(n.levels[l].succ) {
			n.levels[l].succ = overlay.Peer{}
		}
	}
	n.refreshFrom(1, pb.Cause_CAUSE_REPAIR)
	if askedGone && n.maintain.takeOver.seq == 0 {
		n.takeOverChecked(check)
	}
}

// forgetNamed drops the gone nodes from what other nodes' answers named (beyondPreds, succSucc):
// a take-over stops at a node named there, and asks it first. A node's former incarnation, named
// by an answer sent before it restarted or migrated and kept because nothing newer replaced it,
// drew every take-over of the range back to asking it, and its new incarnation's answer ended
// none of them (a random case of TestOverlayProperties, kept as
// -known-successor-link-to-a-rejoined-node; TestTakeOverPastTwoRejoinedNodes).
func (n *Node) forgetNamed(gone func(overlay.Peer) bool) {
	for _, a := range n.maintain.beyondPreds {
		for i, p := range a.preds {
			if gone(p) {
				a.preds[i] = overlay.Peer{} // in place: the first is the level-0 predecessor
			}
		}
	}
	if gone(n.maintain.succSucc) {
		n.maintain.succSucc = overlay.Peer{}
	}
}

// rangeLost records lost, a dead node's range (or part of it) taken over without its items
// (items of them, as far as known).
func (n *Node) rangeLost(lost overlay.Range, dead overlay.NodeID, items int) {
	n.markTakenLost(lost)
	n.debug("successor failed", func() []zap.Field {
		return []zap.Field{zap.String("dead", string(dead)), zap.String("new_succ", string(n.levels[0].succ.ID)), zap.Stringer("taken", lost)}
	})
	n.Stats.RangesLost++
	n.Stats.ItemsLost += items
	n.env.Report(overlay.Event{Kind: overlay.EventRangeLost, Peer: dead, Range: lost, Items: items,
		Detail: "successor failed; its range was taken over without its items"})
}

// succMovedUp checks an answer of x, the successor, whose predecessor is now pred: if x's
// start moved up since this node last knew it and x names this node (or no node) as its
// predecessor, the part between belonged to a node that died and is nobody's; it is taken over.
// That node was the dead one before x whose range a take-over ended at x's stale start (a NIX
// from x to it: 20% of 500 nodes crashing, seed 73, where a migrant's leave then never started,
// its piece not adjoining its predecessor's range), or a joiner below x that crashed after
// acknowledging its piece (x's start had moved; found by TestBalanceCrashProperties). Nothing is
// taken while x names another predecessor (a live one is re-admitted as an intruder; a dead
// one, not yet found dead by x, once x drops it), nor while the two exchange a piece, nor from
// an answer older than x's descriptor here: sent before a handoff between the two moved x's
// start, it would claim x's new part. Nor while this node waits to be confirmed: it stood still
// (a pause), and the live ring took its successor's old range over meanwhile — the successor
// moved up by a migration, not by a death. Taken over, the part was a second claim beside the
// live holder's, whose re-admission copies went to one claimant while its word that the piece
// was whole dropped the other's lost marks, and that one answered "not found" for values the
// first held (skipsim balance --pause 0.1 --clients 20, small runs: TestPausesWithCheckedClients).
func (n *Node) succMovedUp(x, pred overlay.Peer) {
	s := n.levels[0].succ
	if n.unconfirmed() || x.Version <= s.Version || x.Start == s.Start || !(pred.IsZero() || pred.ID == n.self.ID) ||
		n.in != nil && n.in.from.ID == x.ID || n.out != nil && n.out.to.ID == x.ID ||
		!overlay.StrictlyBetween(s.Start, x.Start, n.self.Start) {
		return
	}
	n.takeOverUpTo(x)
}

// takeOverUpTo links x, a live node past this range's end with no predecessor but this node, as
// the level-0 successor, and takes the range up to it over: the nodes that held it, unknown here
// by name, are gone.
func (n *Node) takeOverUpTo(x overlay.Peer) {
	lost := overlay.Range{Start: n.end(), End: x.Start}
	n.linkSuccessor(x)
	n.rangeLost(lost, "", 0)
	n.failureUpdate(x.ID, 0, pb.Side_SIDE_PRED, n.self, "")
	n.urgent(urgentFor)
}

// takeOverCheck is a take-over of the range of gone, the level-0 successor, put off until
// asked, the node it would go up to, has said who its predecessor is: keep is the incarnation
// of gone's name that is alive (0: none), seq the ping to asked — 0 once it was answered or
// timed out.
type takeOverCheck struct {
	gone  overlay.Peer
	keep  uint64
	asked overlay.Peer
	seq   uint64
	// again is set once asked was asked a second time (askAgainLater); due is when that ask
	// goes out, zero when none is pending.
	again bool
	due   time.Time
	// silent are the nodes asked for this take-over that did not answer (askPastSilent).
	silent []overlay.NodeID
}

// askAgainLater reports whether asked's answer, naming pred as its level-0 predecessor, is to
// be asked for again a probe interval later before the take-over: pred is silent here too — a
// node dead with the successor, in the run the take-over goes over, that asked has not yet
// found gone. A node that joined below pred, unheard here, takes pred's range over when pred
// dies and then tells asked, and the take-over must stop at it; asked had answered a second
// before that word reached it, and the take-over went over the joiner (a random case of
// TestBalanceCrashProperties, kept as -known-takeover-over-a-joiner-the-asked-node-had-not-heard-of).
// Asked once more at most, at the first tick a probe interval on: a run of dead nodes with no
// joiner is taken over one or two probe intervals later than before, and no later.
func (n *Node) askAgainLater(c takeOverCheck, pred overlay.Peer) bool {
	if c.again || pred.IsZero() || pred.ID == c.gone.ID || !n.missed(pred, 1) || !n.isSucc(c.gone) {
		return false
	}
	c.again, c.due = true, n.env.Now().Add(n.cfg.ProbeInterval)
	n.maintain.takeOver = c
	return true
}

// checkUnderWay reports whether take-over check c waits for an answer or for its second ask.
func (n *Node) checkUnderWay(c takeOverCheck) bool {
	_, asking := n.maintain.pings[c.seq]
	return asking || !c.due.IsZero()
}

// askAgainIfDue sends the second ask of a take-over check when it is due (askAgainLater).
func (n *Node) askAgainIfDue() {
	c := &n.maintain.takeOver
	if c.due.IsZero() || n.env.Now().Before(c.due) {
		return
	}
	c.due = time.Time{}
	if n.isSucc(c.gone) {
		c.seq = n.sendBeyond(c.asked, &pb.Ping{Level: 0, Table: true})
	}
}

// askBeforeTakeOver reports whether the take-over of the level-0 successor's range (keep: the
// incarnation of its name that is alive, 0: none; gone: the nodes failed) up to next must wait
// for next's word: no probe of next has answered since the successor last did, so a node may lie
// between this range's end and next unheard here. Next is then asked for its predecessor, and the take-over is made
// when it answers (joinedBefore stops it at that node) or once the ask times out. Found by
// TestBalanceCrashProperties, both ways over a live node's range: the successor list ran out
// (four successors gone at once) and next was only the nearest node linked clockwise, past a
// node that had joined below it; and next was a migrant placed in the list at its new place
// (placeInSuccList), whose predecessor there — a node whose join the crashed successor had
// committed a second before — nobody here had heard of. Probes sent while the successor was in
// doubt (probeBeyond) answer for the nodes listed, so a single crash is taken over at once.
//
// A next that was probed alongside the successor and is silent too would leave an ask
// unanswered: it is not asked (a run of dead successors is taken over at once, failSilentRun,
// not one ask's timeout and ProbeMisses pings per node — 30% of 500 nodes crashing, seed 25: a
// node walked through eight dead successors for longer than a waiting node waits, and gave its
// place up). The first listed node past it that is not silent is asked instead, afresh even if
// it answered a probe lately: a node that joined below next unheard here and took next's range
// over when next died names itself to that node only then (namedPastSilent).
func (n *Node) askBeforeTakeOver(keep uint64, next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) bool {
	if next.IsZero() || next.ID == n.self.ID || next.Start == end {
		return false
	}
	c := n.maintain.takeOver
	if !n.isSucc(c.gone) || c.keep != keep {
		c.silent = nil // another take-over's
	}
	asked := next
	if n.missed(next, 1) {
		if asked = n.heardPast(next, gone); asked.IsZero() {
			return false
		}
	} else if slices.Contains(c.silent, next.ID) {
		if asked = n.askPastSilent(next, c.silent, gone); asked.IsZero() {
			return false
		}
	} else if a, ok := n.maintain.beyondPreds[next.ID]; ok && a.answers(next) {
		return false
	}
	if n.isSucc(c.gone) && c.keep == keep && c.asked.ID == asked.ID && c.asked.Incarnation == asked.Incarnation {
		return n.checkUnderWay(c) // asked already: answered, or silent, it is taken over as without the check
	}
	seq := n.sendBeyond(asked, &pb.Ping{Level: 0, Table: true})
	n.maintain.takeOver = takeOverCheck{gone: n.levels[0].succ, keep: keep, asked: asked, seq: seq, silent: c.silent}
	return true
}

// askPastSilent returns the node to ask when next, the node the take-over would go up to, was
// asked and did not answer, and no listed node past it answers the probes: the first node known
// clockwise past next (on any level) that is neither gone nor silent to an ask and, once it
// answered, the nearest past next of the predecessors it named on every level, in turn, until
// one names none between. Its predecessors then name the nodes that lie before next
// (namedPastAskedSilent), at whose nearest the take-over stops. Without it, the take-over went
// up to next, over any live node between that this node never heard of (a random case of
// TestBalanceCrashProperties, kept as -known-takeover-past-five-crashed-over-a-live-node: five
// of ten nodes crashed within four seconds, every listed successor among them, and the
// take-over went up to a crashed node known from a level above, over a live one). A zero Peer
// when a listed node past next answers the probes (namedPastSilent speaks then) or none is known.
func (n *Node) askPastSilent(next overlay.Peer, silent []overlay.NodeID, gone func(overlay.Peer) bool) overlay.Peer {
	if !n.heardPast(next, gone).IsZero() {
		return overlay.Peer{}
	}
	var best overlay.Peer
	consider := func(p overlay.Peer) {
		if p.IsZero() || p.ID == n.self.ID || p.ID == next.ID || gone(p) || slices.Contains(silent, p.ID) ||
			!overlay.StrictlyBetween(next.Start, p.Start, n.self.Start) {
			return
		}
		if best.IsZero() || overlay.StrictlyBetween(next.Start, p.Start, best.Start) {
			best = p
		}
	}
	for _, lk := range n.levels {
		consider(lk.pred)
		consider(lk.succ)
	}
	for _, p := range n.succList {
		consider(p)
	}
	for !best.IsZero() {
		a, ok := n.maintain.beyondPreds[best.ID]
		if !ok || !a.answers(best) {
			break
		}
		asked := best
		for _, p := range a.preds {
			consider(p)
		}
		if best.ID == asked.ID {
			break
		}
	}
	return best
}

// namedPastAskedSilent returns, when next was asked and did not answer, the node nearest to end
// that the node asked past it (askPastSilent) named as its predecessor on any level, if it lies
// from end up to next: the take-over stops there and asks it in turn. A zero Peer otherwise.
func (n *Node) namedPastAskedSilent(next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	c := n.maintain.takeOver
	if next.IsZero() || !n.isSucc(c.gone) || !slices.Contains(c.silent, next.ID) {
		return overlay.Peer{}
	}
	return n.namedBy(n.askPastSilent(next, c.silent, gone), next, end, gone)
}

// heardPast returns the first node the successor list names after next that is neither gone
// nor silent to the probes: the node a run of dead successors ending at or after next would be
// taken over up to. A zero Peer when next is not listed or no such node is.
func (n *Node) heardPast(next overlay.Peer, gone func(overlay.Peer) bool) overlay.Peer {
	i := slices.IndexFunc(n.succList, func(q overlay.Peer) bool { return q.ID == next.ID })
	if i < 0 {
		return overlay.Peer{}
	}
	for _, q := range n.succList[i+1:] {
		if q.ID != n.self.ID && !gone(q) && !n.missed(q, 1) {
			return q
		}
	}
	return overlay.Peer{}
}

// namedPastSilent returns, when next is silent to the probes too, the level-0 predecessor that
// the first node past it that answers (heardPast) named, if it lies from end up to next: a node
// that joined below next unheard here and, next dying with the successor, took its range over
// and told the node after it. A take-over up to next would go over it (a random case of
// TestBalanceCrashProperties, kept as -known-takeover-up-to-a-silent-node-past-a-joiner: two
// nodes crashed at once with a joiner between them). Only level 0 speaks for that: the levels
// above often still name a migrant at the place it left (30% of 500 nodes crashing, seed 3).
// The node that answered is itself such a node when its start, as it answered, lies there:
// the list's order is stale — the successor had just given it a NIX, moving its start below
// next's (a random case, kept as -known-node-past-a-silent-one-starts-before-it). A zero Peer
// otherwise.
func (n *Node) namedPastSilent(next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	if next.IsZero() || !n.missed(next, 1) {
		return overlay.Peer{}
	}
	past := n.heardPast(next, gone)
	a, ok := n.maintain.beyondPreds[past.ID]
	if past.IsZero() || !ok || !a.answers(past) {
		return overlay.Peer{}
	}
	return n.nearestFrom(end, next, append([]overlay.Peer{a.from}, a.preds[:min(1, len(a.preds))]...), gone)
}

// strangerSeen handles a node that answers as a new incarnation of one this node links to: the
// old one is gone. When it was the level-0 successor, its range is not taken over at once: the
// link may be stale — the successor migrated (a graceful leave to its predecessor, then a join
// elsewhere) and the node that leaves next to it told this one of it before learning who
// joined between them — and then a live node holds that range. The next successor knows its
// predecessor; it is asked first (strangerChecked). placed is learn's: only a node that holds
// its place is put in the successor list (placeInSuccList). A check already under way for the
// successor goes on, keeping the new incarnation's links: started afresh at each word from the
// new incarnation, it asked the next successor — dead — again and again, and never got to the
// node past it that would end it (a random case of TestPartitionProperties, kept as
// -known-successor-left-linked-to-a-node-that-rejoined-below: a range nobody's for hours).
func (n *Node) strangerSeen(p overlay.Peer, placed bool) {
	succ := n.levels[0].succ
	if succ.ID != p.ID || succ.Incarnation == p.Incarnation || succ.ID == n.self.ID {
		n.linksFailed(p.ID, p.Incarnation)
		if placed {
			n.placeInSuccList(p)
		}
		return
	}
	if c := &n.maintain.takeOver; n.isSucc(c.gone) && n.checkUnderWay(*c) {
		c.keep = p.Incarnation
		return
	}
	next := n.nextLive(func(q overlay.Peer) bool { return q.ID == p.ID && q.Incarnation != p.Incarnation })
	if next.IsZero() || next.ID == n.self.ID {
		n.linksFailed(p.ID, p.Incarnation)
		return
	}
	n.maintain.takeOver = takeOverCheck{gone: succ, keep: p.Incarnation, asked: next, seq: n.pingBeyond(next)}
}

// placeInSuccList puts p, a node just heard from as a new incarnation of one this node listed
// (a migrant, joined again elsewhere), into the successor list where its start now lies, when
// that is between two entries. A take-over of a dead successor's range goes up to the first
// live entry: without p there, it went past p — alive, and holding the start of the range
// taken (a migrant that joined above the node that then crashed; found by
// TestBalanceCrashProperties).
func (n *Node) placeInSuccList(p overlay.Peer) {
	if n.listed(p.ID) {
		return
	}
	for i := 1; i < len(n.succList); i++ {
		a, b := n.succList[i-1].Start, n.succList[i].Start
		if a != b && overlay.StrictlyBetween(a, p.Start, b) {
			n.succList = n.trimSuccList(slices.Insert(slices.Clone(n.succList), i, p))
			return
		}
	}
}

// takeOverChecked ends a take-over check (askBeforeTakeOver, strangerSeen), answered or not:
// the range is taken over up to the node asked or to the node it named as its predecessor
// (joinedBefore). Not while this node hands a stranger a piece: it is joining again next to
// this node, and takes its former range with the piece (joined); if the handoff fails, its
// next message starts a check.
func (n *Node) takeOverChecked(c takeOverCheck) {
	if x := n.out; x != nil && x.to.ID == c.gone.ID {
		return
	}
	if n.isSucc(c.gone) {
		n.linksFailed(c.gone.ID, c.keep)
		n.failSilentRun()
	}
}

// joinedBefore returns the node nearest to end among those that next, answering a probe, named
// as its predecessors (on level 0, and on every level when asked for its table) that lie from
// end (where this range ends) to next: alive a moment ago and unknown to this node, it holds
// part of what a take-over up to next would claim — it joined below next unheard, or took the
// gone successor's range when this node's link to it was stale. The take-over then stops at it
// (nothing is taken when it starts at end), and asks it in turn (askBeforeTakeOver): with many
// nodes unheard in between, the levels above reach the first of them in a logarithmic number
// of asks. A zero Peer otherwise, and when next starts at end: then nothing lies between.
func (n *Node) joinedBefore(next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	return n.namedBy(next, next, end, gone)
}

// namedBy returns the node nearest to end among those that asked, answering a probe, named as
// its predecessors, that lies from end up to next (nearestFrom); a zero Peer when asked has not
// answered as this node knows it.
func (n *Node) namedBy(asked, next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	a, ok := n.maintain.beyondPreds[asked.ID]
	if asked.IsZero() || !ok || !a.answers(asked) {
		return overlay.Peer{}
	}
	return n.nearestFrom(end, next, a.preds, gone)
}

// nearestFrom returns the one of candidates nearest to end that lies from end up to (not
// including) next, leaving out this node, next and the gone ones; a zero Peer when none does,
// and when next starts at end (Between would read the empty interval (end, end) as a full turn).
func (n *Node) nearestFrom(end overlay.Key, next overlay.Peer, candidates []overlay.Peer, gone func(overlay.Peer) bool) overlay.Peer {
	var best overlay.Peer
	if next.IsZero() || next.Start == end {
		return best
	}
	for _, p := range candidates {
		if p.IsZero() || p.ID == n.self.ID || p.ID == next.ID || gone(p) ||
			p.Start != end && !overlay.StrictlyBetween(end, p.Start, next.Start) {
			continue
		}
		if best.IsZero() || p.Start == end || best.Start != end && overlay.StrictlyBetween(end, p.Start, best.Start) {
			best = p
		}
	}
	return best
}

// namedBySucc returns the node that dead, the level-0 successor now gone, named as its own
// successor in its last answer, when that node lies from end (where this range ends) up to
// next and the successor list does not name it: it joined below the node after dead, and dead
// was linked to it before its successor list caught up, so the list dead sent on missed it. A
// take-over up to next would go over it (a random case of TestBalanceCrashProperties, kept as
// -known-successor-list-behind-a-successor-update: the next node left and then dead crashed,
// and the take-over went up to the leaver's stale start). The take-over stops at it and asks it
// first (askBeforeTakeOver). Listed nodes are left to the list, as in linkedBefore. A zero Peer
// otherwise.
func (n *Node) namedBySucc(dead overlay.NodeID, next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	s := n.maintain.succSucc
	if n.maintain.succItemsOf.ID != dead || s.IsZero() || n.listed(s.ID) || n.linked(s.ID) {
		return overlay.Peer{}
	}
	return n.nearestFrom(end, next, []overlay.Peer{s}, gone)
}

// answeredBefore returns the node nearest to end among those that answered a probe sent past the
// successor while it was in doubt or gone (beyondPreds) from between end (where this range
// ends) and next: alive a moment ago where it answered from, it holds what a take-over past it
// would claim. The checks above look only at what next, or the nodes asked for it, name: a node
// back from a pause whose listed successors had all migrated took their ranges over one by one
// and then, its list empty, up to a node linked on a level above at that node's old start, over
// the live nodes in between, one of which had answered its probes twice in the minute before
// (500 nodes, a fifth paused, seed 3). A zero Peer when none did, and when next starts at end.
func (n *Node) answeredBefore(next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	var answered []overlay.Peer
	for _, a := range n.maintain.beyondPreds {
		answered = append(answered, a.from)
	}
	return n.nearestFrom(end, next, answered, gone)
}

// linked reports whether id is this node's neighbour on some level. A node the dead successor
// named that is linked here under that name is one this node knows better: often a migrant
// that has left the place named (a random case of TestBalanceCrashProperties, kept as
// -known-successor-named-as-it-was-before-it-migrated: the take-over stopped at its old start,
// and with the same name as this node's predecessor the stale link was never found dead).
func (n *Node) linked(id overlay.NodeID) bool {
	for _, lk := range n.levels {
		if lk.pred.ID == id || lk.succ.ID == id {
			return true
		}
	}
	return false
}

// linkedBefore returns the node nearest to end among those this node links to on any level that
// lie from end (where this range ends) up to next, the node a take-over would go up to: one the
// successor list did not know — it joined below next since the list was sent, and this node
// heard of it only as a neighbour on a level above (found by TestBalanceCrashProperties: a
// migrant joined below the node after the crashed successor, and the take-over went up to that
// node's new start, over the migrant's range). The take-over stops at it; if the link was stale,
// the node's answer or silence is handled as any successor's. Nodes the list names are left to
// the list: a link on a level above may carry a start the node has since moved up, and a
// take-over up to it leaves the keys in between to nobody (20% of 500 nodes crashing, seed 73).
// A zero Peer when there is none, and when next starts at end.
func (n *Node) linkedBefore(next overlay.Peer, end overlay.Key, gone func(overlay.Peer) bool) overlay.Peer {
	var linked []overlay.Peer
	for _, lk := range n.levels[1:] {
		for _, p := range []overlay.Peer{lk.pred, lk.succ} {
			if !n.listed(p.ID) {
				linked = append(linked, p)
			}
		}
	}
	return n.nearestFrom(end, next, linked, gone)
}

// listed reports whether a node of that name is in the successor list.
func (n *Node) listed(id overlay.NodeID) bool {
	return slices.ContainsFunc(n.succList, func(q overlay.Peer) bool { return q.ID == id })
}

// nextLive is the node a take-over of the gone level-0 successor's range goes up to: the first
// successor listed that is not gone, else the nearest node known clockwise. An entry that starts
// inside this node's range as it is now has moved or left since it was listed, and is passed
// over: taken as next, it made the take-over run from the successor's start round to it, and
// the checks that stop a take-over early, each looking for a node before next, found one far
// past the live nodes listed after it (a node that left was listed after the successor that
// took its range by its leave and then gave this node the lower part of it by a NIX; the
// take-over went over the live node listed next; found by TestBalanceCrashProperties).
func (n *Node) nextLive(gone func(overlay.Peer) bool) overlay.Peer {
	for _, q := range n.succList {
		if !gone(q) && !n.startsInside(q) {
			return q
		}
	}
	return n.nearestClockwise(gone)
}

// startsInside reports whether q's start, as this node knows it, lies inside this node's range
// (at its start included).
func (n *Node) startsInside(q overlay.Peer) bool {
	end := n.end()
	return end != n.self.Start && (q.Start == n.self.Start || overlay.StrictlyBetween(n.self.Start, q.Start, end))
}

// nearestClockwise returns, among every node this one links to except the gone ones, the first one
// clockwise: the successor to fall back on when the successor list ran out. If it is not the true
// successor, the nodes in between show up as intruders and are re-admitted.
func (n *Node) nearestClockwise(gone func(overlay.Peer) bool) overlay.Peer {
	var best overlay.Peer
	consider := func(p overlay.Peer) {
		if p.IsZero() || p.ID == n.self.ID || gone(p) {
			return
		}
		if best.IsZero() || overlay.StrictlyBetween(n.self.Start, p.Start, best.Start) {
			best = p
		}
	}
	for _, lk := range n.levels {
		consider(lk.pred)
		consider(lk.succ)
	}
	return best
}

// rememberPeers keeps the nodes linked to at any level, except the gone ones, before the node
// finds itself alone.
func (n *Node) rememberPeers(gone func(overlay.Peer) bool) {
	seen := map[overlay.NodeID]bool{n.self.ID: true}
	keep := func(p overlay.Peer) {
		if !p.IsZero() && !seen[p.ID] && !gone(p) {
			seen[p.ID] = true
			n.maintain.former = append(n.maintain.former, p)
		}
	}
	for _, lk := range n.levels {
		keep(lk.pred)
		keep(lk.succ)
	}
	for _, p := range n.succList {
		keep(p)
	}
	for _, p := range n.maintain.recent {
		keep(p)
	}
}

// Rediscover gives a node that is alone after failures another node to call on (the runtime found
// it, e.g. through discovery): if it answers, the two rings merge by re-admission.
// A node named again is called on again.
func (n *Node) Rediscover(id overlay.NodeID) {
	if id == n.self.ID || !n.Alone() {
		return
	}
	delete(n.maintain.formerCalls, id)
	for _, p := range n.maintain.former {
		if p.ID == id {
			return
		}
	}
	n.maintain.former = append(n.maintain.former, overlay.Peer{ID: id})
}

// CrossCheck is given a node the runtime found through discovery, now and then, at random, while
// this node serves a range in a ring: if it is not a neighbour here, the search for this node's
// start goes through it (announceVia). In this ring the search ends here and nothing happens; in
// another — one that formed apart during a cut and was never called on, because the cut lasted
// longer than the calls on cut-off successors (cutOffFor) or every node called on died — the
// owner of this node's start finds it inside its range, and the rings merge from there as after
// any cut. Without it, such rings stayed apart for ever (TestRingsApartForMoreThanADayMerge).
// One search at a time: a node found while one is under way is passed over.
func (n *Node) CrossCheck(id overlay.NodeID) {
	if id == n.self.ID || n.state != StateActive || n.Alone() || n.linked(id) {
		return
	}
	if _, searching := n.pending[n.maintain.crossCheck]; searching {
		return
	}
	n.maintain.crossCheck = n.announceVia(id)
}

// Alone reports whether the node owns a range and knows no other node on level 0: after the
// failure (or the unreachability) of every node it knew, or as the only node of a network.
func (n *Node) Alone() bool { return n.Owns() && n.levels[0].succ.ID == n.self.ID }

// noteRecent remembers a node heard from in the maintenance of the levels.
func (n *Node) noteRecent(p overlay.Peer) {
	m := &n.maintain
	m.recent[m.recentNext] = p
	m.recentNext = (m.recentNext + 1) % len(m.recent)
}

// callFormerPeers runs each tick while the node is alone after failures took all its known
// successors: the others may be alive but unreachable for a while (a partition, lost messages).
// It pings one former neighbour per tick, as an intruder check: one that answers is re-admitted,
// the ring closes again through it, and stabilization re-admits the rest. A former neighbour is
// called at most formerCalls times.
func (n *Node) callFormerPeers() {
	m := &n.maintain
	if len(m.former) == 0 || !n.Alone() {
		return
	}
	if _, checking := m.pings[m.intruderSeq]; checking {
		return
	}
	p := m.former[0]
	m.former = m.former[1:]
	m.formerCalls[p.ID]++
	if m.formerCalls[p.ID] < formerCalls {
		m.former = append(m.former, p)
	}
	m.intruder = p.ID
	m.intruderSeq = n.ping(p, 0, true)
}

// formerCalls is how often a lone node calls on each former neighbour.
const formerCalls = 20

// rememberCutOff keeps p, a successor just declared dead, to be called on later (callCutOff).
func (n *Node) rememberCutOff(p overlay.Peer) {
	m := &n.maintain
	m.cutOff = slices.DeleteFunc(m.cutOff, func(f cutOffPeer) bool { return f.peer.ID == p.ID })
	if len(m.cutOff) == maxCutOff {
		m.cutOff = m.cutOff[1:]
	}
	now := n.env.Now()
	m.cutOff = append(m.cutOff, cutOffPeer{peer: p, next: now.Add(cutOffFirst * n.cfg.ProbeInterval), until: now.Add(cutOffFor)})
}

// callCutOff calls on one successor this node declared dead, if one is due: one that answers
// was cut off rather than dead (cutOffAnswered). After a partition both sides hold the whole circle in
// rings of their own; without these calls only a node left alone looked for the others, and two
// rings of several nodes each stayed apart for ever. The calls come further apart each time
// (from cutOffFirst to cutOffLast probe intervals) and stop cutOffFor after the death.
// They stopped after an hour at first, and a longer cut left two rings for ever; a day is
// Serf's reconnect timeout for failed members, which it calls on the same way.
func (n *Node) callCutOff() {
	m := &n.maintain
	now := n.env.Now()
	m.cutOff = slices.DeleteFunc(m.cutOff, func(f cutOffPeer) bool { return now.After(f.until) })
	for i, f := range m.cutOff {
		if now.Before(f.next) {
			continue
		}
		f.calls++
		f.next = now.Add(time.Duration(cutOffLast) * n.cfg.ProbeInterval)
		if f.calls < cutOffDoublings {
			f.next = now.Add(time.Duration(cutOffFirst<<f.calls) * n.cfg.ProbeInterval)
		}
		m.cutOff[i] = f
		seq := n.ping(f.peer, 0, false)
		info := m.pings[seq]
		info.cutOff = true
		m.pings[seq] = info
		return
	}
}

// cutOffAnswered handles x's answer to a call (callCutOff) made to its incarnation incarnation.
// A new incarnation joined again (restarted or migrated) and is called on no more, but the ring
// it joined may be the other one — during a long cut, balancing moves nodes there — so the
// search for this node's start goes through it once (without, a side whose called-on nodes had
// all moved stayed apart for ever: TestPartitionedHalvesMergeAfterMigrations). The same one, answering
// from inside this node's range (or from its start), is checked as an intruder, which settles
// the overlap — through the intruder check itself, whose one slot the calls leave free (calls
// on dead nodes held it for a probe timeout each, putting off real checks: the 30% crash runs
// of seeds 22 and 42 went wrong). Answering from outside, it may hold a place in another ring,
// where the owner of this node's start is the one to find this node inside its range
// (announceVia). It is called on again as planned either way, in case its check or the search
// goes astray in rings still merging — until it is linked here at level 0.
func (n *Node) cutOffAnswered(x overlay.Peer, incarnation uint64) {
	// Linked here at level 0, it is in this ring: the rings merged through it, and calls for
	// the rest of the day would search for this node's start through its own ring, a lookup each.
	lk := n.levels[0]
	if renewed, linked := x.Incarnation != incarnation, lk.succ.ID == x.ID || lk.pred.ID == x.ID; renewed || linked {
		n.maintain.cutOff = slices.DeleteFunc(n.maintain.cutOff, func(f cutOffPeer) bool { return f.peer.ID == x.ID })
		if renewed {
			n.announceVia(x.ID)
		}
		return
	}
	if !n.checkIntruder(x, n.levels[0].succ) {
		n.announceVia(x.ID)
	}
}

// How many successors declared dead a node calls on, and how often (see callCutOff).
const (
	maxCutOff   = 8
	cutOffFirst = 2  // probe intervals before the first call
	cutOffLast  = 64 // probe intervals between the last calls
	// cutOffDoublings is how many calls come before the gap reaches cutOffLast. The gap was
	// cutOffFirst<<calls, capped: past 63 calls (some five hours after the death) the shift gave 0,
	// the node called on every tick, and as one call goes out a tick, the others were never
	// made (a random case of TestPartitionProperties: three 3-hour cuts in a row, kept as
	// -known-calls-starved-by-one-called-every-tick).
	cutOffDoublings = 5
	cutOffFor       = 24 * time.Hour
)

// relinkAround unlinks a dead level-0 successor from every level above 0 on its behalf, from the
// links it reported last: on each level, its two neighbours are told about each other, as a leave
// would. A neighbour that this node declared dead before (the dead one was the next of a run of
// consecutive dead nodes) is looked through, by its own table, to the live node beyond, so that
// the whole run is relinked from its live end. Stale entries are mended by later refresh passes.
func (n *Node) relinkAround(dead overlay.Peer) {
	m := &n.maintain
	i := 0
	for i < len(m.succTables) && overlay.NodeID(m.succTables[i].Node.Id) != dead.ID {
		i++
	}
	if i == len(m.succTables) {
		return
	}
	t := linkTable{node: overlay.PeerFromPB(m.succTables[i].Node), preds: overlay.PeersFromPB(m.succTables[i].Preds), succs: overlay.PeersFromPB(m.succTables[i].Succs)}
	m.succTables = m.succTables[i+1:]
	for l := 1; l < len(t.preds); l++ {
		p, passedP := n.pastFallen(t.preds[l], l, pb.Side_SIDE_PRED)
		s, passedS := n.pastFallen(t.succs[l], l, pb.Side_SIDE_SUCC)
		if p.IsZero() || s.IsZero() || p.ID == dead.ID || s.ID == dead.ID {
			continue
		}
		// Each may still link to the dead node or to any dead one passed on its side (one relink
		// per candidate: a relink applies only where it replaces the node it names).
		for _, e := range append([]overlay.NodeID{dead.ID}, passedP...) {
			n.relink(p.ID, l, pb.Side_SIDE_SUCC, s, e)
		}
		if s.ID == p.ID {
			continue
		}
		for _, e := range append([]overlay.NodeID{dead.ID}, passedS...) {
			n.relink(s.ID, l, pb.Side_SIDE_PRED, p, e)
		}
	}
	m.fallen = append(m.fallen, t)
	if len(m.fallen) > fallenKept {
		m.fallen = m.fallen[1:]
	}
}

// pastFallen follows the links on level l toward side from p through the nodes this node declared
// dead lately and returns the first node that is not one of them, with those passed. It returns
// nobody if a dead node's table does not reach level l (it was not on that ring when it reported).
func (n *Node) pastFallen(p overlay.Peer, l int, side pb.Side) (overlay.Peer, []overlay.NodeID) {
	var passed []overlay.NodeID
	for range len(n.maintain.fallen) + 1 {
		t, ok := n.fallenTable(p)
		if !ok {
			return p, passed
		}
		if l >= len(t.preds) {
			return overlay.Peer{}, passed
		}
		passed = append(passed, p.ID)
		p = t.succs[l]
		if side == pb.Side_SIDE_PRED {
			p = t.preds[l]
		}
	}
	return overlay.Peer{}, passed // the dead nodes' links go round in a circle
}

// fallenTable returns the table of p if this node declared that incarnation of p dead lately.
func (n *Node) fallenTable(p overlay.Peer) (linkTable, bool) {
	for _, t := range n.maintain.fallen {
		if t.node.ID == p.ID && t.node.Incarnation == p.Incarnation && !p.IsZero() {
			return t, true
		}
	}
	return linkTable{}, false
}

// relink tells node to (or, when it is this node, makes it) take nb as its neighbour on side at
// level l in place of dead.
func (n *Node) relink(to overlay.NodeID, l int, side pb.Side, nb overlay.Peer, dead overlay.NodeID) {
	u := &pb.NeighborUpdate{Level: uint32(l), Side: side, Node: nb.ToPB(), Expect: []byte(dead), AfterFailure: true}
	if to == n.self.ID {
		n.onNeighborUpdate(n.self, u)
		return
	}
	n.send(to, &pb.Envelope{Body: &pb.Envelope_NeighborUpdate{NeighborUpdate: u}}, pb.Cause_CAUSE_REPAIR)
}

// sendScan starts a scan for this node's successor at level l, walking level l-1 clockwise. (The
// receiving side also answers counter-clockwise scans: the message allows both directions.)
func (n *Node) sendScan(l int, cause pb.Cause) bool {
	first := n.levels[l-1].succ
	if first.IsZero() {
		return false
	}
	n.send(first.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: &pb.LevelScan{
		Origin: n.selfRef, Level: uint32(l), Side: pb.Side_SIDE_SUCC,
	}}}, cause)
	return true
}

func (n *Node) onLevelScan(s *pb.LevelScan) {
	if !n.Owns() {
		return
	}
	origin := overlay.PeerFromPB(s.Origin)
	n.noteRecent(origin)
	l := int(s.Level)
	if origin.ID == n.self.ID {
		if !s.Found {
			n.onLevelFound(&pb.LevelFound{Level: s.Level, Side: s.Side, Alone: true})
		}
		return
	}
	if !s.Found {
		if !overlay.SameRing(n.self.MVec, origin.MVec, l) {
			// A scan is bounded only by the hop limit: membership vectors are random, but the
			// nodes on a stretch of the ring are not a random sample of them once balancing has
			// moved nodes — migrants found through higher-level links share bits with the node
			// they join next to, and a stretch of hundreds of nodes may lack the origin's next
			// bit (found at 250 nodes after Item Balancing on a 3% pulse; a bound of 64 hops
			// left those rings broken for good).
			next := n.scanNext(origin, l, s.Side)
			if next.IsZero() || s.Hops >= n.cfg.MaxHops || !n.scanAdvances(origin, next, s.Side) {
				return // no way on: the origin retries on a later tick
			}
			s.Hops++
			n.forward(next.ID, &pb.Envelope{Body: &pb.Envelope_LevelScan{LevelScan: s}})
			return
		}
		s.Found = true
	}
	// This node is the first on the ring below, in the scan's direction, that shares l bits with
	// the origin: it is the origin's neighbour on level l, and the origin is its neighbour on the
	// other side.
	for len(n.levels) <= l {
		n.levels = append(n.levels, link{})
	}
	lk := &n.levels[l]
	if lk.pred.IsZero() && lk.succ.IsZero() || lk.succ.ID == n.self.ID {
		// Alone on level l until now: the origin is both neighbours.
		lk.pred, lk.succ = origin, origin
		n.replyFound(origin, l, s.Side, n.self)
		return
	}
	cur := &lk.succ
	if s.Side == pb.Side_SIDE_SUCC {
		cur = &lk.pred
	}
	other := *cur
	if other.ID == origin.ID {
		other = overlay.Peer{}
	}
	*cur = origin
	n.replyFound(origin, l, s.Side, other)
	// The origin now lies between this node and its former neighbour: tell that one too. The
	// origin does so itself only when it had no neighbour on that side yet; when joins race, it
	// has one, and the former neighbour kept linking past it until its own next pass. (At 10,000
	// nodes this made every level exact 323 units after the build instead of 396.)
	if !other.IsZero() && other.ID != n.self.ID {
		if s.Side == pb.Side_SIDE_SUCC && overlay.StrictlyBetween(other.Start, origin.Start, n.self.Start) {
			n.updateNeighbor(other.ID, l, pb.Side_SIDE_SUCC, origin, n.self.ID, n.handling)
		} else if s.Side == pb.Side_SIDE_PRED && overlay.StrictlyBetween(n.self.Start, origin.Start, other.Start) {
			n.updateNeighbor(other.ID, l, pb.Side_SIDE_PRED, origin, n.self.ID, n.handling)
		}
	}
}

// scanAdvances reports whether next lies on a scan's way from this node to its origin: clockwise
// for a successor scan, counter-clockwise for a predecessor scan. On a whole ring it always
// does, next being the origin at the latest. On a ring broken by failures, two nodes may link
// each other, and scans bounced between them up to the hop limit, sent again every tick —
// hundreds of messages a second between two nodes until the ring closed. Such a scan is
// dropped, as one with no way on.
func (n *Node) scanAdvances(origin, next overlay.Peer, side pb.Side) bool {
	if next.ID == origin.ID {
		return true
	}
	if side == pb.Side_SIDE_SUCC {
		return overlay.StrictlyBetween(n.self.Start, next.Start, origin.Start)
	}
	return overlay.StrictlyBetween(origin.Start, next.Start, n.self.Start)
}

// scanNext is the next node of a scan for origin's level-l neighbour on side: the neighbour on the
// ring below, l-1, or, where this node is not linked there yet (it joined a moment ago and is still
// climbing, or a failure broke that ring here), on the highest ring below that it is linked on and
// shares with origin. Any ring it shares with origin passes the nodes of origin's ring l-1 in the
// same order and skips only nodes that cannot share l bits with origin, so the scan ends at the
// same node, in more hops, instead of being dropped (17,000 scans were dropped so during a
// 10,000-node build, and each made its origin re-scan every level each tick for a while).
func (n *Node) scanNext(origin overlay.Peer, l int, side pb.Side) overlay.Peer {
	for w := min(l-1, overlay.CommonPrefix(n.self.MVec, origin.MVec), len(n.levels)-1); w >= 0; w-- {
		next := n.levels[w].pred
		if side == pb.Side_SIDE_SUCC {
			next = n.levels[w].succ
		}
		if !next.IsZero() {
			return next
		}
	}
	return overlay.Peer{}
}

func (n *Node) replyFound(origin overlay.Peer, l int, side pb.Side, other overlay.Peer) {
	n.forward(origin.ID, &pb.Envelope{Body: &pb.Envelope_LevelFound{LevelFound: &pb.LevelFound{
		Level: uint32(l), Side: side, Node: n.selfRef, Other: other.ToPB(),
	}}})
}

func (n *Node) onLevelFound(f *pb.LevelFound) {
	if !n.Owns() {
		return
	}
	l := int(f.Level)
	if f.Alone {
		// The scan walked the whole ring below without meeting a node that shares l bits: links
		// on level l and above point at nodes that left or failed. (A node that linked in while
		// the scan walked will find this one again with its own scans.)
		if l < len(n.levels) {
			n.levels = n.levels[:l]
		}
		n.passStep(l, f.Side)
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
	if f.Side == pb.Side_SIDE_SUCC && lk.succ.ID != node.ID && n.maintain.unanswered&(1<<(l+1)) != 0 {
		// The urgent scan of ring l+1 sent this tick has not come back: it walked ring l along
		// the link that just changed, likely into a dead node. Send it again at once over the
		// new link rather than next tick, so that a repair climbs the rings at message speed.
		defer n.sendScan(l+1, pb.Cause_CAUSE_REPAIR)
	}
	if f.Side == pb.Side_SIDE_PRED {
		lk.pred = node
		if lk.succ.IsZero() && !other.IsZero() {
			if other.ID == node.ID {
				lk.succ = node
			} else {
				lk.succ = other
				n.updateNeighbor(other.ID, l, pb.Side_SIDE_PRED, n.self, node.ID, n.handling)
			}
		}
	} else {
		lk.succ = node
		if lk.pred.IsZero() && !other.IsZero() {
			if other.ID == node.ID {
				lk.pred = node
			} else {
				lk.pred = other
				n.updateNeighbor(other.ID, l, pb.Side_SIDE_SUCC, n.self, node.ID, n.handling)
			}
		}
	}
	n.passStep(l, f.Side)
}

// inFromPredCovers reports whether pred, the level-0 predecessor, is handing this node a piece
// that holds start.
func (n *Node) inFromPredCovers(pred overlay.Peer, start overlay.Key) bool {
	x := n.in
	return x != nil && !pred.IsZero() && x.from.ID == pred.ID && x.piece.Contains(start)
}

// passStep moves the refresh pass on after the scan of level l answered.
func (n *Node) passStep(l int, side pb.Side) {
	if side == pb.Side_SIDE_SUCC {
		n.maintain.unanswered &^= 1 << l
	}
	if n.maintain.pass == l && side == pb.Side_SIDE_SUCC {
		n.refreshFrom(l+1, n.maintain.passCause)
	}
}

func (n *Node) onNeighborUpdate(from overlay.Peer, u *pb.NeighborUpdate) {
	if !n.Owns() {
		return
	}
	if u.AfterFailure {
		n.urgent(urgentFor)
	}
	if u.Readmission && n.unconfirmed() {
		// The sender re-admitted this node and its batches follow: its word on them is waited
		// for, whoever vouches, even where every batch is lost on the way.
		n.readmittedBy(from)
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
		// Versions count within one incarnation. Another incarnation of the node linked here is
		// not taken on a third node's word: the link was learnt from the node itself, and the word
		// may be stale. A node whose successor link, just made to a new incarnation by a join it
		// gave, was set back to the former one, by an update its own failure report drew, owned
		// that one's old range again and gave half of it to the next joiner (a random case of
		// TestOverlayProperties; TestUpdateNamingAFormerIncarnationRefused).
		if l == 0 && u.Side == pb.Side_SIDE_SUCC && passedOn(u) {
			return // a word passed on only ever shrinks a range (shrinkWhileWaiting)
		}
		if node.Incarnation == cur.Incarnation && node.Version >= cur.Version {
			oldEnd := n.end()
			*cur = node
			if l == 0 && u.Side == pb.Side_SIDE_SUCC {
				n.endMovedUpByWord(oldEnd)
			}
		}
		return
	case l == 0 && u.Side == pb.Side_SIDE_SUCC && node.Start == n.end() && node.ID != n.self.ID:
		// A node that starts exactly where this range ends (one that joined below the
		// successor): linking to it leaves the range as it is.
	case l == 0 && u.Side == pb.Side_SIDE_SUCC && u.AfterFailure && n.unconfirmed() && !n.Busy() && node.ID != n.self.ID &&
		overlay.StrictlyBetween(n.self.Start, node.Start, n.end()):
		// A re-admission's word, or one passed on, names a node inside the range of a node that
		// waits: the piece it was given ends there.
		n.shrinkWhileWaiting(node, from.ID)
		return
	case l == 0 && u.Side == pb.Side_SIDE_SUCC && u.AfterFailure && !passedOn(u) && n.unconfirmed() && !n.Busy() &&
		node.ID != n.self.ID && n.succGoneBehind(node):
		n.growToReadmittersEnd(node, from.ID)
		return
	case l == 0 && u.Side == pb.Side_SIDE_SUCC:
		// The level-0 successor decides where our range ends; it changes only through handoffs
		// and take-overs, never on a neighbour's word.
		if !expected || node.ID != n.self.ID {
			if u.AfterFailure && n.unconfirmed() && !cur.IsZero() && cur.ID != n.self.ID && overlay.StrictlyBetween(n.self.Start, cur.Start, node.Start) {
				n.listPieceEnd(node)
				n.passOnPieceEnd(*cur, node)
			}
			n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: from.ID, Detail: "refused level-0 successor update"})
			return
		}
	case l == 0 && u.Side == pb.Side_SIDE_PRED && u.AfterFailure && expected && n.predHeardLately():
		// The node that took our predecessor for dead is wrong, or has it from a path that loses
		// messages: our predecessor spoke a moment ago. Our answers go on naming it, so that the
		// sender checks it as an intruder and re-admits it. Taken at its word, a node that had
		// been cut off, still not hearing one neighbour, was linked in here over that live
		// node, and then confirmed by us while it still covered it
		// (TestReturningNodeNotConfirmedOverLiveNodes).
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: from.ID, Detail: "refused a failure report of a predecessor heard lately"})
		return
	case l == 0 && u.Side == pb.Side_SIDE_PRED && !(expected && u.AfterFailure) && n.inFromPredCovers(*cur, node.Start):
		// A node inside the piece the predecessor is handing this one: taken as the predecessor,
		// the piece, committed, could not become this range, and its items went out as copies
		// to owners that were not there yet — a gap the giver took over as lost while a
		// returning node, re-admitted into it, served its older values (skipsim balance
		// --nodes 50 --pause 0.1 --pause-for 120s --clients 50 --seed 414). Once the piece
		// commits, the node is inside this range: the intruder check re-admits it. Only a
		// failure report naming the giver gone passes; a stabilization update that names the
		// giver as the predecessor it replaces does not — a node back from a pause sent one
		// from its successor's answer, and the copies written out so reached it after its
		// confirmation (skipsim balance --nodes 50 ... --pause 0.3 --pause-for 120s --seed 39).
		n.env.Report(overlay.Event{Kind: overlay.EventConflict, Peer: from.ID, Detail: "refused a predecessor inside the piece being handed here"})
		return
	case expected || cur.IsZero():
	case u.Side == pb.Side_SIDE_PRED && overlay.StrictlyBetween(cur.Start, node.Start, n.self.Start):
	case u.Side == pb.Side_SIDE_SUCC && overlay.StrictlyBetween(n.self.Start, node.Start, cur.Start):
	default:
		if l == 0 && u.Side == pb.Side_SIDE_PRED && node.ID != n.self.ID && overlay.StrictlyBetween(node.Start, cur.Start, n.self.Start) {
			// Our predecessor lies between the proposed one and us: a leaving node told its
			// predecessor to link to us before it learned that a node joined below us. That node
			// has its successor wrong; point it to ours (it links only if our predecessor starts
			// where its range ends) rather than let it find us later as a stranger.
			n.updateNeighbor(node.ID, 0, pb.Side_SIDE_SUCC, *cur, n.self.ID, pb.Cause_CAUSE_MAINTAIN)
		}
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
	if l == 0 {
		n.debug("level-0 link updated", func() []zap.Field {
			return []zap.Field{zap.String("side", u.Side.String()), zap.String("node", string(node.ID)), zap.String("was", string(cur.ID)), zap.String("by", string(from.ID))}
		})
	}
	was := *cur
	*cur = node
	if l == 0 && lk.succ.ID == n.self.ID {
		// This node believed itself alone (every successor it knew had failed) and owned the
		// whole circle, but another node links to it: the ring is larger. Check it as an
		// intruder: its answer settles the overlap (claim.go); re-admission of any node in
		// between follows from stabilization.
		n.maintain.intruder = node.ID
		n.maintain.intruderSeq = n.ping(node, 0, true)
	}
	if l == 0 && u.Side == pb.Side_SIDE_PRED {
		n.askTakerOfGiver(was, node)
	}
}

// endMovedUpByWord marks lost what a neighbour's word added to this node's range past oldEnd,
// its end before: its successor's start moved up, and this node holds nothing of the part in
// between. The word comes from a node that re-admitted this one (readmit: its copies of the part
// follow, and its CopiesWhole drops the marks but where it had lost the items itself) or from a
// stale view; either way, unmarked, a read of a key there answered "not found" for a value the
// items' holder had: a node that re-admitted this one while it waited to be confirmed gave it
// the ranges of two other waiting nodes, which held their items (skipsim balance --pause 0.1
// --clients: TestPausesWithCheckedClients).
func (n *Node) endMovedUpByWord(oldEnd overlay.Key) {
	end := n.end()
	if end == oldEnd || !n.Range().Contains(oldEnd) {
		return
	}
	part := overlay.Range{Start: oldEnd, End: end}
	n.markTakenLost(part)
	n.debug("end moved up by a neighbour's word; the part marked lost until its copies are whole", func() []zap.Field {
		return []zap.Field{zap.Stringer("part", part)}
	})
}

// passOnPieceEnd passes on to succ, the successor of this waiting node, the word of a node that
// re-admitted this one (or the word passed on to it): the piece it gave ends at end, a node past
// succ. succ lies inside that piece, back from standing still beside this node; its own links
// may have stretched its range far past end, over live nodes, and nobody else can tell it where
// the piece stops. Passed on with no expected node, the word only ever shrinks a waiting node's
// range (shrinkWhileWaiting), and only waiting nodes pass it on: a confirmed one that a stale
// link reached lies outside the piece — a migrant, elsewhere now — and, passed on by it, the
// word went on round the ring node after node, each made urgent (a third of the ring in a
// 500-node pause run, while the rule was being written).
func (n *Node) passOnPieceEnd(succ, end overlay.Peer) {
	n.failureUpdate(succ.ID, 0, pb.Side_SIDE_SUCC, end, "")
}

// listPieceEnd puts end, the node a re-admission named as the end of this waiting node's piece,
// into the successor list in clockwise order, past the entries before it: should the nodes
// between fail (links from before this node stood still, to migrants gone elsewhere), the
// take-over stops at end. With the list holding only such a node, it went on past end to a node
// a level above named, round most of the ring, and the node, never confirmed, gave its place up
// with its range nobody's until its predecessor found it gone (500 nodes, --pause 0.1 --clients
// 50 --seed 6, while the rule was being written).
func (n *Node) listPieceEnd(end overlay.Peer) {
	if n.listed(end.ID) {
		return
	}
	i := 0
	for i < len(n.succList) && !overlay.StrictlyBetween(n.self.Start, end.Start, n.succList[i].Start) {
		i++
	}
	n.succList = n.trimSuccList(slices.Insert(slices.Clone(n.succList), i, end))
}

// passedOn reports whether u is a re-admission's word passed on (passOnPieceEnd).
func passedOn(u *pb.NeighborUpdate) bool { return u.AfterFailure && len(u.Expect) == 0 }

// shrinkWhileWaiting ends this waiting node's range at node, which by named as its successor
// after a failure: the word of a node that re-admitted it (or of one the piece was given to
// before it, passed on), which gives the piece up to its own successor, node. A node back from
// standing still may have taken ranges over on its stale links meanwhile, up to a node far past
// the live ones between; kept, that range was confirmed by its neighbours back from the same
// pause, and it served keys that live nodes held (small pause runs with checked clients, seed
// 40). Owning less is safe where it waits: what it holds past node goes to the owners as
// copies, which stand only where newer, and so do the deletes it remembers there — made in a
// part it took over while cut off, one was otherwise forgotten, and the owner's older copy of
// the key stood (TestPartitionProperties, -rapid.seed=1220932).
func (n *Node) shrinkWhileWaiting(node overlay.Peer, by overlay.NodeID) {
	oldEnd := n.end()
	n.linkSuccessor(node)
	past := overlay.Range{Start: node.Start, End: oldEnd}
	copies := append(n.copiesIn(past), n.deleteItemsIn(past)...)
	sortClockwise(copies, past.Start)
	n.forgetLost(past) // its tombstones there too: gathered above, they go with the copies
	n.debug("range shrunk on a re-admission's word while waiting", func() []zap.Field {
		return []zap.Field{zap.String("succ", string(node.ID)), zap.String("by", string(by)), zap.Stringer("given_up", past)}
	})
	n.pushCopies(copies, true, 0, node.ID, nil, "range shrunk on a re-admission's word while waiting", nil)
}

// succGoneBehind reports whether this node's level-0 successor, by its own last answer, now
// starts behind this node, outside the piece a re-admission says ends at end, while the link
// still holds the start it had inside that piece: a node that moved (a NIX from below moved its
// start down past this one's while this node stood still), whose newer start the link does not
// take (succStartMovedUp) and which will never name this node its predecessor.
func (n *Node) succGoneBehind(end overlay.Peer) bool {
	cur, s := n.levels[0].succ, n.maintain.succItemsOf
	return !n.isSelf(cur) && s.SameNode(cur) && s.Incarnation == cur.Incarnation && s.Version > cur.Version &&
		overlay.StrictlyBetween(n.self.Start, cur.Start, end.Start) && overlay.StrictlyBetween(end.Start, s.Start, n.self.Start)
}

// growToReadmittersEnd links end, which the node that re-admitted this waiting one named as its
// successor, in place of a successor gone behind this node (succGoneBehind): the re-admitter
// gave this node the piece up to end, and nobody else holds the part between this range's old
// end and end. Refused, as a word that grows a waiting node's range is otherwise, and passed on
// to the successor gone elsewhere, which refused it too, the node was never confirmed: its
// successor never named it predecessor, the re-admitter's successor did, and after
// maxUnconfirmed it gave its place up (500 nodes, a fifth paused, seed 10). The part is marked
// lost until the re-admitter's word that its copies are whole (endMovedUpByWord).
func (n *Node) growToReadmittersEnd(end overlay.Peer, by overlay.NodeID) {
	oldEnd, gone := n.end(), n.levels[0].succ
	n.linkSuccessor(end)
	n.endMovedUpByWord(oldEnd)
	n.debug("range grown to a re-admission's end while waiting: the successor moved behind this node", func() []zap.Field {
		return []zap.Field{zap.String("succ", string(end.ID)), zap.String("gone", string(gone.ID)), zap.String("by", string(by))}
	})
}

// SuccessorItems reports how many items the level-0 successor said it stores in its last answer
// to a ping; false when the successor has not answered one since it became the successor.
func (n *Node) SuccessorItems() (int, bool) {
	if s := n.levels[0].succ; !n.Owns() || !n.maintain.succItemsOf.SameNode(s) || n.isSelf(s) {
		return 0, false
	}
	return n.maintain.succItems, true
}
