package nixmig

import (
	"testing"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// sentTo lists the balancing messages env recorded to node to, and those carrying op.
func sentTo(env *recordingEnv, to overlay.NodeID, is func(*pb.Balance) bool) []*pb.Balance {
	var out []*pb.Balance
	for _, s := range env.sent {
		if m := s.m.GetBalance(); m != nil && s.to == to && is(m) {
			out = append(out, m)
		}
	}
	return out
}

func isAck(m *pb.Balance) bool        { return m.GetAck() != nil }
func isProbeReply(m *pb.Balance) bool { return m.GetProbeReply() != nil }
func isRelease(m *pb.Balance) bool    { return m.GetRelease() != nil }

// TestNumberedMessagesAcknowledgedAndActedOnOnce: a node that has seen no loss numbers nothing;
// a numbered message is acknowledged every time it arrives and acted on once (another
// incarnation of its sender numbers afresh), and tells the receiver to number its own
// messages of that wave, which it then sends again until acknowledged, at most ackAttempts
// times in all — but not its messages of other waves, until one of its own was acknowledged
// only after it was sent again; and nothing once skipgraph.LossMemory has passed.
func TestNumberedMessagesAcknowledgedAndActedOnOnce(t *testing.T) {
	env, b := loadedNode(t, "r", DefaultConfig(), 10)
	b.send("x", 5, &pb.Release{})
	if m := sentTo(env, "x", isRelease); len(m) != 1 || m[0].Seq != 0 {
		t.Fatalf("before any loss: %v sent, want one unnumbered release", m)
	}

	from := overlay.Peer{ID: "i", Incarnation: 1}
	probe := &pb.Balance{Wave: 3, Seq: 7, Op: &pb.Balance_Probe{Probe: &pb.Probe{Load: 1}}}
	b.Handle(from, probe)
	b.Handle(from, probe)
	acks, replies := sentTo(env, "i", isAck), sentTo(env, "i", isProbeReply)
	if len(acks) != 2 || acks[0].GetAck().Seq != 7 || acks[1].GetAck().Seq != 7 {
		t.Fatalf("a numbered probe twice: acknowledgements %v, want two of 7", acks)
	}
	if len(replies) != 1 {
		t.Fatalf("a numbered probe twice: %d replies, want it acted on once", len(replies))
	}
	b.Handle(overlay.Peer{ID: "i", Incarnation: 2}, probe)
	if replies := sentTo(env, "i", isProbeReply); len(replies) != 2 {
		t.Fatalf("the same number from a new incarnation: %d replies in all, want a second", len(replies))
	}

	seq := replies[0].Seq
	if seq == 0 {
		t.Fatal("after a numbered message came in, the reply is not numbered")
	}
	for range ackAttempts {
		b.onResendTimer(seq)
	}
	var copies int
	for _, m := range sentTo(env, "i", isProbeReply) {
		if m.Seq == seq {
			copies++
		}
	}
	if copies != ackAttempts || b.Stats.Resent != ackAttempts-1 {
		t.Fatalf("an unacknowledged reply went %d times (%d resent), want %d", copies, b.Stats.Resent, ackAttempts)
	}

	b.send("k", 4, &pb.Release{})
	if m := sentTo(env, "k", isRelease); len(m) != 1 || m[0].Seq != 0 {
		t.Fatalf("after a numbered message of another wave: %v sent, want one unnumbered release", m)
	}

	b.send("j", 3, &pb.Release{})
	rel := sentTo(env, "j", isRelease)
	b.onResendTimer(rel[0].Seq)
	b.Handle(overlay.Peer{ID: "j"}, &pb.Balance{Wave: 3, Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: rel[0].Seq}}})
	b.onResendTimer(rel[0].Seq)
	if got := sentTo(env, "j", isRelease); len(got) != 2 || rel[0].Seq == 0 {
		t.Fatalf("a release of a numbered wave acknowledged after one resending went %d times (number %d), want twice, numbered", len(got), rel[0].Seq)
	}
	b.send("k", 4, &pb.Release{})
	if m := sentTo(env, "k", isRelease); len(m) != 2 || m[1].Seq == 0 {
		t.Fatalf("after a message acknowledged only when sent again: %v sent to k, want the second numbered", m)
	}

	env.now = env.now.Add(skipgraph.LossMemory + 1)
	b.send("y", 6, &pb.Release{})
	if m := sentTo(env, "y", isRelease); len(m) != 1 || m[0].Seq != 0 {
		t.Fatalf("long after the last loss: %v sent, want one unnumbered release", m)
	}
}

// TestInvalidAcknowledgementRejected: an acknowledgement must name a message and not be numbered.
func TestInvalidAcknowledgementRejected(t *testing.T) {
	for _, m := range []*pb.Balance{
		{Wave: 1, Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{}}},
		{Wave: 1, Op: &pb.Balance_Ack{}},
		{Wave: 1, Seq: 2, Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: 3}}},
	} {
		if Validate(m) == nil {
			t.Errorf("%v accepted", m)
		}
	}
	if err := Validate(&pb.Balance{Wave: 1, Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: 3}}}); err != nil {
		t.Errorf("a valid acknowledgement rejected: %v", err)
	}
}
