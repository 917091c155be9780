package nixmig

import (
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// t0 is an arbitrary, slot-aligned instant for the tests (1e9 s is a multiple of every slot length
// used below).
var t0 = time.Unix(1_000_000_000, 0)

func seq(keys ...overlay.Key) iter.Seq[overlay.Key] { return slices.Values(keys) }

// uint64Keys returns the keys 0 … n−1.
func uint64Keys(n int) []overlay.Key {
	keys := make([]overlay.Key, n)
	for i := range keys {
		keys[i] = overlay.Uint64Key(uint64(i))
	}
	return keys
}

// randomHits records n hits on keys drawn at random, at most maxStep apart from t0 on, and
// returns the time of the last.
func randomHits(lt *LoadTracker, keys []overlay.Key, n int, maxStep time.Duration, rng *rand.Rand) time.Time {
	now := t0
	for range n {
		now = now.Add(time.Duration(rng.Int64N(int64(maxStep))))
		lt.Hit(keys[rng.IntN(len(keys))], now)
	}
	return now
}

func mustTracker(t *testing.T, window time.Duration, slots int) *LoadTracker {
	t.Helper()
	lt, err := NewLoadTracker(window, slots)
	if err != nil {
		t.Fatal(err)
	}
	return lt
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestNewLoadTracker(t *testing.T) {
	tests := []struct {
		window  time.Duration
		slots   int
		wantErr bool
		wantW   time.Duration
	}{
		{time.Minute, 12, false, time.Minute},
		{time.Second, 1, false, time.Second},
		{time.Second, 3, false, 999_999_999},
		{3, 3, false, 3},
		{0, 4, true, 0},
		{-time.Second, 4, true, 0},
		{time.Second, 0, true, 0},
		{time.Second, -1, true, 0},
		{2, 3, true, 0},
	}
	for _, tc := range tests {
		lt, err := NewLoadTracker(tc.window, tc.slots)
		if (err != nil) != tc.wantErr {
			t.Errorf("NewLoadTracker(%v, %d): err = %v, want error %v", tc.window, tc.slots, err, tc.wantErr)
			continue
		}
		if err == nil && (lt.Window() != tc.wantW || lt.Slots() != tc.slots) {
			t.Errorf("NewLoadTracker(%v, %d): window %v slots %d, want %v %d", tc.window, tc.slots, lt.Window(), lt.Slots(), tc.wantW, tc.slots)
		}
	}
}

func TestSlotOfFloor(t *testing.T) {
	lt := mustTracker(t, 4*time.Second, 4) // 1 s slots
	tests := []struct {
		ns   int64
		slot int64
		f    float64
	}{
		{0, 0, 0},
		{1, 0, 1e-9},
		{999_999_999, 0, 0.999999999},
		{1_000_000_000, 1, 0},
		{-1, -1, 0.999999999},
		{-1_000_000_000, -1, 0},
		{-1_000_000_001, -2, 0.999999999},
		{math.MinInt64, math.MinInt64/1_000_000_000 - 1, 0.145224192},
	}
	for _, tc := range tests {
		s, f := lt.slotOf(time.Unix(0, tc.ns))
		if s != tc.slot || !near(f, tc.f, 1e-9) {
			t.Errorf("slotOf(%d ns) = %d, %v; want %d, %v", tc.ns, s, f, tc.slot, tc.f)
		}
	}
}

func TestConstantRate(t *testing.T) {
	const rate = 50.0 // hits per second
	lt := mustTracker(t, 10*time.Second, 10)
	keys := []overlay.Key{"a", "b", "c", "d", "e"}
	start := t0.Add(7 * time.Millisecond)
	step := time.Duration(float64(time.Second) / rate)
	end := start.Add(30 * time.Second)
	next := start.Add(137 * time.Millisecond) // next sampling instant
	i := 0
	for now := start; now.Before(end); now = now.Add(step) {
		for !next.After(now) {
			// All hits before next have been recorded. The window holds rate·W hits ±1.
			elapsed := next.Sub(start).Seconds()
			want := rate * math.Min(elapsed, 10) / 10
			if got := lt.Load(next); math.Abs(got-want) > 0.25 {
				t.Fatalf("Load at +%.3fs = %v, want %v ± 0.25", elapsed, got, want)
			}
			if elapsed > 10 {
				for _, k := range keys {
					if got := lt.KeyLoad(k, next); math.Abs(got-rate/5) > 0.25 {
						t.Fatalf("KeyLoad(%s) at +%.3fs = %v, want %v ± 0.25", k, elapsed, got, rate/5)
					}
				}
			}
			next = next.Add(137 * time.Millisecond)
		}
		lt.Hit(keys[i%len(keys)], now)
		i++
	}
}

func TestExpiry(t *testing.T) {
	lt := mustTracker(t, 10*time.Second, 5) // 2 s slots
	last := t0.Add(3 * time.Second)
	for i := range 100 {
		lt.Hit(overlay.Key([]byte{byte('a' + i%4)}), t0.Add(time.Duration(i)*30*time.Millisecond))
	}
	if got := lt.Load(last); !near(got, 10, 1e-12) {
		t.Fatalf("Load before expiry = %v, want 10", got)
	}
	// Linear decay through the oldest slot, gone once a full window has passed the last slot.
	if got := lt.Load(t0.Add(11 * time.Second)); got <= 0 || got >= 10 {
		t.Errorf("Load during decay = %v, want strictly between 0 and 10", got)
	}
	gone := t0.Add(14 * time.Second) // last hit in slot [2 s, 4 s); window ends 10 s later
	if got := lt.Load(gone); got != 0 {
		t.Errorf("Load after the window = %v, want 0", got)
	}
	if got := lt.KeyLoad("a", gone); got != 0 {
		t.Errorf("KeyLoad after the window = %v, want 0", got)
	}
	lt.Compact(last)
	if lt.Keys() != 4 {
		t.Fatalf("Keys after early Compact = %d, want 4", lt.Keys())
	}
	// A hit on another key moves the clock; old counters are expired in the total too.
	lt.Hit("z", gone)
	if got := lt.Load(gone); !near(got, 0.1, 1e-12) {
		t.Errorf("Load after a fresh hit = %v, want 0.1", got)
	}
	// An expired key that is hit again starts afresh.
	lt.Hit("a", gone)
	if got := lt.KeyLoad("a", gone); !near(got, 0.1, 1e-12) {
		t.Errorf("KeyLoad of a re-hit expired key = %v, want 0.1", got)
	}
	lt.Compact(gone)
	if lt.Keys() != 2 {
		t.Errorf("Keys after Compact = %d, want 2 (a, z)", lt.Keys())
	}
	lt.Compact(gone.Add(time.Hour))
	if lt.Keys() != 0 || lt.Load(gone.Add(time.Hour)) != 0 {
		t.Errorf("after a late Compact: %d keys, load %v; want 0, 0", lt.Keys(), lt.Load(gone.Add(time.Hour)))
	}
}

func TestLateHits(t *testing.T) {
	lt := mustTracker(t, 4*time.Second, 4) // 1 s slots
	lt.Hit("k", t0.Add(10*time.Second))
	lt.Hit("k", t0.Add(8*time.Second)) // within the window: counted in its own slot
	lt.Hit("k", t0.Add(5*time.Second)) // older than the window: ignored
	lt.Hit("j", t0.Add(-time.Hour))    // ignored, and no key created
	lt.Hit("k", t0.Add(6*time.Second)) // exactly the partly weighted oldest slot: counted
	at := t0.Add(10*time.Second + 500*time.Millisecond)
	want := (2 + 0.5*1) / 4.0
	if got := lt.KeyLoad("k", at); !near(got, want, 1e-12) {
		t.Errorf("KeyLoad = %v, want %v", got, want)
	}
	if got := lt.Load(at); !near(got, want, 1e-12) {
		t.Errorf("Load = %v, want %v", got, want)
	}
	if lt.Keys() != 1 {
		t.Errorf("Keys = %d, want 1", lt.Keys())
	}
	// Reading in the past of the clock never sees expired counters nor future ones.
	if got := lt.Load(t0.Add(5 * time.Second)); got != 0 {
		t.Errorf("Load before the window = %v, want 0", got)
	}
}

// HitN(k, t, n) must leave a tracker exactly as n calls of Hit(k, t) do: late, expired and
// current times, zero counts, and new keys (the simulator's direct queries rely on it).
func TestHitNIsRepeatedHit(t *testing.T) {
	one, bulk := mustTracker(t, 4*time.Second, 4), mustTracker(t, 4*time.Second, 4)
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []overlay.Key{"a", "b", "c"}
	clock := 10 * time.Second
	for range 500 {
		clock += time.Duration(rng.IntN(700)) * time.Millisecond
		at := t0.Add(clock - time.Duration(rng.IntN(6000))*time.Millisecond) // late up to 6 s
		k, n := keys[rng.IntN(len(keys))], uint32(rng.IntN(4))
		for range n {
			one.Hit(k, at)
		}
		bulk.HitN(k, at, n)
		if n == 0 { // Hit(k, at) zero times does not move the clock: neither may HitN
			continue
		}
		if a, b := snapshot(one, keys, t0.Add(clock)), snapshot(bulk, keys, t0.Add(clock)); !slices.Equal(a, b) {
			t.Fatalf("at %v after HitN(%q, %d): %v, repeated Hit: %v", clock, k, n, b, a)
		}
	}
}

func TestSmoothAtSlotBoundaries(t *testing.T) {
	const slots = 8
	lt := mustTracker(t, 8*time.Second, slots) // 1 s slots
	rng := rand.New(rand.NewPCG(1, 2))
	var maxSlot float64
	perSlot := map[int64]float64{}
	for range 2000 {
		at := t0.Add(time.Duration(rng.Int64N(int64(8 * time.Second))))
		lt.Hit(overlay.Key([]byte{byte(rng.IntN(20))}), at)
		s, _ := lt.slotOf(at)
		perSlot[s]++
		maxSlot = max(maxSlot, perSlot[s])
	}
	// No more hits: between t0+8s and t0+17s the load may only decay, and continuously.
	const w = 8.0
	for b := 8; b <= 17; b++ {
		edge := t0.Add(time.Duration(b) * time.Second)
		before, after := lt.Load(edge.Add(-time.Nanosecond)), lt.Load(edge)
		// The decay over 1 ns is at most maxSlot/W per second · 1e-9 s.
		if math.Abs(before-after) > maxSlot/w*1e-9+1e-9 {
			t.Errorf("load jumps at slot boundary %d: %v -> %v", b, before, after)
		}
	}
	prev := lt.Load(t0.Add(8 * time.Second))
	const step = 10 * time.Millisecond
	for at := t0.Add(8*time.Second + step); at.Before(t0.Add(17 * time.Second)); at = at.Add(step) {
		cur := lt.Load(at)
		if cur > prev+1e-9 || prev-cur > maxSlot/w*step.Seconds()+1e-9 {
			t.Fatalf("load at %v: %v after %v, not a continuous decay", at.Sub(t0), cur, prev)
		}
		prev = cur
	}
	if prev > 1e-9 {
		t.Errorf("load after the window = %v, want 0", prev)
	}
}

// model is a brute-force reference for the tracker: every count kept forever in a map, the
// formula of the LoadTracker doc evaluated directly.
type model struct {
	slots, slotLen int64
	clock          int64
	keys           map[overlay.Key]map[int64]uint64
}

func newModel(lt *LoadTracker) *model {
	return &model{slots: lt.slots, slotLen: lt.slotLen, clock: math.MinInt64, keys: map[overlay.Key]map[int64]uint64{}}
}

func (m *model) slot(now time.Time) int64 {
	ns := now.UnixNano()
	s := ns / m.slotLen
	if ns%m.slotLen < 0 {
		s--
	}
	return s
}

// tick advances the model's clock; counts that fall out of the window are forgotten.
func (m *model) tick(now time.Time) {
	m.clock = max(m.clock, m.slot(now))
	for _, counts := range m.keys {
		for s := range counts {
			if s < m.lo() {
				delete(counts, s)
			}
		}
	}
}
func (m *model) lo() int64 { return subSat(m.clock, m.slots) }

func (m *model) add(k overlay.Key, s int64, c uint64) {
	if m.keys[k] == nil {
		m.keys[k] = map[int64]uint64{}
	}
	m.keys[k][s] += c
}

func (m *model) hit(k overlay.Key, now time.Time) {
	m.tick(now)
	if s := m.slot(now); s >= m.lo() {
		m.add(k, s, 1)
	}
}

func (m *model) live(k overlay.Key) map[int64]uint64 {
	out := map[int64]uint64{}
	for s, c := range m.keys[k] {
		if s >= m.lo() && c > 0 {
			out[s] = c
		}
	}
	return out
}

func (m *model) keyLoad(k overlay.Key, now time.Time) float64 {
	cur := m.slot(now)
	f := float64(now.UnixNano()-cur*m.slotLen) / float64(m.slotLen)
	var a, b float64
	for s, c := range m.live(k) {
		switch {
		case s > cur:
		case cur-s < m.slots:
			a += float64(c)
		case cur-s == m.slots:
			b += float64(c)
		}
	}
	return (a + (1-f)*b) / (float64(m.slots*m.slotLen) / 1e9)
}

func (m *model) export(r overlay.Range, now time.Time) []*pb.KeyLoad {
	m.tick(now)
	var above, wrapped []overlay.Key // from the piece's start up, then from the bottom of the key space
	for k := range m.keys {
		switch {
		case !r.Contains(k):
		case k >= r.Start:
			above = append(above, k)
		default:
			wrapped = append(wrapped, k)
		}
	}
	slices.Sort(above)
	slices.Sort(wrapped)
	keys := append(above, wrapped...)
	var out []*pb.KeyLoad
	for _, k := range keys {
		live := m.live(k)
		delete(m.keys, k)
		if len(live) == 0 {
			continue
		}
		hi, lo := int64(math.MinInt64), int64(math.MaxInt64)
		for s := range live {
			hi, lo = max(hi, s), min(lo, s)
		}
		e := &pb.KeyLoad{Key: []byte(k), Slot: hi}
		for s := hi; s >= lo; s-- {
			e.Counts = append(e.Counts, uint32(live[s]))
		}
		out = append(out, e)
	}
	return out
}

func (m *model) imp(loads []*pb.KeyLoad, now time.Time) {
	m.tick(now)
	for _, e := range loads {
		newest := min(e.Slot, m.clock)
		for i, c := range e.Counts {
			if s := newest - int64(i); s >= m.lo() && c > 0 {
				m.add(overlay.Key(e.Key), s, uint64(c))
			}
		}
	}
}

func (m *model) compact(now time.Time) {
	m.tick(now)
	for k := range m.keys {
		if len(m.live(k)) == 0 {
			delete(m.keys, k)
		}
	}
}

func sameLoads(a, b []*pb.KeyLoad) bool {
	return slices.EqualFunc(a, b, func(x, y *pb.KeyLoad) bool {
		return string(x.Key) == string(y.Key) && x.Slot == y.Slot && slices.Equal(x.Counts, y.Counts)
	})
}

// TestAgainstModel drives two trackers (a node and its neighbour) with random hits, exports,
// imports between them, drops and compactions at wandering times, and checks after every step
// that each matches the reference model key by key, that Load equals the sum of the key loads,
// and that exports are identical to the model's.
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		slots := 1 + rng.IntN(6)
		window := time.Duration(1+rng.IntN(5)) * time.Second
		if seed == 7 {
			window = 1000 + 7 // odd ns lengths: slotLen does not divide the window
		}
		var lts [2]*LoadTracker
		var ms [2]*model
		for i := range lts {
			lts[i] = mustTracker(t, window, slots)
			ms[i] = newModel(lts[i])
		}
		const nkeys = 40
		universe := make([]overlay.Key, nkeys)
		for i := range universe {
			universe[i] = overlay.Uint64Key(uint64(i))
		}
		now := t0.Add(time.Duration(rng.Int64N(int64(window))))
		for step := range 3000 {
			switch p := rng.IntN(100); {
			case p < 3:
				now = now.Add(-time.Duration(rng.Int64N(int64(2 * window)))) // late events
			case p < 5:
				now = now.Add(time.Duration(rng.Int64N(int64(3 * window))))
			default:
				now = now.Add(time.Duration(rng.Int64N(int64(window) / 50)))
			}
			i := rng.IntN(2)
			lt, m := lts[i], ms[i]
			switch p := rng.IntN(100); {
			case p < 80:
				k := universe[min(rng.IntN(nkeys), rng.IntN(nkeys))] // skewed
				lt.Hit(k, now)
				m.hit(k, now)
			case p < 88:
				r := overlay.Range{Start: universe[rng.IntN(nkeys)], End: universe[rng.IntN(nkeys)]}
				got, want := lt.Export(r, now), m.export(r, now)
				if !sameLoads(got, want) {
					t.Fatalf("seed %d step %d: Export(%v) = %v, model %v", seed, step, r, got, want)
				}
				// The neighbour receives them a little later (or, with skew, earlier).
				later := now.Add(time.Duration(rng.Int64N(int64(window)/10) - int64(window)/40))
				if err := lts[1-i].Import(got, later); err != nil {
					t.Fatalf("seed %d step %d: Import: %v", seed, step, err)
				}
				ms[1-i].imp(got, later)
			case p < 93:
				r := overlay.Range{Start: universe[rng.IntN(nkeys)], End: universe[rng.IntN(nkeys)]}
				lt.Retain(r.Contains)
				for k := range m.keys {
					if !r.Contains(k) {
						delete(m.keys, k)
					}
				}
			case p < 96:
				lt.Compact(now)
				m.compact(now)
			default:
				// Foreign statistics, some stale, some from the future.
				var loads []*pb.KeyLoad
				for range rng.IntN(4) {
					s, _ := lt.slotOf(now)
					e := &pb.KeyLoad{Key: []byte(universe[rng.IntN(nkeys)]), Slot: s + rng.Int64N(int64(3*slots)) - int64(2*slots)}
					for range rng.IntN(slots + 2) {
						e.Counts = append(e.Counts, uint32(rng.IntN(3)))
					}
					loads = append(loads, e)
				}
				if err := lt.Import(loads, now); err != nil {
					t.Fatalf("seed %d step %d: Import: %v", seed, step, err)
				}
				m.imp(loads, now)
			}
			// Check both trackers at a time around now.
			at := now.Add(time.Duration(rng.Int64N(int64(2*window))) - window/2)
			for j := range lts {
				var sum float64
				for _, k := range universe {
					got, want := lts[j].KeyLoad(k, at), ms[j].keyLoad(k, at)
					if !near(got, want, 1e-12) {
						t.Fatalf("seed %d step %d tracker %d: KeyLoad(%v) = %v, model %v", seed, step, j, k, got, want)
					}
					sum += got
				}
				if got := lts[j].Load(at); !near(got, sum, 1e-9) {
					t.Fatalf("seed %d step %d tracker %d: Load = %v, sum of key loads %v", seed, step, j, got, sum)
				}
				if lts[j].Keys() != len(ms[j].keys) {
					t.Fatalf("seed %d step %d tracker %d: Keys = %d, model %d", seed, step, j, lts[j].Keys(), len(ms[j].keys))
				}
			}
		}
	}
}

func TestExportImportMovesLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := mustTracker(t, 10*time.Second, 10)
	b := mustTracker(t, 10*time.Second, 10)
	var keys []overlay.Key
	for i := range 100 {
		keys = append(keys, overlay.Uint64Key(uint64(i*10)))
	}
	now := t0
	for range 20000 {
		now = now.Add(time.Duration(rng.Int64N(int64(time.Millisecond))))
		a.Hit(keys[rng.IntN(len(keys))], now)
	}
	// b already serves some of its own keys, and one of the moved keys.
	for range 500 {
		b.Hit(overlay.Uint64Key(5), now)
		b.Hit(keys[30], now)
	}
	piece := overlay.Range{Start: keys[20], End: keys[60]}
	times := []time.Time{now, now.Add(3 * time.Second), now.Add(9 * time.Second)}
	before := map[overlay.Key][]float64{}
	var totalA, totalB []float64
	for _, at := range times {
		totalA = append(totalA, a.Load(at))
		totalB = append(totalB, b.Load(at))
		for _, k := range keys {
			before[k] = append(before[k], a.KeyLoad(k, at)+b.KeyLoad(k, at))
		}
	}
	// Only the keys inside the piece move.
	loads := a.Export(piece, now)
	if len(loads) != 40 {
		t.Fatalf("exported %d keys, want 40", len(loads))
	}
	for _, e := range loads {
		if len(e.Counts) == 0 || len(e.Counts) > 11 || e.Counts[0] == 0 || e.Counts[len(e.Counts)-1] == 0 {
			t.Fatalf("bad export entry %v", e)
		}
	}
	if err := b.Import(loads, now); err != nil {
		t.Fatal(err)
	}
	if a.Keys() != 60 {
		t.Errorf("a tracks %d keys after export, want 60", a.Keys())
	}
	for i, at := range times {
		if got, want := a.Load(at)+b.Load(at), totalA[i]+totalB[i]; !near(got, want, 1e-12) {
			t.Errorf("at +%v: total load %v after the move, %v before", at.Sub(now), got, want)
		}
		for _, k := range keys {
			inA, inB := a.KeyLoad(k, at), b.KeyLoad(k, at)
			if piece.Contains(k) && inA != 0 || !piece.Contains(k) && inB != 0 {
				t.Fatalf("key %v: load %v left in a, %v in b", k, inA, inB)
			}
			if !near(inA+inB, before[k][i], 1e-12) {
				t.Errorf("key %v at +%v: load %v after the move, %v before", k, at.Sub(now), inA+inB, before[k][i])
			}
		}
	}
	// Exporting again finds nothing.
	if again := a.Export(piece, now); len(again) != 0 {
		t.Errorf("second export returned %d entries", len(again))
	}
}

func TestExportFormat(t *testing.T) {
	lt := mustTracker(t, 8*time.Second, 4) // 2 s slots
	base := time.Unix(0, 0)
	lt.Hit("k", base.Add(16*time.Second)) // slot 8
	lt.Hit("k", base.Add(21*time.Second)) // slot 10
	lt.Hit("k", base.Add(20*time.Second)) // slot 10
	lt.Hit("x", base.Add(20*time.Second))
	got := lt.Export(overlay.Range{Start: "a", End: "m"}, base.Add(21*time.Second))
	want := []*pb.KeyLoad{{Key: []byte("k"), Slot: 10, Counts: []uint32{2, 0, 1}}}
	if !sameLoads(got, want) {
		t.Errorf("Export = %v, want %v", got, want)
	}
	if lt.Keys() != 1 || lt.KeyLoad("x", base.Add(21*time.Second)) == 0 {
		t.Errorf("x should remain: %d keys", lt.Keys())
	}
	// A wrapping piece holds x.
	got = lt.Export(overlay.Range{Start: "w", End: "b"}, base.Add(21*time.Second))
	if len(got) != 1 || lt.Load(base.Add(21*time.Second)) != 0 {
		t.Errorf("wrapping export = %v, load left %v", got, lt.Load(base.Add(21*time.Second)))
	}
}

func TestImportAlignment(t *testing.T) {
	lt := mustTracker(t, 8*time.Second, 4) // 2 s slots
	now := time.Unix(200, 0)               // slot 100
	ref := mustTracker(t, 8*time.Second, 4)
	tests := []struct {
		name  string
		entry *pb.KeyLoad
		hits  map[int64]int // slot -> hits the entry must amount to
	}{
		{"aligned", &pb.KeyLoad{Key: []byte("a"), Slot: 100, Counts: []uint32{3, 0, 2}}, map[int64]int{100: 3, 98: 2}},
		{"older", &pb.KeyLoad{Key: []byte("b"), Slot: 97, Counts: []uint32{1, 4, 5}}, map[int64]int{97: 1, 96: 4}},
		{"future shifted", &pb.KeyLoad{Key: []byte("c"), Slot: 105, Counts: []uint32{3, 2}}, map[int64]int{100: 3, 99: 2}},
		{"stale", &pb.KeyLoad{Key: []byte("d"), Slot: 95, Counts: []uint32{7}}, nil},
		{"empty counts", &pb.KeyLoad{Key: []byte("e"), Slot: 100}, nil},
		{"zeros", &pb.KeyLoad{Key: []byte("f"), Slot: 100, Counts: []uint32{0, 0}}, nil},
	}
	for _, tc := range tests {
		if err := lt.Import([]*pb.KeyLoad{tc.entry}, now); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for s, n := range tc.hits {
			for range n {
				ref.Hit(overlay.Key(tc.entry.Key), time.Unix(0, s*int64(2*time.Second)))
			}
		}
	}
	// Merging with existing counts.
	if err := lt.Import([]*pb.KeyLoad{{Key: []byte("a"), Slot: 99, Counts: []uint32{1, 1}}}, now); err != nil {
		t.Fatal(err)
	}
	ref.Hit("a", time.Unix(198, 0))
	ref.Hit("a", time.Unix(196, 0))
	if lt.Keys() != 3 {
		t.Errorf("Keys = %d, want 3 (stale, empty and zero entries create no key)", lt.Keys())
	}
	for _, at := range []time.Time{now, now.Add(time.Second), now.Add(5 * time.Second)} {
		for _, k := range []overlay.Key{"a", "b", "c", "d", "e", "f"} {
			if got, want := lt.KeyLoad(k, at), ref.KeyLoad(k, at); !near(got, want, 1e-12) {
				t.Errorf("KeyLoad(%s) at %v = %v, want %v", k, at.Unix(), got, want)
			}
		}
		if got, want := lt.Load(at), ref.Load(at); !near(got, want, 1e-12) {
			t.Errorf("Load at %v = %v, want %v", at.Unix(), got, want)
		}
	}
}

func TestImportSaturates(t *testing.T) {
	lt := mustTracker(t, 4*time.Second, 4)
	e := []*pb.KeyLoad{{Key: []byte("k"), Slot: 10, Counts: []uint32{math.MaxUint32}}}
	now := time.Unix(10, 0)
	for range 3 {
		if err := lt.Import(e, now); err != nil {
			t.Fatal(err)
		}
	}
	lt.Hit("k", now)
	want := float64(math.MaxUint32) / 4
	if got := lt.KeyLoad("k", now); got != want || lt.Load(now) != want {
		t.Errorf("KeyLoad %v, Load %v; want both %v", got, lt.Load(now), want)
	}
	lt.Retain(func(overlay.Key) bool { return false })
	if lt.Load(now) != 0 || lt.Keys() != 0 {
		t.Errorf("after Retain of nothing: load %v, %d keys", lt.Load(now), lt.Keys())
	}
}

// snapshot captures everything observable about a tracker over keys at a few times.
func snapshot(lt *LoadTracker, keys []overlay.Key, now time.Time) []float64 {
	out := []float64{float64(lt.Keys())}
	for _, at := range []time.Time{now, now.Add(lt.Window() / 2), now.Add(lt.Window())} {
		out = append(out, lt.Load(at))
		for _, k := range keys {
			out = append(out, lt.KeyLoad(k, at))
		}
	}
	return out
}

func TestImportValidation(t *testing.T) {
	lt := mustTracker(t, 4*time.Second, 4)
	keys := []overlay.Key{"a", "b", "c"}
	now := t0
	for i := range 30 {
		lt.Hit(keys[i%3], now.Add(time.Duration(i)*100*time.Millisecond))
	}
	now = now.Add(3 * time.Second)
	good := &pb.KeyLoad{Key: []byte("a"), Slot: 1_000_000_003, Counts: []uint32{5, 5}}
	tests := []struct {
		name  string
		loads []*pb.KeyLoad
	}{
		{"too many counts", []*pb.KeyLoad{good, {Key: []byte("b"), Slot: 1_000_000_003, Counts: make([]uint32, 6)}}},
		{"empty key", []*pb.KeyLoad{good, {Key: nil, Slot: 1_000_000_003, Counts: []uint32{1}}}},
		{"nil entry", []*pb.KeyLoad{good, nil}},
	}
	for _, tc := range tests {
		before := snapshot(lt, keys, now)
		// A far future time: the clock must not move either.
		if err := lt.Import(tc.loads, now.Add(time.Hour)); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
		if after := snapshot(lt, keys, now); !slices.Equal(before, after) {
			t.Errorf("%s: tracker changed by a failed Import:\n%v\n%v", tc.name, before, after)
		}
	}
	// Exactly slots+1 counts is fine.
	if err := lt.Import([]*pb.KeyLoad{{Key: []byte("b"), Slot: 1, Counts: make([]uint32, 5)}}, now); err != nil {
		t.Errorf("slots+1 counts: %v", err)
	}
}

func TestSplit(t *testing.T) {
	lt := mustTracker(t, 10*time.Second, 10)
	loads := map[overlay.Key]int{"a": 10, "b": 0, "c": 20, "d": 0, "e": 5} // hits; load = hits/10
	for k, n := range loads {
		for range n {
			lt.Hit(k, t0)
		}
	}
	asc := []overlay.Key{"a", "b", "c", "d", "e"}
	desc := []overlay.Key{"f", "e", "d", "c", "b", "a"} // f: untracked, zero load, at the top
	down := []struct {
		want  float64
		split overlay.Key
		got   float64
		n     int
		ok    bool
	}{
		{-1, "f", 0, 1, true},
		{0, "f", 0, 1, true},
		{0.1, "e", 0.5, 2, true},
		{0.5, "e", 0.5, 2, true},
		{0.6, "c", 2.5, 4, true},
		{2.5, "c", 2.5, 4, true},
		{3.5, "a", 3.5, 6, true},
		{3.6, "a", 3.5, 6, false},
		{math.Inf(1), "a", 3.5, 6, false},
	}
	for _, tc := range down {
		split, got, n, ok := lt.SplitDown(seq(desc...), tc.want, t0)
		if split != tc.split || !near(got, tc.got, 1e-12) || n != tc.n || ok != tc.ok {
			t.Errorf("SplitDown(want %v) = %q, %v, %d, %v; want %q, %v, %d, %v", tc.want, split, got, n, ok, tc.split, tc.got, tc.n, tc.ok)
		}
	}
	up := []struct {
		want  float64
		split overlay.Key
		got   float64
		n     int
		ok    bool
	}{
		{0, "a\x00", 1, 1, true},
		{1, "a\x00", 1, 1, true},
		{1.5, "c\x00", 3, 3, true},
		{3.1, "e\x00", 3.5, 5, true},
		{4, "e\x00", 3.5, 5, false},
	}
	for _, tc := range up {
		split, got, n, ok := lt.SplitUp(seq(asc...), tc.want, t0)
		if split != tc.split || !near(got, tc.got, 1e-12) || n != tc.n || ok != tc.ok {
			t.Errorf("SplitUp(want %v) = %q, %v, %d, %v; want %q, %v, %d, %v", tc.want, split, got, n, ok, tc.split, tc.got, tc.n, tc.ok)
		}
	}
	// The piece [rangeStart, split) holds exactly the keys up to the one where the sum was reached.
	split, _, _, _ := lt.SplitUp(seq(asc...), 1.5, t0)
	if r := (overlay.Range{Start: "", End: split}); !r.Contains("c") || r.Contains("c\x00") || r.Contains("d") {
		t.Errorf("piece [\"\", %q) does not hold exactly a..c", split)
	}
	// No keys at all.
	if split, got, n, ok := lt.SplitDown(seq(), 1, t0); split != "" || got != 0 || n != 0 || ok {
		t.Errorf("SplitDown(no keys) = %q, %v, %d, %v", split, got, n, ok)
	}
	if split, got, n, ok := lt.SplitUp(seq(), 0, t0); split != "" || got != 0 || n != 0 || ok {
		t.Errorf("SplitUp(no keys) = %q, %v, %d, %v", split, got, n, ok)
	}
	// The scan stops as soon as the sum is reached.
	yielded := 0
	counting := func(yield func(overlay.Key) bool) {
		for _, k := range asc {
			yielded++
			if !yield(k) {
				return
			}
		}
	}
	lt.SplitUp(counting, 0.5, t0)
	if yielded != 1 {
		t.Errorf("SplitUp consumed %d keys, want 1", yielded)
	}
}

// TestSplitMatchesLoad: over all the keys, at an arbitrary instant, the accumulated got equals the
// node load; and the piece found is the shortest one.
func TestSplitMatchesLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lt := mustTracker(t, 6*time.Second, 6)
	keys := uint64Keys(200)
	now := randomHits(lt, keys, 5000, 2*time.Millisecond, rng)
	at := now.Add(1234567 * time.Microsecond)
	desc := slices.Clone(keys)
	slices.Reverse(desc)
	_, got, n, ok := lt.SplitDown(seq(desc...), math.Inf(1), at)
	if ok || n != len(keys) || !near(got, lt.Load(at), 1e-12) {
		t.Fatalf("whole scan: got %v (load %v), n %d, ok %v", got, lt.Load(at), n, ok)
	}
	for range 100 {
		want := rng.Float64() * lt.Load(at)
		split, got, n, ok := lt.SplitDown(seq(desc...), want, at)
		if !ok || got < want || desc[n-1] != split {
			t.Fatalf("SplitDown(%v) = %v, %v, %d, %v", want, split, got, n, ok)
		}
		// One key fewer would not have been enough.
		var less float64
		for _, k := range desc[:n-1] {
			less += lt.KeyLoad(k, at)
		}
		if n > 1 && less >= want*(1+1e-12) {
			t.Fatalf("SplitDown(%v): piece of %d keys is not the shortest (%d keys carry %v)", want, n, n-1, less)
		}
	}
}

func TestOddTimesDoNotPanic(t *testing.T) {
	times := []time.Time{
		{},
		time.Unix(0, math.MinInt64),
		time.Unix(0, math.MaxInt64),
		time.Unix(-1, 0),
		time.Unix(0, -1),
		time.Unix(-1<<40, 12345),
		time.Unix(0, math.MinInt64),
		t0,
		time.Unix(0, math.MinInt64+1),
	}
	for _, cfg := range []struct {
		window time.Duration
		slots  int
	}{{3, 3}, {time.Minute, 12}, {time.Second, 7}, {math.MaxInt64, 1}, {math.MaxInt64, 1000}} {
		lt := mustTracker(t, cfg.window, cfg.slots)
		other := mustTracker(t, cfg.window, cfg.slots)
		for i, now := range times {
			lt.Hit("k", now)
			lt.Hit(overlay.Key(rune('a'+i)), now)
			for _, at := range times {
				l := lt.Load(at)
				if math.IsNaN(l) || l < 0 || math.IsInf(l, 0) || !near(l, lt.KeyLoad("k", at)+sumKeys(lt, at, len(times)), 1e-9) {
					t.Fatalf("%v/%d: hit at %d, Load(%v) = %v", cfg.window, cfg.slots, now.UnixNano(), at.UnixNano(), l)
				}
			}
			loads := lt.Export(overlay.Range{Start: "k", End: "k\x00"}, now)
			loads = append(loads,
				&pb.KeyLoad{Key: []byte("m"), Slot: math.MinInt64, Counts: []uint32{1, 2}},
				&pb.KeyLoad{Key: []byte("n"), Slot: math.MaxInt64, Counts: []uint32{1, 2}})
			if err := other.Import(loads, now); err != nil {
				t.Fatal(err)
			}
			if err := lt.Import(other.Export(overlay.FullRange, now), now); err != nil {
				t.Fatal(err)
			}
			lt.Compact(now)
			other.SplitDown(seq("n", "m", "k"), 1, now)
			other.SplitUp(seq("k", "m", "n"), 1, now)
		}
	}
}

func sumKeys(lt *LoadTracker, at time.Time, n int) float64 {
	var s float64
	for i := range n {
		s += lt.KeyLoad(overlay.Key(rune('a'+i)), at)
	}
	return s + lt.KeyLoad("m", at) + lt.KeyLoad("n", at)
}

func BenchmarkHit(b *testing.B) {
	lt, _ := NewLoadTracker(time.Minute, 12)
	keys := make([]overlay.Key, 1024)
	for i := range keys {
		keys[i] = overlay.Uint64Key(uint64(i))
	}
	now := t0
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		lt.Hit(keys[i%len(keys)], now)
	}
}

// TestLoadOfIsWhatImportAdds: the load a piece's statistics would add, read without importing
// them, is what importing them adds — received at once, later, after part of the window has
// passed, and by a receiver whose clock is behind the giver's.
func TestLoadOfIsWhatImportAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	giver := mustTracker(t, 10*time.Second, 10)
	keys := uint64Keys(50)
	now := randomHits(giver, keys, 20000, time.Millisecond, rng)
	loads := giver.Export(overlay.Range{Start: keys[10], End: keys[40]}, now)
	if len(loads) == 0 {
		t.Fatal("nothing exported")
	}
	receiver := func(clock time.Time) *LoadTracker {
		r := mustTracker(t, 10*time.Second, 10)
		for range 300 {
			r.Hit(keys[0], clock)
			r.Hit(keys[20], clock) // a key of the piece, already served here too
		}
		return r
	}
	for _, c := range []struct{ clock, at time.Time }{
		{now, now},
		{now, now.Add(300 * time.Millisecond)},
		{now, now.Add(2500 * time.Millisecond)},
		{now, now.Add(9 * time.Second)},
		{now, now.Add(11 * time.Second)},                       // expired
		{now.Add(-3 * time.Second), now.Add(-2 * time.Second)}, // the receiver's clock behind
		{now.Add(-time.Second), now.Add(-500 * time.Millisecond)},
	} {
		r := receiver(c.clock)
		before, predicted := r.Load(c.at), r.LoadOf(loads, c.at)
		if err := r.Import(loads, c.at); err != nil {
			t.Fatal(err)
		}
		if added := r.Load(c.at) - before; math.Abs(added-predicted) > 1e-9 {
			t.Errorf("received at %v (clock %v): import added %v, LoadOf said %v", c.at.Sub(now), c.clock.Sub(now), added, predicted)
		}
	}
	if got := mustTracker(t, 10*time.Second, 10).LoadOf(nil, now); got != 0 {
		t.Errorf("LoadOf(nil) = %v", got)
	}
}
