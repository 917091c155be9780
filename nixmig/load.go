package nixmig

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// LoadTracker measures item loads (SPEC §1): requests served per key per second over a sliding
// window, and the node load as their sum.
//
// Time is cut into slots of fixed length slotLen = window/slots, numbered since the Unix epoch
// (slot of t = ⌊t.UnixNano()/slotLen⌋). Each key keeps one request counter per slot in a ring of
// slots+1 counters, so its memory is bounded by slots+1 uint32 values whatever its request rate.
// The load at time now, with cur = slot(now) and f ∈ [0, 1) the elapsed fraction of slot cur, is
//
//	l_k(now) = ( Σ_{i=0..slots-1} c_k[cur−i] + (1−f)·c_k[cur−slots] ) / W
//
// where W = slots·slotLen (the window, rounded down to a whole number of nanoseconds per slot).
// The partly weighted oldest slot makes the window slide smoothly: crossing a slot boundary does
// not change the load, and between requests it decays linearly.
//
// The node keeps the same ring for the total over all its keys, updated by every Hit, Import,
// Export and Drop, so Load costs O(slots) and never visits the keys. Because the denominator W is
// the same constant for every key (it does not depend on how long a key has been known, on its
// first or last request, or on how many slots it has used), the formula is linear in the counters,
// and the total's counters are exactly the sums of the keys' counters: Load(now) = Σ_k KeyLoad(k,
// now) up to float rounding, at every instant, including right after a transfer of statistics.
//
// The tracker's clock is the newest slot it has seen through Hit, Import, Export or Compact (it
// never calls time.Now: the caller passes the time, virtual or real). Counters older than
// clock−slots are expired everywhere (per key and in the total). A request stamped earlier than the
// clock is still counted in its own slot if that slot is inside the window and ignored otherwise.
// Keys whose counters have all expired keep their (stale) entry until they are touched again or
// Compact runs; they contribute nothing to any load.
//
// Hit costs O(1) (at most slots+1 counters are cleared when a key or the clock advances), KeyLoad
// and Load O(slots). A LoadTracker is not safe for concurrent use.
type LoadTracker struct {
	slots   int64
	slotLen int64   // nanoseconds
	wsec    float64 // W in seconds = slots·slotLen
	keys    map[overlay.Key]*keyLoad
	total   ring[uint64] // total.slot is the tracker's clock
}

// keyLoad holds one key's counters: slots+1 per-slot counts relative to its newest slot.
type keyLoad = ring[uint32]

// ring is a circular array of len(c) per-slot counters; slot s lives at index s mod len(c).
// slot is the newest slot the ring has been advanced to; it holds slots slot−len(c)+1 … slot.
type ring[T uint32 | uint64] struct {
	slot int64
	c    []T
}

func (r *ring[T]) idx(s int64) int {
	n := int64(len(r.c))
	i := s % n
	if i < 0 {
		i += n
	}
	return int(i)
}

// advance moves the ring's newest slot forward to s, zeroing the counters of the slots that enter.
func (r *ring[T]) advance(s int64) {
	if s <= r.slot {
		return
	}
	gap := uint64(s) - uint64(r.slot) // exact even when s−r.slot overflows int64
	if gap >= uint64(len(r.c)) {
		clear(r.c)
	} else {
		for i := int64(1); i <= int64(gap); i++ {
			r.c[r.idx(r.slot+i)] = 0
		}
	}
	r.slot = s
}

// NewLoadTracker returns a tracker with the given window cut into slots slots.
func NewLoadTracker(window time.Duration, slots int) (*LoadTracker, error) {
	if window <= 0 {
		return nil, fmt.Errorf("load tracker: window %v must be positive", window)
	}
	if slots < 1 {
		return nil, fmt.Errorf("load tracker: %d slots, need at least 1", slots)
	}
	slotLen := int64(window) / int64(slots)
	if slotLen <= 0 {
		return nil, fmt.Errorf("load tracker: window %v too short for %d slots", window, slots)
	}
	return &LoadTracker{
		slots:   int64(slots),
		slotLen: slotLen,
		wsec:    float64(slotLen) * float64(slots) / float64(time.Second),
		keys:    make(map[overlay.Key]*keyLoad),
		total:   ring[uint64]{slot: math.MinInt64, c: make([]uint64, slots+1)},
	}, nil
}

// Window is the effective window W = slots·slotLen (window rounded down to a multiple of slots ns).
func (t *LoadTracker) Window() time.Duration { return time.Duration(t.slots * t.slotLen) }

// Slots is the number of slots in the window; each key keeps Slots()+1 counters.
func (t *LoadTracker) Slots() int { return int(t.slots) }

// Keys is the number of keys tracked, including expired ones that Compact has not dropped yet.
func (t *LoadTracker) Keys() int { return len(t.keys) }

// slotOf returns the slot of now (floor division, correct for times before the epoch) and the
// elapsed fraction of that slot. now.UnixNano must be representable (years 1678–2262).
func (t *LoadTracker) slotOf(now time.Time) (cur int64, f float64) {
	ns := now.UnixNano()
	cur, rem := ns/t.slotLen, ns%t.slotLen
	if rem < 0 {
		cur--
		rem += t.slotLen
	}
	return cur, float64(rem) / float64(t.slotLen)
}

// subSat returns a−b for b ≥ 0, saturating at math.MinInt64.
func subSat(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// lo is the oldest slot not yet expired: clock − slots.
func (t *LoadTracker) lo() int64 { return subSat(t.total.slot, t.slots) }

// valid returns the slots [from, to] in which k holds live counters; ok is false if none.
func (t *LoadTracker) valid(k *keyLoad) (from, to int64, ok bool) {
	lo := t.lo()
	if k.slot < lo {
		return 0, 0, false
	}
	return max(subSat(k.slot, t.slots), lo), k.slot, true
}

// parts splits the load formula of a ring, restricted to its live slots [from, to], into its two
// integer sums at slot cur: a = Σ_{i<slots} c[cur−i], b = c[cur−slots].
func parts[T uint32 | uint64](r *ring[T], from, to, cur, slots int64) (a, b uint64) {
	to = min(to, cur)
	from = max(from, subSat(cur, slots))
	if to < from {
		return 0, 0
	}
	for s := to; ; s-- {
		v := uint64(r.c[r.idx(s)])
		if uint64(cur)-uint64(s) < uint64(slots) {
			a += v
		} else {
			b += v
		}
		if s == from {
			return a, b
		}
	}
}

func (t *LoadTracker) rate(a, b uint64, f float64) float64 {
	return (float64(a) + (1-f)*float64(b)) / t.wsec
}

func (t *LoadTracker) keyParts(k overlay.Key, cur int64) (a, b uint64) {
	kl := t.keys[k]
	if kl == nil {
		return 0, 0
	}
	from, to, ok := t.valid(kl)
	if !ok {
		return 0, 0
	}
	return parts(kl, from, to, cur, t.slots)
}

// KeyLoad returns the load of k (requests per second) at now; 0 for an unknown key.
func (t *LoadTracker) KeyLoad(k overlay.Key, now time.Time) float64 {
	cur, f := t.slotOf(now)
	a, b := t.keyParts(k, cur)
	return t.rate(a, b, f)
}

// Load returns the node load at now: the sum of the loads of all tracked keys, in O(slots).
func (t *LoadTracker) Load(now time.Time) float64 {
	cur, f := t.slotOf(now)
	a, b := parts(&t.total, t.lo(), t.total.slot, cur, t.slots)
	return t.rate(a, b, f)
}

// tick advances the tracker's clock to slot s if s is newer.
func (t *LoadTracker) tick(s int64) { t.total.advance(s) }

// add adds c requests to k in slot s, which must be live (lo ≤ s ≤ clock). Counters saturate at
// math.MaxUint32; the total gains exactly what the key gained.
func (t *LoadTracker) add(k overlay.Key, s int64, c uint32) {
	kl := t.keys[k]
	if kl == nil {
		kl = &keyLoad{slot: s, c: make([]uint32, t.slots+1)}
		t.keys[k] = kl
	} else if kl.slot < t.lo() {
		// Every counter has expired: start afresh rather than keep stale values in the ring.
		clear(kl.c)
		kl.slot = s
	}
	kl.advance(s)
	if s < subSat(kl.slot, t.slots) {
		return // cannot happen for live s (kl.slot ≤ clock), kept as a guard
	}
	p := &kl.c[kl.idx(s)]
	applied := min(c, math.MaxUint32-*p)
	*p += applied
	t.total.c[t.total.idx(s)] += uint64(applied)
}

// Hit records one request served for k at now (+1 in slot(now)). A time earlier than the clock is
// counted in its own slot when that slot is still inside the window and ignored otherwise; it
// never moves the clock back.
func (t *LoadTracker) Hit(k overlay.Key, now time.Time) { t.HitN(k, now, 1) }

// HitN records n requests served for k at now, as n calls of Hit would.
func (t *LoadTracker) HitN(k overlay.Key, now time.Time, n uint32) {
	s, _ := t.slotOf(now)
	t.tick(s)
	if s < t.lo() || n == 0 {
		return
	}
	t.add(k, s, n)
}

// remove forgets k, subtracting its live counters from the total; it returns k's entry (nil if
// k was not tracked) and its live slot span.
func (t *LoadTracker) remove(k overlay.Key) (kl *keyLoad, from, to int64, ok bool) {
	kl = t.keys[k]
	if kl == nil {
		return nil, 0, 0, false
	}
	delete(t.keys, k)
	from, to, ok = t.valid(kl)
	if !ok {
		return kl, 0, 0, false
	}
	for s := to; ; s-- {
		t.total.c[t.total.idx(s)] -= uint64(kl.c[kl.idx(s)])
		if s == from {
			break
		}
	}
	return kl, from, to, true
}

// Export removes the statistics of the keys of piece r and returns them for the wire, in order
// from the piece's start: every tracked key inside r, whether or not the node stores it — a key
// deleted since it was read is load the piece's new owner serves; left behind, it stayed this
// node's load with no key to give away. The node total loses exactly what is exported. Each
// entry has counts[i] for slot Slot−i, newest first, trailing zeros trimmed. Tracked keys inside
// r whose counters have all expired are dropped without being exported.
func (t *LoadTracker) Export(r overlay.Range, now time.Time) []*pb.KeyLoad {
	s, _ := t.slotOf(now)
	t.tick(s)
	var keys []overlay.Key
	for k := range t.keys {
		if r.Contains(k) {
			keys = append(keys, k)
		}
	}
	// Map order is random; the wire and the receiver's sums must not be. Clockwise from the
	// piece's start, as the store yields a piece that wraps round the top of the key space.
	slices.SortFunc(keys, func(a, b overlay.Key) int {
		if wa, wb := a < r.Start, b < r.Start; wa != wb {
			if wa {
				return 1 // past the top of the key space
			}
			return -1
		}
		return cmp.Compare(a, b)
	})
	var out []*pb.KeyLoad
	for _, k := range keys {
		kl, from, to, ok := t.remove(k)
		if !ok {
			continue
		}
		counts := make([]uint32, 0, to-from+1)
		last := 0
		for s := to; ; s-- {
			c := kl.c[kl.idx(s)]
			counts = append(counts, c)
			if c != 0 {
				last = len(counts)
			}
			if s == from {
				break
			}
		}
		if last == 0 {
			continue
		}
		out = append(out, &pb.KeyLoad{Key: []byte(k), Slot: to, Counts: counts[:last:last]})
	}
	return out
}

// Import adds statistics received with a piece (as produced by Export), merging them with counts
// already held for the same keys slot by slot. Counts older than the window (as of the clock,
// advanced to now) are dropped. An entry whose newest slot lies ahead of the clock (clock skew
// between nodes) is shifted back so that its newest slot is the clock's, keeping its shape. An
// entry with an empty key or more than slots+1 counts is an error, and then nothing is applied.
func (t *LoadTracker) Import(loads []*pb.KeyLoad, now time.Time) error {
	for i, e := range loads {
		switch {
		case e == nil:
			return fmt.Errorf("import load %d: nil entry", i)
		case len(e.Key) == 0:
			return fmt.Errorf("import load %d: %w", i, errEmptyKey)
		case int64(len(e.Counts)) > t.slots+1:
			return fmt.Errorf("import load %d (key %q): %d counts, at most %d", i, e.Key, len(e.Counts), t.slots+1)
		}
	}
	cur, _ := t.slotOf(now)
	t.tick(cur)
	lo := t.lo()
	for _, e := range loads {
		newest := min(e.Slot, t.total.slot)
		if newest < lo || len(e.Counts) == 0 {
			continue
		}
		// Slots newest−i for i ≤ span are live.
		span := min(uint64(newest)-uint64(lo), uint64(len(e.Counts)-1))
		k := overlay.Key(e.Key)
		for i := int64(0); i <= int64(span); i++ {
			if c := e.Counts[i]; c != 0 {
				t.add(k, newest-i, c)
			}
		}
	}
	return nil
}

var errEmptyKey = errors.New("empty key")

// LoadOf returns the load at now that statistics produced by Export would add to this tracker if
// imported now, without importing them (malformed entries count nothing).
func (t *LoadTracker) LoadOf(loads []*pb.KeyLoad, now time.Time) float64 {
	cur, f := t.slotOf(now)
	clock := max(t.total.slot, cur)
	lo := subSat(clock, t.slots)
	var a, b uint64
	for _, e := range loads {
		if e == nil || int64(len(e.Counts)) > t.slots+1 {
			continue
		}
		newest := min(e.Slot, clock)
		for i, c := range e.Counts {
			s := newest - int64(i)
			if s < lo { // lo ≥ cur − slots: older slots are out of the window
				break
			}
			if s > cur {
				continue
			}
			if cur-s < t.slots {
				a += uint64(c)
			} else {
				b += uint64(c)
			}
		}
	}
	return t.rate(a, b, f)
}

// Retain forgets every key that keep rejects (keys the node is no longer responsible for); the
// node total loses their load.
func (t *LoadTracker) Retain(keep func(overlay.Key) bool) {
	for k := range t.keys {
		if !keep(k) {
			t.remove(k)
		}
	}
}

// Compact advances the clock to now and drops every key whose counters have all expired. It
// visits all keys; run it occasionally, never on the hot path.
func (t *LoadTracker) Compact(now time.Time) {
	s, _ := t.slotOf(now)
	t.tick(s)
	lo := t.lo()
	for k, kl := range t.keys {
		if kl.slot < lo {
			delete(t.keys, k)
		}
	}
}

// SplitDown chooses a split key scanning a range downwards from its upper end (SPEC §4 step 1,
// clockwise helper). keys yields the range's keys in descending order. It accumulates their loads
// at now until the sum reaches want; split is the key where it does, and the piece is [split,
// rangeEnd), zero-load keys above split included. got is the piece's load and n its number of
// keys (every key yielded so far). If the keys run out first, ok is false and split, got and n
// describe all the keys yielded (split is the last one, "" if none). want ≤ 0 gives the first key.
func (t *LoadTracker) SplitDown(keys iter.Seq[overlay.Key], want float64, now time.Time) (split overlay.Key, got float64, n int, ok bool) {
	return t.split(keys, want, now)
}

// SplitUp chooses a split key scanning a range upwards from its lower end (SPEC §4 step 1,
// counter-clockwise helper). keys yields the range's keys in ascending order. It accumulates
// their loads until the sum reaches want at key k; the piece is [rangeStart, split) with split =
// k+"\x00". That is the immediate successor of k in byte order — no key lies strictly between k
// and k+"\x00" — so the half-open piece holds k and exactly the keys ≤ k, whatever other keys
// exist or are inserted later, without looking ahead to the next stored key (a boundary at k
// itself would leave k out). got, n and ok are as for SplitDown; when the keys run out, split is
// the successor of the last key yielded ("" if none).
func (t *LoadTracker) SplitUp(keys iter.Seq[overlay.Key], want float64, now time.Time) (split overlay.Key, got float64, n int, ok bool) {
	k, got, n, ok := t.split(keys, want, now)
	if n > 0 {
		split = k + "\x00"
	}
	return split, got, n, ok
}

// split accumulates key loads over keys until they reach want. The loads are summed as exact
// integer counter sums, so got for a set of keys equals what Load computes for the same counters.
func (t *LoadTracker) split(keys iter.Seq[overlay.Key], want float64, now time.Time) (last overlay.Key, got float64, n int, ok bool) {
	cur, f := t.slotOf(now)
	var a, b uint64
	for k := range keys {
		ka, kb := t.keyParts(k, cur)
		a += ka
		b += kb
		n++
		last = k
		got = t.rate(a, b, f)
		if got >= want {
			return last, got, n, true
		}
	}
	return last, got, n, false
}
