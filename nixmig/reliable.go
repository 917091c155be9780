package nixmig

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
	"google.golang.org/protobuf/proto"
)

// Acknowledged balancing messages on a lossy network.
//
// A wave is a few dozen messages in a row (lock requests, NIX turns, the remote wave, migration
// orders and their reports, releases); one lost message leaves its nodes locked until their
// leases run out (40 s and more) and the initiator backing off. Under 1% loss that made
// balancing twice as slow, and under 5% most waves failed and balancing never ended. So a node
// that has seen messages lost lately (skipgraph's LossSeen: a neighbour whose pings went
// unanswered was heard from again) numbers each balancing message it sends and sends it again
// every AckTimeout until the receiver acknowledges it, at most ackAttempts times in all; the
// receiver acknowledges every numbered message and acts on each one once, and numbers its own
// from then on too (a numbered message says that its sender saw losses), as does a sender whose
// message was acknowledged only after it was sent again. A node that has never seen a loss
// sends no numbers and asks for no acknowledgements: on a network that loses nothing,
// balancing costs not one message more.

// ackAttempts is how often a numbered message is sent at most: under 5% loss each way, all four
// attempts fail with a chance of 1 in 10,000.
const ackAttempts = 4

// seenFor is how long a receiver remembers a numbered message: well past its last resending in
// the simulator (AckTimeout 3 s) and on real nodes (150 ms), whatever the network's delays.
const seenFor = 2 * ackAttempts * 3 * time.Second

// outstanding is a numbered message not yet acknowledged.
type outstanding struct {
	to       overlay.NodeID
	msg      *pb.Balance // a copy kept apart from what the network delivers
	attempts int
}

// seenKey names a numbered message: its sender's incarnation numbers from 1 again.
type seenKey struct {
	from        overlay.NodeID
	incarnation uint64
	seq         uint64
}

type reliableState struct {
	nextSeq     uint64
	outstanding map[uint64]*outstanding
	// seen holds the numbered messages received lately (in time units of the node's clock) so
	// that a message sent again after its acknowledgement was lost is not acted on twice.
	seen map[seenKey]time.Time
	// lossHeard is when a numbered message last came in, or an acknowledgement of a message
	// sent more than once.
	lossHeard time.Time
}

// acking reports whether this node numbers its messages now: it saw a loss, or heard of one,
// within skipgraph.LossMemory.
func (b *Balancer) acking(now time.Time) bool {
	seen := b.sg.LossSeen()
	if b.reliable.lossHeard.After(seen) {
		seen = b.reliable.lossHeard
	}
	return !seen.IsZero() && now.Sub(seen) < skipgraph.LossMemory
}

// number gives m a sequence number and keeps a copy to send again until it is acknowledged.
func (b *Balancer) number(to overlay.NodeID, m *pb.Balance) {
	r := &b.reliable
	r.nextSeq++
	m.Seq = r.nextSeq
	r.outstanding[m.Seq] = &outstanding{to: to, msg: proto.CloneOf(m), attempts: 1}
	b.env.SetTimer(b.cfg.AckTimeout(), overlay.Timer{Kind: timerResend, ID: m.Seq})
}

// onResendTimer sends an unacknowledged message again, or gives it up after ackAttempts: the
// leases of the wave's locks then end it as they did before.
func (b *Balancer) onResendTimer(seq uint64) {
	o := b.reliable.outstanding[seq]
	if o == nil {
		return
	}
	if o.attempts >= ackAttempts {
		delete(b.reliable.outstanding, seq)
		return
	}
	o.attempts++
	b.Stats.Resent++
	b.sg.Send(o.to, &pb.Envelope{Body: &pb.Envelope_Balance{Balance: proto.CloneOf(o.msg)}}, pb.Cause_CAUSE_BALANCE)
	b.env.SetTimer(b.cfg.AckTimeout(), overlay.Timer{Kind: timerResend, ID: seq})
}

// received acknowledges a numbered message and reports whether it is new; an acknowledgement
// ends the resending of the message it names, and is not new.
func (b *Balancer) received(from overlay.Peer, m *pb.Balance) bool {
	r := &b.reliable
	if ack, ok := m.Op.(*pb.Balance_Ack); ok {
		if o := r.outstanding[ack.Ack.Seq]; o != nil {
			if o.attempts > 1 {
				r.lossHeard = b.env.Now()
			}
			delete(r.outstanding, ack.Ack.Seq)
		}
		return false
	}
	if m.Seq == 0 {
		return true
	}
	r.lossHeard = b.env.Now()
	b.sg.Send(from.ID, &pb.Envelope{Body: &pb.Envelope_Balance{Balance: &pb.Balance{Wave: m.Wave,
		Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: m.Seq}}}}}, pb.Cause_CAUSE_BALANCE)
	k := seenKey{from.ID, from.Incarnation, m.Seq}
	if _, dup := r.seen[k]; dup {
		return false
	}
	r.seen[k] = b.env.Now()
	return true
}

// forgetSeen drops the numbered messages received longer ago than seenFor.
func (b *Balancer) forgetSeen(now time.Time) {
	for k, at := range b.reliable.seen {
		if now.Sub(at) > seenFor {
			delete(b.reliable.seen, k)
		}
	}
}
