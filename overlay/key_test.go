package overlay

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"testing/quick"

	"pgregory.net/rapid"
)

// alphabet is the small byte alphabet the brute-force tests build their keys from: the two extreme
// bytes, their neighbours and a middle one.
var alphabet = []byte{0x00, 0x01, 0x7f, 0xff}

// allKeys returns every key of length 0..maxLen over alphabet, in ascending key order (MinKey first).
func allKeys(maxLen int) []Key {
	keys := []Key{MinKey}
	prev := []Key{MinKey}
	for l := 1; l <= maxLen; l++ {
		var next []Key
		for _, p := range prev {
			for _, c := range alphabet {
				next = append(next, p+Key([]byte{c}))
			}
		}
		keys = append(keys, next...)
		prev = next
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// universe returns the keys sorted and deduplicated, always including MinKey: a finite model of
// the circle.
func universe(keys ...Key) []Key {
	u := append([]Key{MinKey}, keys...)
	slices.Sort(u)
	return slices.Compact(u)
}

// walkBetween is the reference definition of Between: starting at a, step clockwise around the
// finite circle u (which must hold a, x and b) and report whether x is met no later than b.
func walkBetween(u []Key, a, x, b Key) bool {
	i, _ := slices.BinarySearch(u, a)
	for range len(u) {
		i = (i + 1) % len(u)
		if u[i] == x {
			return true
		}
		if u[i] == b {
			return false
		}
	}
	panic("walkBetween: keys not in universe")
}

// walkStrictlyBetween is the reference definition of StrictlyBetween: x is met strictly before b.
func walkStrictlyBetween(u []Key, a, x, b Key) bool {
	i, _ := slices.BinarySearch(u, a)
	for range len(u) {
		i = (i + 1) % len(u)
		if u[i] == b {
			return false
		}
		if u[i] == x {
			return true
		}
	}
	panic("walkStrictlyBetween: keys not in universe")
}

// genKey draws keys of length 0..4 over a slightly larger alphabet than the brute-force tests.
var genKey = rapid.Custom(func(t *rapid.T) Key {
	b := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff}), 0, 4).Draw(t, "bytes")
	return Key(b)
})

func TestMinKeyIsSmallest(t *testing.T) {
	if MinKey != "" {
		t.Fatalf("MinKey = %q, want empty", MinKey)
	}
	for _, k := range allKeys(2)[1:] {
		if !(MinKey < k) {
			t.Errorf("MinKey not below %q", k)
		}
	}
}

func TestKeyOrderIsLexicographic(t *testing.T) {
	// The tests below rely on Go's string order being bytewise lexicographic with prefixes first.
	ordered := []Key{"", "\x00", "\x00\x00", "\x00\xff", "\x01", "a", "a\x00", "a\x00\x00", "a\x01", "ab", "b", "\x7f", "\x80", "\xff", "\xff\x00", "\xff\xff"}
	for i := 1; i < len(ordered); i++ {
		if !(ordered[i-1] < ordered[i]) {
			t.Errorf("%q !< %q", ordered[i-1], ordered[i])
		}
		if bytes.Compare([]byte(ordered[i-1]), []byte(ordered[i])) >= 0 {
			t.Errorf("bytes.Compare disagrees on %q, %q", ordered[i-1], ordered[i])
		}
	}
}

func TestBetweenTable(t *testing.T) {
	tests := []struct {
		name                string
		a, x, b             Key
		between, strictlyBt bool
	}{
		// Plain interval (b, d].
		{"plain below", "b", "a", "d", false, false},
		{"plain at a", "b", "b", "d", false, false},
		{"plain just after a", "b", "b\x00", "d", true, true},
		{"plain inside", "b", "c", "d", true, true},
		{"plain at b", "b", "d", "d", true, false},
		{"plain just after b", "b", "d\x00", "d", false, false},
		{"plain above", "b", "e", "d", false, false},
		{"plain MinKey", "b", MinKey, "d", false, false},

		// Wrapping interval (d, b].
		{"wrap above a", "d", "e", "b", true, true},
		{"wrap top byte", "d", "\xff", "b", true, true},
		{"wrap top bytes", "d", "\xff\xff\xff", "b", true, true},
		{"wrap MinKey", "d", MinKey, "b", true, true},
		{"wrap below b", "d", "a", "b", true, true},
		{"wrap at b", "d", "b", "b", true, false},
		{"wrap just after b", "d", "b\x00", "b", false, false},
		{"wrap middle", "d", "c", "b", false, false},
		{"wrap at a", "d", "d", "b", false, false},
		{"wrap just after a", "d", "d\x00", "b", true, true},

		// Ending at MinKey: (m, MinKey] is everything above m plus MinKey itself.
		{"to MinKey, MinKey", "m", MinKey, MinKey, true, false},
		{"to MinKey, above", "m", "z", MinKey, true, true},
		{"to MinKey, top", "m", "\xff\xff", MinKey, true, true},
		{"to MinKey, at a", "m", "m", MinKey, false, false},
		{"to MinKey, below", "m", "a", MinKey, false, false},
		{"to MinKey, 0x00", "m", "\x00", MinKey, false, false},

		// Starting at MinKey: (MinKey, m].
		{"from MinKey, MinKey", MinKey, MinKey, "m", false, false},
		{"from MinKey, 0x00", MinKey, "\x00", "m", true, true},
		{"from MinKey, at b", MinKey, "m", "m", true, false},
		{"from MinKey, above", MinKey, "m\x00", "m", false, false},
		{"from MinKey, top", MinKey, "\xff", "m", false, false},

		// a == b: the whole circle; strictly, all but a.
		{"whole, at a", "k", "k", "k", true, false},
		{"whole, MinKey", "k", MinKey, "k", true, true},
		{"whole, below", "k", "a", "k", true, true},
		{"whole, above", "k", "z", "k", true, true},
		{"whole MinKey, MinKey", MinKey, MinKey, MinKey, true, false},
		{"whole MinKey, 0x00", MinKey, "\x00", MinKey, true, true},
		{"whole MinKey, top", MinKey, "\xff\xff", MinKey, true, true},

		// Keys that are prefixes of each other: nothing lies strictly between "a" and "a\x00".
		{"prefix, at a", "a", "a", "a\x00", false, false},
		{"prefix, at b", "a", "a\x00", "a\x00", true, false},
		{"prefix, beyond", "a", "a\x00\x00", "a\x00", false, false},
		{"prefix, a\\x01", "a", "a\x01", "a\x00", false, false},
		{"prefix rev, at b", "a\x00", "a", "a", true, false},
		{"prefix rev, at a", "a\x00", "a\x00", "a", false, false},
		{"prefix rev, beyond", "a\x00", "a\x00\x00", "a", true, true},
		{"prefix rev, MinKey", "a\x00", MinKey, "a", true, true},
		{"prefix rev, top", "a\x00", "\xff", "a", true, true},

		// Single-byte extremes.
		{"00..ff, 00", "\x00", "\x00", "\xff", false, false},
		{"00..ff, 00 00", "\x00", "\x00\x00", "\xff", true, true},
		{"00..ff, 01", "\x00", "\x01", "\xff", true, true},
		{"00..ff, ff", "\x00", "\xff", "\xff", true, false},
		{"00..ff, ff 00", "\x00", "\xff\x00", "\xff", false, false},
		{"00..ff, MinKey", "\x00", MinKey, "\xff", false, false},
		{"ff..00, MinKey", "\xff", MinKey, "\x00", true, true},
		{"ff..00, 00", "\xff", "\x00", "\x00", true, false},
		{"ff..00, 00 00", "\xff", "\x00\x00", "\x00", false, false},
		{"ff..00, ff", "\xff", "\xff", "\x00", false, false},
		{"ff..00, ff ff", "\xff", "\xff\xff", "\x00", true, true},
		{"ff..00, 7f", "\xff", "\x7f", "\x00", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Between(tt.a, tt.x, tt.b); got != tt.between {
				t.Errorf("Between(%q, %q, %q) = %v, want %v", tt.a, tt.x, tt.b, got, tt.between)
			}
			if got := StrictlyBetween(tt.a, tt.x, tt.b); got != tt.strictlyBt {
				t.Errorf("StrictlyBetween(%q, %q, %q) = %v, want %v", tt.a, tt.x, tt.b, got, tt.strictlyBt)
			}
		})
	}
}

// TestBetweenWalkExhaustive checks Between and StrictlyBetween against walking the circle, for
// every triple of keys of length 0..2 over the small alphabet.
func TestBetweenWalkExhaustive(t *testing.T) {
	u := allKeys(2)
	for _, a := range u {
		for _, b := range u {
			for _, x := range u {
				if got, want := Between(a, x, b), walkBetween(u, a, x, b); got != want {
					t.Fatalf("Between(%q, %q, %q) = %v, walking the circle says %v", a, x, b, got, want)
				}
				if got, want := StrictlyBetween(a, x, b), walkStrictlyBetween(u, a, x, b); got != want {
					t.Fatalf("StrictlyBetween(%q, %q, %q) = %v, walking the circle says %v", a, x, b, got, want)
				}
			}
		}
	}
}

// TestBetweenWalkRapid does the same for longer random keys, walking a circle made of just the
// drawn keys (the answer only depends on their relative order).
func TestBetweenWalkRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, x, b := genKey.Draw(t, "a"), genKey.Draw(t, "x"), genKey.Draw(t, "b")
		u := universe(a, x, b)
		if got, want := Between(a, x, b), walkBetween(u, a, x, b); got != want {
			t.Fatalf("Between(%q, %q, %q) = %v, walking the circle says %v", a, x, b, got, want)
		}
		if got, want := StrictlyBetween(a, x, b), walkStrictlyBetween(u, a, x, b); got != want {
			t.Fatalf("StrictlyBetween(%q, %q, %q) = %v, walking the circle says %v", a, x, b, got, want)
		}
	})
}

// TestBetweenAlgebra checks identities that tie the two predicates together.
func TestBetweenAlgebra(t *testing.T) {
	u := allKeys(2)
	for _, a := range u {
		for _, b := range u {
			for _, x := range u {
				bt, st := Between(a, x, b), StrictlyBetween(a, x, b)
				if st != (bt && x != b) {
					t.Fatalf("StrictlyBetween(%q, %q, %q) = %v, Between = %v", a, x, b, st, bt)
				}
				if a != b && bt == Between(b, x, a) {
					// (a, b] and (b, a] partition the circle.
					t.Fatalf("(%q, %q] and (%q, %q] do not partition the circle at %q", a, b, b, a, x)
				}
				// For a != b, (a, b] is the range [a, b) without a, plus b.
				if a != b && bt != (x == b || (x != a && (Range{a, b}).Contains(x))) {
					t.Fatalf("Between(%q, %q, %q) = %v disagrees with Range{%q, %q}.Contains", a, x, b, bt, a, b)
				}
			}
			if !Between(a, b, b) {
				t.Errorf("Between(%q, %q, %q) = false; b always lies in (a, b]", a, b, b)
			}
			if StrictlyBetween(a, b, b) {
				t.Errorf("StrictlyBetween(%q, %q, %q) = true; b never lies in (a, b)", a, b, b)
			}
			if a != b && Between(a, a, b) {
				t.Errorf("Between(%q, %q, %q) = true; a never lies in (a, b] when a != b", a, a, b)
			}
		}
	}
}

func TestUint64KeyTable(t *testing.T) {
	tests := []struct {
		i    uint64
		want Key
	}{
		{0, "\x00\x00\x00\x00\x00\x00\x00\x00"},
		{1, "\x00\x00\x00\x00\x00\x00\x00\x01"},
		{0xff, "\x00\x00\x00\x00\x00\x00\x00\xff"},
		{0x100, "\x00\x00\x00\x00\x00\x00\x01\x00"},
		{0x0102030405060708, "\x01\x02\x03\x04\x05\x06\x07\x08"},
		{1 << 63, "\x80\x00\x00\x00\x00\x00\x00\x00"},
		{math.MaxUint64 - 1, "\xff\xff\xff\xff\xff\xff\xff\xfe"},
		{math.MaxUint64, "\xff\xff\xff\xff\xff\xff\xff\xff"},
	}
	for _, tt := range tests {
		got := Uint64Key(tt.i)
		if got != tt.want {
			t.Errorf("Uint64Key(%d) = %q, want %q", tt.i, got, tt.want)
		}
		if len(got) != 8 {
			t.Errorf("len(Uint64Key(%d)) = %d, want 8", tt.i, len(got))
		}
		if back := KeyUint64(got); back != tt.i {
			t.Errorf("KeyUint64(Uint64Key(%d)) = %d", tt.i, back)
		}
	}
	// Even zero encodes to a non-empty key: Uint64Key(0) is not MinKey but its successor-ish.
	if Uint64Key(0) == MinKey || !(MinKey < Uint64Key(0)) {
		t.Errorf("Uint64Key(0) = %q should lie strictly above MinKey", Uint64Key(0))
	}
}

func TestKeyUint64ShortAndLongKeys(t *testing.T) {
	tests := []struct {
		k    Key
		want uint64
	}{
		{MinKey, 0},
		{"\x00", 0},
		{"\x01", 1 << 56},
		{"\xff", 0xff << 56},
		{"\x01\x02", 0x0102 << 48},
		{"a", uint64('a') << 56},
		{"a\x00", uint64('a') << 56},
		{"\x00\x00\x00\x00\x00\x00\x00", 0},
		{"\x00\x00\x00\x00\x00\x00\x01", 0x100},
		{"\x00\x00\x00\x00\x00\x00\x00\x05zzz", 5},
		{"\xff\xff\xff\xff\xff\xff\xff\xff\xff", math.MaxUint64},
	}
	for _, tt := range tests {
		if got := KeyUint64(tt.k); got != tt.want {
			t.Errorf("KeyUint64(%q) = %#x, want %#x", tt.k, got, tt.want)
		}
	}
}

func TestUint64KeyRoundTripQuick(t *testing.T) {
	if err := quick.Check(func(i uint64) bool { return KeyUint64(Uint64Key(i)) == i }, nil); err != nil {
		t.Error(err)
	}
	// Keys of exactly 8 bytes also round trip the other way.
	if err := quick.Check(func(b [8]byte) bool {
		k := Key(b[:])
		return Uint64Key(KeyUint64(k)) == k
	}, nil); err != nil {
		t.Error(err)
	}
}

func TestUint64KeyOrderPreserving(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.Uint64().Draw(t, "i")
		j := rapid.Uint64().Draw(t, "j")
		ki, kj := Uint64Key(i), Uint64Key(j)
		if (i < j) != (ki < kj) || (i == j) != (ki == kj) {
			t.Fatalf("order differs: %d vs %d encode to %q vs %q", i, j, ki, kj)
		}
	})
	// Neighbours around byte carries.
	for _, i := range []uint64{0, 0xfe, 0xff, 0xffff, 1<<32 - 1, 1<<56 - 1, 1<<63 - 1, math.MaxUint64 - 1} {
		if !(Uint64Key(i) < Uint64Key(i+1)) {
			t.Errorf("Uint64Key(%d) !< Uint64Key(%d)", i, i+1)
		}
	}
}

// TestKeyUint64Monotone checks that KeyUint64 never inverts key order on arbitrary keys (it may
// collapse keys sharing their first 8 bytes).
func TestKeyUint64Monotone(t *testing.T) {
	keys := allKeys(2)
	for _, a := range keys {
		for _, b := range keys {
			if a <= b && KeyUint64(a) > KeyUint64(b) {
				t.Fatalf("%q <= %q but KeyUint64 %#x > %#x", a, b, KeyUint64(a), KeyUint64(b))
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		a := Key(rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "a"))
		b := Key(rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "b"))
		if a > b {
			a, b = b, a
		}
		if KeyUint64(a) > KeyUint64(b) {
			t.Fatalf("%q <= %q but KeyUint64 %#x > %#x", a, b, KeyUint64(a), KeyUint64(b))
		}
	})
}

// TestClockwiseAgreesWithBetween checks the clockwise order against Between for every triple of
// keys of length 0..2 (which share 8-byte prefixes, so the byte comparison behind the prefixes is
// exercised too) and for random longer keys: x lies in (a, b] exactly when b is not before x.
func TestClockwiseAgreesWithBetween(t *testing.T) {
	check := func(a, x, b Key) {
		cw := ClockwiseFrom(a)
		if got, want := !cw.Of(b).Before(cw.Of(x)), Between(a, x, b); got != want {
			t.Fatalf("clockwise from %q: %q not after %q = %v, Between says %v", a, x, b, got, want)
		}
	}
	u := allKeys(2)
	for _, a := range u {
		for _, b := range u {
			for _, x := range u {
				check(a, x, b)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		long := rapid.Custom(func(t *rapid.T) Key {
			b := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 0x7f, 0xff}), 6, 11).Draw(t, "bytes")
			return Key(b)
		})
		check(long.Draw(t, "a"), long.Draw(t, "x"), long.Draw(t, "b"))
	})
}
