package nixmig

import (
	"errors"
	"fmt"
	"math"

	"github.com/skiprange/skiprange/overlay/pb"
)

// maxChain bounds the node lists a balancing message may carry.
const maxChain = 64

// MaxTTL is the largest ttl: a wave's lock request names every node it reserved.
const MaxTTL = maxChain - 1

// Validate checks a balancing message's fields before Handle may see it: invalid messages are
// rejected and counted by the caller, never acted on.
func Validate(m *pb.Balance) error {
	if m == nil || m.Op == nil {
		return errors.New("empty balancing message")
	}
	if m.Wave == 0 {
		return errors.New("balancing message without wave")
	}
	refs := func(rs []*pb.NodeRef) error {
		if len(rs) > maxChain {
			return fmt.Errorf("%d nodes over the limit of %d", len(rs), maxChain)
		}
		for _, r := range rs {
			if r == nil || len(r.Id) == 0 {
				return errors.New("missing node reference")
			}
		}
		return nil
	}
	finite := func(vs ...float64) error {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("load value %v is not a finite non-negative number", v)
			}
		}
		return nil
	}
	// keeps checks RemoteLock/RemoteReply.migrant_keep: none, or one positive keep a migrant.
	keeps := func(ks []float64, migrants int) error {
		if len(ks) != 0 && len(ks) != migrants {
			return fmt.Errorf("%d migrant keeps for %d migrants", len(ks), migrants)
		}
		for _, k := range ks {
			if !(k > 0) || math.IsInf(k, 1) {
				return fmt.Errorf("migrant keep %v is not a positive finite number", k)
			}
		}
		return nil
	}
	side := func(s pb.Side) error {
		if s != pb.Side_SIDE_PRED && s != pb.Side_SIDE_SUCC {
			return fmt.Errorf("unknown side %v", s)
		}
		return nil
	}
	plans := func(ps []*pb.SplitPlan, migrants int, m *pb.NodeRef) error {
		if len(ps) > 0 && m == nil {
			return errors.New("split leaves without M")
		}
		if len(ps) > maxChain {
			return fmt.Errorf("%d split leaves over the limit of %d", len(ps), maxChain)
		}
		for _, p := range ps {
			if p == nil || p.Absorber == nil || len(p.Absorber.Id) == 0 {
				return errors.New("split leave without absorber")
			}
			if int(p.Migrant) >= migrants {
				return fmt.Errorf("split leave of migrant %d of %d", p.Migrant, migrants)
			}
			if err := finite(p.GiveUp, p.GiveUpMax); err != nil {
				return err
			}
		}
		return nil
	}
	switch op := m.Op.(type) {
	case *pb.Balance_Lock:
		r := op.Lock
		if len(r.Chain) == 0 {
			return errors.New("lock request without chain")
		}
		if r.Ttl > MaxTTL {
			return fmt.Errorf("lock request with ttl %d over the limit of %d", r.Ttl, MaxTTL)
		}
		return errors.Join(side(r.Dir), refs(r.Chain), finite(r.TmpLoad, r.Moved))
	case *pb.Balance_NixTurn:
		t := op.NixTurn
		if len(t.Chain) == 0 || int(t.Index) >= len(t.Chain) {
			return errors.New("nix turn index outside its chain")
		}
		return errors.Join(side(t.Dir), refs(t.Chain))
	case *pb.Balance_RemoteLock:
		r := op.RemoteLock
		if r.End == nil || len(r.End.Id) == 0 {
			return errors.New("remote lock without end node")
		}
		if r.Want > maxChain {
			return fmt.Errorf("remote lock wants %d nodes", r.Want)
		}
		var m []*pb.NodeRef
		if r.M != nil {
			m = append(m, r.M)
		}
		if r.Absorb && (r.M == nil || len(r.Migrants) == 0) {
			return errors.New("remote lock asks to absorb without M or a migrant")
		}
		return errors.Join(refs(r.Migrants), refs(m), finite(r.AccLoad, r.MThres, r.LastLoad), plans(r.Splits, len(r.Migrants), r.M),
			keeps(r.MigrantKeep, len(r.Migrants)))
	case *pb.Balance_RemoteReply:
		r := op.RemoteReply
		var m []*pb.NodeRef
		if r.M != nil {
			m = append(m, r.M)
		}
		return errors.Join(refs(r.Migrants), refs(m), plans(r.Splits, len(r.Migrants), r.M), keeps(r.MigrantKeep, len(r.Migrants)))
	case *pb.Balance_MigOrder:
		o := op.MigOrder
		if o.Target == nil || len(o.Target.Id) == 0 {
			return errors.New("migration order without target")
		}
		if o.GiveUp > 0 && (o.Absorber == nil || len(o.Absorber.Id) == 0) {
			return errors.New("split leave without absorber")
		}
		return finite(o.GiveUp, o.GiveUpMax)
	case *pb.Balance_Probe:
		return finite(op.Probe.Load)
	case *pb.Balance_ProbeReply:
		r := op.ProbeReply
		if r.Next != nil && len(r.Next.Id) == 0 {
			return errors.New("probe reply names an empty node")
		}
		return finite(r.Load, r.Thres)
	case *pb.Balance_IbOffer:
		o := op.IbOffer
		if o.Heavy == nil || len(o.Heavy.Id) == 0 {
			return errors.New("offer without heavy node")
		}
		if o.Step < pb.IBStep_IB_LIGHT || o.Step > pb.IBStep_IB_MOVE {
			return fmt.Errorf("unknown offer step %v", o.Step)
		}
		return finite(o.HeavyLoad, o.LightLoad)
	case *pb.Balance_IbNix:
		return finite(op.IbNix.Load)
	case *pb.Balance_Ack:
		if op.Ack.GetSeq() == 0 || m.Seq != 0 {
			return errors.New("acknowledgement without a message number, or numbered itself")
		}
	}
	return nil
}
