package sim

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// FuzzBalanceMessage delivers an arbitrary balancing message, under a real node's identity, to a
// node of a small network whose balancers are busy with a hot spot, and a second one (unless
// empty) a second later the other way. Whatever the messages say
// — a lock for a wave nobody started, a migration order from a node that is no end node, a remote
// reply naming strangers, a NIX turn out of order — no node may panic, and once the balancers
// stop and the leases run out every invariant holds, every item is where it belongs exactly once
// and no lock is left. pick chooses the sender, the receiver, when the first message arrives (in
// the first half minute after busyBalancers returns), and whether each names the wave its
// receiver is locked for then (a stranger's number is ignored by most handlers at once).
func FuzzBalanceMessage(f *testing.F) {
	ref := func(id string) *pb.NodeRef {
		return &pb.NodeRef{Id: []byte(id), Start: overlay.Uint64Key(15).WireBytes(), Mvec: uint64(overlay.MVecFor(overlay.NodeID(id)))}
	}
	seeds := []*pb.Balance{
		{Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{ref("n00000")}, TmpLoad: 200, Moved: 90, Ttl: 63}}},
		{Wave: 1, Op: &pb.Balance_LockRefused{LockRefused: &pb.LockRefused{Overloaded: true}}},
		{Wave: 1, Op: &pb.Balance_Release{Release: &pb.Release{Abort: true}}},
		{Wave: 1, Op: &pb.Balance_LockFree{LockFree: &pb.LockFree{}}},
		{Wave: 1, Op: &pb.Balance_NixTurn{NixTurn: &pb.NixTurn{Index: 1, Chain: []*pb.NodeRef{ref("n00000"), ref("n00001")}}}},
		{Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("n00000"), Want: 3}}},
		{Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("n00000"), Want: 3, M: ref("n00002"), Migrants: []*pb.NodeRef{ref("n00003")}, Absorb: true, AccLoad: 80, MThres: 57}}},
		{Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("n00002"), Migrants: []*pb.NodeRef{ref("n00003"), ref("n00004")},
			Splits: []*pb.SplitPlan{{Migrant: 1, Absorber: ref("n00005"), GiveUp: 10, GiveUpMax: 20}}}}},
		{Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Target: ref("n00000"), Split: overlay.Uint64Key(7).WireBytes(), Below: true}}},
		{Wave: 1, Op: &pb.Balance_MigDone{MigDone: &pb.MigDone{Left: true}}},
		{Wave: 1, Op: &pb.Balance_WaveDone{WaveDone: &pb.WaveDone{Ok: true, Dir: pb.Side_SIDE_PRED, Migrations: 2, OutOfReach: true}}},
		{Wave: 1, Op: &pb.Balance_Probe{Probe: &pb.Probe{Load: 100}}},
		{Wave: 1, Op: &pb.Balance_ProbeReply{ProbeReply: &pb.ProbeReply{Load: 1, Thres: 60, Idle: true, Next: ref("n00004")}}},
		{Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{}}},
		{Wave: 1, Seq: 7, Op: &pb.Balance_Ack{Ack: &pb.BalanceAck{Seq: 7}}},
	}
	for i, m := range seeds {
		first, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		second, err := proto.Marshal(seeds[(i+1)%len(seeds)])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(first, second, uint8(i*37))
	}
	f.Fuzz(func(t *testing.T, first, second []byte, pick uint8) {
		m, reply := &pb.Balance{}, &pb.Balance{}
		if proto.Unmarshal(first, m) != nil || proto.Unmarshal(second, reply) != nil {
			t.Skip()
		}
		h := busyBalancers(t)
		nodes := h.Net.order
		from, to := nodes[int(pick)%len(nodes)], nodes[int(pick/8)%len(nodes)]
		deliver := func(m *pb.Balance, from, to *simNode) {
			if pick&0x80 != 0 {
				if wave, ok := to.node.Balancer.Locked(); ok {
					m.Wave = wave
				}
			}
			to.node.Handle(from.id, &pb.Envelope{From: from.node.Self().ToPB(), Body: &pb.Envelope_Balance{Balance: m}})
		}
		at := h.Net.Now() + time.Duration(pick%32)*time.Second
		h.Net.At(at, func() { deliver(m, from, to) })
		if len(second) > 0 {
			h.Net.At(at+time.Second, func() { deliver(reply, to, from) })
		}
		h.Net.RunFor(100 * time.Second)
		for _, s := range nodes {
			s.node.Balancer.Stop()
		}
		cfg := h.Net.cfg.Node.Balance
		h.Net.RunFor(cfg.LongestHold() + 2*cfg.LockLease())
		h.settle(endSettleLimit, func(int) {})
		if problems := h.checkBalanced(); problems != "ok" {
			t.Fatalf("after %v from %s to %s and %v back: %s", m, from.id, to.id, reply, problems)
		}
	})
}

// busyBalancers builds ten nodes over 100 keys with reads on the first thirty, 40/s at each of
// the three nodes holding them where a node may carry 20/s, and starts the balancers: it returns
// three seconds into balancing, with the first waves under way. The middle node's neighbours are
// overloaded too, so it brings a migrant; the load is spread in about forty seconds.
func busyBalancers(t *testing.T) *Harness {
	t.Helper()
	cfg := DefaultConfig()
	b := &cfg.Node.Balance
	b.Window, b.Slots, b.Thres = 20*time.Second, 10, 20
	h := hundredKeys(t, cfg, []uint64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90})
	h.Net.RunFor(10 * time.Second)
	t0 := h.Net.Now()
	const reads, every = 100 * time.Second, time.Second / 4 // 120/s on keys 0–29
	for k := range 30 {
		key := overlay.Uint64Key(uint64(k))
		for at := every / 2; at < reads; at += every {
			h.Net.At(t0+at, func() {
				h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.Get(key) }, func(overlay.Result) {})
			})
		}
	}
	h.Net.RunFor(b.Window + time.Second)
	for _, s := range h.Net.order {
		s.node.Balancer.Start()
	}
	h.Net.RunFor(3 * time.Second)
	return h
}
