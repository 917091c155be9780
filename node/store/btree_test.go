package store

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/skiprange/skiprange/overlay"
)

// The tests below are a conformance suite: each runs against every implementation in impls.

// impl is one overlay.Store implementation under test.
type impl struct {
	name string
	// open returns a new empty store, closed when the test ends.
	open func(t testing.TB) overlay.Store
	// reopen closes s and opens it again from where it keeps its items; nil when the store keeps
	// nothing across Close.
	reopen func(t testing.TB, s overlay.Store) overlay.Store
	// checksAllocate is set when the store was built with internal checks that allocate as they
	// go, which voids allocation counts.
	checksAllocate bool
}

var impls = []impl{memoryImpl, pebbleImpl}

var memoryImpl = impl{name: "Memory", open: func(testing.TB) overlay.Store { return NewMemory() }}

var pebbleImpl = impl{
	name: "Pebble",
	open: func(t testing.TB) overlay.Store { return openPebble(t, t.TempDir()) },
	reopen: func(t testing.TB, s overlay.Store) overlay.Store {
		p := s.(*Pebble)
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return openPebble(t, p.dir)
	},
	checksAllocate: pebbleInvariants(),
}

// openPebble opens the Pebble store in dir, and closes it when the test ends. Pebble's errors are
// logged to t; its routine messages, at debug level, are not.
func openPebble(t testing.TB, dir string) *Pebble {
	t.Helper()
	p, err := OpenPebble(dir, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// forEachImpl runs test as a subtest for each implementation.
func forEachImpl(t *testing.T, test func(t *testing.T, s impl)) {
	for _, s := range impls {
		t.Run(s.name, func(t *testing.T) { test(t, s) })
	}
}

// testKeys are the keys most tests fill the store with, in key order. They include the empty key,
// keys made of 0x00 and 0xff bytes, and prefixes of one another.
var testKeys = []overlay.Key{
	"", "\x00", "\x00\x00", "\x00\xff", "\x01", "a", "b", "m", "z", "\xff", "\xff\x00", "\xff\xff",
}

// filled opens a store of implementation s holding testKeys, each with its valueOf.
func filled(t testing.TB, s impl) overlay.Store {
	t.Helper()
	m := s.open(t)
	for _, k := range testKeys {
		if err := m.Put(overlay.Item{Key: k, Value: valueOf(k)}); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	return m
}

func valueOf(k overlay.Key) []byte { return []byte("v" + string(k)) }

// collect returns the keys Ascend visits in r, stopping after limit keys when limit > 0. It also
// checks that each value is the one filled stored.
func collect(t *testing.T, m overlay.Store, r overlay.Range, limit int) []overlay.Key {
	t.Helper()
	var got []overlay.Key
	err := m.Ascend(r, func(it overlay.Item) bool {
		k, v := it.Key, it.Value
		if !bytes.Equal(v, valueOf(k)) {
			t.Errorf("Ascend(%s): key %q has value %q, want %q", r, k, v, valueOf(k))
		}
		got = append(got, k)
		return limit <= 0 || len(got) < limit
	})
	if err != nil {
		t.Fatalf("Ascend(%s): %v", r, err)
	}
	return got
}

func keys(m overlay.Store) []overlay.Key {
	var got []overlay.Key
	m.Ascend(overlay.FullRange, func(it overlay.Item) bool {
		k := it.Key
		got = append(got, k)
		return true
	})
	return got
}

func TestGetPutDelete(t *testing.T) { forEachImpl(t, testGetPutDelete) }

func testGetPutDelete(t *testing.T, s impl) {
	for _, k := range testKeys {
		t.Run(fmt.Sprintf("%q", k), func(t *testing.T) {
			m := filled(t, s)
			got, found, err := m.Get(k)
			v := got.Value
			if err != nil || !found || !bytes.Equal(v, valueOf(k)) {
				t.Fatalf("Get = %q, %v, %v; want %q, true, nil", v, found, err, valueOf(k))
			}

			// Overwrite with a buffer the caller then reuses: the store must have copied it.
			buf := []byte("new")
			if err := m.Put(overlay.Item{Key: k, Value: buf}); err != nil {
				t.Fatal(err)
			}
			copy(buf, "xxx")
			if got, found, _ := m.Get(k); !found || string(got.Value) != "new" {
				t.Fatalf("after overwrite and buffer reuse Get = %q, %v; want \"new\", true", got.Value, found)
			}
			if m.Len() != len(testKeys) {
				t.Fatalf("Len = %d after overwrite, want %d", m.Len(), len(testKeys))
			}

			if err := m.Delete(k); err != nil {
				t.Fatal(err)
			}
			if got, found, err := m.Get(k); err != nil || found || got.Value != nil {
				t.Fatalf("after Delete Get = %q, %v, %v; want nil, false, nil", got.Value, found, err)
			}
			if m.Len() != len(testKeys)-1 {
				t.Fatalf("Len = %d after Delete, want %d", m.Len(), len(testKeys)-1)
			}
			// Deleting an absent key is not an error.
			if err := m.Delete(k); err != nil {
				t.Fatalf("second Delete: %v", err)
			}
			// Every other key is untouched.
			for _, o := range testKeys {
				if o == k {
					continue
				}
				if got, found, _ := m.Get(o); !found || !bytes.Equal(got.Value, valueOf(o)) {
					t.Fatalf("Get(%q) = %q, %v after deleting %q", o, got.Value, found, k)
				}
			}
		})
	}
}

func TestEmptyValue(t *testing.T) { forEachImpl(t, testEmptyValue) }

func testEmptyValue(t *testing.T, s impl) {
	m := s.open(t)
	for _, v := range [][]byte{nil, {}} {
		if err := m.Put(overlay.Item{Key: "k", Value: v}); err != nil {
			t.Fatal(err)
		}
		got, found, err := m.Get("k")
		if err != nil || !found || len(got.Value) != 0 {
			t.Fatalf("Put(%#v) then Get = %q, %v, %v; want empty, true, nil", v, got.Value, found, err)
		}
	}
}

func TestEmptyStore(t *testing.T) { forEachImpl(t, testEmptyStore) }

func testEmptyStore(t *testing.T, s impl) {
	m := s.open(t)
	for _, r := range []overlay.Range{overlay.FullRange, {Start: "a", End: "b"}, {Start: "b", End: "a"}, {Start: "a"}} {
		if got := collect(t, m, r, 0); len(got) != 0 {
			t.Errorf("Ascend(%s) on empty store visited %q", r, got)
		}
		if n, err := m.Count(r); err != nil || n != 0 {
			t.Errorf("Count(%s) on empty store = %d, %v", r, n, err)
		}
		if err := m.DeleteRange(r); err != nil {
			t.Errorf("DeleteRange(%s) on empty store: %v", r, err)
		}
	}
	if _, found, _ := m.Get(""); found {
		t.Error("Get on empty store found a key")
	}
	if m.Len() != 0 {
		t.Errorf("Len = %d", m.Len())
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestPutBatch(t *testing.T) { forEachImpl(t, testPutBatch) }

func testPutBatch(t *testing.T, s impl) {
	tests := []struct {
		name  string
		items []overlay.Item
		want  map[overlay.Key]string
	}{
		{name: "empty", items: nil, want: map[overlay.Key]string{}},
		{
			name:  "edge keys",
			items: []overlay.Item{{Key: "", Value: []byte("e")}, {Key: "\x00", Value: []byte("0")}, {Key: "\xff\xff", Value: []byte("f")}},
			want:  map[overlay.Key]string{"": "e", "\x00": "0", "\xff\xff": "f"},
		},
		{
			name:  "repeated key last wins",
			items: []overlay.Item{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("3")}},
			want:  map[overlay.Key]string{"a": "3", "b": "2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := s.open(t)
			for _, sync := range []bool{false, true} {
				if err := m.PutBatch(tt.items, sync); err != nil {
					t.Fatal(err)
				}
			}
			// The caller may reuse its buffers after the call.
			for _, it := range tt.items {
				for i := range it.Value {
					it.Value[i] = '!'
				}
			}
			if m.Len() != len(tt.want) {
				t.Fatalf("Len = %d, want %d", m.Len(), len(tt.want))
			}
			for k, want := range tt.want {
				if got, found, _ := m.Get(k); !found || string(got.Value) != want {
					t.Errorf("Get(%q) = %q, %v; want %q", k, got.Value, found, want)
				}
			}
		})
	}
}

// ascendTests run against the filled store. want lists the keys visited in order.
var ascendTests = []struct {
	name  string
	r     overlay.Range
	limit int // stop after this many keys; 0 means never stop
	want  []overlay.Key
}{
	{name: "normal", r: overlay.Range{Start: "a", End: "m"}, want: []overlay.Key{"a", "b"}},
	{name: "normal from empty key", r: overlay.Range{Start: "", End: "\x01"}, want: []overlay.Key{"", "\x00", "\x00\x00", "\x00\xff"}},
	{name: "normal between keys", r: overlay.Range{Start: "\x00\x01", End: "a\x00"}, want: []overlay.Key{"\x00\xff", "\x01", "a"}},
	{name: "normal no keys", r: overlay.Range{Start: "c", End: "l"}, want: nil},
	{name: "normal 0xff bytes", r: overlay.Range{Start: "\xff", End: "\xff\xff"}, want: []overlay.Key{"\xff", "\xff\x00"}},
	{name: "normal early stop", r: overlay.Range{Start: "\x00", End: "z"}, limit: 2, want: []overlay.Key{"\x00", "\x00\x00"}},
	{
		name: "wrapping",
		r:    overlay.Range{Start: "m", End: "b"},
		want: []overlay.Key{"m", "z", "\xff", "\xff\x00", "\xff\xff", "", "\x00", "\x00\x00", "\x00\xff", "\x01", "a"},
	},
	{name: "wrapping to empty-key successor", r: overlay.Range{Start: "\xff\xff", End: "\x00"}, want: []overlay.Key{"\xff\xff", ""}},
	{name: "wrapping no high part", r: overlay.Range{Start: "\xff\xff\x00", End: "\x00\x01"}, want: []overlay.Key{"", "\x00", "\x00\x00"}},
	{name: "wrapping no low part", r: overlay.Range{Start: "\xff\x00", End: "\x00"}, want: []overlay.Key{"\xff\x00", "\xff\xff", ""}},
	{name: "wrapping stop before seam", r: overlay.Range{Start: "m", End: "b"}, limit: 2, want: []overlay.Key{"m", "z"}},
	{name: "wrapping stop at seam", r: overlay.Range{Start: "m", End: "b"}, limit: 5, want: []overlay.Key{"m", "z", "\xff", "\xff\x00", "\xff\xff"}},
	{name: "wrapping stop after seam", r: overlay.Range{Start: "m", End: "b"}, limit: 7, want: []overlay.Key{"m", "z", "\xff", "\xff\x00", "\xff\xff", "", "\x00"}},
	{name: "full", r: overlay.FullRange, want: testKeys},
	{name: "full not at seam", r: overlay.Range{Start: "m", End: "m"}, want: testKeys},
	{name: "full early stop", r: overlay.FullRange, limit: 3, want: []overlay.Key{"", "\x00", "\x00\x00"}},
	{name: "top-ended", r: overlay.Range{Start: "m"}, want: []overlay.Key{"m", "z", "\xff", "\xff\x00", "\xff\xff"}},
	{name: "top-ended 0xff", r: overlay.Range{Start: "\xff\x00"}, want: []overlay.Key{"\xff\x00", "\xff\xff"}},
	{name: "top-ended past every key", r: overlay.Range{Start: "\xff\xff\xff"}, want: nil},
	{name: "top-ended early stop", r: overlay.Range{Start: "b"}, limit: 2, want: []overlay.Key{"b", "m"}},
}

func TestAscend(t *testing.T) { forEachImpl(t, testAscend) }

func testAscend(t *testing.T, s impl) {
	m := filled(t, s)
	for _, tt := range ascendTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := collect(t, m, tt.r, tt.limit); !slices.Equal(got, tt.want) {
				t.Errorf("Ascend(%s, limit %d) visited %q, want %q", tt.r, tt.limit, got, tt.want)
			}
		})
	}
}

func TestCount(t *testing.T) { forEachImpl(t, testCount) }

func testCount(t *testing.T, s impl) {
	m := filled(t, s)
	for _, tt := range ascendTests {
		if tt.limit > 0 {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			n, err := m.Count(tt.r)
			if err != nil || n != len(tt.want) {
				t.Errorf("Count(%s) = %d, %v; want %d", tt.r, n, err, len(tt.want))
			}
		})
	}
}

func TestCountDoesNotAllocatePerItem(t *testing.T) { forEachImpl(t, testCountDoesNotAllocatePerItem) }

func testCountDoesNotAllocatePerItem(t *testing.T, s impl) {
	if s.checksAllocate {
		t.Skip("the store's internal checks allocate")
	}
	m := s.open(t)
	for i := range 10000 {
		m.Put(overlay.Item{Key: overlay.Uint64Key(uint64(i)), Value: nil})
	}
	ranges := []overlay.Range{
		overlay.FullRange,
		{Start: overlay.Uint64Key(100), End: overlay.Uint64Key(9000)},
		{Start: overlay.Uint64Key(9000), End: overlay.Uint64Key(1000)},
		{Start: overlay.Uint64Key(5000)},
	}
	for _, r := range ranges {
		allocs := testing.AllocsPerRun(10, func() { m.Count(r) })
		if allocs > 4 {
			t.Errorf("Count(%s) made %v allocations", r, allocs)
		}
	}
}

func TestDeleteRange(t *testing.T) { forEachImpl(t, testDeleteRange) }

func testDeleteRange(t *testing.T, s impl) {
	tests := []struct {
		name string
		r    overlay.Range
		want []overlay.Key // keys left
	}{
		{name: "normal", r: overlay.Range{Start: "\x00", End: "b"}, want: []overlay.Key{"", "b", "m", "z", "\xff", "\xff\x00", "\xff\xff"}},
		{name: "normal no keys", r: overlay.Range{Start: "c", End: "l"}, want: testKeys},
		{name: "wrapping", r: overlay.Range{Start: "m", End: "b"}, want: []overlay.Key{"b"}},
		{name: "wrapping through the empty key", r: overlay.Range{Start: "\xff\xff", End: "\x00\x00"}, want: []overlay.Key{"\x00\x00", "\x00\xff", "\x01", "a", "b", "m", "z", "\xff", "\xff\x00"}},
		{name: "wrapping one key", r: overlay.Range{Start: "\xff\xff\x00", End: "\x00"}, want: testKeys[1:]},
		{name: "wrapping between keys", r: overlay.Range{Start: "z\x00", End: "\x00\x01"}, want: []overlay.Key{"\x00\xff", "\x01", "a", "b", "m", "z"}},
		{name: "top-ended", r: overlay.Range{Start: "\xff"}, want: []overlay.Key{"", "\x00", "\x00\x00", "\x00\xff", "\x01", "a", "b", "m", "z"}},
		{name: "full", r: overlay.FullRange, want: nil},
		{name: "full not at seam", r: overlay.Range{Start: "b", End: "b"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := filled(t, s)
			if err := m.DeleteRange(tt.r); err != nil {
				t.Fatal(err)
			}
			if got := keys(m); !slices.Equal(got, tt.want) {
				t.Errorf("after DeleteRange(%s) keys are %q, want %q", tt.r, got, tt.want)
			}
			if m.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", m.Len(), len(tt.want))
			}
			if n, _ := m.Count(tt.r); n != 0 {
				t.Errorf("Count(%s) = %d after deleting it", tt.r, n)
			}
			// The store stays usable.
			if err := m.Put(overlay.Item{Key: "q", Value: []byte("q")}); err != nil {
				t.Fatal(err)
			}
			if got, found, _ := m.Get("q"); !found || string(got.Value) != "q" {
				t.Errorf("Get after DeleteRange = %q, %v", got.Value, found)
			}
		})
	}
}

// Property test: the store against a Go map, with a brute-force scan using Range.Contains as the
// reference for Ascend, Count and DeleteRange.

// keyGen draws short keys from a small alphabet heavy in edge bytes, so that random keys collide
// and random range bounds fall on, between and around stored keys.
var keyGen = rapid.Custom(func(t *rapid.T) overlay.Key {
	b := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 'a', 0x7f, 0xfe, 0xff}), 0, 3).Draw(t, "bytes")
	return overlay.Key(b)
})

var rangeGen = rapid.Custom(func(t *rapid.T) overlay.Range {
	return overlay.Range{Start: keyGen.Draw(t, "start"), End: keyGen.Draw(t, "end")}
})

// refAscend lists the keys of ref in r in circular order: the keys in r, sorted, with those below
// Start moved behind the others when r wraps the seam.
func refAscend(ref map[overlay.Key][]byte, r overlay.Range) []overlay.Key {
	all := make([]overlay.Key, 0, len(ref))
	for k := range ref {
		all = append(all, k)
	}
	slices.Sort(all)
	var high, low []overlay.Key
	for _, k := range all {
		switch {
		case !r.Contains(k):
		case r.Wraps() && k < r.Start:
			low = append(low, k)
		default:
			high = append(high, k)
		}
	}
	return append(high, low...)
}

func TestMatchesReference(t *testing.T) { forEachImpl(t, testMatchesReference) }

func testMatchesReference(tt *testing.T, s impl) {
	rapid.Check(tt, func(t *rapid.T) {
		// Stores belong to the enclosing test, which outlives each check; close them as each
		// check ends rather than keep them all open until then.
		m := s.open(tt)
		defer func() { m.Close() }()
		ref := map[overlay.Key][]byte{}
		actions := map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				v := []byte(rapid.StringN(0, 4, -1).Draw(t, "value"))
				if err := m.Put(overlay.Item{Key: k, Value: v}); err != nil {
					t.Fatal(err)
				}
				ref[k] = bytes.Clone(v)
				clear(v) // the store must have copied it
			},
			"putBatch": func(t *rapid.T) {
				n := rapid.IntRange(0, 8).Draw(t, "n")
				items := make([]overlay.Item, n)
				for i := range items {
					items[i] = overlay.Item{Key: keyGen.Draw(t, "key"), Value: []byte{byte(i)}}
				}
				if err := m.PutBatch(items, rapid.Bool().Draw(t, "sync")); err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					ref[it.Key] = bytes.Clone(it.Value)
					it.Value[0] = 0xee
				}
			},
			"delete": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				if err := m.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(ref, k)
			},
			"deleteRange": func(t *rapid.T) {
				r := rangeGen.Draw(t, "range")
				if err := m.DeleteRange(r); err != nil {
					t.Fatal(err)
				}
				for k := range ref {
					if r.Contains(k) {
						delete(ref, k)
					}
				}
			},
			"get": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				got, found, err := m.Get(k)
				v := got.Value
				want, wantFound := ref[k]
				if err != nil || found != wantFound || !bytes.Equal(v, want) {
					t.Fatalf("Get(%q) = %q, %v, %v; want %q, %v", k, v, found, err, want, wantFound)
				}
			},
			"ascend": func(t *rapid.T) {
				r := rangeGen.Draw(t, "range")
				want := refAscend(ref, r)
				limit := rapid.IntRange(0, len(want)+1).Draw(t, "limit") // 0: never stop
				if limit > 0 && limit < len(want) {
					want = want[:limit]
				}
				var got []overlay.Key
				err := m.Ascend(r, func(it overlay.Item) bool {
					k, v := it.Key, it.Value
					if !bytes.Equal(v, ref[k]) {
						t.Fatalf("Ascend(%s): key %q has value %q, want %q", r, k, v, ref[k])
					}
					got = append(got, k)
					return limit == 0 || len(got) < limit
				})
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("Ascend(%s, limit %d) = %q, %v; want %q", r, limit, got, err, want)
				}
			},
			"count": func(t *rapid.T) {
				r := rangeGen.Draw(t, "range")
				want := len(refAscend(ref, r))
				if n, err := m.Count(r); err != nil || n != want {
					t.Fatalf("Count(%s) = %d, %v; want %d", r, n, err, want)
				}
			},
			"": func(t *rapid.T) {
				if m.Len() != len(ref) {
					t.Fatalf("Len = %d, want %d", m.Len(), len(ref))
				}
				if got, want := keys(m), refAscend(ref, overlay.FullRange); !slices.Equal(got, want) {
					t.Fatalf("keys = %q, want %q", got, want)
				}
			},
		}
		if s.reopen != nil {
			// Whatever was written must be there again after a restart, with Len recounted.
			actions["reopen"] = func(*rapid.T) { m = s.reopen(tt, m) }
		}
		t.Repeat(actions)
	})
}

func BenchmarkMemoryPut(b *testing.B) { benchmarkPut(b, NewMemory()) }

func benchmarkPut(b *testing.B, m overlay.Store) {
	value := make([]byte, 100)
	var i uint64
	for b.Loop() {
		// A multiplicative hash spreads the keys over the tree instead of appending at its end.
		if err := m.Put(overlay.Item{Key: overlay.Uint64Key(i * 0x9e3779b97f4a7c15), Value: value}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkMemoryAscend100(b *testing.B) { benchmarkAscend100(b, NewMemory()) }

func benchmarkAscend100(b *testing.B, m overlay.Store) {
	const n = 100_000
	value := make([]byte, 100)
	for i := range uint64(n) {
		m.Put(overlay.Item{Key: overlay.Uint64Key(i), Value: value})
	}
	var i uint64
	for b.Loop() {
		// Start anywhere, so some walks wrap the seam.
		start := (i * 7919) % n
		i++
		r := overlay.Range{Start: overlay.Uint64Key(start), End: overlay.Uint64Key((start + n/2) % n)}
		seen := 0
		m.Ascend(r, func(it overlay.Item) bool {
			seen++
			return seen < 100
		})
		if seen != 100 {
			b.Fatalf("visited %d items, want 100", seen)
		}
	}
}

func TestStampsAreKept(t *testing.T) { forEachImpl(t, testStampsAreKept) }

// Every write keeps its item's stamp, which Get and Ascend give back, across a reopen too.
func testStampsAreKept(t *testing.T, s impl) {
	m := s.open(t)
	if err := m.Put(overlay.Item{Key: "a", Value: []byte("va"), Written: 7}); err != nil {
		t.Fatal(err)
	}
	if err := m.PutBatch([]overlay.Item{{Key: "b", Value: []byte("vb"), Written: 1 << 62}, {Key: "c", Value: nil}}, true); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(overlay.Item{Key: "a", Value: []byte("va2"), Written: 9}); err != nil {
		t.Fatal(err)
	}
	want := map[overlay.Key]uint64{"a": 9, "b": 1 << 62, "c": 0}
	check := func(m overlay.Store) {
		t.Helper()
		for k, w := range want {
			if it, found, err := m.Get(k); err != nil || !found || it.Written != w || it.Key != k {
				t.Errorf("Get(%q) = %+v, %v, %v; want stamp %d", k, it, found, err, w)
			}
		}
		seen := 0
		if err := m.Ascend(overlay.FullRange, func(it overlay.Item) bool {
			if it.Written != want[it.Key] {
				t.Errorf("Ascend: %q has stamp %d, want %d", it.Key, it.Written, want[it.Key])
			}
			seen++
			return true
		}); err != nil || seen != len(want) {
			t.Errorf("Ascend visited %d items, %v; want %d", seen, err, len(want))
		}
	}
	check(m)
	if s.reopen != nil {
		check(s.reopen(t, m))
	}
}
