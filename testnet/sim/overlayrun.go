package sim

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// OverlayParams configures an overlay run: build by joins, load, query, leave, crash, repair.
type OverlayParams struct {
	Nodes   int     `json:"nodes"`
	Keys    int     `json:"keys"`
	Seed    uint64  `json:"seed"`
	Lookups int     `json:"lookups"`
	Scans   int     `json:"scans"`
	Leave   float64 `json:"leave_fraction"`
	Crash   float64 `json:"crash_fraction"`
	// ScanKeys is the width, in keys, of each range scan.
	ScanKeys int `json:"scan_keys"`
	// Batch is the number of items per bulk-load batch.
	Batch int `json:"batch"`
	// JoinInterval is the mean gap between join arrivals (Poisson), in virtual time.
	JoinInterval time.Duration `json:"join_interval_ns"`
	// QueryRate is how many client requests are started per unit of virtual time.
	QueryRate int `json:"query_rate"`
	// RepairLimit bounds the wait for repair after the crash.
	RepairLimit time.Duration `json:"repair_limit_ns"`
	Net         Config        `json:"-"`
}

// DefaultOverlayParams returns the defaults of `skipsim overlay`.
func DefaultOverlayParams() OverlayParams {
	return OverlayParams{
		Nodes: 1000, Keys: 100_000, Seed: 1, Lookups: 10_000, Scans: 1000, ScanKeys: 100, Batch: 1000,
		JoinInterval: 50 * time.Millisecond, QueryRate: 1000, RepairLimit: 2000 * time.Second,
		Net: DefaultConfig(),
	}
}

// Validate reports the first unusable parameter in words a user can act on.
func (p OverlayParams) Validate() error {
	switch {
	case p.Nodes < 1:
		return fmt.Errorf("--nodes must be at least 1 (got %d)", p.Nodes)
	case p.Keys < p.Nodes:
		return fmt.Errorf("--keys must be at least --nodes (got %d keys for %d nodes)", p.Keys, p.Nodes)
	case p.Lookups < 0 || p.Scans < 0:
		return fmt.Errorf("--lookups and --scans must not be negative")
	case p.Leave < 0 || p.Leave >= 1:
		return fmt.Errorf("--leave must be a fraction in [0,1) (got %g)", p.Leave)
	case p.Crash < 0 || p.Crash >= 1:
		return fmt.Errorf("--crash must be a fraction in [0,1) (got %g)", p.Crash)
	case p.Leave+p.Crash >= 1:
		return fmt.Errorf("--leave plus --crash must stay below 1: some nodes must remain")
	case p.ScanKeys < 1:
		return fmt.Errorf("--scan-keys must be at least 1")
	case p.Batch < 1 || p.Batch > 100_000:
		return fmt.Errorf("--batch must be in [1, 100000]")
	case p.JoinInterval <= 0:
		return fmt.Errorf("--join-interval must be positive")
	case p.QueryRate < 1:
		return fmt.Errorf("--query-rate must be at least 1")
	case p.RepairLimit <= 0:
		return fmt.Errorf("--repair-limit must be positive")
	}
	return nil
}

// HopStats summarizes the hops of answered requests.
type HopStats struct {
	Count  int     `json:"count"`
	Wrong  int     `json:"wrong"`
	Failed int     `json:"failed"`
	Mean   float64 `json:"hops_mean"`
	P50    int     `json:"hops_p50"`
	P99    int     `json:"hops_p99"`
	Max    int     `json:"hops_max"`
}

// OverlaySummary is the outcome of an overlay run.
type OverlaySummary struct {
	Params OverlayParams `json:"params"`
	Log2N  float64       `json:"log2_n"`

	BuildTime    float64 `json:"build_time"` // virtual seconds
	BuildSettled bool    `json:"build_settled"`
	// SettleTime is how long after the end of the build every invariant held (the load and the
	// queries run meanwhile).
	SettleTime float64 `json:"settle_time"`
	// Wall-clock seconds of the build, the load, the lookups and the scans.
	WallBuild        float64  `json:"wall_build"`
	WallLoad         float64  `json:"wall_load"`
	WallLookups      float64  `json:"wall_lookups"`
	WallScans        float64  `json:"wall_scans"`
	Joins            int      `json:"joins"`
	MessagesPerJoin  float64  `json:"messages_per_join"`
	JoinConstant     float64  `json:"join_messages_per_log2n"`
	LoadTime         float64  `json:"load_time"`
	LoadMessages     uint64   `json:"load_messages"`
	Lookups          HopStats `json:"lookups"`
	Scans            HopStats `json:"scans"`
	Leaves           int      `json:"leaves"`
	MessagesPerLeave float64  `json:"messages_per_leave"`
	LeaveTime        float64  `json:"leave_time"`

	Crashed           int      `json:"crashed"`
	ItemsLost         int      `json:"items_lost"`
	RangesLost        int      `json:"ranges_reported_lost"`
	Repaired          bool     `json:"repaired"`
	RepairTime        float64  `json:"repair_time"`
	RepairMessages    uint64   `json:"repair_messages"`
	MaintainMessages  uint64   `json:"maintenance_messages_during_repair"`
	PostCrashLookups  HopStats `json:"post_crash_lookups"`
	MissingAfterCrash int      `json:"surviving_keys_missing"`

	// Checks lists every invariant check made, with its outcome.
	Checks []CheckResult `json:"checks"`

	// MessagesByCause counts every message sent during the run by the activity it served;
	// MessagesByKind by message type.
	MessagesByCause map[string]uint64 `json:"messages_by_cause"`
	MessagesByKind  map[string]uint64 `json:"messages_by_kind"`

	SimTime        float64 `json:"sim_time"`
	Events         uint64  `json:"events"`
	Delivered      uint64  `json:"messages_delivered"`
	WallSeconds    float64 `json:"wall_seconds"`
	MessagesPerSec float64 `json:"messages_per_wall_second"`
	PeakHeapMB     float64 `json:"peak_heap_mb"`
}

// CheckResult is one invariant check.
type CheckResult struct {
	Phase string `json:"phase"`
	OK    bool   `json:"ok"`
	// Detail lists violations (or is empty).
	Detail string `json:"detail,omitempty"`
}

// Failed reports whether the run saw a wrong answer or a broken invariant.
func (s *OverlaySummary) Failed() bool {
	for _, c := range s.Checks {
		if !c.OK {
			return true
		}
	}
	return s.Lookups.Wrong+s.Scans.Wrong+s.PostCrashLookups.Wrong > 0 || s.MissingAfterCrash > 0 ||
		(s.Crashed > 0 && !s.Repaired) || !s.BuildSettled
}

// Progress receives the phase and its completion, for display.
type Progress func(phase string, done, total int)

// phaseLabeller returns a function that tags the CPU profile samples taken from then on with
// the run's phase (go tool pprof -tagfocus phase=load), and progress wrapped to call it.
func phaseLabeller(progress Progress) (label func(phase string), labelled Progress) {
	current := ""
	label = func(phase string) {
		if phase != current {
			current = phase
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("phase", phase)))
		}
	}
	return label, func(phase string, done, total int) {
		label(phase)
		progress(phase, done, total)
	}
}

// RunOverlay performs an overlay run.
func RunOverlay(p OverlayParams, progress Progress) (*OverlaySummary, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(string, int, int) {}
	}
	label, progress := phaseLabeller(progress)
	wall := time.Now()
	p.Net.Seed = p.Seed
	h, err := NewHarness(p.Net)
	if err != nil {
		return nil, err
	}
	nw := h.Net
	sum := &OverlaySummary{Params: p, Log2N: math.Log2(float64(p.Nodes))}
	var peak uint64
	sampleHeap := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	check := func(phase string) {
		label("check")
		rep := nw.Check()
		c := CheckResult{Phase: phase, OK: rep.OK()}
		if m, x, w := nw.CheckItems(h.Expected, h.Lost); m+x+w > 0 {
			c.OK = false
			c.Detail = fmt.Sprintf("items: %d missing, %d unexpected, %d wrong; ", m, x, w)
		}
		if !rep.OK() {
			c.Detail += rep.String()
		}
		sum.Checks = append(sum.Checks, c)
	}

	// Build by joins at random positions of the key space.
	space := uint64(p.Keys)
	label("build")
	before := nw.SentByCause()
	start := nw.Now()
	err = h.Build(p.Nodes, p.JoinInterval, true,
		func(int) overlay.Key { return overlay.Uint64Key(nw.rng.Uint64N(space)) },
		time.Duration(p.Nodes)*p.JoinInterval*20+1000*time.Second,
		func(j int) { progress("build", j, p.Nodes-1) })
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	sum.BuildTime = (nw.Now() - start).Seconds()
	sum.Joins = p.Nodes - 1
	after := nw.SentByCause()
	if sum.Joins > 0 {
		sum.MessagesPerJoin = float64(after[pb.Cause_CAUSE_JOIN]-before[pb.Cause_CAUSE_JOIN]) / float64(sum.Joins)
		if sum.Log2N > 0 {
			sum.JoinConstant = sum.MessagesPerJoin / sum.Log2N
		}
	}
	sampleHeap()
	sum.WallBuild = time.Since(wall).Seconds()
	buildEnd := nw.Now()

	// Load every key in batches of consecutive keys, each from a random node.
	label("load")
	before = nw.SentByCause()
	start = nw.Now()
	batches := (p.Keys + p.Batch - 1) / p.Batch
	loaded := 0
	if len(h.Expected) == 0 {
		h.Expected = make(map[overlay.Key]string, p.Keys) // sized once: growing it rehashed 5M keys
	}
	for b := 0; b < batches; b++ {
		lo, hi := b*p.Batch, min((b+1)*p.Batch, p.Keys)
		items := make([]overlay.Item, 0, hi-lo)
		for i := lo; i < hi; i++ {
			k := overlay.Uint64Key(uint64(i))
			v := valueFor(k)
			items = append(items, overlay.Item{Key: k, Value: v})
			h.Expected[k] = string(v)
		}
		h.Do(h.RandomOwner(), func(n *node.Node) uint64 { return n.PutBatch(items) }, func(r overlay.Result) {
			loaded += r.Stored
			if r.Status != pb.Status_STATUS_OK {
				sum.Checks = append(sum.Checks, CheckResult{Phase: "load", Detail: fmt.Sprintf("batch failed: %v %s", r.Status, r.Err)})
			}
		})
	}
	nw.RunWhile(func() bool { progress("load", loaded, p.Keys); return h.Pending() > 0 }, nw.Now()+100_000*time.Second)
	sum.LoadTime = (nw.Now() - start).Seconds()
	after = nw.SentByCause()
	sum.LoadMessages = after[pb.Cause_CAUSE_CLIENT] - before[pb.Cause_CAUSE_CLIENT]
	sampleHeap()
	sum.WallLoad = time.Since(wall).Seconds() - sum.WallBuild

	// Lookups and scans from random nodes, checked against the reference. The higher levels may
	// still be mending links after the racing joins: answers must be right all the same.
	sum.Lookups = h.lookups(p, p.Lookups, func(int) overlay.Key { return overlay.Uint64Key(nw.rng.Uint64N(space)) }, progress, "lookups")
	sum.WallLookups = time.Since(wall).Seconds() - sum.WallBuild - sum.WallLoad
	sum.Scans = h.scans(p, progress)
	sampleHeap()
	sum.WallScans = time.Since(wall).Seconds() - sum.WallBuild - sum.WallLoad - sum.WallLookups

	// Wait until every invariant holds: the time after the build that the levels take to become
	// exactly right.
	sum.BuildSettled = h.settle(p.RepairLimit, func(t int) { progress("settle", t, int(p.RepairLimit/time.Second)) })
	sum.SettleTime = (nw.Now() - buildEnd).Seconds()
	check("after build, load, queries")

	// Graceful leaves, all at once.
	if p.Leave > 0 {
		ids := h.pick(int(p.Leave * float64(p.Nodes)))
		before = nw.SentByCause()
		start = nw.Now()
		target := h.Left + len(ids)
		for _, id := range ids {
			_ = nw.Node(id).Leave()
		}
		nw.RunWhile(func() bool { progress("leave", h.Left-(target-len(ids)), len(ids)); return h.Left < target }, nw.Now()+100_000*time.Second)
		sum.Leaves = len(ids) - (target - h.Left)
		sum.LeaveTime = (nw.Now() - start).Seconds()
		after = nw.SentByCause()
		if sum.Leaves > 0 {
			sum.MessagesPerLeave = float64(after[pb.Cause_CAUSE_LEAVE]-before[pb.Cause_CAUSE_LEAVE]) / float64(sum.Leaves)
		}
		nw.RunFor(60 * time.Second)
		check("after leaves")
	}

	// Crash a fraction at once; wait until every invariant holds again.
	if p.Crash > 0 {
		ids := h.pick(int(p.Crash * float64(p.Nodes)))
		lostBefore := len(h.Lost)
		for _, id := range ids {
			if err := h.Crash(id); err != nil {
				return nil, err
			}
		}
		sum.Crashed = len(ids)
		sum.ItemsLost = len(h.Lost) - lostBefore
		before = nw.SentByCause()
		rangesBefore := h.RangesLost
		start = nw.Now()
		sum.Repaired = h.settle(p.RepairLimit, func(t int) { progress("repair", t, int(p.RepairLimit/time.Second)) })
		sum.RepairTime = (nw.Now() - start).Seconds()
		after = nw.SentByCause()
		sum.RepairMessages = after[pb.Cause_CAUSE_REPAIR] - before[pb.Cause_CAUSE_REPAIR]
		sum.MaintainMessages = after[pb.Cause_CAUSE_MAINTAIN] - before[pb.Cause_CAUSE_MAINTAIN]
		sum.RangesLost = h.RangesLost - rangesBefore
		check("after crash repair")
		missing, _, _ := nw.CheckItems(h.Expected, h.Lost)
		sum.MissingAfterCrash = missing
		// Every surviving key must be found by search from live nodes.
		surviving := make([]overlay.Key, 0, len(h.Expected))
		for k := range h.Expected {
			if !h.Lost[k] {
				surviving = append(surviving, k)
			}
		}
		sort.Slice(surviving, func(i, j int) bool { return surviving[i] < surviving[j] })
		n := min(len(surviving), max(p.Lookups, 1000))
		sum.PostCrashLookups = h.lookups(p, n, func(i int) overlay.Key {
			if n == len(surviving) {
				return surviving[i]
			}
			return surviving[nw.rng.IntN(len(surviving))]
		}, progress, "post-crash lookups")
	}
	sampleHeap()
	sum.MessagesByCause = map[string]uint64{}
	for c, v := range nw.SentByCause() {
		if v > 0 {
			sum.MessagesByCause[strings.ToLower(strings.TrimPrefix(pb.Cause(c).String(), "CAUSE_"))] = v
		}
	}
	sum.MessagesByKind = map[string]uint64{}
	for k, v := range nw.Stats.Sent {
		if v > 0 {
			sum.MessagesByKind[KindNames[k]] = v
		}
	}
	sum.SimTime = nw.Now().Seconds()
	sum.Events = nw.Stats.Events
	sum.Delivered = nw.Stats.Delivered
	sum.WallSeconds = time.Since(wall).Seconds()
	sum.MessagesPerSec = float64(sum.Delivered) / sum.WallSeconds
	sum.PeakHeapMB = float64(peak) / (1 << 20)
	return sum, nil
}

// settle runs the network until every structural invariant holds or limit passes. It checks
// every unit of virtual time up to 2,000 nodes, and every N/2,000 units above, where a check
// costs more: the time it reports is that precise.
func (h *Harness) settle(limit time.Duration, progress func(units int)) bool {
	start := h.Net.Now()
	step := time.Duration(max(1, len(h.Net.order)/2000)) * time.Second
	for h.Net.Now()-start < limit {
		if h.Net.CheckStructure().OK() && h.Net.Check().OK() {
			return true
		}
		h.Net.RunFor(step)
		progress(int((h.Net.Now() - start) / time.Second))
	}
	return h.Net.Check().OK()
}

// valueFor is the value the overlay run writes for key k.
func valueFor(k overlay.Key) []byte { return []byte("v" + string(k)) }

// pick returns n distinct random live owners.
func (h *Harness) pick(n int) []overlay.NodeID {
	chosen := map[overlay.NodeID]bool{}
	var out []overlay.NodeID
	for len(out) < n {
		id := h.randomOwner()
		if !chosen[id] {
			chosen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// lookups issues n gets of keyAt(i) from random nodes at the run's query rate and checks each
// answer against the reference.
func (h *Harness) lookups(p OverlayParams, n int, keyAt func(int) overlay.Key, progress Progress, phase string) HopStats {
	var hops []int
	st := HopStats{Count: n}
	done := 0
	for i := 0; i < n; i++ {
		k := keyAt(i)
		at := h.Net.Now() + time.Duration(i/p.QueryRate)*time.Second
		h.Net.At(at, func() {
			h.Do(h.RandomOwner(), func(nd *node.Node) uint64 { return nd.Get(k) }, func(r overlay.Result) {
				done++
				want, exists := h.Expected[k]
				switch {
				case r.Status == pb.Status_STATUS_ERROR || r.Status == pb.Status_STATUS_HOP_LIMIT:
					st.Failed++
				case h.Lost[k]:
					hops = append(hops, r.Hops) // lost keys may be missing: not wrong either way
				case !exists && r.Status == pb.Status_STATUS_LOST:
					hops = append(hops, r.Hops) // never written, in a lost range: "may have existed"
				case exists && (r.Status != pb.Status_STATUS_OK || string(r.Value) != want),
					!exists && r.Status != pb.Status_STATUS_NOT_FOUND:
					st.Wrong++
				default:
					hops = append(hops, r.Hops)
				}
			})
		})
	}
	h.Net.RunWhile(func() bool { progress(phase, done, n); return done < n }, h.Net.Now()+time.Duration(n/p.QueryRate+1)*time.Second+100_000*time.Second)
	st.Failed += n - done
	fillHops(&st, hops)
	return st
}

// scans issues range scans of p.ScanKeys keys from random nodes and checks each answer is exactly
// the reference's keys in that range.
func (h *Harness) scans(p OverlayParams, progress Progress) HopStats {
	var hops []int
	st := HopStats{Count: p.Scans}
	done := 0
	for i := 0; i < p.Scans; i++ {
		lo := h.Net.rng.Uint64N(uint64(p.Keys))
		hi := lo + uint64(p.ScanKeys)
		at := h.Net.Now() + time.Duration(i/p.QueryRate)*time.Second
		h.Net.At(at, func() {
			h.Do(h.RandomOwner(), func(nd *node.Node) uint64 {
				return nd.Scan(overlay.Uint64Key(lo), overlay.Uint64Key(hi), p.ScanKeys, 0)
			}, func(r overlay.Result) {
				done++
				if r.Status != pb.Status_STATUS_OK {
					st.Failed++
					return
				}
				var want []overlay.Key
				for k := lo; k < hi && k < uint64(p.Keys); k++ {
					key := overlay.Uint64Key(k)
					if _, ok := h.Expected[key]; ok && !h.Lost[key] {
						want = append(want, key)
					}
				}
				if !sameKeys(r.Items, want, h.Expected) {
					st.Wrong++
					return
				}
				hops = append(hops, r.Hops)
			})
		})
	}
	h.Net.RunWhile(func() bool { progress("scans", done, p.Scans); return done < p.Scans }, h.Net.Now()+time.Duration(p.Scans/p.QueryRate+1)*time.Second+100_000*time.Second)
	st.Failed += p.Scans - done
	fillHops(&st, hops)
	return st
}

func sameKeys(items []overlay.Item, want []overlay.Key, expected map[overlay.Key]string) bool {
	if len(items) != len(want) {
		return false
	}
	for i, it := range items {
		if it.Key != want[i] || string(it.Value) != expected[it.Key] {
			return false
		}
	}
	return true
}

func fillHops(st *HopStats, hops []int) {
	if len(hops) == 0 {
		return
	}
	sort.Ints(hops)
	total := 0
	for _, x := range hops {
		total += x
	}
	st.Mean = float64(total) / float64(len(hops))
	st.P50 = hops[len(hops)/2]
	st.P99 = hops[min(len(hops)-1, len(hops)*99/100)]
	st.Max = hops[len(hops)-1]
}
