package store

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/skiprange/skiprange/overlay"
)

// Tests of what Pebble adds to the conformance suite in btree_test.go: persistence, metadata and
// ownership of returned values.

// pebbleInvariants reports whether Pebble was built with its invariant checks, which the race
// detector and the invariants build tag turn on. They allocate as they go and make Pebble pick
// some behaviours at random.
func pebbleInvariants() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "-race" && s.Value == "true":
			return true
		case s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "invariants"):
			return true
		}
	}
	return false
}

// reopenPebble closes p and opens the store in its directory again.
func reopenPebble(t *testing.T, p *Pebble) *Pebble {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openPebble(t, p.dir)
}

func TestPebbleSurvivesReopen(t *testing.T) {
	p := filled(t, pebbleImpl).(*Pebble)
	// Writes of every kind, unsynced and synced, before the restart.
	if err := p.Delete("m"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteRange(overlay.Range{Start: "\xff\x00", End: "\x00"}); err != nil { // "\xff\x00", "\xff\xff", ""
		t.Fatal(err)
	}
	if err := p.PutBatch([]overlay.Item{{Key: "new", Value: valueOf("new")}, {Key: "a", Value: []byte("changed")}}, true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMeta("range-start", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMeta("", []byte("empty name")); err != nil {
		t.Fatal(err)
	}
	want := []overlay.Key{"\x00", "\x00\x00", "\x00\xff", "\x01", "a", "b", "new", "z", "\xff"}

	p = reopenPebble(t, p)
	if got := keys(p); !slices.Equal(got, want) {
		t.Errorf("after reopen keys are %q, want %q", got, want)
	}
	if p.Len() != len(want) {
		t.Errorf("after reopen Len = %d, want %d", p.Len(), len(want))
	}
	for _, k := range want {
		wantV := valueOf(k)
		if k == "a" {
			wantV = []byte("changed")
		}
		if got, found, err := p.Get(k); err != nil || !found || !bytes.Equal(got.Value, wantV) {
			t.Errorf("after reopen Get(%q) = %q, %v, %v; want %q", k, got.Value, found, err, wantV)
		}
	}
	for name, wantV := range map[string]string{"range-start": "b", "": "empty name"} {
		if v, found, err := p.GetMeta(name); err != nil || !found || string(v) != wantV {
			t.Errorf("after reopen GetMeta(%q) = %q, %v, %v; want %q", name, v, found, err, wantV)
		}
	}
	if v, found, err := p.GetMeta("absent"); err != nil || found || v != nil {
		t.Errorf("GetMeta(absent) = %q, %v, %v; want nil, false, nil", v, found, err)
	}
}

// Metadata lives beside the items without being one: the item operations neither see nor
// remove it, whatever the range.
func TestPebbleMetaIsNotAnItem(t *testing.T) {
	p := filled(t, pebbleImpl).(*Pebble)
	if err := p.SetMeta("version", []byte("7")); err != nil {
		t.Fatal(err)
	}
	if p.Len() != len(testKeys) {
		t.Errorf("Len = %d after SetMeta, want %d", p.Len(), len(testKeys))
	}
	if n, err := p.Count(overlay.Range{Start: "\x00"}); err != nil || n != len(testKeys)-1 {
		t.Errorf("Count = %d, %v after SetMeta, want %d", n, err, len(testKeys)-1)
	}
	if got := keys(p); !slices.Equal(got, testKeys) {
		t.Errorf("keys = %q after SetMeta, want %q", got, testKeys)
	}
	for _, r := range []overlay.Range{{Start: "\xff\xff", End: "\x00"}, overlay.FullRange} {
		if err := p.DeleteRange(r); err != nil {
			t.Fatal(err)
		}
		if v, found, err := p.GetMeta("version"); err != nil || !found || string(v) != "7" {
			t.Errorf("after DeleteRange(%s) GetMeta = %q, %v, %v; want \"7\"", r, v, found, err)
		}
	}
	if p = reopenPebble(t, p); p.Len() != 0 {
		t.Errorf("after reopen Len = %d, want 0: metadata counted as items", p.Len())
	}
}

// A range that wraps the seam is deleted in both parts, atomically, and the counter follows,
// as a recount at reopen confirms.
func TestPebbleDeleteRangeOverSeam(t *testing.T) {
	p := filled(t, pebbleImpl).(*Pebble)
	r := overlay.Range{Start: "z", End: "\x00\xff"} // "z" .. "\xff\xff", then "" .. "\x00\x00"
	want := []overlay.Key{"\x00\xff", "\x01", "a", "b", "m"}
	if err := p.DeleteRange(r); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if got := keys(p); !slices.Equal(got, want) {
			t.Errorf("%s keys are %q, want %q", when, got, want)
		}
		if p.Len() != len(want) {
			t.Errorf("%s Len = %d, want %d", when, p.Len(), len(want))
		}
		if n, err := p.Count(r); err != nil || n != 0 {
			t.Errorf("%s Count(%s) = %d, %v; want 0", when, r, n, err)
		}
	}
	check("after DeleteRange")
	p = reopenPebble(t, p)
	check("after reopen")

	// Keys written again into the deleted range are not hidden by its tombstones.
	if err := p.PutBatch([]overlay.Item{{Key: "", Value: valueOf("")}, {Key: "\xff\xff", Value: valueOf("\xff\xff")}}, false); err != nil {
		t.Fatal(err)
	}
	want = []overlay.Key{"", "\x00\xff", "\x01", "a", "b", "m", "\xff\xff"}
	if got := keys(p); !slices.Equal(got, want) {
		t.Errorf("after rewrite keys are %q, want %q", got, want)
	}
	if p.Len() != len(want) {
		t.Errorf("after rewrite Len = %d, want %d", p.Len(), len(want))
	}
}

// Values handed out belong to the caller: modifying them leaves the store intact, and later
// writes, flushes and reads leave them intact.
func TestPebbleValuesAreNotAliased(t *testing.T) {
	p := filled(t, pebbleImpl).(*Pebble)
	got, _, err := p.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	var ascended [][]byte
	if err := p.Ascend(overlay.FullRange, func(it overlay.Item) bool {
		v := it.Value
		ascended = append(ascended, v) // kept past the callback, as handoffs do
		return true
	}); err != nil {
		t.Fatal(err)
	}
	meta := []byte("meta")
	if err := p.SetMeta("x", meta); err != nil {
		t.Fatal(err)
	}
	gotMeta, _, err := p.GetMeta("x")
	if err != nil {
		t.Fatal(err)
	}
	clear(meta) // SetMeta must have copied it

	// Overwrite and scribble everywhere, and move the data from the memtable to a table.
	for _, k := range testKeys {
		if err := p.Put(overlay.Item{Key: k, Value: []byte("XXXXXXXX")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Get("b"); err != nil {
		t.Fatal(err)
	}
	if string(got.Value) != "va" {
		t.Errorf("value from Get changed to %q, want \"va\"", got.Value)
	}
	for i, v := range ascended {
		if want := valueOf(testKeys[i]); !bytes.Equal(v, want) {
			t.Errorf("value from Ascend for %q changed to %q, want %q", testKeys[i], v, want)
		}
	}
	if string(gotMeta) != "meta" {
		t.Errorf("value from GetMeta changed to %q, want \"meta\"", gotMeta)
	}

	// And the other way round: modifying a returned value does not reach the store.
	if err := p.Put(overlay.Item{Key: "new", Value: []byte("YYYYYYYY")}); err != nil { // in the memtable, not the table
		t.Fatal(err)
	}
	got, _, _ = p.Get("a")
	clear(got.Value)
	v, _, _ := p.GetMeta("x")
	clear(v)
	if err := p.Ascend(overlay.FullRange, func(it overlay.Item) bool {
		v := it.Value
		clear(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(slices.Clone(testKeys), "new") {
		want := "XXXXXXXX"
		if k == "new" {
			want = "YYYYYYYY"
		}
		if got, _, _ := p.Get(k); string(got.Value) != want {
			t.Errorf("Get(%q) after modifying returned values = %q, want %q", k, got.Value, want)
		}
	}
	if v, _, _ := p.GetMeta("x"); string(v) != "meta" {
		t.Errorf("GetMeta after modifying a returned value = %q", v)
	}
}

// An empty synced batch is a durability barrier, not an error.
func TestPebbleEmptySyncedBatch(t *testing.T) {
	p := openPebble(t, t.TempDir())
	if err := p.Put(overlay.Item{Key: "k", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	for _, items := range [][]overlay.Item{nil, {}} {
		if err := p.PutBatch(items, true); err != nil {
			t.Fatalf("PutBatch(%#v, true): %v", items, err)
		}
	}
	if p.Len() != 1 {
		t.Errorf("Len = %d, want 1", p.Len())
	}
	if p = reopenPebble(t, p); p.Len() != 1 {
		t.Errorf("after reopen Len = %d, want 1", p.Len())
	}
}

func TestPebbleCloseTwiceAndLock(t *testing.T) {
	dir := t.TempDir()
	p := openPebble(t, dir)
	// The directory is locked while the store is open.
	if q, err := OpenPebble(dir, nil); err == nil {
		q.Close()
		t.Fatal("opened the same directory twice")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	q, err := OpenPebble(dir, nil) // a nil logger discards Pebble's messages
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkPebblePut(b *testing.B) { benchmarkPut(b, openPebble(b, b.TempDir())) }

func BenchmarkPebbleAscend100(b *testing.B) { benchmarkAscend100(b, openPebble(b, b.TempDir())) }

// TestPebbleSyncSurvivesACrash: a process that dies without closing the store (kill -9 does the
// same) keeps every write made before its last Sync. Pebble holds unsynced writes in its own log
// buffer, so without the Sync they would be gone. The crash runs in a child process.
func TestPebbleSyncSurvivesACrash(t *testing.T) {
	if dir := os.Getenv("SKIPRANGE_PEBBLE_CRASH_DIR"); dir != "" {
		p, err := OpenPebble(dir, nil)
		if err != nil {
			os.Exit(3)
		}
		for i := 0; i < 10; i++ {
			if p.Put(overlay.Item{Key: overlay.Key(fmt.Sprintf("k%d", i)), Value: []byte("v")}) != nil {
				os.Exit(4)
			}
		}
		if p.Sync() != nil {
			os.Exit(5)
		}
		os.Exit(0) // no Close: the process just ends
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPebbleSyncSurvivesACrash$")
	cmd.Env = append(os.Environ(), "SKIPRANGE_PEBBLE_CRASH_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	p, err := OpenPebble(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 10; i++ {
		if _, ok, err := p.Get(overlay.Key(fmt.Sprintf("k%d", i))); err != nil || !ok {
			t.Fatalf("k%d lost in the crash although synced (err %v)", i, err)
		}
	}
	if err := p.Sync(); err != nil {
		t.Fatalf("Sync with nothing to sync: %v", err)
	}
}

// A database whose items were written before the stamps existed holds bare values, which would
// be misread as stamps: it is refused with a clear error, and an empty one is taken and marked.
func TestPebbleRefusesItemsWithoutStamps(t *testing.T) {
	dir := t.TempDir()
	p := openPebble(t, dir)
	if err := p.db.Set(itemKey("k"), []byte("bare value"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := p.db.Delete(metaKey(formatMeta), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if q, err := OpenPebble(dir, nil); err == nil || !strings.Contains(err.Error(), "without write stamps") {
		if q != nil {
			_ = q.Close()
		}
		t.Fatalf("OpenPebble on items without stamps: %v; want an error naming them", err)
	}

	empty := t.TempDir()
	q := openPebble(t, empty)
	if format, found, err := q.GetMeta(formatMeta); err != nil || !found || string(format) != string(stampedFormat) {
		t.Errorf("a new store's format = %q, %v, %v; want %q", format, found, err, stampedFormat)
	}
}
