package store

import (
	"bytes"

	"github.com/google/btree"

	"github.com/skiprange/skiprange/overlay"
)

// degree is the B-tree's minimum degree: each node holds between degree-1 and 2*degree-1 items.
const degree = 32

// entry is one stored item. The tree orders entries by key alone; value and stamp ride along.
type entry = overlay.Item

func lessEntry(a, b entry) bool { return a.Key < b.Key }

// Memory is an in-memory overlay.Store backed by a B-tree.
//
// Put and PutBatch copy values, so callers may reuse their buffers. Get and Ascend return values
// as stored, without copying: callers must not modify them.
//
// Memory is not safe for concurrent use: a node's event loop is single-threaded and is the only
// user of its store. The callback passed to Ascend must not modify the store.
type Memory struct {
	tree *btree.BTreeG[entry]
}

var _ overlay.Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{tree: btree.NewG(degree, lessEntry)}
}

// Get returns the item stored under k. Its value must not be modified.
func (m *Memory) Get(k overlay.Key) (overlay.Item, bool, error) {
	e, ok := m.tree.Get(entry{Key: k})
	return e, ok, nil
}

// Put stores a copy of it, replacing any previous value of its key.
func (m *Memory) Put(it overlay.Item) error {
	m.tree.ReplaceOrInsert(stored(it))
	return nil
}

// stored is the entry kept for it: its own copy of the value, no delete mark.
func stored(it overlay.Item) entry {
	return entry{Key: it.Key, Value: bytes.Clone(it.Value), Written: it.Written}
}

// Delete removes k; deleting an absent key is not an error.
func (m *Memory) Delete(k overlay.Key) error {
	m.tree.Delete(entry{Key: k})
	return nil
}

// PutBatch stores copies of the items' values. An in-memory write cannot fail half-way, so the
// batch is trivially atomic; sync has no meaning for memory and is ignored. When a key repeats,
// its last occurrence wins.
func (m *Memory) PutBatch(items []overlay.Item, sync bool) error {
	for _, it := range items {
		m.tree.ReplaceOrInsert(stored(it))
	}
	return nil
}

// span is a linear piece [lo, hi) of the key line; top means hi lies beyond every key.
type span struct {
	lo, hi overlay.Key
	top    bool
}

// spans cuts r into at most two linear pieces in circular visiting order: a wrapping range yields
// [Start, top] then [min, End); the full range yields the whole line from the smallest key.
func spans(r overlay.Range) (first, second span, n int) {
	switch {
	case r.IsFull():
		return span{lo: overlay.MinKey, top: true}, span{}, 1
	case r.End == overlay.MinKey:
		return span{lo: r.Start, top: true}, span{}, 1
	case r.Start < r.End:
		return span{lo: r.Start, hi: r.End}, span{}, 1
	default:
		return span{lo: r.Start, top: true}, span{lo: overlay.MinKey, hi: r.End}, 2
	}
}

// ascendSpan visits the entries of s in key order until iter returns false, and reports whether
// the walk ran to the end of s.
func (m *Memory) ascendSpan(s span, iter btree.ItemIteratorG[entry]) bool {
	completed := true
	stop := func(e entry) bool {
		if !iter(e) {
			completed = false
			return false
		}
		return true
	}
	switch {
	case s.top && s.lo == overlay.MinKey:
		m.tree.Ascend(stop)
	case s.top:
		m.tree.AscendGreaterOrEqual(entry{Key: s.lo}, stop)
	default:
		m.tree.AscendRange(entry{Key: s.lo}, entry{Key: s.hi}, stop)
	}
	return completed
}

// ascend visits the entries of r in circular order until iter returns false.
func (m *Memory) ascend(r overlay.Range, iter btree.ItemIteratorG[entry]) {
	first, second, n := spans(r)
	if m.ascendSpan(first, iter) && n == 2 {
		m.ascendSpan(second, iter)
	}
}

// DeleteRange removes every key in r.
func (m *Memory) DeleteRange(r overlay.Range) error {
	if r.IsFull() {
		m.tree.Clear(false)
		return nil
	}
	first, second, n := spans(r)
	m.deleteSpan(first)
	if n == 2 {
		m.deleteSpan(second)
	}
	return nil
}

// deleteSpan removes the entries of s one at a time, each time looking up the smallest remaining
// key at or above s.lo. This needs no buffer of doomed keys, whatever the size of the span.
func (m *Memory) deleteSpan(s span) {
	var next entry
	var found bool
	first := func(e entry) bool {
		next, found = e, true
		return false
	}
	for {
		found = false
		m.tree.AscendGreaterOrEqual(entry{Key: s.lo}, first)
		if !found || (!s.top && next.Key >= s.hi) {
			return
		}
		m.tree.Delete(next)
	}
}

// Ascend calls fn for each item in r in circular order until fn returns false: a wrapping range
// is visited from its Start up to the largest key, then from the smallest key up to its End; the
// full range is visited in key order from the smallest key. Values must not be modified, and fn
// must not modify the store.
func (m *Memory) Ascend(r overlay.Range, fn func(it overlay.Item) bool) error {
	m.ascend(r, fn)
	return nil
}

// Count returns the number of keys in r. It walks them, so it costs time linear in the count but
// allocates nothing per key.
func (m *Memory) Count(r overlay.Range) (int, error) {
	if r.IsFull() {
		return m.tree.Len(), nil
	}
	n := 0
	m.ascend(r, func(entry) bool {
		n++
		return true
	})
	return n, nil
}

// Len returns the number of keys stored.
func (m *Memory) Len() int { return m.tree.Len() }

// Close does nothing and returns nil; the store stays usable.
func (m *Memory) Close() error { return nil }
