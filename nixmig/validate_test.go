package nixmig

import (
	"math"
	"testing"

	"github.com/skiprange/skiprange/overlay/pb"
)

func ref(id string) *pb.NodeRef { return &pb.NodeRef{Id: []byte(id)} }

func TestValidateRejectsBadMessages(t *testing.T) {
	long := make([]*pb.NodeRef, maxChain+1)
	for i := range long {
		long[i] = ref("x")
	}
	bad := map[string]*pb.Balance{
		"nil":                nil,
		"no op":              {Wave: 1},
		"no wave":            {Op: &pb.Balance_Probe{Probe: &pb.Probe{}}},
		"lock no chain":      {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_SUCC}}},
		"lock no side":       {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Chain: []*pb.NodeRef{ref("a")}}}},
		"lock NaN load":      {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a")}, TmpLoad: math.NaN()}}},
		"lock negative move": {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a")}, Moved: -1}}},
		"lock long chain":    {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: long}}},
		"lock empty ref":     {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{{}}}}},
		"turn out of chain":  {Wave: 1, Op: &pb.Balance_NixTurn{NixTurn: &pb.NixTurn{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{ref("a")}, Index: 1}}},
		"remote no end":      {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{Want: 1}}},
		"remote huge want":   {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), Want: maxChain + 1}}},
		"mig no target":      {Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Split: []byte("k")}}},
		"probe negative":     {Wave: 1, Op: &pb.Balance_Probe{Probe: &pb.Probe{Load: -1}}},
		"reply inf":          {Wave: 1, Op: &pb.Balance_ProbeReply{ProbeReply: &pb.ProbeReply{Load: math.Inf(1)}}},
		"offer no step":      {Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{Heavy: ref("h")}}},
		"offer no heavy":     {Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{Step: pb.IBStep_IB_LIGHT}}},
	}
	for name, m := range bad {
		if err := Validate(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := []*pb.Balance{
		{Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{ref("a")}, TmpLoad: 90, Moved: 30}}},
		{Wave: 1, Op: &pb.Balance_NixTurn{NixTurn: &pb.NixTurn{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a"), ref("b")}, Index: 1}}},
		{Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), Want: 3, M: ref("m")}}},
		{Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{Heavy: ref("h"), Step: pb.IBStep_IB_PLACE}}},
	}
	for i, m := range good {
		if err := Validate(m); err != nil {
			t.Errorf("good message %d rejected: %v", i, err)
		}
	}
}

func TestMovedLoad(t *testing.T) {
	// SPEC §6.1: a share a of the excess above overThres, the whole excess between thres and
	// overThres, nothing below thres.
	cases := []struct{ l, want float64 }{{50, 0}, {60, 0}, {100, 40}, {400, 340}, {500, 220}}
	for _, c := range cases {
		if got := moved(c.l, 60, 400, 0.5); got != c.want {
			t.Errorf("moved(%v) = %v, want %v", c.l, got, c.want)
		}
	}
}

func TestExNodes(t *testing.T) {
	b := &Balancer{cfg: DefaultConfig()}
	faithful := &Balancer{cfg: DefaultConfig()}
	faithful.cfg.FaithfulExNodes = true
	cases := []struct {
		l            float64
		ours, thesis int
	}{{30, 0, 0}, {60, 0, 0}, {61, 1, 0}, {119, 1, 0}, {120, 1, 1}, {121, 2, 1}, {440, 7, 6}}
	for _, c := range cases {
		if got := b.exNodes(c.l); got != c.ours {
			t.Errorf("exNodes(%v) = %d, want %d", c.l, got, c.ours)
		}
		if got := faithful.exNodes(c.l); got != c.thesis {
			t.Errorf("faithful exNodes(%v) = %d, want %d", c.l, got, c.thesis)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"thres zero":        func(c *Config) { c.Thres = 0 },
		"overThres low":     func(c *Config) { c.OverThres = c.Thres },
		"a above one":       func(c *Config) { c.A = 1.5 },
		"ttl zero":          func(c *Config) { c.TTL = 0 },
		"no window":         func(c *Config) { c.Window = 0 },
		"epsilon one":       func(c *Config) { c.IBEpsilon = 1 },
		"unknown algo":      func(c *Config) { c.Algorithm = 99 },
		"negative probes":   func(c *Config) { c.MaxProbes = -1 },
		"no check period":   func(c *Config) { c.CheckInterval = 0 },
		"unknown placement": func(c *Config) { c.Placement = 9 },
	} {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseAlgorithm("nixmig2"); err == nil {
		t.Error("unknown algorithm name accepted")
	}
	for _, name := range []string{"none", "nixmig", "nix", "mig", "ib"} {
		a, err := ParseAlgorithm(name)
		if err != nil || a.String() != name {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", name, a, err)
		}
	}
}
