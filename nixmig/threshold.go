package nixmig

import (
	"math"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// The threshold algorithm of Ganesan, Bawa and Garcia-Molina ("Online Balancing of
// Range-Partitioned Data with Applications to Peer-to-Peer Systems", VLDB 2004), an optional
// baseline of SPEC §10. Thresholds T_j = thres·δ^j cut the loads into levels: a node whose load
// lies in (T_m, T_m+1] is at level m. A node whose load rises into a level balances:
//
//   - NbrAdjust: if the lighter of its two neighbours carries at most T_m−1, it hands it half
//     their difference by a NIX;
//   - Reorder: otherwise, if the least loaded node it finds carries at most T_m−2, that node
//     leaves — its range goes to its neighbour — and joins next to this one, taking half its
//     load (Item Balancing's placement: IB_MOVE, IB_PLACE, MigOrder).
//
// With δ the golden ratio this is the paper's Fibbing algorithm, whose ratio of the largest to
// the smallest load it bounds by δ³ ≈ 4.2. Three things differ from the paper, because nothing
// here knows the whole network: the least loaded node is the lightest of ThresholdSamples random
// entries of the routing table (the paper keeps a second skip graph ordered by load); the
// loads are measured rates, not item counts, so the node looks at its level every CheckInterval
// rather than on each insert; and since a sample sees only some of the nodes, a node whose
// sample found nothing to do samples again at the same level after IBInterval, doubling
// maxThresholdDoublings times (the paper's node acts once per crossing; ours, without the
// retries, stayed over for good whenever its one sample missed every light node). Loads that
// fall (the paper's merges after deletes) are left alone: nothing here deletes load. The lowest
// threshold is thres·δ^lowestThreshold: a node acts only at the levels whose T_m−2 is a
// threshold, so idle, cold nodes never probe.

const (
	// lowestThreshold is the level of the lowest threshold, relative to thres (T_0 = thres).
	lowestThreshold = -4
	// MaxThresholdSamples and MaxThresholdDelta bound Config.ThresholdSamples and
	// Config.ThresholdDelta.
	MaxThresholdSamples = 64
	MaxThresholdDelta   = 16
	// maxThresholdDoublings bounds the doubling of the wait before sampling again at one level.
	maxThresholdDoublings = 4
	// highestLevel bounds the levels (a load past thres·δ^64 counts as that level).
	highestLevel = 64
)

// thresholdState is a node's part in the threshold algorithm.
type thresholdState struct {
	sample  uint64 // wave of the outstanding sample, 0 when none
	waiting int    // replies the sample still expects
	// sampled is the node's level at its last sample, at when it was taken; fruitless counts the
	// samples in a row at that level that did nothing.
	sampled   int
	at        time.Time
	fruitless int
	// The sample's answers: the node's level-0 neighbours when it was sent, the lighter idle
	// one and the lightest idle node of the others.
	pred, succ  overlay.NodeID
	neighbour   overlay.Peer
	neighbourL  float64
	lightest    overlay.Peer
	lightestL   float64
	hasLighter  bool
	hasLightest bool
}

// thresholdAt is T_j for this node.
func (b *Balancer) thresholdAt(j int) float64 {
	return b.cfg.Thres * math.Pow(b.cfg.ThresholdDelta, float64(j))
}

// level returns m with load l in (T_m, T_m+1], or lowestThreshold−1 when l is at most the
// lowest threshold.
func (b *Balancer) level(l float64) int {
	if !(l > b.thresholdAt(lowestThreshold)) {
		return lowestThreshold - 1
	}
	f := math.Ceil(math.Log(l/b.cfg.Thres)/math.Log(b.cfg.ThresholdDelta)) - 1
	m := int(max(lowestThreshold, min(f, highestLevel)))
	for m > lowestThreshold && l <= b.thresholdAt(m) { // rounding at a boundary
		m--
	}
	for m < highestLevel && l > b.thresholdAt(m+1) {
		m++
	}
	return m
}

// startThreshold makes the node's first check take its level as newly reached: the loads built
// up while balancing was off.
func (b *Balancer) startThreshold() { b.threshold.sampled = lowestThreshold - 1 }

// thresholdCheck runs on every check: a node at a level where it acts samples once it reached
// that level, and again after a wait that doubles with each sample there that did nothing.
func (b *Balancer) thresholdCheck(now time.Time) {
	t := &b.threshold
	if t.sample != 0 || !b.idle() {
		return
	}
	l := b.load.Load(now)
	m := b.level(l)
	if m-2 < lowestThreshold {
		return
	}
	if m == t.sampled {
		if now.Sub(t.at) < b.cfg.IBInterval<<min(t.fruitless, maxThresholdDoublings) {
			return
		}
	} else {
		t.fruitless = 0
	}
	pred, succ := b.sg.Neighbors(0)
	targets := b.sampleTargets(pred, succ)
	if len(targets) == 0 {
		return
	}
	*t = thresholdState{sample: b.newWave(), waiting: len(targets), sampled: m, at: now,
		fruitless: t.fruitless, pred: pred.ID, succ: succ.ID}
	for _, p := range targets {
		b.Stats.Probes++
		b.send(p.ID, t.sample, &pb.Probe{Load: l})
	}
	// A probe's round trip is two hops; answers later than twice that are not waited for.
	b.env.SetTimer(4*b.cfg.HopTime, overlay.Timer{Kind: timerSample, ID: t.sample})
}

// sampleTargets returns the node's two level-0 neighbours and up to ThresholdSamples other
// random entries of its routing table, each once.
func (b *Balancer) sampleTargets(pred, succ overlay.Peer) []overlay.Peer {
	var targets []overlay.Peer
	chosen := func(id overlay.NodeID) bool {
		for _, p := range targets {
			if p.ID == id {
				return true
			}
		}
		return false
	}
	for _, p := range []overlay.Peer{pred, succ} {
		if !p.IsZero() && p.ID != b.sg.ID() && !chosen(p.ID) {
			targets = append(targets, p)
		}
	}
	for range b.cfg.ThresholdSamples {
		if p := b.randomTableEntry(chosen); !p.IsZero() {
			targets = append(targets, p)
		}
	}
	return targets
}

// onThresholdReply takes in one answer to the node's sample.
func (b *Balancer) onThresholdReply(from overlay.Peer, r *pb.ProbeReply) {
	t := &b.threshold
	t.waiting--
	if r.Idle {
		switch {
		case from.ID == t.pred || from.ID == t.succ:
			if !t.hasLighter || r.Load < t.neighbourL {
				t.neighbour, t.neighbourL, t.hasLighter = from, r.Load, true
			}
		case !t.hasLightest || r.Load < t.lightestL:
			t.lightest, t.lightestL, t.hasLightest = from, r.Load, true
		}
	}
	if t.waiting == 0 {
		b.thresholdDecide()
	}
}

// onSampleTimer decides on the answers that came when some of the sample's did not.
func (b *Balancer) onSampleTimer(wave uint64) {
	if b.threshold.sample == wave && wave != 0 {
		b.thresholdDecide()
	}
}

// thresholdDecide ends a sample: NbrAdjust with the lighter neighbour, or Reorder with the
// lightest other node, or nothing.
func (b *Balancer) thresholdDecide() {
	t := &b.threshold
	t.sample = 0
	t.fruitless++
	if !b.running || !b.idle() {
		return
	}
	l := b.load.Load(b.env.Now())
	m := b.level(l)
	pred, succ := b.sg.Neighbors(0)
	switch {
	case t.hasLighter && t.neighbourL <= b.thresholdAt(m-1) && (t.neighbour.ID == pred.ID || t.neighbour.ID == succ.ID):
		t.fruitless = 0
		wave := b.newWave()
		b.lockFor(wave, roleIB, b.cfg.LockLease())
		b.ibGive(wave, t.neighbour.ID == succ.ID, (l-t.neighbourL)/2)
	case t.hasLightest && t.lightestL <= b.thresholdAt(m-2) && t.lightest.ID != pred.ID && t.lightest.ID != succ.ID:
		t.fruitless = 0
		b.send(t.lightest.ID, b.newWave(), &pb.IBOffer{Heavy: b.sg.Self().ToPB(), HeavyLoad: l, LightLoad: t.lightestL, Step: pb.IBStep_IB_MOVE})
	}
}
