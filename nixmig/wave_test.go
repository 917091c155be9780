package nixmig

import (
	"testing"

	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// TestLockRefusedByOverloadedNode: a node more than clearlyOverloaded times over thres refuses a
// local wave that asks to end before overloaded nodes, saying why; under that margin, or asked
// without the flag, it joins the wave as before.
func TestLockRefusedByOverloadedNode(t *testing.T) {
	const wave = 9
	from := overlay.Peer{ID: "i"}
	request := func(flag bool) *pb.LockRequest {
		return &pb.LockRequest{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{{Id: []byte("i"), Start: []byte("k0")}}, TmpLoad: 100, Moved: 30, EndBeforeOverloaded: flag}
	}
	refused := func(env *recordingEnv) bool {
		for _, s := range env.sent {
			if r := s.m.GetBalance().GetLockRefused(); r != nil && r.Overloaded && s.to == "i" {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		load float64
		flag bool
		want bool
	}{{100, true, true}, {100, false, false}, {65, true, false}} {
		env, b := loadedNode(t, "r", DefaultConfig(), c.load)
		b.onLockRequest(from, wave, request(c.flag))
		if got := refused(env); got != c.want {
			t.Errorf("load %v, end_before_overloaded %v: refused %v, want %v", c.load, c.flag, got, c.want)
		}
		if joined := b.lock.wave == wave; joined == c.want {
			t.Errorf("load %v, end_before_overloaded %v: locked by the wave %v", c.load, c.flag, joined)
		}
	}
}

// TestInitiatorRefusedByOverloadedNeighbourSeeksMigrants: an initiator whose first neighbour
// refused as overloaded becomes its own end node and asks its hint cache for migrants; refused
// for being busy it backs off as before.
func TestInitiatorRefusedByOverloadedNeighbourSeeksMigrants(t *testing.T) {
	const wave = 7
	for _, overloaded := range []bool{true, false} {
		env, b := endNode(t, DefaultConfig()) // locked by wave 7, hints light and next
		b.initiated[wave] = pb.Side_SIDE_SUCC
		b.lock.dir, b.lock.chain, b.lock.tmpL = pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 100
		b.onLockRefused(wave, &pb.LockRefused{Reason: "test", Overloaded: overloaded})
		locks, _ := env.balanceOps()
		if overloaded && (b.end == nil || len(locks) != 1 || locks[0] != "light") {
			t.Errorf("refused as overloaded: end state %+v, remote locks %v; want the initiator as end node asking light", b.end, locks)
		}
		if !overloaded && (b.end != nil || len(locks) != 0 || b.Stats.WavesFailed != 1) {
			t.Errorf("refused as busy: end state %+v, remote locks %v, %d waves failed; want the wave failed", b.end, locks, b.Stats.WavesFailed)
		}
	}
}

// TestEndsBeforeOverloadedOnlyWithOurChain: the rule is NIXMIG's, under overThres, and off in
// FaithfulChain and the baselines.
func TestEndsBeforeOverloadedOnlyWithOurChain(t *testing.T) {
	faithful, nixOnly := DefaultConfig(), DefaultConfig()
	faithful.FaithfulChain = true
	nixOnly.Algorithm = NIXOnly
	for _, c := range []struct {
		name string
		cfg  Config
		load float64
		want bool
	}{{"ours", DefaultConfig(), 100, true}, {"ours over overThres", DefaultConfig(), 500, false}, {"faithful chain", faithful, 100, false}, {"NIX only", nixOnly, 100, false}} {
		_, b := loneNode(t, "n", store.NewMemory(), c.cfg)
		if got := b.endsBeforeOverloaded(c.load); got != c.want {
			t.Errorf("%s at %v: %v, want %v", c.name, c.load, got, c.want)
		}
	}
}
