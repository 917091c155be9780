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
// that has seen messages lost lately (skipgraph's LossSeen: a neighbour whose ping went
// unanswered answered one again) numbers each balancing message it sends and sends it again
// every AckTimeout until the receiver acknowledges it, at most ackAttempts times in all; the
// receiver acknowledges every numbered message and acts on each one once. A sender whose message
// was acknowledged only after it was sent again has seen a loss too, and numbers from then on.
// A receiver that has seen no loss itself numbers only its messages of the waves in which
// numbered messages reached it: the rest of such a wave crosses the same lossy links, but a
// node that numbered everything it sent after hearing a number made its neighbours number
// everything too, and Item Balancing's steady probing (every node every 10 s) kept the whole
// network numbering for ever after one loss. A node that has never seen a loss sends no
// numbers and asks for no acknowledgements: on a network that loses nothing, balancing costs
// not one message more.

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
	// resentAcked is when a message sent more than once was last acknowledged.
	resentAcked time.Time
	// numberedWaves holds the waves in which a numbered message came in, and when the last did.
	numberedWaves map[uint64]time.Time
}

// acking reports whether this node numbers its messages of wave now: it saw a loss within
// skipgraph.LossMemory, or a numbered message of the wave came in within it.
func (b *Balancer) acking(now time.Time, wave uint64) bool {
	seen := b.sg.LossSeen()
	if b.reliable.resentAcked.After(seen) {
		seen = b.reliable.resentAcked
	}
	if heard, ok := b.reliable.numberedWaves[wave]; ok && heard.After(seen) {
		seen = heard
	}
	return !seen.IsZero() && now.Sub(seen) < skipgraph.LossMemory
}

// number gives m a sequence number and keeps a copy to send again until it is acknowledged.
func (b *Balancer) number(to overlay.NodeID, m *pb.Balance) {
	r := &b.reliable
	r.nextSeq++
	b.Stats.Numbered++
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
				r.resentAcked = b.env.Now()
			}
			delete(r.outstanding, ack.Ack.Seq)
		}
		return false
	}
	if m.Seq == 0 {
		return true
	}
	r.numberedWaves[m.Wave] = b.env.Now()
	b.sg.Send(from.ID, &pb.Envelope{Body: &pb.Envelope_Balance{Balance: &pb.Balance{Wave: m.Wave,
		Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: m.Seq}}}}}, pb.Cause_CAUSE_BALANCE)
	k := seenKey{from.ID, from.Incarnation, m.Seq}
	if _, dup := r.seen[k]; dup {
		return false
	}
	r.seen[k] = b.env.Now()
	return true
}

// forgetSeen drops the numbered messages received longer ago than seenFor, and the waves whose
// last numbered message came in longer ago than skipgraph.LossMemory.
func (b *Balancer) forgetSeen(now time.Time) {
	for k, at := range b.reliable.seen {
		if now.Sub(at) > seenFor {
			delete(b.reliable.seen, k)
		}
	}
	for wave, at := range b.reliable.numberedWaves {
		if now.Sub(at) >= skipgraph.LossMemory {
			delete(b.reliable.numberedWaves, wave)
		}
	}
}
