package nixmig

import (
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// The end node's work — the remote wave, the NIX chain it starts, the MIG phase — and the
// migrants' side (SPEC §6.2–§6.4).

// --- the end node: remote wave (SPEC §6.2) ---

// beginEnd starts the end node's work. The remote wave looks for migrants while the NIX chain
// runs (the two involve different nodes, and the migrants take their pieces only once both are
// over); FaithfulPhases starts the chain after the remote wave instead. giveFirst: every member
// before this node can give its piece from its own keys, so the chain can be shifted.
func (b *Balancer) beginEnd(wave uint64, dir pb.Side, chain []overlay.Peer, tmpL float64, ex int, giveFirst, outOfReach bool) {
	e := &endState{wave: wave, dir: dir, chain: chain, tmpL: tmpL, exNodes: min(ex, maxChain-1), probes: b.cfg.MaxProbes, outOfReach: outOfReach}
	e.shift = giveFirst && !b.cfg.FaithfulChain && len(chain) > 2
	b.end = e
	b.renew(wave, b.cfg.LockLease())
	search := e.exNodes > 0 && b.cfg.Algorithm != NIXOnly
	if !search {
		e.migrants = []overlay.Peer{}
	}
	if !search || !b.cfg.FaithfulPhases {
		b.startNIX(e)
	}
	if search {
		b.seekM(e, overlay.Peer{})
	}
}

// searchOver ends the remote wave, with or without migrants.
func (b *Balancer) searchOver(e *endState) {
	if e.migrants == nil {
		e.migrants = []overlay.Peer{}
	}
	b.renew(e.wave, b.cfg.LockLease())
	switch {
	case b.cfg.FaithfulPhases:
		b.startNIX(e)
	case e.chainDone:
		b.migPhase(e)
	}
}

func (e *endState) involves(id overlay.NodeID) bool {
	for _, p := range e.chain {
		if p.ID == id {
			return true
		}
	}
	return false
}

// seekM looks for an underloaded idle node: first in the hint cache (SmartUNL), then by
// probing random routing-table entries, walking on from the answers (SPEC §7.1). via is the
// node to probe next, if a probe answer named one.
func (b *Balancer) seekM(e *endState, via overlay.Peer) {
	if e.tries >= 3 {
		b.searchOver(e)
		return
	}
	if b.cfg.SmartUNL && via.IsZero() {
		if h, ok := b.unl.best(b.env.Now(), e.involves); ok {
			b.Stats.UNLHits++
			b.remoteLock(e, h)
			return
		}
	}
	if e.probes <= 0 {
		b.searchOver(e)
		return
	}
	target := via
	if target.IsZero() || target.ID == b.sg.ID() || e.involves(target.ID) {
		target = b.randomTableEntry(e.involves)
	}
	if target.IsZero() {
		b.searchOver(e)
		return
	}
	e.probes--
	b.Stats.Probes++
	b.send(target.ID, e.wave, &pb.Probe{Load: b.load.Load(b.env.Now())})
}

// randomTableEntry returns a random node of the routing table outside skip.
func (b *Balancer) randomTableEntry(skip func(overlay.NodeID) bool) overlay.Peer {
	h := b.sg.Height()
	for range 4 {
		if h == 0 {
			break
		}
		pred, succ := b.sg.Neighbors(b.env.Rand().IntN(h))
		p := pred
		if b.env.Rand().IntN(2) == 0 {
			p = succ
		}
		if !p.IsZero() && p.ID != b.sg.ID() && (skip == nil || !skip(p.ID)) {
			return p
		}
	}
	return overlay.Peer{}
}

func (b *Balancer) onProbe(from overlay.Peer, wave uint64, _ *pb.Probe) {
	next := b.randomTableEntry(func(id overlay.NodeID) bool { return id == from.ID })
	reply := &pb.ProbeReply{Load: b.load.Load(b.env.Now()), Thres: b.cfg.Thres, Idle: b.idle()}
	if !next.IsZero() {
		reply.Next = next.ToPB()
	}
	b.send(from.ID, wave, reply)
}

func (b *Balancer) onProbeReply(from overlay.Peer, wave uint64, r *pb.ProbeReply) {
	if b.ib.probe == wave && wave != 0 {
		b.onIBProbeReply(from, r)
		return
	}
	if b.threshold.sample == wave && wave != 0 {
		b.onThresholdReply(from, r)
		return
	}
	e := b.end
	if e == nil || e.wave != wave || e.m.ID != "" || e.migrants != nil {
		return // not this wave's, a candidate already asked, or the search is over
	}
	// A candidate needs room, as for its own hints (hasRoom): under its keep, not merely its thres.
	if r.Idle && r.Load < b.cfg.KeepFor(r.Thres) && !e.involves(from.ID) {
		b.remoteLock(e, from)
		return
	}
	var via overlay.Peer
	if r.Next != nil {
		via = overlay.PeerFromPB(r.Next)
	}
	b.seekM(e, via)
}

func (b *Balancer) remoteLock(e *endState, m overlay.Peer) {
	e.tries++
	e.m = m
	b.Stats.RemoteTries++
	b.send(m.ID, e.wave, &pb.RemoteLock{End: b.sg.Self().ToPB(), Want: uint32(e.exNodes)})
}

// migrantSizeRatio: a node storing more than this many times the items of M and the migrants
// before it does not migrate onto them (unless Config.FaithfulMigrants).
const migrantSizeRatio = 4

// hasRoom reports whether a node with load l can be M (and says so in its hints): it must be
// under keep, not merely under thres — one between the two has no room for a migrant's range.
func (b *Balancer) hasRoom(l float64) bool { return l < b.keepAt(l) }

// onRemoteLock reserves this node as M (first request) or as a migrant after M.
func (b *Balancer) onRemoteLock(from overlay.Peer, wave uint64, r *pb.RemoteLock) {
	end := overlay.NodeID(r.End.Id)
	l := b.load.Load(b.env.Now())
	// M and the migrants wait for the NIX chain and the migrations before them; a long wave
	// still gets a bounded lease.
	lease := b.cfg.LockLease() * time.Duration(min(r.Want+2, MaxLeaseFactor))
	if r.M == nil {
		if !b.idle() || !b.hasRoom(l) || end == b.sg.ID() {
			b.send(end, wave, &pb.RemoteReply{Reason: "candidate not idle or not underloaded"})
			return
		}
		b.lockFor(wave, roleRemote, lease)
		self := b.sg.Self().ToPB()
		_, succ := b.sg.Neighbors(0)
		if r.Want == 0 || succ.IsZero() || succ.ID == b.sg.ID() {
			b.send(end, wave, &pb.RemoteReply{M: self})
			return
		}
		b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: l, MThres: b.keepAt(l), M: self, AccItems: uint64(b.store.Len())})
		return
	}
	if r.Absorb {
		b.onAbsorb(end, wave, r, l, lease)
		return
	}
	reply := &pb.RemoteReply{M: r.M, Migrants: r.Migrants, Splits: r.Splits, MigrantKeep: r.MigrantKeep}
	items := uint64(b.store.Len())
	if !b.idle() || end == b.sg.ID() || (!b.cfg.FaithfulMigrants && items > migrantSizeRatio*r.AccItems) {
		b.send(end, wave, reply)
		return
	}
	_, succ := b.sg.Neighbors(0)
	lastOne := succ.IsZero() || succ.ID == b.sg.ID()
	if r.AccLoad+l >= r.MThres {
		// The node taking the migrants' ranges (M, or an absorber) cannot take this node's range
		// whole; with split leaves the node after this one may take the top of it.
		if !b.splitLeaves() || !b.mayPassOn(succ, end, r.M) {
			b.send(end, wave, reply)
			return
		}
		b.lockFor(wave, roleMigrant, lease)
		b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: r.AccLoad + l, MThres: r.MThres, M: r.M,
			Migrants: append(r.Migrants, b.sg.Self().ToPB()), MigrantKeep: b.withOwnKeep(r.MigrantKeep, len(r.Migrants)),
			AccItems: r.AccItems + items, Absorb: true, LastLoad: l, Splits: r.Splits})
		return
	}
	b.lockFor(wave, roleMigrant, lease)
	migrants, keeps := append(r.Migrants, b.sg.Self().ToPB()), b.withOwnKeep(r.MigrantKeep, len(r.Migrants))
	if len(migrants) >= int(r.Want) || lastOne {
		b.send(end, wave, &pb.RemoteReply{M: r.M, Migrants: migrants, Splits: r.Splits, MigrantKeep: keeps})
		return
	}
	b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: r.AccLoad + l, MThres: r.MThres, M: r.M, Migrants: migrants,
		MigrantKeep: keeps, AccItems: r.AccItems + items, Splits: r.Splits})
}

// withOwnKeep returns the keeps of the migrants reserved so far (RemoteLock.migrant_keep) with
// this node's appended, as it reserves itself behind them; nil when a node before it sent none
// (a node of an older version), so that the list stays one keep a migrant or empty.
func (b *Balancer) withOwnKeep(keeps []float64, migrants int) []float64 {
	if len(keeps) != migrants {
		return nil
	}
	return append(slices.Clip(keeps), b.keep())
}

// mayPassOn reports whether a remote lock with split leaves may go on to succ, this node's
// successor, as an absorber or a migrant: not this node, nor the end node, nor M.
func (b *Balancer) mayPassOn(succ overlay.Peer, end overlay.NodeID, m *pb.NodeRef) bool {
	return !succ.IsZero() && succ.ID != b.sg.ID() && succ.ID != end && succ.ID != overlay.NodeID(m.Id)
}

// splitLeaves reports whether a migrant whose load M cannot take whole may leave part of its
// range to its successor (ours; not in MIG only, whose migrations hand ranges to M alone, nor
// with the thesis's migrant rules).
func (b *Balancer) splitLeaves() bool {
	return b.cfg.Algorithm == NIXMIG && !b.cfg.FaithfulMigrants
}

// onAbsorb answers a remote lock sent past the last migrant, whose load the node before it (M,
// or an absorber: "M" below) cannot take whole: this node, the migrant's successor, takes the
// top of the migrant's range first (a split leave) if it has room for the load M has not. It
// asks for what leaves M and itself equally loaded, at least M's overflow, and at most halfway
// from the overflow to the migrant's whole load (the migrant keeps a key or more for M: a NIX
// never hands over a whole range). Refusing, it frees the last migrant
// and the wave goes on with the migrants before it. Accepting, it takes the next migrants'
// ranges in turn, as M took the first ones, while the wave wants more.
//
// Near the end of a mild skew (zipf θ = 1) nodes with room are many but no two neighbours
// together are under keep, so no node could migrate and lumps travelled hundreds of nodes by NIX
// chains to them; two neighbours of a leaving node share its load.
func (b *Balancer) onAbsorb(end overlay.NodeID, wave uint64, r *pb.RemoteLock, l float64, lease time.Duration) {
	n := len(r.Migrants)
	last := overlay.NodeID(r.Migrants[n-1].Id)
	overflow := r.AccLoad - r.MThres
	giveUp := min(max((r.AccLoad-l)/2, overflow), (overflow+r.LastLoad)/2)
	room := b.keepAt(l) - l
	if !b.idle() || end == b.sg.ID() || overflow >= r.LastLoad || giveUp >= room {
		b.send(last, wave, &pb.Release{Reason: "no room after the last migrant"})
		b.send(end, wave, &pb.RemoteReply{M: r.M, Migrants: r.Migrants[:n-1], Splits: r.Splits, MigrantKeep: r.MigrantKeep[:max(0, len(r.MigrantKeep)-1)]})
		return
	}
	b.lockFor(wave, roleRemote, lease)
	self := b.sg.Self().ToPB()
	splits := append(r.Splits, &pb.SplitPlan{Migrant: uint32(n - 1), Absorber: self, GiveUp: giveUp, GiveUpMax: room})
	_, succ := b.sg.Neighbors(0)
	if n >= int(r.Want) || !b.mayPassOn(succ, end, r.M) {
		b.send(end, wave, &pb.RemoteReply{M: r.M, Migrants: r.Migrants, Splits: splits, MigrantKeep: r.MigrantKeep})
		return
	}
	b.send(succ.ID, wave, &pb.RemoteLock{End: r.End, Want: r.Want, AccLoad: l + giveUp, MThres: b.keepAt(l), M: r.M,
		Migrants: r.Migrants, MigrantKeep: r.MigrantKeep, AccItems: uint64(b.store.Len()), Splits: splits})
}

func (b *Balancer) onRemoteReply(wave uint64, r *pb.RemoteReply) {
	e := b.end
	if e == nil || e.wave != wave {
		if i := slices.Index(b.remoteGivenUp, wave); i >= 0 {
			b.remoteGivenUp = slices.Delete(b.remoteGivenUp, i, i+1)
			b.releaseRemote(wave, r)
		}
		return
	}
	if e.migrants != nil {
		return // a reply sent again: the first was taken
	}
	if r.M == nil {
		e.m = overlay.Peer{}
		b.seekM(e, overlay.Peer{})
		return
	}
	b.Stats.RemoteAccepted++
	if len(r.Migrants) == 0 {
		b.send(overlay.NodeID(r.M.Id), wave, &pb.Release{Reason: "no migrants"})
		if !b.cfg.FaithfulRemote {
			// M is light but its successor is not light enough to leave its range to M: the
			// candidate gives nothing, so the next one is asked (up to seekM's tries).
			e.m = overlay.Peer{}
			b.seekM(e, overlay.Peer{})
			return
		}
	}
	e.m = overlay.PeerFromPB(r.M)
	e.migrants = overlay.PeersFromPB(r.Migrants)
	e.migrantKeep = r.MigrantKeep
	e.splitLeaves = r.Splits
	b.searchOver(e)
}

// releaseRemote frees the nodes a remote wave reserved for a wave this node gave up as its end
// node while the remote wave was under way (its lease ran out, a member left: abortEnd), which
// released M alone; the reply names the migrants M reserved since. Left alone they stayed
// locked until their own leases ran out — up to six leases, and on the 3% pulse with 40 s
// leases dozens of them at a time (JOURNAL.md, "Leases per wave, and a late remote reply
// releases what it names").
func (b *Balancer) releaseRemote(wave uint64, r *pb.RemoteReply) {
	if r.M == nil {
		return // nothing reserved
	}
	for _, p := range r.Migrants {
		b.send(overlay.NodeID(p.Id), wave, &pb.Release{Reason: "wave over"})
	}
	for _, p := range r.Splits {
		b.send(overlay.NodeID(p.Absorber.Id), wave, &pb.Release{Reason: "wave over"})
	}
	b.send(overlay.NodeID(r.M.Id), wave, &pb.Release{Reason: "wave over"})
}

// --- NIX chain (SPEC §6.3) ---

// startNIX starts the NIX chain: the turn goes to the initiator, and in a shifted chain to every
// other member at once (indices 0, 2, 4, … before this node), each to give from its own keys;
// the members between give once their piece is in, as in the sequential chain.
func (b *Balancer) startNIX(e *endState) {
	b.renew(e.wave, b.cfg.LockLease())
	chain := overlay.PeersToPB(e.chain)
	if !e.shift {
		b.send(e.chain[0].ID, e.wave, &pb.NixTurn{Dir: e.dir, Chain: chain, Index: 0})
		return
	}
	for i := 0; i < len(e.chain)-1; i += 2 {
		b.send(e.chain[i].ID, e.wave, &pb.NixTurn{Dir: e.dir, Chain: chain, Index: uint32(i), Shift: true})
	}
}

// onNixTurn is a member's turn in the NIX chain (SPEC §6.3): it hands the next member what its
// load now exceeds keep by, then unlocks and passes the turn on at the flip. In a shifted chain
// a member told by the end node to give first adds what the plan brings it (LockRequest.moved)
// to its load, gives that from its own keys, and keeps its lock until the turn passed on by the
// member before tells it that its own piece is in.
func (b *Balancer) onNixTurn(wave uint64, t *pb.NixTurn) {
	chain := overlay.PeersFromPB(t.Chain)
	i := int(t.Index)
	if i >= len(chain) {
		return
	}
	last := chain[len(chain)-1].ID
	if b.lock.wave != wave {
		if t.Shift {
			// The turn from the member before came first (a lost or late message) and this
			// member gave as in the sequential chain; or its lock ran out, and the end node's
			// lease ends the wave.
			return
		}
		// This node's lock ran out: the wave cannot go on.
		b.send(last, wave, &pb.Release{Abort: true, Reason: "chain member lost its lock"})
		return
	}
	if b.sg.Busy() {
		// The member before passed the turn at its flip and its commit, sent first, has not
		// arrived yet (messages overtook each other), or another handoff is under way here: the
		// turn waits, within this node's lease, which it does not renew meanwhile.
		b.waiting, b.waitingWave = t, wave
		b.env.SetTimer(b.cfg.HopTime, overlay.Timer{Kind: timerTurn, ID: wave})
		return
	}
	if i == len(chain)-1 {
		if e := b.end; e != nil && e.wave == wave {
			e.chainDone = true
			if e.migrants != nil {
				b.migPhase(e)
			}
		}
		return
	}
	if b.lock.gave {
		b.unlock(wave) // gave first; the piece from the member before is in
		return
	}
	b.renew(wave, b.cfg.LockLease())
	load := b.load.Load(b.env.Now())
	first := t.Shift && i > 0 // the initiator has nothing to wait for
	if first {
		b.lock.gave = true
		load += b.lock.movedIn
	}
	pass := func() {
		if !first {
			b.unlock(wave)
		}
		b.send(chain[i+1].ID, wave, &pb.NixTurn{Dir: t.Dir, Chain: t.Chain, Index: t.Index + 1})
	}
	want := moved(load, b.keep(), b.cfg.OverThres, b.cfg.A)
	if i == 0 && b.lock.pieceCap > 0 {
		want = min(want, b.lock.pieceCap)
	}
	if want <= 0 {
		pass()
		return
	}
	split, ok := b.nixSplit(t.Dir == pb.Side_SIDE_SUCC, want)
	if !ok {
		pass()
		return
	}
	err := b.sg.GiveNIX(t.Dir == pb.Side_SIDE_SUCC, split, pb.Cause_CAUSE_BALANCE, func(ok bool, _ int) {
		if !ok {
			b.unlock(wave)
			b.send(last, wave, &pb.Release{Abort: true, Reason: "nix aborted"})
			return
		}
		b.Stats.NIX++
		pass()
	})
	if err != nil {
		b.unlock(wave)
		b.send(last, wave, &pb.Release{Abort: true, Reason: err.Error()})
	}
}

// ownKeys returns the keys of the node's range in order from its start.
func (b *Balancer) ownKeys() []overlay.Key {
	return slices.Collect(b.keysIn(b.sg.Range()))
}

// nixSplit picks the split key of a NIX carrying want to the successor (up) or the predecessor
// (SPEC §4 step 1): the shortest piece from the end touching the helper whose load reaches want,
// never the whole range — short of load, all but the key farthest from the helper.
//
// Whether the piece took every key is decided by its key count, never by comparing keys: keys
// are in circular order from the range's start, and a range across the seam of the key circle
// ends with keys smaller than its first ones (comparing split with the last key once made every
// NIX to the predecessor from such a range hand over all but one key).
func (b *Balancer) nixSplit(up bool, want float64) (overlay.Key, bool) {
	keys, split, _, found := b.shortestPiece(up, want)
	if len(keys) < 2 {
		return "", false
	}
	if !found {
		split = keys[len(keys)-1] // [start, last key) to the predecessor
		if up {
			split = keys[1] // [second key, end) to the successor
		}
	}
	if split == b.sg.Range().Start {
		return "", false
	}
	return split, true
}

// shortestPiece cuts the node's own keys (returned too) for a NIX carrying want towards the
// successor (up) or the predecessor: the split key and load of the shortest piece from that end
// whose load reaches want; found is false when no such piece leaves a key behind.
func (b *Balancer) shortestPiece(up bool, want float64) (keys []overlay.Key, split overlay.Key, load float64, found bool) {
	keys = b.ownKeys()
	if len(keys) < 2 {
		return keys, "", 0, false
	}
	split, load, n, ok := b.cutPiece(keys, up, want)
	return keys, split, load, ok && n < len(keys)
}

// cutPiece finds the shortest piece carrying want from the upper end (up) or the lower end of
// the keys; it returns the split key, the piece's load and key count.
func (b *Balancer) cutPiece(keys []overlay.Key, up bool, want float64) (overlay.Key, float64, int, bool) {
	now := b.env.Now()
	if up {
		desc := func(yield func(overlay.Key) bool) {
			for i := len(keys) - 1; i >= 0; i-- {
				if !yield(keys[i]) {
					return
				}
			}
		}
		split, got, n, ok := b.load.SplitDown(desc, want, now)
		return split, got, n, ok
	}
	asc := func(yield func(overlay.Key) bool) {
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}
	split, got, n, ok := b.load.SplitUp(asc, want, now)
	return split, got, n, ok
}

// --- MIG phase (SPEC §6.4) ---

// migPhase starts the migrations. The end node cuts its range for all of them at once — the
// i-th migrant's piece carries the i-th share counted from the side SmartRNP chose — and orders
// them one after another, each as soon as the one before has handed its old range over: the
// leaves chain towards M one at a time, while the joins next to the end node overlap with them.
func (b *Balancer) migPhase(e *endState) {
	b.renew(e.wave, b.cfg.LockLease())
	r := len(e.migrants)
	l := b.load.Load(b.env.Now())
	if r == 0 || l <= b.keepAt(l) {
		b.finishEnd(e, true)
		return
	}
	shares, keeps := b.migShares(e, l, r)
	keys := b.ownKeys()
	e.below = b.placeBelow(keys, shares[0])
	e.splits = b.migSplits(keys, e.below, shares, keeps)
	if len(e.splits) == 0 {
		b.finishEnd(e, true)
		return
	}
	b.orderMigrant(e)
}

// migShares returns the load each of the r migrants' pieces aims at and the most it may carry:
// the end node and each migrant an equal share of the load l, capped at keep (with
// FaithfulMigShare the thesis's tmpL/r, uncapped). With heterogeneous nodes — the migrants'
// keeps, as the remote wave reported them, not all this node's — each share is in proportion to
// the keep of the node that will carry it, and capped at that keep: a migrant of thres 30 given
// an equal share of a node of 90 would start overloaded, one of 90 given a node of 30's share
// would leave room unused.
func (b *Balancer) migShares(e *endState, l float64, r int) (shares, keeps []float64) {
	own := b.keep()
	mixed := !b.cfg.FaithfulMigShare && len(e.migrantKeep) == r &&
		slices.ContainsFunc(e.migrantKeep, func(k float64) bool { return k != own })
	capacity := own
	for _, k := range e.migrantKeep {
		capacity += k
	}
	shares, keeps = make([]float64, r), make([]float64, r)
	for i := range shares {
		switch {
		case b.cfg.FaithfulMigShare:
			shares[i], keeps[i] = e.tmpL/float64(r), math.Inf(1)
		case mixed:
			shares[i], keeps[i] = l*e.migrantKeep[i]/capacity, e.migrantKeep[i]
		default:
			shares[i], keeps[i] = l/float64(r+1), own
		}
	}
	return shares, keeps
}

// orderMigrant sends the next migration order.
func (b *Balancer) orderMigrant(e *endState) {
	i := e.ordered
	e.ordered++
	b.renew(e.wave, b.cfg.LockLease())
	o := &pb.MigOrder{Target: b.sg.Self().ToPB(), Split: []byte(e.splits[i]), Below: e.below}
	for _, p := range e.splitLeaves {
		if int(p.Migrant) == i {
			o.Absorber, o.GiveUp, o.GiveUpMax = p.Absorber, p.GiveUp, p.GiveUpMax
		}
	}
	b.send(e.migrants[i].ID, e.wave, o)
}

// placeBelow is SmartRNP (SPEC §7.2): the migrant goes to the side whose piece carrying share
// holds fewer keys (or as the experiment's placement option says).
func (b *Balancer) placeBelow(keys []overlay.Key, share float64) bool {
	switch b.cfg.Placement {
	case PlaceRandom:
		return b.env.Rand().IntN(2) == 0
	}
	_, _, nUp, _ := b.cutPiece(keys, true, share)
	_, _, nDown, _ := b.cutPiece(keys, false, share)
	below := nDown < nUp
	if b.cfg.Placement == PlaceAdversarial {
		return !below
	}
	return below
}

// migSplits cuts the end node's range for the migrants, the i-th piece carrying shares[i] and at
// most keeps[i] (cutPieces), from the upper end (migrants join above, the first one outermost)
// or from the lower end (below). It never hands out the key farthest from that end, and returns
// fewer cuts when the load runs out.
func (b *Balancer) migSplits(keys []overlay.Key, below bool, shares, keeps []float64) []overlay.Key {
	now := b.env.Now()
	n := len(keys)
	fromEnd := func(j int) overlay.Key { // the j-th key counted from the chosen end
		if below {
			return keys[j]
		}
		return keys[n-1-j]
	}
	loads := make([]float64, n)
	for j := range loads {
		loads[j] = b.load.KeyLoad(fromEnd(j), now)
	}
	var splits []overlay.Key
	for _, j := range cutPieces(loads, shares, keeps) {
		k := fromEnd(j) // the piece is [k, end) above
		if below {
			k += "\x00" // the piece is [start, k] inclusive below: it ends just after k
		}
		splits = append(splits, k)
	}
	return splits
}

// cutPieces cuts up to len(shares) pieces off the front of loads (key loads counted from one end
// of a range), the i-th carrying shares[i], and returns the index of each piece's last key; the
// last key of loads is never handed out, and fewer pieces come back when the load runs out.
//
// Piece i never grows above keeps[i] unless one key alone does: it is cut before the key that
// would take it there, and the next piece aims at its whole share from that cut. Where a few hot keys
// fill a node, cutting wherever the running sum reached the next share gave some migrants one
// key too many — six keys of 10/s is 60, over thres from the start — and others one too few;
// on the tightest pulses every such slot is needed. (The thesis's rule, FaithfulMigShare, has
// no cap: keep is +Inf.)
func cutPieces(loads, shares, keeps []float64) []int {
	r := len(shares)
	if r == 0 {
		return nil
	}
	var cuts []int
	acc, piece, want := 0.0, 0.0, shares[0]
	for j := 0; j < len(loads)-1 && len(cuts) < r; j++ {
		l := loads[j]
		if piece > 0 && piece+l > keeps[len(cuts)] {
			cuts = append(cuts, j-1)
			if len(cuts) == r {
				break
			}
			piece, want = 0, acc+shares[len(cuts)]
		}
		acc += l
		piece += l
		if acc >= want {
			cuts = append(cuts, j)
			piece = 0
			if len(cuts) < r {
				want += shares[len(cuts)]
			}
		}
	}
	return cuts
}

func (b *Balancer) onMigOrder(from overlay.Peer, wave uint64, o *pb.MigOrder) {
	if b.lock.wave != wave || b.lock.role == roleChain {
		b.send(from.ID, wave, &pb.MigDone{})
		return
	}
	b.renew(wave, b.cfg.LockLease()*4)
	if o.GiveUp > 0 {
		b.splitLeave(from, wave, o)
		return
	}
	b.migrate(from, wave, o)
}

func (b *Balancer) migrate(from overlay.Peer, wave uint64, o *pb.MigOrder) {
	inc := b.sg.Self().Incarnation
	if err := b.sg.Migrate(overlay.NodeID(o.Target.Id), overlay.Key(o.Split), o.Below); err != nil {
		b.migrationFailed(from, wave, err.Error())
		return
	}
	b.migrating = &migrating{wave: wave, end: from.ID, incarnation: inc}
}

func (b *Balancer) migrationFailed(from overlay.Peer, wave uint64, reason string) {
	b.env.Logger().Info("migration refused", zap.String("reason", reason))
	b.unlock(wave)
	b.send(from.ID, wave, &pb.MigDone{})
}

// splitLeave hands the top of this migrant's range, carrying at least o.GiveUp, to its successor
// (the absorber the remote wave reserved) by a NIX, then migrates: its leave hands the rest to its
// predecessor (M, or an absorber).
// The piece may not carry more than the absorber had room for.
func (b *Balancer) splitLeave(from overlay.Peer, wave uint64, o *pb.MigOrder) {
	_, succ := b.sg.Neighbors(0)
	if o.Absorber == nil || succ.ID != overlay.NodeID(o.Absorber.Id) {
		b.migrationFailed(from, wave, "split leave: the absorber is no longer the successor")
		return
	}
	_, split, load, found := b.shortestPiece(true, o.GiveUp)
	if !found || load > o.GiveUpMax {
		b.migrationFailed(from, wave, "split leave: no piece fits the absorber")
		return
	}
	err := b.sg.GiveNIX(true, split, pb.Cause_CAUSE_BALANCE, func(ok bool, _ int) {
		if !ok || b.lock.wave != wave {
			b.migrationFailed(from, wave, "split leave: the piece did not go")
			return
		}
		b.Stats.NIX++
		b.Stats.SplitLeaves++
		b.migrate(from, wave, o)
	})
	if err != nil {
		b.migrationFailed(from, wave, err.Error())
	}
}

// checkMigration tells the end node how this node's migration goes: once its old range is
// handed over, and once it has joined again.
func (b *Balancer) checkMigration() {
	mg := b.migrating
	if mg == nil {
		return
	}
	state := b.sg.State()
	if !mg.left && (state == skipgraph.StateNew || state == skipgraph.StateJoining || b.sg.Self().Incarnation != mg.incarnation) {
		mg.left = true
		b.send(mg.end, mg.wave, &pb.MigDone{Left: true})
	}
	if state == skipgraph.StateActive && b.sg.Self().Incarnation != mg.incarnation {
		b.migrating = nil
		b.send(mg.end, mg.wave, &pb.MigDone{Ok: true})
		b.unlock(mg.wave)
	}
}

func (b *Balancer) onMigDone(wave uint64, d *pb.MigDone) {
	if b.ib.placing == wave {
		if d.Left {
			return
		}
		b.ib.placing = 0
		if d.Ok {
			b.Stats.MIG++
		}
		b.unlock(wave)
		return
	}
	e := b.end
	if e == nil || e.wave != wave {
		return
	}
	if d.Left {
		if e.ordered < len(e.splits) {
			b.orderMigrant(e)
		}
		return
	}
	if d.Ok {
		e.migs++
		b.Stats.MIG++
	}
	e.done++
	if e.ordered == e.done && e.ordered < len(e.splits) {
		b.orderMigrant(e) // the migrant failed before it left: the next one goes now
		return
	}
	if e.done == len(e.splits) {
		b.finishEnd(e, true)
	}
}

// finishEnd ends the wave at its end node: the remote nodes not used go free, and the
// initiator hears the outcome.
func (b *Balancer) finishEnd(e *endState, ok bool) {
	b.end = nil
	if e.m.ID != "" && e.migrants != nil {
		b.send(e.m.ID, e.wave, &pb.Release{Reason: "wave over"})
	}
	for _, p := range e.splitLeaves {
		b.send(overlay.NodeID(p.Absorber.Id), e.wave, &pb.Release{Reason: "wave over"})
	}
	for _, p := range e.migrants[min(e.ordered, len(e.migrants)):] {
		b.send(p.ID, e.wave, &pb.Release{Reason: "wave over"})
	}
	b.unlock(e.wave)
	if ok && e.exNodes > 0 && e.migs == 0 {
		// This node needed migrants and none came: it keeps the lump, and its next wave that
		// way sends it on in shiftable pieces (shiftablePiece).
		b.noMigrants[e.dir] = true
	}
	b.send(e.chain[0].ID, e.wave, &pb.WaveDone{Ok: ok, Dir: e.dir, Migrations: uint32(e.migs), OutOfReach: e.outOfReach})
}

// abortEnd gives up a wave at its end node: everyone still reserved goes free.
func (b *Balancer) abortEnd(e *endState, reason string) {
	for i := 1; i < len(e.chain)-1; i++ {
		b.send(e.chain[i].ID, e.wave, &pb.Release{Reason: reason})
	}
	if e.migrants == nil {
		e.migrants = []overlay.Peer{}
		if e.m.ID != "" {
			// A remote lock may be under way: release M, and what it reserved once its reply
			// comes (releaseRemote).
			b.send(e.m.ID, e.wave, &pb.Release{Reason: reason})
			e.m = overlay.Peer{}
			b.remoteGivenUp = append(b.remoteGivenUp, e.wave)
			if len(b.remoteGivenUp) > maxRemoteGivenUp {
				b.remoteGivenUp = b.remoteGivenUp[1:]
			}
		}
	}
	b.finishEnd(e, false)
}
