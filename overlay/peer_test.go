package overlay

import (
	"fmt"
	"math"
	"math/bits"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

func TestCommonPrefixTable(t *testing.T) {
	tests := []struct {
		name string
		a, b MVec
		want int
	}{
		{"equal zero", 0, 0, 64},
		{"equal ones", math.MaxUint64, math.MaxUint64, 64},
		{"equal mixed", 0xdeadbeefcafebabe, 0xdeadbeefcafebabe, 64},
		{"top bit", 0, 1 << 63, 0},
		{"top bit, rest equal", 0x7fffffffffffffff, math.MaxUint64, 0},
		{"complements", 0xaaaaaaaaaaaaaaaa, 0x5555555555555555, 0},
		{"second bit", 0, 1 << 62, 1},
		{"bottom bit", 0, 1, 63},
		{"bottom bit ones", math.MaxUint64, math.MaxUint64 - 1, 63},
		{"byte boundary", 0x1200000000000000, 0x1280000000000000, 8},
		{"several bits differ", 0xff00000000000000, 0xff0f000000000001, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommonPrefix(tt.a, tt.b); got != tt.want {
				t.Errorf("CommonPrefix(%#x, %#x) = %d, want %d", uint64(tt.a), uint64(tt.b), got, tt.want)
			}
			if got := CommonPrefix(tt.b, tt.a); got != tt.want {
				t.Errorf("CommonPrefix(%#x, %#x) = %d, want %d", uint64(tt.b), uint64(tt.a), got, tt.want)
			}
		})
	}
}

// TestCommonPrefixEveryBit flips each bit of a few vectors in turn: flipping the bit read at
// position i (from the most significant) leaves exactly i common leading bits.
func TestCommonPrefixEveryBit(t *testing.T) {
	for _, v := range []MVec{0, math.MaxUint64, 0x0123456789abcdef, 0x8000000000000001} {
		for i := range MaxLevel {
			w := v ^ MVec(1)<<(63-i)
			if got := CommonPrefix(v, w); got != i {
				t.Errorf("CommonPrefix(%#x, %#x) = %d, want %d", uint64(v), uint64(w), got, i)
			}
		}
	}
}

func TestCommonPrefixRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := MVec(rapid.Uint64().Draw(t, "a"))
		b := MVec(rapid.Uint64().Draw(t, "b"))
		p := CommonPrefix(a, b)
		if p != CommonPrefix(b, a) {
			t.Fatalf("CommonPrefix not symmetric on %#x, %#x", uint64(a), uint64(b))
		}
		if p < 0 || p > MaxLevel || (p == MaxLevel) != (a == b) {
			t.Fatalf("CommonPrefix(%#x, %#x) = %d", uint64(a), uint64(b), p)
		}
		// Reference: compare bit by bit from the most significant.
		want := 0
		for want < 64 && (uint64(a)>>(63-want))&1 == (uint64(b)>>(63-want))&1 {
			want++
		}
		if p != want {
			t.Fatalf("CommonPrefix(%#x, %#x) = %d, bitwise walk says %d", uint64(a), uint64(b), p, want)
		}
		for level := 0; level <= MaxLevel+1; level++ {
			if got := SameRing(a, b, level); got != (level <= p) {
				t.Fatalf("SameRing(%#x, %#x, %d) = %v, common prefix %d", uint64(a), uint64(b), level, got, p)
			}
		}
	})
}

func TestSameRingLevels(t *testing.T) {
	a := MVec(0xf0f0f0f0f0f0f0f0)
	b := a ^ 1<<(63-10) // share the first 10 bits
	tests := []struct {
		a, b  MVec
		level int
		want  bool
	}{
		// Level 0 is the base ring: everyone meets there.
		{0, math.MaxUint64, 0, true},
		{0, 1 << 63, 0, true},
		{0, 1 << 63, 1, false},
		{a, b, 1, true},
		{a, b, 9, true},
		{a, b, 10, true},
		{a, b, 11, false},
		{a, b, MaxLevel, false},
		// Equal vectors share every ring up to the top level, and no ring above it exists.
		{a, a, 0, true},
		{a, a, MaxLevel - 1, true},
		{a, a, MaxLevel, true},
		{0, 1, MaxLevel - 1, true},
		{0, 1, MaxLevel, false},
		{a, a, MaxLevel + 1, false},
	}
	for _, tt := range tests {
		if got := SameRing(tt.a, tt.b, tt.level); got != tt.want {
			t.Errorf("SameRing(%#x, %#x, %d) = %v, want %v", uint64(tt.a), uint64(tt.b), tt.level, got, tt.want)
		}
	}
}

// TestSameRingNested checks that rings nest: meeting at level l implies meeting at every lower
// level.
func TestSameRingNested(t *testing.T) {
	for i := range 200 {
		a, b := MVecFor(NodeID(fmt.Sprint("a", i))), MVecFor(NodeID(fmt.Sprint("b", i)))
		p := i % (MaxLevel + 1)
		mask := MVec(^(uint64(math.MaxUint64) >> p)) // the top p bits
		b = b&^mask | a&mask                         // share at least the first p bits
		if CommonPrefix(a, b) < p {
			t.Fatalf("%#x and %#x share fewer than %d leading bits", uint64(a), uint64(b), p)
		}
		met := true
		for level := 0; level <= MaxLevel; level++ {
			s := SameRing(a, b, level)
			if s && !met {
				t.Fatalf("%#x and %#x meet at level %d but not below", uint64(a), uint64(b), level)
			}
			met = s
		}
	}
}

func TestMVecForKnownValue(t *testing.T) {
	// SHA-256("") starts e3b0c442 98fc1c14; the vector is its first 8 bytes, big-endian. Pinning
	// it guards against an accidental change of derivation, which would reshuffle every ring.
	if got, want := MVecFor(""), MVec(0xe3b0c44298fc1c14); got != want {
		t.Errorf("MVecFor(\"\") = %#x, want %#x", uint64(got), uint64(want))
	}
	// SHA-256("abc") starts ba7816bf 8f01cfea.
	if got, want := MVecFor("abc"), MVec(0xba7816bf8f01cfea); got != want {
		t.Errorf("MVecFor(\"abc\") = %#x, want %#x", uint64(got), uint64(want))
	}
}

func TestMVecForDeterministicAndDistinct(t *testing.T) {
	const n = 4096
	seen := make(map[MVec]NodeID, n)
	topOnes := 0
	ones := 0
	for i := range n {
		id := NodeID(fmt.Sprintf("node-%d", i))
		v := MVecFor(id)
		if again := MVecFor(NodeID(string([]byte(id)))); again != v {
			t.Fatalf("MVecFor(%q) not deterministic: %#x then %#x", id, uint64(v), uint64(again))
		}
		if other, dup := seen[v]; dup {
			t.Fatalf("MVecFor(%q) == MVecFor(%q) == %#x", id, other, uint64(v))
		}
		seen[v] = id
		if v>>63 == 1 {
			topOnes++
		}
		ones += bits.OnesCount64(uint64(v))
	}
	// The bits should look random: the level-1 rings split the nodes roughly in half. (The values
	// are deterministic, so these bounds cannot flake.)
	if topOnes < n/2-n/10 || topOnes > n/2+n/10 {
		t.Errorf("%d of %d vectors have the top bit set; want about half", topOnes, n)
	}
	if avg := float64(ones) / n; avg < 30 || avg > 34 {
		t.Errorf("average popcount %.2f; want about 32", avg)
	}
	// Byte-level neighbours of an id, including ids that are prefixes of each other, differ too.
	for _, pair := range [][2]NodeID{{"", "\x00"}, {"a", "a\x00"}, {"a", "b"}, {"peer", "Peer"}, {"\xff", "\xfe"}} {
		if MVecFor(pair[0]) == MVecFor(pair[1]) {
			t.Errorf("MVecFor(%q) == MVecFor(%q)", pair[0], pair[1])
		}
	}
}

func TestPeerIsZero(t *testing.T) {
	tests := []struct {
		p    Peer
		want bool
	}{
		{Peer{}, true},
		{Peer{Start: "k", Version: 3, MVec: 7, Addrs: [][]byte{{1}}}, true},
		{Peer{ID: "n1"}, false},
		{Peer{ID: "\x00"}, false},
		{Peer{ID: "n1", Start: MinKey}, false},
	}
	for _, tt := range tests {
		if got := tt.p.IsZero(); got != tt.want {
			t.Errorf("%+v.IsZero() = %v, want %v", tt.p, got, tt.want)
		}
	}
}

// A node's identity and start keep one copy of their bytes from Peer to descriptor and back, so
// that comparing two Peers read from the same descriptor never reads those bytes (aliasString);
// the values themselves survive the round trip unchanged, empty start included.
func TestPeerWireFormSharesBytes(t *testing.T) {
	for _, start := range []Key{"k0042", MinKey} {
		p := Peer{ID: "n00042", MVec: 9, Incarnation: 3, Version: 2}.WithStart(start, 2)
		ref := p.ToPB()
		if string(ref.Id) != string(p.ID) || string(ref.Start) != string(p.Start) {
			t.Fatalf("descriptor of %+v: id %q start %q", p, ref.Id, ref.Start)
		}
		q := PeerFromPB(ref)
		if q.ID != p.ID || q.Start != p.Start || q.Version != p.Version || q.MVec != p.MVec || q.Incarnation != p.Incarnation {
			t.Fatalf("round trip of %+v gave %+v", p, q)
		}
		if unsafe.StringData(string(q.ID)) != unsafe.StringData(string(p.ID)) {
			t.Errorf("identity copied on the round trip")
		}
		if start != MinKey && unsafe.StringData(string(q.Start)) != unsafe.StringData(string(p.Start)) {
			t.Errorf("start %q copied on the round trip", start)
		}
	}
}
