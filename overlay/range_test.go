package overlay

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// top is a key above every range endpoint the tests use, standing in for "the largest keys".
const top Key = "\xff\xff\xff\xff\xff\xff"

// allRanges returns every Range whose endpoints are drawn from keys, including the non-canonical
// full ranges {k, k}.
func allRanges(keys []Key) []Range {
	var rs []Range
	for _, s := range keys {
		for _, e := range keys {
			rs = append(rs, Range{s, e})
		}
	}
	return rs
}

// walkContains is the reference definition of Range.Contains: starting at Start, step clockwise
// around the finite circle u (which must hold Start, End and k) and report whether k is met before
// End. Start == End is the full circle.
func walkContains(u []Key, r Range, k Key) bool {
	if r.Start == r.End {
		return true
	}
	i, found := slices.BinarySearch(u, r.Start)
	if !found {
		panic("walkContains: start not in universe")
	}
	for range len(u) {
		if u[i] == r.End {
			return false
		}
		if u[i] == k {
			return true
		}
		i = (i + 1) % len(u)
	}
	panic("walkContains: keys not in universe")
}

func anyContains(rs []Range, k Key) bool {
	for _, r := range rs {
		if r.Contains(k) {
			return true
		}
	}
	return false
}

// canonicalRanges returns the canonical description of the key set {k : in(k)}: its maximal arcs
// as ranges sorted by Start, FullRange alone for the whole circle, nil for the empty set. u must
// be sorted, start with MinKey and hold every endpoint of the ranges in(k) is built from; then
// membership is constant between neighbouring keys of u, so the arcs can be read off u.
func canonicalRanges(u []Key, in func(Key) bool) []Range {
	n := len(u)
	m := make([]bool, n)
	all, none := true, true
	for i, k := range u {
		m[i] = in(k)
		all = all && m[i]
		none = none && !m[i]
	}
	switch {
	case all:
		return []Range{FullRange}
	case none:
		return nil
	}
	var rs []Range
	for i := range n {
		if !m[i] || m[(i-1+n)%n] {
			continue
		}
		j := (i + 1) % n
		for m[j] {
			j = (j + 1) % n
		}
		rs = append(rs, Range{u[i], u[j]})
	}
	slices.SortFunc(rs, func(a, b Range) int { return strings.Compare(string(a.Start), string(b.Start)) })
	return rs
}

func TestFullRange(t *testing.T) {
	if FullRange != (Range{MinKey, MinKey}) {
		t.Fatalf("FullRange = %v", FullRange)
	}
	if !FullRange.IsFull() || FullRange.Wraps() {
		t.Fatalf("FullRange: IsFull %v, Wraps %v", FullRange.IsFull(), FullRange.Wraps())
	}
	for _, k := range allKeys(3) {
		if !FullRange.Contains(k) {
			t.Errorf("FullRange does not contain %q", k)
		}
	}
}

func TestRangeIsFullWrapsTable(t *testing.T) {
	tests := []struct {
		r           Range
		full, wraps bool
	}{
		{FullRange, true, false},
		{Range{"k", "k"}, true, false},
		{Range{"\xff", "\xff"}, true, false},
		{Range{"\x00", "\x00"}, true, false},
		{Range{"a", "b"}, false, false},
		{Range{"b", "a"}, false, true},
		{Range{MinKey, "a"}, false, false},
		{Range{"a", MinKey}, false, false},
		{Range{"\xff", MinKey}, false, false},
		{Range{"\x00", MinKey}, false, false},
		{Range{MinKey, "\x00"}, false, false},
		{Range{"\xff", "\x00"}, false, true},
		{Range{"\x00", "\xff"}, false, false},
		{Range{"a", "a\x00"}, false, false},
		{Range{"a\x00", "a"}, false, true},
		{Range{"\x00", MinKey}, false, false},
	}
	for _, tt := range tests {
		if got := tt.r.IsFull(); got != tt.full {
			t.Errorf("%v.IsFull() = %v, want %v", tt.r, got, tt.full)
		}
		if got := tt.r.Wraps(); got != tt.wraps {
			t.Errorf("%v.Wraps() = %v, want %v", tt.r, got, tt.wraps)
		}
	}
}

func TestRangeContainsTable(t *testing.T) {
	tests := []struct {
		name string
		r    Range
		k    Key
		want bool
	}{
		// Plain [b, d).
		{"plain start", Range{"b", "d"}, "b", true},
		{"plain inside", Range{"b", "d"}, "c", true},
		{"plain just below end", Range{"b", "d"}, "c\xff\xff", true},
		{"plain end", Range{"b", "d"}, "d", false},
		{"plain just after end", Range{"b", "d"}, "d\x00", false},
		{"plain below", Range{"b", "d"}, "a", false},
		{"plain MinKey", Range{"b", "d"}, MinKey, false},
		{"plain top", Range{"b", "d"}, top, false},

		// Wrapping [x, c).
		{"wrap start", Range{"x", "c"}, "x", true},
		{"wrap above", Range{"x", "c"}, "z", true},
		{"wrap top", Range{"x", "c"}, top, true},
		{"wrap MinKey", Range{"x", "c"}, MinKey, true},
		{"wrap 0x00", Range{"x", "c"}, "\x00", true},
		{"wrap below end", Range{"x", "c"}, "b", true},
		{"wrap end", Range{"x", "c"}, "c", false},
		{"wrap middle", Range{"x", "c"}, "m", false},
		{"wrap just below start", Range{"x", "c"}, "w\xff", false},

		// Ending at MinKey: [m, top].
		{"to MinKey start", Range{"m", MinKey}, "m", true},
		{"to MinKey above", Range{"m", MinKey}, "z", true},
		{"to MinKey top", Range{"m", MinKey}, top, true},
		{"to MinKey MinKey", Range{"m", MinKey}, MinKey, false},
		{"to MinKey 0x00", Range{"m", MinKey}, "\x00", false},
		{"to MinKey below", Range{"m", MinKey}, "l", false},
		{"0xff to MinKey, 0xff", Range{"\xff", MinKey}, "\xff", true},
		{"0xff to MinKey, 0xff 0x00", Range{"\xff", MinKey}, "\xff\x00", true},
		{"0xff to MinKey, 0xfe", Range{"\xff", MinKey}, "\xfe\xff", false},
		{"0x00 to MinKey, MinKey", Range{"\x00", MinKey}, MinKey, false},
		{"0x00 to MinKey, 0x00", Range{"\x00", MinKey}, "\x00", true},
		{"0x00 to MinKey, top", Range{"\x00", MinKey}, top, true},

		// Starting at MinKey.
		{"from MinKey MinKey", Range{MinKey, "m"}, MinKey, true},
		{"from MinKey 0x00", Range{MinKey, "m"}, "\x00", true},
		{"from MinKey end", Range{MinKey, "m"}, "m", false},
		{"from MinKey top", Range{MinKey, "m"}, top, false},
		{"MinKey to 0x00, MinKey", Range{MinKey, "\x00"}, MinKey, true},
		{"MinKey to 0x00, 0x00", Range{MinKey, "\x00"}, "\x00", false},

		// Full circles, canonical and not.
		{"full MinKey", FullRange, MinKey, true},
		{"full top", FullRange, top, true},
		{"full k at k", Range{"k", "k"}, "k", true},
		{"full k MinKey", Range{"k", "k"}, MinKey, true},
		{"full k below", Range{"k", "k"}, "j", true},

		// Prefixes: [a, a\x00) holds exactly "a".
		{"prefix a", Range{"a", "a\x00"}, "a", true},
		{"prefix a\\x00", Range{"a", "a\x00"}, "a\x00", false},
		{"prefix below", Range{"a", "a\x00"}, "`\xff", false},
		{"prefix rev a", Range{"a\x00", "a"}, "a", false},
		{"prefix rev a\\x00", Range{"a\x00", "a"}, "a\x00", true},
		{"prefix rev a\\x00\\x00", Range{"a\x00", "a"}, "a\x00\x00", true},
		{"prefix rev MinKey", Range{"a\x00", "a"}, MinKey, true},

		// Single-byte extremes.
		{"00..ff 00", Range{"\x00", "\xff"}, "\x00", true},
		{"00..ff fe ff", Range{"\x00", "\xff"}, "\xfe\xff", true},
		{"00..ff ff", Range{"\x00", "\xff"}, "\xff", false},
		{"00..ff MinKey", Range{"\x00", "\xff"}, MinKey, false},
		{"ff..00 ff", Range{"\xff", "\x00"}, "\xff", true},
		{"ff..00 MinKey", Range{"\xff", "\x00"}, MinKey, true},
		{"ff..00 00", Range{"\xff", "\x00"}, "\x00", false},
		{"ff..00 7f", Range{"\xff", "\x00"}, "\x7f", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Contains(tt.k); got != tt.want {
				t.Errorf("%v.Contains(%q) = %v, want %v", tt.r, tt.k, got, tt.want)
			}
		})
	}
}

// TestRangeContainsExhaustive checks Contains against walking the circle, and IsFull and Wraps
// against their descriptions, for every range over keys of length 0..2 and every key of length
// 0..3.
func TestRangeContainsExhaustive(t *testing.T) {
	u := allKeys(3)
	for _, r := range allRanges(allKeys(2)) {
		all := true
		for _, k := range u {
			got, want := r.Contains(k), walkContains(u, r, k)
			if got != want {
				t.Fatalf("%v.Contains(%q) = %v, walking the circle says %v", r, k, got, want)
			}
			all = all && got
		}
		if !r.Contains(r.Start) {
			t.Errorf("%v does not contain its start", r)
		}
		if !r.IsFull() && r.Contains(r.End) {
			t.Errorf("%v contains its end", r)
		}
		if r.IsFull() != all {
			t.Errorf("%v.IsFull() = %v but contains every key: %v", r, r.IsFull(), all)
		}
		if want := !r.IsFull() && r.Contains(MinKey) && r.Contains(top); r.Wraps() != want {
			t.Errorf("%v.Wraps() = %v, want %v (holds both smallest and largest keys)", r, r.Wraps(), want)
		}
		// Contains agrees with Between: k in [s, e) iff k == s or k in (s, e) (s != e).
		if !r.IsFull() {
			for _, k := range u {
				if want := k == r.Start || StrictlyBetween(r.Start, k, r.End); r.Contains(k) != want {
					t.Fatalf("%v.Contains(%q) = %v, Between says %v", r, k, r.Contains(k), want)
				}
			}
		}
	}
}

func TestRangeSplitTable(t *testing.T) {
	tests := []struct {
		name         string
		r            Range
		at           Key
		lower, upper Range
		wantErr      bool
	}{
		{"plain middle", Range{"b", "f"}, "d", Range{"b", "d"}, Range{"d", "f"}, false},
		{"plain just after start", Range{"b", "f"}, "b\x00", Range{"b", "b\x00"}, Range{"b\x00", "f"}, false},
		{"plain just below end", Range{"b", "f"}, "e\xff", Range{"b", "e\xff"}, Range{"e\xff", "f"}, false},
		{"plain at start", Range{"b", "f"}, "b", Range{}, Range{}, true},
		{"plain at end", Range{"b", "f"}, "f", Range{}, Range{}, true},
		{"plain below", Range{"b", "f"}, "a", Range{}, Range{}, true},
		{"plain above", Range{"b", "f"}, "g", Range{}, Range{}, true},
		{"plain MinKey", Range{"b", "f"}, MinKey, Range{}, Range{}, true},

		{"wrap high part", Range{"x", "c"}, "z", Range{"x", "z"}, Range{"z", "c"}, false},
		{"wrap top", Range{"x", "c"}, top, Range{"x", top}, Range{top, "c"}, false},
		{"wrap at seam", Range{"x", "c"}, MinKey, Range{"x", MinKey}, Range{MinKey, "c"}, false},
		{"wrap 0x00", Range{"x", "c"}, "\x00", Range{"x", "\x00"}, Range{"\x00", "c"}, false},
		{"wrap low part", Range{"x", "c"}, "a", Range{"x", "a"}, Range{"a", "c"}, false},
		{"wrap at start", Range{"x", "c"}, "x", Range{}, Range{}, true},
		{"wrap at end", Range{"x", "c"}, "c", Range{}, Range{}, true},
		{"wrap outside", Range{"x", "c"}, "m", Range{}, Range{}, true},

		{"to MinKey", Range{"m", MinKey}, "z", Range{"m", "z"}, Range{"z", MinKey}, false},
		{"to MinKey at MinKey", Range{"m", MinKey}, MinKey, Range{}, Range{}, true},
		{"to MinKey at start", Range{"m", MinKey}, "m", Range{}, Range{}, true},
		{"to MinKey below", Range{"m", MinKey}, "a", Range{}, Range{}, true},
		{"0xff to MinKey", Range{"\xff", MinKey}, "\xff\xff", Range{"\xff", "\xff\xff"}, Range{"\xff\xff", MinKey}, false},

		{"from MinKey", Range{MinKey, "m"}, "\x00", Range{MinKey, "\x00"}, Range{"\x00", "m"}, false},
		{"from MinKey at MinKey", Range{MinKey, "m"}, MinKey, Range{}, Range{}, true},
		{"from MinKey at end", Range{MinKey, "m"}, "m", Range{}, Range{}, true},
		{"MinKey to 0x00", Range{MinKey, "\x00"}, "\x00", Range{}, Range{}, true},

		{"full", FullRange, "k", Range{MinKey, "k"}, Range{"k", MinKey}, false},
		{"full at 0x00", FullRange, "\x00", Range{MinKey, "\x00"}, Range{"\x00", MinKey}, false},
		{"full at MinKey", FullRange, MinKey, Range{}, Range{}, true},
		{"full k at MinKey", Range{"k", "k"}, MinKey, Range{"k", MinKey}, Range{MinKey, "k"}, false},
		{"full k above", Range{"k", "k"}, "z", Range{"k", "z"}, Range{"z", "k"}, false},
		{"full k below", Range{"k", "k"}, "a", Range{"k", "a"}, Range{"a", "k"}, false},
		{"full k at k", Range{"k", "k"}, "k", Range{}, Range{}, true},

		// [a, a\x00) holds the single key "a" and cannot be split.
		{"single key at a", Range{"a", "a\x00"}, "a", Range{}, Range{}, true},
		{"single key at a\\x00", Range{"a", "a\x00"}, "a\x00", Range{}, Range{}, true},
		{"prefix rev", Range{"a\x00", "a"}, MinKey, Range{"a\x00", MinKey}, Range{MinKey, "a"}, false},
		{"00..ff", Range{"\x00", "\xff"}, "\x7f", Range{"\x00", "\x7f"}, Range{"\x7f", "\xff"}, false},
		{"ff..00 at seam", Range{"\xff", "\x00"}, MinKey, Range{"\xff", MinKey}, Range{MinKey, "\x00"}, false},
		{"ff..00 at 00", Range{"\xff", "\x00"}, "\x00", Range{}, Range{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lower, upper, err := tt.r.Split(tt.at)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%v.Split(%q) = %v, %v; want error", tt.r, tt.at, lower, upper)
				}
				if lower != (Range{}) || upper != (Range{}) {
					t.Errorf("%v.Split(%q) failed but returned %v, %v", tt.r, tt.at, lower, upper)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v.Split(%q): %v", tt.r, tt.at, err)
			}
			if lower != tt.lower || upper != tt.upper {
				t.Errorf("%v.Split(%q) = %v, %v; want %v, %v", tt.r, tt.at, lower, upper, tt.lower, tt.upper)
			}
		})
	}
}

// TestRangeSplitExhaustive splits every range over keys of length 0..2 at every such key and checks
// that the pieces partition the original.
func TestRangeSplitExhaustive(t *testing.T) {
	keys := allKeys(2)
	u := allKeys(3)
	for _, r := range allRanges(keys) {
		for _, at := range keys {
			lower, upper, err := r.Split(at)
			wantErr := at == r.Start || !walkContains(u, r, at)
			if wantErr {
				if err == nil {
					t.Fatalf("%v.Split(%q) = %v, %v; want error", r, at, lower, upper)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v.Split(%q): %v", r, at, err)
			}
			if lower.Start != r.Start || lower.End != at || upper.Start != at || upper.End != r.End {
				t.Fatalf("%v.Split(%q) = %v, %v", r, at, lower, upper)
			}
			if lower.IsFull() || upper.IsFull() {
				t.Fatalf("%v.Split(%q) = %v, %v: a piece is the full circle", r, at, lower, upper)
			}
			for _, k := range u {
				inL, inU := lower.Contains(k), upper.Contains(k)
				if inL && inU {
					t.Fatalf("%v.Split(%q) = %v, %v: both hold %q", r, at, lower, upper, k)
				}
				if (inL || inU) != r.Contains(k) {
					t.Fatalf("%v.Split(%q) = %v, %v: union differs from original at %q", r, at, lower, upper, k)
				}
			}
			// Merging the pieces back gives the original (canonicalised when it was full).
			m, err := lower.Merge(upper)
			if err != nil {
				t.Fatalf("%v.Merge(%v) after split: %v", lower, upper, err)
			}
			want := r
			if r.IsFull() {
				want = FullRange
			}
			if m != want {
				t.Fatalf("split %v at %q and merged back: %v", r, at, m)
			}
		}
	}
}

func TestRangeMergeTable(t *testing.T) {
	tests := []struct {
		name    string
		r, next Range
		want    Range
		wantErr bool
	}{
		{"adjacent plain", Range{"a", "c"}, Range{"c", "e"}, Range{"a", "e"}, false},
		{"adjacent to top", Range{"a", "c"}, Range{"c", MinKey}, Range{"a", MinKey}, false},
		{"adjacent from MinKey", Range{MinKey, "c"}, Range{"c", "e"}, Range{MinKey, "e"}, false},
		{"across seam", Range{"x", MinKey}, Range{MinKey, "c"}, Range{"x", "c"}, false},
		{"wrapping then plain", Range{"x", "c"}, Range{"c", "e"}, Range{"x", "e"}, false},
		{"plain then wrapping", Range{"t", "x"}, Range{"x", "c"}, Range{"t", "c"}, false},
		{"plain then to top", Range{"t", "x"}, Range{"x", MinKey}, Range{"t", MinKey}, false},
		{"into 0x00", Range{"\xff", MinKey}, Range{MinKey, "\x00"}, Range{"\xff", "\x00"}, false},
		{"prefix", Range{"a", "a\x00"}, Range{"a\x00", "b"}, Range{"a", "b"}, false},

		{"close circle plain", Range{"a", "c"}, Range{"c", "a"}, FullRange, false},
		{"close circle wrap first", Range{"x", "c"}, Range{"c", "x"}, FullRange, false},
		{"close circle at seam", Range{MinKey, "m"}, Range{"m", MinKey}, FullRange, false},
		{"close circle at seam rev", Range{"m", MinKey}, Range{MinKey, "m"}, FullRange, false},
		{"close circle prefix", Range{"a", "a\x00"}, Range{"a\x00", "a"}, FullRange, false},
		{"close circle extremes", Range{"\x00", "\xff"}, Range{"\xff", "\x00"}, FullRange, false},

		{"gap", Range{"a", "c"}, Range{"d", "e"}, Range{}, true},
		{"same range", Range{"a", "c"}, Range{"a", "c"}, Range{}, true},
		{"reversed order", Range{"c", "e"}, Range{"a", "c"}, Range{}, true},
		{"overlap not adjacent", Range{"a", "d"}, Range{"c", "e"}, Range{}, true},
		{"adjacent but laps", Range{"a", "c"}, Range{"c", "b"}, Range{}, true},
		{"adjacent but laps to start+", Range{"a", "c"}, Range{"c", "a\x00"}, Range{}, true},
		{"adjacent but laps across seam", Range{"x", MinKey}, Range{MinKey, "y"}, Range{}, true},
		{"adjacent, next wraps over MinKey", Range{MinKey, "c"}, Range{"c", "\x00"}, Range{}, true},
		{"full first", FullRange, Range{MinKey, "c"}, Range{}, true},
		{"full second", Range{"a", MinKey}, FullRange, Range{}, true},
		{"both full", FullRange, FullRange, Range{}, true},
		{"non-canonical full first", Range{"k", "k"}, Range{"k", "m"}, Range{}, true},
		{"non-canonical full second", Range{"a", "k"}, Range{"k", "k"}, Range{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Merge(tt.next)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%v.Merge(%v) = %v, want error", tt.r, tt.next, got)
				}
				if got != (Range{}) {
					t.Errorf("%v.Merge(%v) failed but returned %v", tt.r, tt.next, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v.Merge(%v): %v", tt.r, tt.next, err)
			}
			if got != tt.want {
				t.Errorf("%v.Merge(%v) = %v, want %v", tt.r, tt.next, got, tt.want)
			}
		})
	}
}

// TestRangeMergeExhaustive merges every pair of ranges over keys of length 0..2: it must succeed
// exactly for adjacent, disjoint, non-full pairs, and then hold exactly their union.
func TestRangeMergeExhaustive(t *testing.T) {
	u := allKeys(2)
	rs := allRanges(u)
	for _, r := range rs {
		for _, next := range rs {
			overlap := false
			for _, k := range u {
				if r.Contains(k) && next.Contains(k) {
					overlap = true
					break
				}
			}
			wantErr := r.IsFull() || next.IsFull() || r.End != next.Start || overlap
			got, err := r.Merge(next)
			if wantErr {
				if err == nil {
					t.Fatalf("%v.Merge(%v) = %v, want error", r, next, got)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v.Merge(%v): %v", r, next, err)
			}
			want := canonicalRanges(u, func(k Key) bool { return r.Contains(k) || next.Contains(k) })
			if len(want) != 1 || got != want[0] {
				t.Fatalf("%v.Merge(%v) = %v, union is %v", r, next, got, want)
			}
		}
	}
}

func TestRangeIntersectTable(t *testing.T) {
	tests := []struct {
		name string
		a, b Range
		want []Range
	}{
		{"disjoint plain", Range{"a", "c"}, Range{"d", "f"}, nil},
		{"touching plain", Range{"a", "c"}, Range{"c", "e"}, nil},
		{"disjoint wrap and plain", Range{"x", "c"}, Range{"d", "w"}, nil},
		{"touching wrap and plain", Range{"x", "c"}, Range{"c", "x"}, nil},
		{"disjoint at seam", Range{"x", MinKey}, Range{MinKey, "x"}, nil},
		{"disjoint 0x00 and top", Range{MinKey, "\x00"}, Range{"\x00", MinKey}, nil},
		{"disjoint extremes", Range{"\xff", "\x00"}, Range{"\x00", "\xff"}, nil},
		{"disjoint prefixes", Range{"a", "a\x00"}, Range{"a\x00", "b"}, nil},

		{"nested plain", Range{"a", "z"}, Range{"c", "d"}, []Range{{"c", "d"}}},
		{"nested plain rev", Range{"c", "d"}, Range{"a", "z"}, []Range{{"c", "d"}}},
		{"same plain", Range{"c", "d"}, Range{"c", "d"}, []Range{{"c", "d"}}},
		{"single key", Range{"a", "a\x00"}, Range{MinKey, "b"}, []Range{{"a", "a\x00"}}},
		{"plain in wrap high", Range{"x", "c"}, Range{"y", "z"}, []Range{{"y", "z"}}},
		{"plain in wrap low", Range{"x", "c"}, Range{"a", "b"}, []Range{{"a", "b"}}},
		{"to top in wrap", Range{"x", "c"}, Range{"y", MinKey}, []Range{{"y", MinKey}}},
		{"from MinKey in wrap", Range{"x", "c"}, Range{MinKey, "b"}, []Range{{MinKey, "b"}}},
		{"wrap in wrap", Range{"x", "c"}, Range{"y", "b"}, []Range{{"y", "b"}}},
		{"same wrap", Range{"x", "c"}, Range{"x", "c"}, []Range{{"x", "c"}}},

		{"overlap plain", Range{"a", "d"}, Range{"c", "f"}, []Range{{"c", "d"}}},
		{"overlap plain rev", Range{"c", "f"}, Range{"a", "d"}, []Range{{"c", "d"}}},
		{"overlap to top", Range{"m", MinKey}, Range{"c", "p"}, []Range{{"m", "p"}}},
		{"overlap from MinKey", Range{MinKey, "m"}, Range{"c", "p"}, []Range{{"c", "m"}}},
		{"to top and from MinKey", Range{"m", MinKey}, Range{MinKey, "p"}, []Range{{"m", "p"}}},
		{"to top and wrap", Range{"m", MinKey}, Range{"x", "c"}, []Range{{"x", MinKey}}},
		{"from MinKey and wrap", Range{MinKey, "m"}, Range{"x", "c"}, []Range{{MinKey, "c"}}},
		{"wrap and plain on both ends", Range{"x", "c"}, Range{"a", "z"}, []Range{{"a", "c"}, {"x", "z"}}},
		{"wrap and plain on both ends rev", Range{"a", "z"}, Range{"x", "c"}, []Range{{"a", "c"}, {"x", "z"}}},
		{"wrap and plain from MinKey", Range{"x", "c"}, Range{MinKey, "z"}, []Range{{MinKey, "c"}, {"x", "z"}}},
		{"wrap and plain to top", Range{"x", "c"}, Range{"a", MinKey}, []Range{{"a", "c"}, {"x", MinKey}}},

		// Both wrapping: the seam-touching pieces merge into one wrapping range.
		{"both wrap one piece", Range{"x", "c"}, Range{"w", "d"}, []Range{{"x", "c"}}},
		{"both wrap one piece crossed", Range{"w", "c"}, Range{"x", "d"}, []Range{{"x", "c"}}},
		{"both wrap two pieces", Range{"x", "d"}, Range{"c", "b"}, []Range{{"c", "d"}, {"x", "b"}}},
		{"both wrap two pieces rev", Range{"c", "b"}, Range{"x", "d"}, []Range{{"c", "d"}, {"x", "b"}}},
		{"both wrap extremes", Range{"\xff", "\x00"}, Range{"\x7f", "\x01"}, []Range{{"\xff", "\x00"}}},
		{"both wrap prefixes", Range{"a\x00", "a"}, Range{"b", "a\x00"}, []Range{{"b", "a"}}},

		{"full and plain", FullRange, Range{"a", "c"}, []Range{{"a", "c"}}},
		{"plain and full", Range{"a", "c"}, FullRange, []Range{{"a", "c"}}},
		{"full and wrap", FullRange, Range{"x", "c"}, []Range{{"x", "c"}}},
		{"full and to top", FullRange, Range{"m", MinKey}, []Range{{"m", MinKey}}},
		{"full and from MinKey", FullRange, Range{MinKey, "m"}, []Range{{MinKey, "m"}}},
		{"full and full", FullRange, FullRange, []Range{FullRange}},
		{"non-canonical fulls", Range{"k", "k"}, Range{"m", "m"}, []Range{FullRange}},
		{"non-canonical full and wrap", Range{"k", "k"}, Range{"x", "c"}, []Range{{"x", "c"}}},
		{"non-canonical full and plain", Range{"k", "k"}, Range{"a", "z"}, []Range{{"a", "z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Intersect(tt.b)
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("%v.Intersect(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// checkIntersect verifies a.Intersect(b) over the finite circle u, which must start with MinKey and
// hold every endpoint of a and b.
func checkIntersect(t interface{ Fatalf(string, ...any) }, u []Key, a, b Range) {
	got := a.Intersect(b)
	in := func(k Key) bool { return a.Contains(k) && b.Contains(k) }
	for _, k := range u {
		if anyContains(got, k) != in(k) {
			t.Fatalf("%v.Intersect(%v) = %v: wrong at %q (in both: %v)", a, b, got, k, in(k))
		}
	}
	if len(got) > 2 {
		t.Fatalf("%v.Intersect(%v) = %v: more than two pieces", a, b, got)
	}
	for i, p := range got {
		if p.IsFull() && (len(got) != 1 || p != FullRange) {
			t.Fatalf("%v.Intersect(%v) = %v: full piece not canonical", a, b, got)
		}
		for j, q := range got {
			if i == j {
				continue
			}
			if p.End == q.Start {
				t.Fatalf("%v.Intersect(%v) = %v: pieces %v and %v touch and should be one range", a, b, got, p, q)
			}
			for _, k := range u {
				if p.Contains(k) && q.Contains(k) {
					t.Fatalf("%v.Intersect(%v) = %v: pieces overlap at %q", a, b, got, k)
				}
			}
		}
		if i > 0 && !(got[i-1].Start < p.Start) {
			t.Fatalf("%v.Intersect(%v) = %v: pieces not in key order", a, b, got)
		}
	}
	// The canonical description of a set is unique; the result must be exactly it.
	if want := canonicalRanges(u, in); !slices.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%v.Intersect(%v) = %v, want %v", a, b, got, want)
	}
}

// TestRangeIntersectExhaustive intersects every pair of ranges over keys of length 0..2.
func TestRangeIntersectExhaustive(t *testing.T) {
	u := allKeys(2)
	rs := allRanges(u)
	for _, a := range rs {
		for _, b := range rs {
			checkIntersect(t, u, a, b)
		}
		// Intersecting with itself or the full circle gives the range back, canonicalised.
		want := []Range{a}
		if a.IsFull() {
			want = []Range{FullRange}
		}
		if got := a.Intersect(a); !slices.Equal(got, want) {
			t.Errorf("%v.Intersect(itself) = %v, want %v", a, got, want)
		}
		if got := a.Intersect(FullRange); !slices.Equal(got, want) {
			t.Errorf("%v.Intersect(FullRange) = %v, want %v", a, got, want)
		}
		if got := FullRange.Intersect(a); !slices.Equal(got, want) {
			t.Errorf("FullRange.Intersect(%v) = %v, want %v", a, got, want)
		}
	}
}

// TestRangePropertiesRapid repeats the exhaustive checks on longer random keys, using the drawn
// endpoints (and their neighbours) as the finite circle.
func TestRangePropertiesRapid(t *testing.T) {
	genRange := rapid.Custom(func(t *rapid.T) Range {
		return Range{genKey.Draw(t, "start"), genKey.Draw(t, "end")}
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := genRange.Draw(t, "a"), genRange.Draw(t, "b")
		at := genKey.Draw(t, "at")
		var keys []Key
		for _, k := range []Key{a.Start, a.End, b.Start, b.End, at} {
			keys = append(keys, k, k+"\x00", k+"\xff")
		}
		u := universe(keys...)

		for _, r := range []Range{a, b} {
			for _, k := range u {
				if got, want := r.Contains(k), walkContains(u, r, k); got != want {
					t.Fatalf("%v.Contains(%q) = %v, walking the circle says %v", r, k, got, want)
				}
			}
		}

		checkIntersect(t, u, a, b)
		if x, y := a.Intersect(b), b.Intersect(a); !slices.Equal(x, y) {
			t.Fatalf("Intersect not symmetric: %v vs %v", x, y)
		}

		lower, upper, err := a.Split(at)
		if wantErr := at == a.Start || !walkContains(u, a, at); wantErr != (err != nil) {
			t.Fatalf("%v.Split(%q) error = %v, want error: %v", a, at, err, wantErr)
		}
		if err == nil {
			for _, k := range u {
				inL, inU := lower.Contains(k), upper.Contains(k)
				if inL && inU || (inL || inU) != a.Contains(k) {
					t.Fatalf("%v.Split(%q) = %v, %v: not a partition at %q", a, at, lower, upper, k)
				}
			}
		}

		// Merge b with whatever follows a's end, to get adjacent pairs often.
		next := Range{a.End, b.End}
		m, err := a.Merge(next)
		overlap := false
		for _, k := range u {
			overlap = overlap || a.Contains(k) && next.Contains(k)
		}
		if wantErr := a.IsFull() || next.IsFull() || overlap; wantErr != (err != nil) {
			t.Fatalf("%v.Merge(%v) = %v, %v; want error: %v", a, next, m, err, wantErr)
		}
		if err == nil {
			want := canonicalRanges(u, func(k Key) bool { return a.Contains(k) || next.Contains(k) })
			if len(want) != 1 || m != want[0] {
				t.Fatalf("%v.Merge(%v) = %v, union is %v", a, next, m, want)
			}
		}
	})
}

func TestRangeString(t *testing.T) {
	tests := []struct {
		r    Range
		want string
	}{
		{FullRange, "[full circle)"},
		{Range{"k", "k"}, "[full circle)"},
		{Range{"a", "b"}, `["a", "b")`},
		{Range{"x", MinKey}, `["x", "")`},
		{Range{MinKey, "\xff"}, `["", "\xff")`},
		{Range{Uint64Key(5), Uint64Key(1 << 40)}, "[5, 1099511627776)"},
		{Range{Uint64Key(0), "a"}, `[0, "a")`},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("String() = %s, want %s", got, tt.want)
		}
	}
}

func TestRangeErrorsMentionRange(t *testing.T) {
	_, _, err := Range{"a", "c"}.Split("z")
	if err == nil || !strings.Contains(err.Error(), `["a", "c")`) {
		t.Errorf("Split error = %v, want it to name the range", err)
	}
	_, err = Range{"a", "c"}.Merge(Range{"d", "e"})
	if err == nil || !strings.Contains(err.Error(), "not adjacent") {
		t.Errorf("Merge error = %v, want 'not adjacent'", err)
	}
	_, err = Range{"a", "c"}.Merge(Range{"c", "b"})
	if err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("Merge error = %v, want 'overlap'", err)
	}
}

func TestSubtract(t *testing.T) {
	k := func(i uint64) Key { return Uint64Key(i) }
	for _, c := range []struct {
		r, o Range
		want []Range
	}{
		{Range{k(10), k(20)}, Range{k(12), k(15)}, []Range{{k(10), k(12)}, {k(15), k(20)}}},
		{Range{k(10), k(20)}, Range{k(5), k(25)}, nil},
		{Range{k(10), k(20)}, Range{k(20), k(30)}, []Range{{k(10), k(20)}}},
		{Range{k(10), k(20)}, FullRange, nil},
		{FullRange, Range{k(10), k(20)}, []Range{{k(20), k(10)}}},
		{Range{k(20), k(10)}, Range{k(5), k(25)}, []Range{{k(25), k(5)}}}, // pieces meeting at the seam are one range
		{Range{k(20), k(10)}, Range{k(30), k(5)}, []Range{{k(5), k(10)}, {k(20), k(30)}}},
	} {
		got := c.r.Subtract(c.o)
		if len(got) != len(c.want) {
			t.Errorf("%s minus %s = %v, want %v", c.r, c.o, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s minus %s = %v, want %v", c.r, c.o, got, c.want)
			}
		}
	}
}

func TestRangeThroughPB(t *testing.T) {
	for _, r := range []Range{FullRange, {Key("a"), Key("m")}, {Key("x"), Key("b")}, {Key("q"), MinKey}} {
		if got := RangeFromPB(r.ToPB()); got != r {
			t.Errorf("%v through the wire is %v", r, got)
		}
	}
}
