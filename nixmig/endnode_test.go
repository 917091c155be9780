package nixmig

import (
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// recordingEnv is an overlay.Env that keeps what a node sends and drops its timers.
type recordingEnv struct {
	now  time.Time
	rng  *rand.Rand
	sent []sentEnvelope
}

type sentEnvelope struct {
	to overlay.NodeID
	m  *pb.Envelope
}

func (e *recordingEnv) Now() time.Time { return e.now }
func (e *recordingEnv) Send(to overlay.NodeID, m *pb.Envelope) {
	e.sent = append(e.sent, sentEnvelope{to, m})
}
func (e *recordingEnv) SetTimer(time.Duration, overlay.Timer) {}
func (e *recordingEnv) Rand() *rand.Rand                      { return e.rng }
func (e *recordingEnv) Logger() *zap.Logger                   { return zap.NewNop() }
func (e *recordingEnv) Complete(overlay.Result)               {}
func (e *recordingEnv) Report(overlay.Event)                  {}

// balanceOps lists, in order, the nodes sent a remote lock and the nodes sent a release.
func (e *recordingEnv) balanceOps() (locks, releases []overlay.NodeID) {
	for _, s := range e.sent {
		b := s.m.GetBalance()
		switch {
		case b == nil:
		case b.GetRemoteLock() != nil:
			locks = append(locks, s.to)
		case b.GetRelease() != nil:
			releases = append(releases, s.to)
		}
	}
	return locks, releases
}

// endNode returns a one-node network's balancer, locked by wave 7 as the only member of its
// chain, with two hints in its cache: light (5/s) and next (10/s).
func endNode(t *testing.T, cfg Config) (*recordingEnv, *Balancer) {
	t.Helper()
	env := &recordingEnv{now: time.Unix(1000, 0), rng: rand.New(rand.NewPCG(1, 2))}
	sg, err := skipgraph.New(env, store.NewMemory(), "e", skipgraph.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := sg.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	b, err := New(env, sg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := env.now.UnixNano()
	b.unl.add(&pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}, 5, 60, at)
	b.unl.add(&pb.NodeRef{Id: []byte("next"), Start: []byte("k2")}, 10, 60, at)
	b.lockFor(7, roleChain, cfg.LockLease())
	return env, b
}

// TestEndNodeAsksNextCandidateWhenMGivesNoMigrant: the first candidate M accepts but its
// successor is too heavy to leave its range to M, so no migrant comes. The end node releases M
// and asks the next candidate of its hint cache instead of giving up the remote wave (before,
// it started its NIX chain and passed its lump on; FaithfulRemote keeps that rule).
func TestEndNodeAsksNextCandidateWhenMGivesNoMigrant(t *testing.T) {
	const wave = 7
	env, b := endNode(t, DefaultConfig())
	b.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b.sg.Self()}, 160, 3)
	if locks, _ := env.balanceOps(); len(locks) != 1 || locks[0] != "light" {
		t.Fatalf("first remote locks %v, want the least loaded hint, light", locks)
	}
	b.onRemoteReply(wave, &pb.RemoteReply{M: &pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}})
	locks, releases := env.balanceOps()
	if len(releases) != 1 || releases[0] != "light" {
		t.Errorf("releases %v, want light released", releases)
	}
	if len(locks) != 2 || locks[1] != "next" {
		t.Errorf("remote locks %v, want the next candidate asked after light gave no migrant", locks)
	}
	if b.end == nil || b.end.migrants != nil {
		t.Errorf("the remote wave ended: end state %+v", b.end)
	}

	// The thesis's rule (SPEC §6.2): rNodes = 0 skips the MIG phase and the NIX phase runs.
	faithful := DefaultConfig()
	faithful.FaithfulRemote = true
	env2, b2 := endNode(t, faithful)
	b2.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{b2.sg.Self()}, 160, 3)
	b2.onRemoteReply(wave, &pb.RemoteReply{M: &pb.NodeRef{Id: []byte("light"), Start: []byte("k1")}})
	if locks, _ := env2.balanceOps(); len(locks) != 1 {
		t.Errorf("faithful: remote locks %v, want light only", locks)
	}
}

// count returns how many balancing messages of the kind has picks were sent.
func (e *recordingEnv) count(has func(*pb.Balance) bool) int {
	n := 0
	for _, s := range e.sent {
		if b := s.m.GetBalance(); b != nil && has(b) {
			n++
		}
	}
	return n
}

func isNixTurn(b *pb.Balance) bool  { return b.GetNixTurn() != nil }
func isWaveDone(b *pb.Balance) bool { return b.GetWaveDone() != nil }

// TestEndNodeRunsNIXChainAlongsideRemoteWave: the end node starts the NIX chain at once, while
// its remote wave looks for migrants, and the MIG phase (here: the wave's end, as no migrant is
// found) waits for both. FaithfulPhases starts the chain only when the remote wave is over.
func TestEndNodeRunsNIXChainAlongsideRemoteWave(t *testing.T) {
	const wave = 7
	p := overlay.Peer{ID: "p", Start: "k0"} // the initiator, this end node's neighbour
	env, b := endNode(t, DefaultConfig())
	chain := []overlay.Peer{p, b.sg.Self()}
	b.beginEnd(wave, pb.Side_SIDE_SUCC, chain, 160, 3)
	if locks, _ := env.balanceOps(); len(locks) != 1 || env.count(isNixTurn) != 1 {
		t.Fatalf("after the exam: remote locks %v, NIX turns %d; want one of each", locks, env.count(isNixTurn))
	}
	// The chain reaches this node while the remote wave is still under way.
	b.onNixTurn(wave, &pb.NixTurn{Dir: pb.Side_SIDE_SUCC, Chain: overlay.PeersToPB(chain), Index: 1})
	if env.count(isWaveDone) != 0 || b.end == nil {
		t.Fatal("the wave ended while its remote wave was still under way")
	}
	b.onRemoteReply(wave, &pb.RemoteReply{}) // light refuses: next is asked
	b.onRemoteReply(wave, &pb.RemoteReply{}) // next refuses; no hint or table entry is left
	if env.count(isWaveDone) != 1 || b.end != nil {
		t.Fatalf("after the remote wave: wave done sent %d times, end state %+v", env.count(isWaveDone), b.end)
	}

	faithful := DefaultConfig()
	faithful.FaithfulPhases = true
	env2, b2 := endNode(t, faithful)
	b2.beginEnd(wave, pb.Side_SIDE_SUCC, []overlay.Peer{p, b2.sg.Self()}, 160, 3)
	if env2.count(isNixTurn) != 0 {
		t.Fatal("FaithfulPhases: the NIX chain started during the remote wave")
	}
	b2.onRemoteReply(wave, &pb.RemoteReply{})
	b2.onRemoteReply(wave, &pb.RemoteReply{})
	if env2.count(isNixTurn) != 1 {
		t.Fatalf("FaithfulPhases: NIX turns %d after the remote wave, want 1", env2.count(isNixTurn))
	}
}
