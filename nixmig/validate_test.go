package nixmig

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay/pb"
)

func ref(id string) *pb.NodeRef { return &pb.NodeRef{Id: []byte(id)} }

func TestValidateRejectsBadMessages(t *testing.T) {
	long := make([]*pb.NodeRef, maxChain+1)
	for i := range long {
		long[i] = ref("x")
	}
	bad := map[string]*pb.Balance{
		"nil":                     nil,
		"no op":                   {Wave: 1},
		"no wave":                 {Op: &pb.Balance_Probe{Probe: &pb.Probe{}}},
		"lock no chain":           {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_SUCC}}},
		"lock no side":            {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Chain: []*pb.NodeRef{ref("a")}}}},
		"lock NaN load":           {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a")}, TmpLoad: math.NaN()}}},
		"lock negative move":      {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a")}, Moved: -1}}},
		"lock ttl over max":       {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{ref("a")}, Ttl: MaxTTL + 1}}},
		"lock long chain":         {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: long}}},
		"lock empty ref":          {Wave: 1, Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Dir: pb.Side_SIDE_PRED, Chain: []*pb.NodeRef{{}}}}},
		"turn out of chain":       {Wave: 1, Op: &pb.Balance_NixTurn{NixTurn: &pb.NixTurn{Dir: pb.Side_SIDE_SUCC, Chain: []*pb.NodeRef{ref("a")}, Index: 1}}},
		"remote no end":           {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{Want: 1}}},
		"remote huge want":        {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), Want: maxChain + 1}}},
		"mig no target":           {Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Split: []byte("k")}}},
		"absorb no migrant":       {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), M: ref("m"), Absorb: true}}},
		"absorb NaN load":         {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Absorb: true, LastLoad: math.NaN()}}},
		"absorber no M":           {Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{Migrants: []*pb.NodeRef{ref("s")}, Splits: []*pb.SplitPlan{{Absorber: ref("a")}}}}},
		"absorber empty":          {Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Splits: []*pb.SplitPlan{{Absorber: &pb.NodeRef{}}}}}},
		"split past migrants":     {Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Splits: []*pb.SplitPlan{{Migrant: 1, Absorber: ref("a")}}}}},
		"split NaN":               {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Splits: []*pb.SplitPlan{{Absorber: ref("a"), GiveUp: math.NaN()}}}}},
		"keeps not one a migrant": {Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, MigrantKeep: []float64{57, 57}}}},
		"keep zero":               {Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, MigrantKeep: []float64{0}}}},
		"keep NaN":                {Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, MigrantKeep: []float64{math.NaN()}}}},
		"split no absorber":       {Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Target: ref("e"), GiveUp: 5, GiveUpMax: 9}}},
		"split inf max":           {Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Target: ref("e"), Absorber: ref("a"), GiveUp: 5, GiveUpMax: math.Inf(1)}}},
		"probe negative":          {Wave: 1, Op: &pb.Balance_Probe{Probe: &pb.Probe{Load: -1}}},
		"reply inf":               {Wave: 1, Op: &pb.Balance_ProbeReply{ProbeReply: &pb.ProbeReply{Load: math.Inf(1)}}},
		"offer no step":           {Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{Heavy: ref("h")}}},
		"offer no heavy":          {Wave: 1, Op: &pb.Balance_IbOffer{IbOffer: &pb.IBOffer{Step: pb.IBStep_IB_LIGHT}}},
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
		{Wave: 1, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("e"), M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Absorb: true, AccLoad: 70, LastLoad: 35}}},
		{Wave: 1, Op: &pb.Balance_RemoteReply{RemoteReply: &pb.RemoteReply{M: ref("m"), Migrants: []*pb.NodeRef{ref("s")}, Splits: []*pb.SplitPlan{{Absorber: ref("a"), GiveUp: 17, GiveUpMax: 22}}}}},
		{Wave: 1, Op: &pb.Balance_MigOrder{MigOrder: &pb.MigOrder{Target: ref("e"), Absorber: ref("a"), GiveUp: 17, GiveUpMax: 22}}},
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
	// Ours: nodes filled to what they carry when their keys are packed whole under keep (57 by
	// default, 50 when the keys are of 10/s).
	for _, c := range []struct {
		l, fill float64
		want    int
	}{{30, 57, 0}, {57, 57, 0}, {58, 57, 1}, {114, 57, 1}, {115, 57, 2}, {160, 57, 2}, {160, 50, 3}, {440, 57, 7}} {
		if got := extraNodes(c.l, c.fill); got != c.want {
			t.Errorf("extraNodes(%v, %v) = %d, want %d", c.l, c.fill, got, c.want)
		}
	}
	// The thesis's: floor(l/thres - 1).
	faithful := &Balancer{cfg: DefaultConfig()}
	faithful.cfg.FaithfulExNodes = true
	for _, c := range []struct {
		l    float64
		want int
	}{{30, 0}, {60, 0}, {61, 0}, {119, 0}, {120, 1}, {121, 1}, {440, 6}} {
		if got := faithful.exNodes(c.l); got != c.want {
			t.Errorf("faithful exNodes(%v) = %d, want %d", c.l, got, c.want)
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

func TestPackedLoad(t *testing.T) {
	tens := func(n int) []float64 {
		l := make([]float64, n)
		for i := range l {
			l[i] = 10
		}
		return l
	}
	for _, c := range []struct {
		name  string
		loads []float64
		want  float64
	}{
		{"sixteen keys of 10/s: five per node", tens(16), 50},
		{"too few to fill a node", tens(5), 57},
		{"no keys", nil, 57},
		{"keys above keep: one per node", []float64{80, 90, 70}, 85},
		{"mixed", []float64{30, 20, 10, 40, 5, 5, 30}, 52.5},
	} {
		if got := packedLoad(c.loads, 57); got != c.want {
			t.Errorf("%s: packedLoad = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCutPieces(t *testing.T) {
	tens := make([]float64, 16)
	for i := range tens {
		tens[i] = 10
	}
	for _, c := range []struct {
		name        string
		loads       []float64
		share, keep float64
		r           int
		want        []int
	}{
		// 160 for two migrants and the end node: the share, 53.3, is reached at the sixth key.
		{"uncapped, the thesis's cut", tens, 160.0 / 3, math.Inf(1), 2, []int{5, 10}},
		{"capped at keep: five keys each", tens, 160.0 / 3, 57, 2, []int{4, 9}},
		{"share under keep: the cap changes nothing", tens, 40, 57, 3, []int{3, 7, 11}},
		{"fewer pieces when the load runs out", tens, 60, math.Inf(1), 5, []int{5, 11}},
		{"the last key is never handed out", []float64{10, 10, 10}, 100, 57, 1, nil},
		{"one key above keep makes a piece alone", []float64{5, 80, 5, 5, 5}, 50, 57, 3, []int{0, 1}},
	} {
		shares, keeps := make([]float64, c.r), make([]float64, c.r)
		for i := range shares {
			shares[i], keeps[i] = c.share, c.keep
		}
		got := cutPieces(c.loads, shares, keeps)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: cutPieces = %v, want %v", c.name, got, c.want)
		}
	}
	// Heterogeneous migrants: the first aims at 20 and may carry 28.5 (thres 30), the second at
	// 60 under 85.5 (thres 90): keys 0–1, then 2–7.
	if got := cutPieces(tens, []float64{20, 60}, []float64{28.5, 85.5}); fmt.Sprint(got) != "[1 7]" {
		t.Errorf("mixed shares: cutPieces = %v, want [1 7]", got)
	}
	// A share over a small migrant's keep is cut at its keep, and the next aims at its own share.
	if got := cutPieces(tens, []float64{50, 30}, []float64{28.5, 85.5}); fmt.Sprint(got) != "[1 4]" {
		t.Errorf("capped small migrant: cutPieces = %v, want [1 4]", got)
	}
}

func TestLockLease(t *testing.T) {
	// SPEC §3: 4·ttl hop times for locking plus the chain's transfers (8·ttl in all), never less
	// than Lease.
	// A wave that grew gets the lease of its own ttl (waveLease); the longest hold is that of
	// the longest wave where it exceeds MaxLeaseFactor leases.
	for _, c := range []struct {
		ttl, ttlMax int
		hop, lease  time.Duration
		want, at12  time.Duration // LockLease, and the lease of a wave of ttl 12
		longestHold time.Duration
	}{
		{5, 0, time.Second, 40 * time.Second, 40 * time.Second, 96 * time.Second, 240 * time.Second},
		{10, 0, time.Second, 40 * time.Second, 80 * time.Second, 96 * time.Second, 480 * time.Second},
		{1, 0, time.Second, 40 * time.Second, 40 * time.Second, 96 * time.Second, 240 * time.Second},
		{3, 12, time.Second, 40 * time.Second, 40 * time.Second, 96 * time.Second, 240 * time.Second},
		{1, 63, time.Second, 40 * time.Second, 40 * time.Second, 96 * time.Second, 504 * time.Second},
		{5, 0, 50 * time.Millisecond, 10 * time.Second, 10 * time.Second, 10 * time.Second, 60 * time.Second},
		{3, 12, 50 * time.Millisecond, 4 * time.Second, 4 * time.Second, 4800 * time.Millisecond, 24 * time.Second},
	} {
		cfg := DefaultConfig()
		cfg.TTL, cfg.TTLMax, cfg.HopTime, cfg.Lease = c.ttl, c.ttlMax, c.hop, c.lease
		if got, at12, hold := cfg.LockLease(), cfg.waveLease(12), cfg.LongestHold(); got != c.want || at12 != c.at12 || hold != c.longestHold {
			t.Errorf("ttl %d (largest %d), hop %v, lease %v: LockLease %v, a ttl-12 wave's %v, longest hold %v; want %v, %v, %v",
				c.ttl, c.ttlMax, c.hop, c.lease, got, at12, hold, c.want, c.at12, c.longestHold)
		}
	}
}
