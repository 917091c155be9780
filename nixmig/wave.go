package nixmig

import (
	"math"
	"slices"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// The initiator and the local wave (SPEC §6.1, §6.5, §7.3).

// --- the initiator ---

// trimToRange forgets the load statistics of keys the node is no longer responsible for, once its
// range changed: a range that shrank without a handoff of this node's (taken over while it was
// thought dead, written out on a rejoin, cut short by a live node found inside it) leaves no
// piece to export the statistics with, and its reads would count as this node's load for the
// whole window.
func (b *Balancer) trimToRange() {
	r, owns := b.sg.Range(), b.sg.Owns()
	if r == b.tracking && owns == b.owning {
		return
	}
	b.tracking, b.owning = r, owns
	b.load.Retain(b.sg.Responsible)
}

func (b *Balancer) onCheck() {
	if !b.running {
		return
	}
	b.env.SetTimer(b.cfg.CheckInterval, overlay.Timer{Kind: timerCheck})
	b.checks++
	now := b.env.Now()
	b.trimToRange()
	if b.checks%64 == 0 {
		b.load.Compact(now)
		b.forgetSeen(now)
		b.forgetInitiated(now)
	}
	b.checkMigration()
	switch {
	case b.cfg.Algorithm == Threshold:
		b.thresholdCheck(now)
		return
	case b.cfg.Algorithm == ItemBalancing || !b.idle():
		return
	}
	l := b.load.Load(now)
	settle := b.atLine(l)
	if l <= b.cfg.Thres && !settle {
		b.wakeRefused(now)
		return
	}
	dir, ok := b.chooseDirection(now, settle)
	if !ok {
		return
	}
	b.startWave(dir, l, settle)
}

// atLine reports whether a node of load l is at the line: under thres but within half the
// headroom of it, where the load tracker's noise carries it over thres and back. On the
// thesis's 10% pulse a node of twelve hot keys of 5/s carries thres itself and reads 59–61/s:
// at 500 nodes a few such nodes cost a few seconds, but at 50,000 there are dozens and some
// of them are always over, so "every node under thres" came only when the noise allowed
// (JOURNAL.md, "Settling waves"). Such a node sends its excess over keep on in a settling wave,
// which ends only at a node with room (Config.Settle; never without headroom, nor in the
// baselines). It does so wherever waves pass: nodes whose keys are heavy keep thres (keepAt) and
// are never at the line, so the narrow pulses' travelling lumps, whose locks settling waves once
// held, meet none (JOURNAL.md, "Settling waves wherever waves pass, as far as a wave grows").
func (b *Balancer) atLine(l float64) bool {
	return b.cfg.Settle && b.cfg.Algorithm == NIXMIG && b.keepAt(l) < b.cfg.Thres && l <= b.cfg.Thres && l > b.cfg.Thres*(1-b.cfg.Headroom/2)
}

// keep is the load this node tries to stay under (keepAt its load now).
func (b *Balancer) keep() float64 { return b.keepAt(b.load.Load(b.env.Now())) }

// keepAt is the load this node tries to stay under, its load being l: Keep — thres less the
// headroom — unless the keys the tracker counts carry more than twice the headroom each on
// average, when it is thres itself. The headroom keeps nodes off the line, where the measured
// load's noise carries them over and back: without it a node may take the key that brings it to
// thres exactly (twelve keys of 5/s, six of 10/s). On the thesis's 10% pulse (keys of 5/s, 454
// nodes of 500 needed) that pays; on its 5% pulse (keys of 10/s, 498 of 500 needed, five keys a
// node) the last lumps of hot keys travelled for hundreds of seconds looking for a room under
// keep, and allowed up to thres they are gone within a few hundred. The rule is empirical: the
// keys' load is what tells those two apart (JOURNAL.md, "The headroom only where keys are
// light").
func (b *Balancer) keepAt(l float64) float64 {
	if n := b.load.Keys(); b.cfg.Headroom > 0 && n > 0 && l/float64(n) > 2*b.cfg.Headroom*b.cfg.Thres {
		return b.cfg.Thres
	}
	return b.cfg.Keep()
}

// chooseDirection picks the side a new wave goes to (SPEC §7.3): the one whose neighbours sent
// fewer lock requests lately, among the sides not backing off; a coin toss on a tie.
// A settling wave goes by the settling waves' back-off.
func (b *Balancer) chooseDirection(now time.Time, settle bool) (pb.Side, bool) {
	pred, succ := pb.Side_SIDE_PRED, pb.Side_SIDE_SUCC
	backoff := &b.backoff
	if settle {
		backoff = &b.settleBackoff
	}
	predOK, succOK := b.backedOff(&backoff[pred], pred, now), b.backedOff(&backoff[succ], succ, now)
	switch {
	case predOK && !succOK:
		return pred, true
	case succOK && !predOK:
		return succ, true
	case !predOK && !succOK:
		return 0, false
	}
	p, s := b.sideValue(pred, now), b.sideValue(succ, now)
	switch {
	case p < s:
		return pred, true
	case s < p:
		return succ, true
	case b.env.Rand().IntN(2) == 0:
		return pred, true
	default:
		return succ, true
	}
}

// backedOff reports whether the back-off st of side s is over: its time has passed, or the
// neighbour that way is no longer the one the failed waves met — a migrant placed beside this
// node, or a node that left, makes a new neighbourhood, and the failures of the old one say
// nothing of it. Without this, a node 12 times over thres, refused ten times each way by busy
// neighbours early in a pulse, stood idle for up to 2¹⁰ − 1 s while the nodes beside it changed
// and went idle (JOURNAL.md, "A back-off ends with its neighbour"). FaithfulBackoff keeps
// SPEC §6.5's: the time runs out.
func (b *Balancer) backedOff(st *backoffState, s pb.Side, now time.Time) bool {
	if !b.cfg.FaithfulBackoff && st.fails > 0 && b.neighbour(s).ID != st.facing {
		*st = backoffState{}
	}
	return !now.Before(st.until)
}

// freeEvery is how many hop times a node lets pass between two initiators it tells it went
// free (wakeRefused): one hop for the LockFree, one for the lock request it brings, and a
// margin for the check that starts the wave; a second initiator told within that time would
// meet the first one's lock.
const freeEvery = 4

// wakeRefused tells the initiator whose wave this node refused longest ago, of the last one
// refused from each side, that this node is free now: called on a check that found the node
// idle with no wave of its own to start. A back-off is a blind wait: at 5,000 nodes a node at
// 496 (thres 60) refused eight times by a busy neighbour waited out a window of 255 one-second
// slots — 155 s — beside that neighbour, idle all the while, and the whole run waited for it
// (JOURNAL.md, "A refused initiator told when its neighbour goes free"). Only one initiator is
// told at a time, and only by a node that will not start a wave itself, so the random spacing
// still separates initiators competing for the same neighbour.
func (b *Balancer) wakeRefused(now time.Time) {
	if now.Before(b.lastFree.Add(freeEvery * b.cfg.HopTime)) {
		return
	}
	var oldest pb.Side
	for _, s := range []pb.Side{pb.Side_SIDE_PRED, pb.Side_SIDE_SUCC} {
		if r := b.refused[s]; r.wave != 0 && (oldest == 0 || r.at.Before(b.refused[oldest].at)) {
			oldest = s
		}
	}
	if oldest == 0 {
		return
	}
	r := b.refused[oldest]
	b.refused[oldest] = refusedWave{}
	b.lastFree = now
	b.Stats.LockFrees++
	b.send(r.initiator, r.wave, &pb.LockFree{})
}

// onLockFree ends the back-off that the failure of wave set, if it is still the last failure
// that way: the neighbour that refused it is free. The count of failures stays, so a wave that
// meets a lock again backs off twice as long.
func (b *Balancer) onLockFree(wave uint64) {
	for _, backoff := range []*[3]backoffState{&b.backoff, &b.settleBackoff} {
		for s := range backoff {
			if st := &backoff[s]; st.fails > 0 && st.wave == wave {
				st.until = b.env.Now()
			}
		}
	}
}

func (b *Balancer) sideValue(s pb.Side, now time.Time) float64 {
	st := b.sides[s]
	if st.at.IsZero() {
		return 0
	}
	return st.value * math.Exp2(-now.Sub(st.at).Seconds()/b.cfg.DirectionHalfLife.Seconds())
}

func (b *Balancer) noteSide(s pb.Side, now time.Time) {
	b.sides[s] = sideStat{value: b.sideValue(s, now) + 1, at: now}
}

// neighbour returns the level-0 neighbour on side s.
func (b *Balancer) neighbour(s pb.Side) overlay.Peer {
	pred, succ := b.sg.Neighbors(0)
	if s == pb.Side_SIDE_PRED {
		return pred
	}
	return succ
}

func opposite(s pb.Side) pb.Side {
	if s == pb.Side_SIDE_PRED {
		return pb.Side_SIDE_SUCC
	}
	return pb.Side_SIDE_PRED
}

func (b *Balancer) newWave() uint64 { return b.env.Rand().Uint64() | 1 }

func (b *Balancer) startWave(dir pb.Side, l float64, settle bool) {
	wave := b.newWave()
	b.Stats.WavesStarted++
	if settle {
		b.Stats.SettlingWaves++
	}
	w := initiatedWave{dir: dir, settle: settle, at: b.env.Now()}
	b.initiated[wave] = w
	ttl := b.waveTTL(dir, settle)
	b.lockFor(wave, roleChain, b.cfg.waveLease(ttl))
	self := b.sg.Self()
	b.lock.dir, b.lock.chain, b.lock.tmpL, b.lock.settle = dir, []overlay.Peer{self}, l, settle
	if b.cfg.Algorithm == MIGOnly {
		// No local wave: the initiator is its own end node, its remote wave sized from its load.
		b.beginEnd(wave, dir, []overlay.Peer{self}, l, b.exNodes(l), false, false)
		return
	}
	next := b.neighbour(dir)
	if next.IsZero() || next.ID == self.ID {
		b.waveFailed(wave, w)
		return
	}
	piece, own := b.plannedPiece(dir, l)
	if c, ok := b.shiftablePiece(dir, l); ok && c < piece {
		piece, own = c, true
		b.lock.pieceCap = c
	}
	b.send(next.ID, wave, &pb.LockRequest{Dir: dir, Chain: []*pb.NodeRef{self.ToPB()}, TmpLoad: l, Moved: piece, GiveFirst: own,
		EndBeforeOverloaded: !settle && b.endsBeforeOverloaded(l), Settle: settle, Ttl: uint32(ttl)})
}

// waveTTL is the ttl of the next wave this node starts towards dir: Config.TTL, doubled for
// each wave that way that ran out of reach (WaveDone.out_of_reach), at most Config.TTLMax, and
// halved again for each that ended within reach. A lump in a packed region — the narrowest
// pulses' — must be carried far to the few nodes with room, and a short wave only reserves
// packed nodes; elsewhere a short wave reserves fewer nodes and its NIX chain carries a lump
// through fewer of them (JOURNAL.md, "A wave's reach grows where it runs out"). A settling wave
// reaches as far as a wave grows, from the start, and after one that way ran out of reach twice
// as far (Config.settleTTL): in a packed region a node at the line finds a node with room for
// one key only many nodes away, and one that failed within reach stayed at the line.
func (b *Balancer) waveTTL(dir pb.Side, settle bool) int {
	if settle {
		if b.settleFar[dir] {
			return b.cfg.settleTTL()
		}
		return b.cfg.maxTTL()
	}
	return min(b.cfg.TTL<<b.outOfReach[dir], b.cfg.maxTTL())
}

// initiatedHorizon bounds how long a wave can run: its end node renews its lease once for each
// migrant it orders (at most maxChain) and a few times before, and gives the wave up when a lease
// runs out. (Waves of fifty migrants on the 3% pulse run for several minutes.)
func (c Config) initiatedHorizon() time.Duration {
	return maxChain*c.LockLease() + c.LongestHold()
}

// forgetInitiated drops the waves started longer ago than initiatedHorizon whose outcome never
// came (the end node crashed, or every attempt of its WaveDone was lost): the map of a
// long-running node would only grow.
func (b *Balancer) forgetInitiated(now time.Time) {
	horizon := b.cfg.initiatedHorizon()
	for wave, w := range b.initiated {
		if now.Sub(w.at) > horizon {
			delete(b.initiated, wave)
		}
	}
}

// waveFailed ends a wave that reserved nothing (or whose outcome was a failure) at the
// initiator: unlock and back off in that direction (SPEC §6.5).
func (b *Balancer) waveFailed(wave uint64, w initiatedWave) {
	b.unlock(wave)
	delete(b.initiated, wave)
	b.Stats.WavesFailed++
	bo := &b.backoff[w.dir]
	if w.settle {
		bo = &b.settleBackoff[w.dir]
	}
	bo.fails++
	bo.facing = b.neighbour(w.dir).ID
	bo.wave = wave
	slots := int64(1)<<min(bo.fails, 10) - 1
	bo.until = b.env.Now().Add(time.Duration(b.env.Rand().Int64N(slots+1)) * b.cfg.HopTime)
}

func (b *Balancer) onWaveDone(wave uint64, d *pb.WaveDone) {
	w, ok := b.initiated[wave]
	if !ok {
		return
	}
	if w.settle {
		b.settleFar[w.dir] = !d.Ok && d.OutOfReach
	}
	if !d.Ok {
		b.waveFailed(wave, w)
		return
	}
	delete(b.initiated, wave)
	b.Stats.WavesOK++
	if w.settle {
		b.settleBackoff[w.dir] = backoffState{}
		return
	}
	b.noMigrants[w.dir] = d.Migrations == 0
	b.backoff[w.dir] = backoffState{}
	if d.OutOfReach {
		b.Stats.WavesOutOfReach++
		if b.waveTTL(w.dir, false) < b.cfg.maxTTL() {
			b.outOfReach[w.dir]++
		}
	} else if b.outOfReach[w.dir] > 0 {
		b.outOfReach[w.dir]--
	}
}

// moved is what a NIX from a node with load l moves on (SPEC §6.1), keep being the load the node
// keeps (its thres, less the headroom).
func moved(l, keep, overThres, a float64) float64 {
	switch {
	case l > overThres:
		return a * (l - keep)
	case l > keep:
		return l - keep
	}
	return 0
}

// plannedPiece is the load of the piece this node will hand on towards dir in the NIX phase when
// its load is then tmpL: the whole keys cut from that end (SPEC §4 step 1), so that the next node
// of the wave plans with what it will really get, not with the bare excess, which one key's load
// can exceed. The keys arriving from the other side meanwhile do not change that end; if the
// node's own keys cannot carry it, the bare excess stands. own reports whether its own keys can
// carry the piece, leaving a key behind: then it can give before its own piece arrives.
func (b *Balancer) plannedPiece(dir pb.Side, tmpL float64) (load float64, own bool) {
	want := moved(tmpL, b.keep(), b.cfg.OverThres, b.cfg.A)
	if want <= 0 {
		return want, true
	}
	_, _, got, found := b.shortestPiece(dir == pb.Side_SIDE_SUCC, want)
	if !found || b.cfg.FaithfulMoved {
		return want, found
	}
	return got, true
}

// shiftablePiece is what an initiator hands on when the last wave it started or ended that way
// brought no migrants and its load is under overThres, if it is less than its whole excess: the
// load of the keys from that end that fit under keep — what a node packed like this end carries
// — less the heaviest of them. A lump in a packed region then goes on a piece at a time, each
// small enough for every full member of the wave to give from its own keys, keeping a key,
// before its own piece arrives: the chain is shifted (two handoff times, up to shiftReach·ttl
// nodes) instead of sequential (a handoff time a member, ttl nodes), and the lump's other keys
// follow in the next waves. Off in FaithfulChain and for NIX only, whose waves never bring
// migrants and whose lumps lie next to their rooms (JOURNAL.md: it made NIX only slower).
func (b *Balancer) shiftablePiece(dir pb.Side, l float64) (float64, bool) {
	if !b.noMigrants[dir] || l > b.cfg.OverThres || b.cfg.FaithfulChain || b.cfg.Algorithm != NIXMIG {
		return 0, false
	}
	keys := b.ownKeys()
	if dir == pb.Side_SIDE_SUCC {
		slices.Reverse(keys)
	}
	now := b.env.Now()
	keep := b.keep()
	fill, heaviest := 0.0, 0.0
	for _, k := range keys {
		kl := b.load.KeyLoad(k, now)
		if fill+kl > keep {
			break
		}
		fill, heaviest = fill+kl, max(heaviest, kl)
	}
	piece := fill - heaviest
	return piece, piece > 0
}

// exNodes is how many extra nodes a load l needs besides this one.
func (b *Balancer) exNodes(l float64) int {
	if b.cfg.FaithfulExNodes {
		return max(0, int(math.Floor(l/b.cfg.Thres-1)))
	}
	return extraNodes(l, b.packedFill())
}

// extraNodes is how many nodes besides one a load l needs when a node carries fill.
func extraNodes(l, fill float64) int { return max(0, int(math.Ceil(l/fill))-1) }

// packedFill is the load one node carries when this node's keys are packed in order, whole,
// under Keep (packedLoad).
func (b *Balancer) packedFill() float64 {
	now := b.env.Now()
	var loads []float64
	for k := range b.keysIn(b.sg.Range()) {
		loads = append(loads, b.load.KeyLoad(k, now))
	}
	return packedLoad(loads, b.keep())
}

// packedLoad is the mean load of the full pieces when keys with these loads are packed in order,
// whole, into pieces under keep (keep itself when they fill none). Where a few hot keys fill a
// node — six keys of 10/s cannot stay under 60 — a node carries 50, not 60, and a count by thres
// asked for too few nodes: the end node kept a lump over thres after its wave.
func packedLoad(loads []float64, keep float64) float64 {
	piece, full, pieces := 0.0, 0.0, 0
	for _, l := range loads {
		if piece > 0 && piece+l > keep {
			full += piece
			pieces++
			piece = 0
		}
		piece += l
	}
	if pieces == 0 {
		return keep
	}
	return full / float64(pieces)
}

// --- the local wave (SPEC §6.1) ---

// shiftReach: a local wave whose members can all give their pieces from their own keys (a
// shifted NIX chain, Config.FaithfulChain) reserves up to shiftReach·ttl nodes, never more than
// a balancing message may name (maxChain). The thesis's ttl bounds a wave because its chain
// takes a handoff time per member; a shifted chain takes two whatever its length, so a lump of a
// key or two crossing a packed region to a node with room 100–180 nodes away (the narrow
// pulses' tails, JOURNAL.md) travels four times as far a wave.
// The lock wave still takes a hop a member: at ttl 5, 20 nodes lock in 20 s, half a lease.
const shiftReach = 4

// clearlyOverloaded: a node whose load exceeds this many times its thres refuses a local wave
// that asks it to end before overloaded nodes (LockRequest.end_before_overloaded). The margin
// keeps in the chains that carry a pulse's last lumps the nodes packed at thres, which the load
// tracker reads at 60.0–61.2/s when thres is 60.
const clearlyOverloaded = 1.2

// endsBeforeOverloaded reports whether a wave started at load l stops before a neighbour that
// is clearly overloaded itself, the initiator (or the last node reserved) then seeking migrants
// for its own excess. In a hot region every node is over thres, and a NIX chain through it only
// pushes load from node to node towards an end node as overloaded as the rest, where the
// migrants arrive: on zipf θ 1–2 that was most of the items moved (JOURNAL.md, "A wave ends
// before an overloaded node"). Each hot node's own waves bring its own migrants instead. Not
// above overThres, where a wave hands on only the share a of the excess and the chains spread a
// pulse's first lumps sooner than migrants alone (the 5% pulse was slower with the rule there),
// and not in FaithfulChain or NIX only.
func (b *Balancer) endsBeforeOverloaded(l float64) bool {
	return b.cfg.Algorithm == NIXMIG && !b.cfg.FaithfulChain && l <= b.cfg.OverThres
}

func (b *Balancer) onLockRequest(from overlay.Peer, wave uint64, r *pb.LockRequest) {
	now := b.env.Now()
	b.noteSide(opposite(r.Dir), now)
	last := from.ID
	if !b.idle() || b.inChain(r.Chain) {
		b.Stats.LockRefusals++
		if len(r.Chain) == 1 && !b.cfg.FaithfulBackoff {
			// The initiator's own request: refused, it backs off (onLockRefused).
			b.refused[opposite(r.Dir)] = refusedWave{wave: wave, initiator: last, at: now}
		}
		b.send(last, wave, &pb.LockRefused{Reason: "busy"})
		return
	}
	self := b.sg.Self()
	l := b.load.Load(now)
	if r.EndBeforeOverloaded && l > clearlyOverloaded*b.cfg.Thres {
		b.send(last, wave, &pb.LockRefused{Reason: "over thres itself", Overloaded: true})
		return
	}
	tmpL := l + r.Moved
	ex := b.exNodes(tmpL)
	ttl := b.cfg.TTL
	if r.Ttl != 0 {
		// The initiator's ttl, but never past this node's own longest wave: its locks are
		// bounded by its configuration (LongestHold), whatever a request says.
		ttl = min(int(r.Ttl), b.cfg.longestTTL())
	}
	chain := append(overlay.PeersFromPB(r.Chain), self)
	b.lockFor(wave, roleChain, b.cfg.waveLease(ttl))
	b.lock.dir, b.lock.chain, b.lock.tmpL, b.lock.exNodes = r.Dir, chain, tmpL, ex
	b.lock.movedIn, b.lock.giveFirst, b.lock.settle = r.Moved, r.GiveFirst, r.Settle
	next := b.neighbour(r.Dir)
	outOfReach := false
	if tmpL > b.keepAt(l) && ex <= ttl && !next.IsZero() && next.ID != self.ID && next.ID != chain[0].ID {
		piece, own := b.plannedPiece(r.Dir, tmpL)
		giveFirst := r.GiveFirst && own
		reach := ttl // a settling wave never reaches further: fewer locks held, for less time
		if giveFirst && !b.cfg.FaithfulChain && !r.Settle {
			reach = min(shiftReach*ttl, maxChain-1)
		}
		if reserved := len(chain) - 1; reserved < reach {
			b.send(next.ID, wave, &pb.LockRequest{Dir: r.Dir, Chain: overlay.PeersToPB(chain), TmpLoad: tmpL, Moved: piece, GiveFirst: giveFirst,
				EndBeforeOverloaded: r.EndBeforeOverloaded, Settle: r.Settle, Ttl: r.Ttl})
			return
		}
		outOfReach = true
	}
	if r.Settle {
		if tmpL > b.keepAt(l) {
			b.settleFailed(wave, chain, outOfReach)
			return
		}
		ex = 0 // a settling wave never seeks migrants
	}
	b.beginEnd(wave, r.Dir, chain, tmpL, ex, r.GiveFirst, outOfReach)
}

// settleFailed ends a settling wave that found no room within its reach, at its last reserved
// node: the chain goes free and the initiator backs off, rather than leave the last node at
// the line in its place.
func (b *Balancer) settleFailed(wave uint64, chain []overlay.Peer, outOfReach bool) {
	dir := b.lock.dir
	b.unlock(wave)
	for _, p := range chain[1 : len(chain)-1] {
		b.send(p.ID, wave, &pb.Release{Reason: "settling wave: no room"})
	}
	b.send(chain[0].ID, wave, &pb.WaveDone{Ok: false, Dir: dir, OutOfReach: outOfReach})
}

func (b *Balancer) inChain(chain []*pb.NodeRef) bool {
	for _, r := range chain {
		if overlay.NodeID(r.Id) == b.sg.ID() {
			return true
		}
	}
	return false
}

// onLockRefused: the next node refused, so this node, the last reserved, ends the wave.
func (b *Balancer) onLockRefused(wave uint64, r *pb.LockRefused) {
	if b.lock.wave != wave || b.lock.role != roleChain {
		return
	}
	if len(b.lock.chain) > 1 && b.lock.settle {
		b.settleFailed(wave, b.lock.chain, false)
		return
	}
	if len(b.lock.chain) == 1 {
		if r.Overloaded {
			// The initiator's neighbour is overloaded too: the initiator seeks migrants for its
			// own excess, as its own end node.
			b.beginEnd(wave, b.lock.dir, b.lock.chain, b.lock.tmpL, b.exNodes(b.lock.tmpL), false, false)
			return
		}
		b.waveFailed(wave, b.initiated[wave]) // nothing reserved: the initiator backs off
		return
	}
	b.beginEnd(wave, b.lock.dir, b.lock.chain, b.lock.tmpL, b.lock.exNodes, b.lock.giveFirst, false)
}

func (b *Balancer) onRelease(wave uint64, r *pb.Release) {
	if e := b.end; e != nil && e.wave == wave && r.Abort {
		b.abortEnd(e, r.Reason)
		return
	}
	if b.lock.wave == wave {
		b.unlock(wave)
	}
}
