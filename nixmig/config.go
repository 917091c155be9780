package nixmig

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Algorithm names the balancing decision logic (SPEC §6, §10).
type Algorithm uint8

const (
	// None: loads are tracked, nothing is balanced.
	None Algorithm = iota
	// NIXMIG: local wave, remote wave, NIX chain and MIG phase.
	NIXMIG
	// NIXOnly: local wave and NIX chain, never a remote wave.
	NIXOnly
	// MIGOnly: no local wave; a remote wave sized from the initiator's load and a MIG chain.
	MIGOnly
	// ItemBalancing: Karger and Ruhl's item balancing (thesis §4.6.2).
	ItemBalancing
	// Threshold: Ganesan, Bawa and Garcia-Molina's threshold algorithm (VLDB 2004; with δ the
	// golden ratio, their Fibbing algorithm), an optional baseline of SPEC §10 (threshold.go).
	Threshold
)

var algorithmNames = [...]string{"none", "nixmig", "nix", "mig", "ib", "threshold"}

func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", a)
}

// ParseAlgorithm reads an algorithm name: none, nixmig, nix, mig, ib or threshold.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, name := range algorithmNames {
		if s == name {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", s, strings.Join(algorithmNames[:], ", "))
}

// Placement is how SmartRNP picks the side of the target a migrant joins (SPEC §7.2).
type Placement uint8

const (
	// PlaceSmart: the side whose piece carrying the load has fewer keys.
	PlaceSmart Placement = iota
	// PlaceRandom: a coin toss.
	PlaceRandom
	// PlaceAdversarial: the side with more keys (an experiment's worst case).
	PlaceAdversarial
)

// Config holds a node's balancing parameters (SPEC §9). Times are in the runtime's clock: one
// hop is one second in the simulator.
type Config struct {
	Algorithm Algorithm
	// Thres: the node is overloaded when its load exceeds it. OverThres: above it only the
	// share A of the excess moves in one NIX. TTL: most nodes a local wave reserves — where
	// waves grow (TTLMax), the ttl a node's waves start with.
	Thres, OverThres, A float64
	TTL                 int
	// TTLMax: the largest ttl a node's waves grow to. Each wave that ran out of reach — it
	// reserved all its ttl allows, its last node still over keep — doubles the ttl of the
	// node's next wave that way, up to TTLMax; each that ended within reach halves it again,
	// down to TTL (our rule: JOURNAL.md, "A wave's reach grows where it runs out"). At or under
	// TTL (0, say): a fixed ttl, the thesis's rule (which ran ttl 5).
	TTLMax int
	// Headroom is the share of Thres the nodes of a wave try to keep free: a node that would
	// end the NIX chain above Keep = (1−Headroom)·Thres passes the excess on if the wave can
	// go on, and every NIX moves a node down to Keep. A wave still ends at a node that stays at
	// or under Thres, and only a node above Thres starts one; but an end node above Keep uses
	// the migrants its remote wave found, and only a node under Keep offers itself as M (in
	// its hints and when asked), since one between Keep and Thres has no room to give. Without
	// it (0, the thesis's rule) the NIX chain fills nodes to just under thres, where the noise
	// of the measured load keeps pushing some of them over again. A node whose keys are heavy
	// next to the headroom keeps none (Balancer.keepAt).
	Headroom float64
	// Settle: a node at the line — under Thres but within half the headroom of it — sends its
	// load over Keep on in a settling wave, which reaches up to TTLMax nodes — twice as far
	// after one that ran out of reach (settleTTL) — and ends only at a node with room (our
	// rule; off in Faithful, and nothing to do without headroom).
	Settle bool
	// Window and Slots: the load tracker's sliding window and its resolution.
	Window time.Duration
	Slots  int
	// CheckInterval: how often an idle node compares its load with Thres.
	CheckInterval time.Duration
	// Lease: the shortest time a lock holds without renewal (SPEC §3); LockLease lengthens it
	// for long waves.
	Lease time.Duration
	// HopTime: one back-off slot (SPEC §6.5).
	HopTime time.Duration
	// SmartUNL: look for underloaded nodes in the hint cache before probing; otherwise probe
	// only. UNLHints: hints per routed message; UNLCache: hints a node keeps.
	SmartUNL bool
	UNLHints int
	UNLCache int
	// MaxProbes bounds the random probes of one search for an underloaded node.
	MaxProbes int
	// Placement: SmartRNP's side choice.
	Placement Placement
	// FaithfulMoved: the local wave plans with each node's bare excess as in the thesis (SPEC
	// §6.1), instead of the load of the whole keys the node will hand on, which can exceed it by
	// up to one key's load.
	FaithfulMoved bool
	// FaithfulExNodes: exNodes = ⌊tmpL/thres − 1⌋ as in the thesis, instead of ⌈tmpL/fill⌉ − 1
	// with fill the load of a node holding this node's keys packed whole under Keep.
	// FaithfulMigShare: each migrant takes tmpL_E/rNodes instead of L_E/(rNodes+1), and its
	// piece is not capped at Keep.
	FaithfulExNodes  bool
	FaithfulMigShare bool
	// FaithfulRemote: a candidate M that reserves no migrant ends the exam and the NIX phase
	// runs (SPEC §6.2), instead of M being released and the next candidate asked.
	FaithfulRemote bool
	// FaithfulPhases: the end node starts the NIX chain only when its remote wave is over (SPEC
	// §6: exam, then NIX phase, then MIG phase), instead of alongside it; the MIG phase waits
	// for both either way.
	FaithfulPhases bool
	// FaithfulMigrants: any idle node light enough migrates, whatever it stores, and candidates
	// for M are ranked by load alone, as in the thesis. Ours: a node migrates onto M only if it
	// stores at most migrantSizeRatio (4) times the items of M and the migrants reserved before
	// it, and among candidates equally light the one whose successor (the first migrant) stores
	// fewer items is asked first. A migrant hands its whole range to M, so without the rule a
	// node that took in earlier migrants' ranges could be sent away with all of them, and a
	// large cold range rolled on from node to node; with it, each time an item moves in a leave
	// its new holder is at least 1.25 times as large as its old one. Ours also has split leaves:
	// a node M cannot take whole may migrate if its successor takes the top of its range first
	// (onAbsorb), and that absorber may take the next migrants' ranges in turn; with
	// FaithfulMigrants a migrant leaves its whole range to M.
	FaithfulMigrants bool
	// FaithfulChain: the NIX chain runs one member after another (SPEC §6.3), each giving once
	// its piece is in, and a local wave reserves at most ttl nodes. Ours: when every member
	// before the end node can hand on its planned piece from its own keys (a lump of a key or
	// two moving along a packed region), the end node tells every other member to give at once,
	// and each of the others gives as soon as its piece is in: the chain takes two handoff times
	// whatever its length, not one a member, and such a wave may reserve up to shiftReach·ttl
	// nodes; and a node whose last wave that way brought no migrants sends a lump on in pieces
	// every full member can give first (shiftablePiece); and a wave started under overThres
	// ends before a node clearly over thres itself, the node before it seeking migrants for its
	// own excess (endsBeforeOverloaded).
	FaithfulChain bool
	// FaithfulBackoff: a side's back-off after failed waves runs its time out (SPEC §6.5).
	// Ours: it ends, its failures forgotten, once the neighbour that way is no longer the one
	// the failed waves met (Balancer.backedOff), or once the neighbour that refused the last of
	// them says it is free (Balancer.wakeRefused).
	FaithfulBackoff bool
	// IBInterval and IBEpsilon: Item Balancing's probe period and lightness ratio. IBInterval is
	// also how long the threshold algorithm waits before sampling again at a level where its
	// last sample found nothing to do.
	IBInterval time.Duration
	IBEpsilon  float64
	// ThresholdDelta and ThresholdSamples: the threshold algorithm's ratio between successive
	// load thresholds (the golden ratio: Fibbing) and how many random routing-table entries it
	// samples, besides its two neighbours, for the least loaded node.
	ThresholdDelta   float64
	ThresholdSamples int
	// DirectionHalfLife: the half-life of the per-side averages of lock requests received.
	DirectionHalfLife time.Duration
}

// DefaultConfig returns the thesis's experiment parameters (SPEC §9) with our defaults where
// SPEC names a faithful variant.
func DefaultConfig() Config {
	return Config{
		Algorithm:         NIXMIG,
		Thres:             60,
		OverThres:         400,
		A:                 0.5,
		TTL:               3,
		TTLMax:            12,
		Headroom:          0.05,
		Settle:            true,
		Window:            700 * time.Second,
		Slots:             14,
		CheckInterval:     time.Second,
		Lease:             40 * time.Second,
		HopTime:           time.Second,
		SmartUNL:          true,
		UNLHints:          5,
		UNLCache:          32,
		MaxProbes:         10,
		Placement:         PlaceSmart,
		IBInterval:        10 * time.Second,
		IBEpsilon:         0.25,
		ThresholdDelta:    (1 + math.Sqrt(5)) / 2,
		ThresholdSamples:  4,
		DirectionHalfLife: 60 * time.Second,
	}
}

// AckTimeout is how long a numbered balancing message waits for its acknowledgement before it
// is sent again (reliable.go): three hop times, one round trip and one to spare.
func (c Config) AckTimeout() time.Duration { return 3 * c.HopTime }

// LockLease is how long a lock holds without renewal. SPEC §3: 4·ttl hop times for the locking
// plus the expected transfer time — about 4 hop times per NIX of the chain, so 8·ttl hop times in
// all — and never less than Lease, which also covers the remote wave's probes and candidates.
// A fixed lease made waves longer than ttl 5 lose their first members' locks before the NIX
// chain reached them (at ttl 10 the 5% pulse took twice as long with 40 s as with 80 s).
// This is the lease of a wave of ttl TTL, and of every lock but a longer wave's (waveLease).
func (c Config) LockLease() time.Duration { return c.waveLease(c.TTL) }

// waveLease is the lease of the locks of a local wave of the given ttl. Only a wave that grew
// (TTLMax) gets more than LockLease: a lock left behind by a crash holds no longer than the
// wave it belonged to needed (the 5% crash of the faults table took 455 s instead of 320 with
// every lease sized for the longest wave).
func (c Config) waveLease(ttl int) time.Duration {
	return max(c.Lease, time.Duration(8*ttl)*c.HopTime)
}

// LongestHold bounds how long any lock is held without renewal: MaxLeaseFactor leases, or the
// lease of the longest wave a node may start.
func (c Config) LongestHold() time.Duration {
	return max(MaxLeaseFactor*c.LockLease(), c.waveLease(c.longestTTL()))
}

// maxTTL is the longest ttl a node's waves grow to.
func (c Config) maxTTL() int { return max(c.TTL, c.TTLMax) }

// settleTTL is the ttl of a settling wave after one that way ran out of reach: twice maxTTL.
// In the packed region of the 10% pulse at 5,000 nodes, the nodes left at the line once every
// node got under thres — five a run, the ones that flicker over it — had their nearest room (a
// node that stays under keep with one more key) 13 to 19 nodes away, beyond maxTTL (JOURNAL.md,
// "Settling waves reach twice as far where they ran out"). Every settling wave reaching that
// far made runs with pauses slower, holding long leases over more nodes.
func (c Config) settleTTL() int { return min(2*c.maxTTL(), MaxTTL) }

// longestTTL is the longest ttl any wave of this node may have: it bounds the ttl a lock
// request may ask for, and so every lease.
func (c Config) longestTTL() int {
	if c.Settle {
		return c.settleTTL()
	}
	return c.maxTTL()
}

// Faithful returns c with the thesis's literal rules wherever ours differ: no headroom, waves
// planned with bare excesses, its exNodes and migrant-share formulas, an exam that ends at the
// first candidate M that accepts, a NIX phase that follows the exam and runs one member after
// another, any light node a migrant whatever it stores and leaving its whole range to M, and
// back-offs that run their time out.
func (c Config) Faithful() Config {
	c.Headroom, c.Settle, c.TTLMax = 0, false, 0
	c.FaithfulMoved, c.FaithfulExNodes, c.FaithfulMigShare, c.FaithfulRemote = true, true, true, true
	c.FaithfulPhases, c.FaithfulMigrants, c.FaithfulChain, c.FaithfulBackoff = true, true, true, true
	return c
}

// Keep is the load the nodes of a wave try to stay under: Thres less the headroom (where their
// keys are light: Balancer.keepAt).
func (c Config) Keep() float64 { return c.KeepFor(c.Thres) }

// KeepFor is keep for a node of the given thres: the headroom is the network's, thresholds may
// differ from node to node.
func (c Config) KeepFor(thres float64) float64 { return thres * (1 - c.Headroom) }

// Validate reports the first unusable parameter.
func (c Config) Validate() error {
	switch {
	case c.Algorithm > Threshold:
		return fmt.Errorf("unknown algorithm %d", c.Algorithm)
	case !(c.Thres > 0):
		return fmt.Errorf("thres must be positive, got %v", c.Thres)
	case !(c.OverThres > c.Thres):
		return fmt.Errorf("overThres (%v) must exceed thres (%v)", c.OverThres, c.Thres)
	case !(c.A > 0 && c.A <= 1):
		return fmt.Errorf("a must lie in (0, 1], got %v", c.A)
	case !(c.Headroom >= 0 && c.Headroom < 1):
		return fmt.Errorf("headroom must lie in [0, 1), got %v", c.Headroom)
	case c.TTL < 1 || c.TTL > MaxTTL:
		return fmt.Errorf("ttl must lie in [1, %d], got %d", MaxTTL, c.TTL)
	case c.TTLMax < 0 || c.TTLMax > MaxTTL:
		return fmt.Errorf("the largest ttl must lie in [0, %d], got %d", MaxTTL, c.TTLMax)
	case c.Window <= 0 || c.Slots < 1 || c.Window/time.Duration(c.Slots) <= 0:
		return fmt.Errorf("load window %v with %d slots is unusable", c.Window, c.Slots)
	case c.CheckInterval <= 0 || c.Lease <= 0 || c.HopTime <= 0 || c.IBInterval <= 0 || c.DirectionHalfLife <= 0:
		return fmt.Errorf("check interval, lease, hop time, IB interval and direction half-life must be positive")
	case c.UNLHints < 0 || c.UNLCache < 0 || c.MaxProbes < 0:
		return fmt.Errorf("UNL hints, cache size and probes must not be negative")
	case c.Placement > PlaceAdversarial:
		return fmt.Errorf("unknown placement %d", c.Placement)
	case !(c.IBEpsilon > 0 && c.IBEpsilon < 1):
		return fmt.Errorf("IB epsilon must lie in (0, 1), got %v", c.IBEpsilon)
	case !(c.ThresholdDelta > 1 && c.ThresholdDelta <= MaxThresholdDelta):
		return fmt.Errorf("threshold delta must lie in (1, %d], got %v", MaxThresholdDelta, c.ThresholdDelta)
	case c.ThresholdSamples < 0 || c.ThresholdSamples > MaxThresholdSamples:
		return fmt.Errorf("threshold samples must lie in [0, %d], got %d", MaxThresholdSamples, c.ThresholdSamples)
	}
	return nil
}
