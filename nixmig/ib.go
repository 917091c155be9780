package nixmig

import (
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// Item Balancing (Karger and Ruhl; thesis §4.6.2; SPEC §10), the baseline: every node probes a
// random routing-table entry every IBInterval. When the lighter of the two carries at most
// IBEpsilon of the heavier's load: neighbours split the difference by a NIX from the heavier;
// otherwise the light node J asks its successor K, and if K is heavier than the heavy node H,
// K gives J half their difference; otherwise J migrates next to H and takes half of H's load.

type ibState struct {
	probe   uint64       // wave of the outstanding probe
	heavy   overlay.Peer // at the light node: the heavy node of its exchange
	placing uint64       // at the heavy node: the wave whose migrant is joining next to it
}

func (b *Balancer) onIBTimer() {
	if !b.running {
		return
	}
	b.env.SetTimer(b.cfg.IBInterval, overlay.Timer{Kind: timerIB})
	if !b.idle() {
		return
	}
	target := b.randomTableEntry(nil)
	if target.IsZero() {
		return
	}
	b.ib.probe = b.newWave()
	b.Stats.Probes++
	b.send(target.ID, b.ib.probe, &pb.Probe{Load: b.load.Load(b.env.Now())})
}

func (b *Balancer) onIBProbeReply(from overlay.Peer, r *pb.ProbeReply) {
	b.ib.probe = 0
	if !b.running || !b.idle() || !r.Idle {
		return
	}
	li, lj := b.load.Load(b.env.Now()), r.Load
	heavy, light := li, lj
	if lj > li {
		heavy, light = lj, li
	}
	if heavy == 0 || light > b.cfg.IBEpsilon*heavy {
		return
	}
	wave := b.newWave()
	pred, succ := b.sg.Neighbors(0)
	adjacent := from.ID == pred.ID || from.ID == succ.ID
	switch {
	case adjacent && li > lj:
		b.lockFor(wave, roleIB, b.cfg.LockLease())
		b.ibGive(wave, from.ID == succ.ID, (li-lj)/2)
	case adjacent:
		b.send(from.ID, wave, &pb.IBNix{Load: (lj - li) / 2})
	case li > lj:
		b.send(from.ID, wave, &pb.IBOffer{Heavy: b.sg.Self().ToPB(), HeavyLoad: li, LightLoad: lj, Step: pb.IBStep_IB_LIGHT})
	default:
		b.onIBOffer(b.sg.Self(), wave, &pb.IBOffer{Heavy: from.ToPB(), HeavyLoad: lj, LightLoad: li, Step: pb.IBStep_IB_LIGHT})
	}
}

// ibGive hands want of this node's load to its successor (up) or predecessor by a NIX, under
// the lock of wave, which it releases when done.
func (b *Balancer) ibGive(wave uint64, up bool, want float64) {
	split, ok := b.nixSplit(up, want)
	if !ok {
		b.unlock(wave)
		return
	}
	err := b.sg.GiveNIX(up, split, pb.Cause_CAUSE_BALANCE, func(ok bool, _ int) {
		if ok {
			b.Stats.NIX++
		}
		b.unlock(wave)
	})
	if err != nil {
		b.unlock(wave)
	}
}

func (b *Balancer) onIBOffer(from overlay.Peer, wave uint64, o *pb.IBOffer) {
	switch o.Step {
	case pb.IBStep_IB_LIGHT:
		if !b.idle() {
			return
		}
		b.lockFor(wave, roleIB, b.cfg.LockLease())
		b.ib.heavy = overlay.PeerFromPB(o.Heavy)
		l := b.load.Load(b.env.Now())
		_, succ := b.sg.Neighbors(0)
		if succ.IsZero() || succ.ID == b.sg.ID() || succ.ID == b.ib.heavy.ID {
			b.ibPlace(wave, l)
			return
		}
		b.send(succ.ID, wave, &pb.IBOffer{Heavy: o.Heavy, HeavyLoad: o.HeavyLoad, LightLoad: l, Step: pb.IBStep_IB_NEIGHBOUR})
	case pb.IBStep_IB_NEIGHBOUR:
		pred, _ := b.sg.Neighbors(0)
		l := b.load.Load(b.env.Now())
		if pred.ID != from.ID || !b.idle() || l <= o.HeavyLoad {
			b.send(from.ID, wave, &pb.IBNix{Load: 0}) // declined
			return
		}
		b.lockFor(wave, roleIB, b.cfg.LockLease())
		b.ibGive(wave, false, (l-o.LightLoad)/2)
		b.send(from.ID, wave, &pb.Release{Reason: "neighbour gives"})
	case pb.IBStep_IB_MOVE:
		// The threshold algorithm's reorder: the heavy node chose this one as the lightest it
		// found; it moves next to it at once (its leave hands its range to its neighbour).
		if !b.idle() {
			return
		}
		b.lockFor(wave, roleIB, b.cfg.LockLease())
		b.ib.heavy = overlay.PeerFromPB(o.Heavy)
		b.ibPlace(wave, b.load.Load(b.env.Now()))
	case pb.IBStep_IB_PLACE:
		if !b.idle() {
			b.send(from.ID, wave, &pb.Release{Reason: "heavy node busy"})
			return
		}
		split, ok := b.nixSplit(true, b.load.Load(b.env.Now())/2)
		if !ok {
			b.send(from.ID, wave, &pb.Release{Reason: "nothing to split"})
			return
		}
		b.lockFor(wave, roleIB, b.cfg.LockLease()*4)
		b.ib.placing = wave
		b.send(from.ID, wave, &pb.MigOrder{Target: b.sg.Self().ToPB(), Split: []byte(split)})
	}
}

// ibPlace asks the heavy node to place this light node next to it.
func (b *Balancer) ibPlace(wave uint64, l float64) {
	h := b.ib.heavy
	b.send(h.ID, wave, &pb.IBOffer{Heavy: h.ToPB(), LightLoad: l, Step: pb.IBStep_IB_PLACE})
}

func (b *Balancer) onIBNix(from overlay.Peer, wave uint64, n *pb.IBNix) {
	if n.Load == 0 {
		// The successor declined: move next to the heavy node.
		if b.lock.wave == wave && b.lock.role == roleIB {
			b.ibPlace(wave, b.load.Load(b.env.Now()))
		}
		return
	}
	pred, succ := b.sg.Neighbors(0)
	if !b.idle() || (from.ID != pred.ID && from.ID != succ.ID) {
		return
	}
	b.lockFor(wave, roleIB, b.cfg.LockLease())
	b.ibGive(wave, from.ID == succ.ID, n.Load)
}
