package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/skiprange/skiprange/overlay"
)

// The database holds two kinds of records, told apart by a one-byte prefix: items (itemPrefix +
// key) and node metadata (metaPrefix + name). Every item key, including the empty one, sorts in
// [itemPrefix, itemsEnd), so the whole item space is one key span that leaves the metadata alone.
const (
	itemPrefix byte = 'i'
	itemsEnd   byte = itemPrefix + 1
	metaPrefix byte = 'm'
)

// An item's record is its write stamp, 8 bytes big-endian, then its value. A database written
// before the stamps existed holds bare values: formatMeta tells the two apart, and such a
// database is refused rather than misread.
const (
	stampLen   = 8
	formatMeta = "item-format"
)

var stampedFormat = []byte("stamped-v1")

// record encodes it as an item's database value.
func record(it overlay.Item) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, stampLen+len(it.Value)), it.Written), it.Value...)
}

// fromRecord decodes an item's database value (the caller's own copy) under key k.
func fromRecord(k overlay.Key, rec []byte) (overlay.Item, error) {
	if len(rec) < stampLen {
		return overlay.Item{}, fmt.Errorf("item %q: record of %d bytes, shorter than its write stamp", k, len(rec))
	}
	return overlay.Item{Key: k, Written: binary.BigEndian.Uint64(rec), Value: rec[stampLen:]}, nil
}

// Pebble is an overlay.Store kept in a Pebble database on disk, beside the node's metadata
// (GetMeta, SetMeta), so that a node restarted on the same directory finds both again.
//
// Put, Delete and DeleteRange commit without syncing the write-ahead log; see Put for why that
// is safe. PutBatch syncs when asked to. Get and Ascend hand out copies of values, which the
// caller owns and may keep: Pebble's own buffers are only valid until the read that produced
// them ends, and callers (handoffs, range queries) keep values past the call, as they may with
// Memory.
//
// Len is kept in a counter, initialised at open by counting the items and maintained by every
// write. To keep it exact, Put and Delete first look the key up, PutBatch looks up each distinct
// key and DeleteRange counts the keys it removes. This makes Pebble, like Memory, unsafe for
// concurrent use: a node's event loop is single-threaded and is the only user of its store. The
// callback passed to Ascend must not modify the store. A Pebble must not be used after Close.
type Pebble struct {
	db     *pebble.DB
	dir    string
	n      int  // number of items stored
	dirty  bool // writes since the last synced one
	closed bool // Close has been called
}

var _ overlay.Store = (*Pebble)(nil)

// OpenPebble opens the Pebble store in dir, creating the directory and an empty database if
// they do not exist. Pebble's log messages go to log (nil discards them).
func OpenPebble(dir string, log *zap.Logger) (*Pebble, error) {
	if log == nil {
		log = zap.NewNop()
	}
	// The default event listener logs only background errors and data corruption, through
	// Logger; the chattier events (flushes, compactions, WAL files) stay silent.
	opts := &pebble.Options{Logger: pebbleLogger{log.Named("pebble").Sugar()}}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble store %s: %w", dir, err)
	}
	p := &Pebble{db: db, dir: dir}
	if p.n, err = p.count(overlay.FullRange); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open pebble store %s: count items: %w", dir, err)
	}
	if err := p.checkFormat(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open pebble store %s: %w", dir, err)
	}
	return p, nil
}

// checkFormat refuses a database whose items were written without stamps, and marks a new one.
func (p *Pebble) checkFormat() error {
	format, found, err := p.GetMeta(formatMeta)
	switch {
	case err != nil:
		return err
	case found && bytes.Equal(format, stampedFormat):
		return nil
	case found:
		return fmt.Errorf("item format %q is not this version's %q: start the node on a new data directory", format, stampedFormat)
	case p.n > 0:
		return fmt.Errorf("%d items stored by an older skiprange, without write stamps: start the node on a new data directory", p.n)
	}
	return p.SetMeta(formatMeta, stampedFormat)
}

// pebbleLogger adapts a zap logger to pebble.Logger.
type pebbleLogger struct{ log *zap.SugaredLogger }

// Infof logs at debug level: Pebble's informational messages (cancelled compactions and the
// like) are routine and of interest only when debugging the store.
func (l pebbleLogger) Infof(format string, args ...any) { l.log.Debugf(format, args...) }

func (l pebbleLogger) Errorf(format string, args ...any) { l.log.Errorf(format, args...) }

// Fatalf logs and exits the process, as Pebble expects: it calls Fatalf on corruption and broken
// invariants, and does not go on afterwards.
func (l pebbleLogger) Fatalf(format string, args ...any) { l.log.Fatalf(format, args...) }

// itemKey returns the database key of item k.
func itemKey(k overlay.Key) []byte {
	b := make([]byte, 0, 1+len(k))
	return append(append(b, itemPrefix), k...)
}

// metaKey returns the database key of metadata entry name.
func metaKey(name string) []byte {
	b := make([]byte, 0, 1+len(name))
	return append(append(b, metaPrefix), name...)
}

// get returns a copy of the value stored under the database key key.
func (p *Pebble) get(key []byte) (value []byte, found bool, err error) {
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	// v lives in Pebble's memory only until closer.Close.
	value = bytes.Clone(v)
	return value, true, closer.Close()
}

// has reports whether the database key key is present.
func (p *Pebble) has(key []byte) (bool, error) {
	_, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

// Get returns the item stored under k, its value a copy.
func (p *Pebble) Get(k overlay.Key) (overlay.Item, bool, error) {
	rec, found, err := p.get(itemKey(k))
	if err == nil && found {
		var it overlay.Item
		if it, err = fromRecord(k, rec); err == nil {
			return it, true, nil
		}
	}
	if err != nil {
		return overlay.Item{}, false, fmt.Errorf("pebble store: get %q: %w", k, err)
	}
	return overlay.Item{}, false, nil
}

// Put stores it, replacing any previous value of its key; the caller may reuse its value
// afterwards.
//
// The write is not synced: until the next synced write (PutBatch(sync=true), SetMeta, Sync) it
// waits in Pebble's log buffer — not even in the operating system's — so a killed process loses
// it. Pebble keeps one write-ahead log in commit order, so each synced write makes every earlier
// one durable too: the runtime calls Sync once per step that wrote, before anything of that step
// (a write's acknowledgement among it) leaves the node.
func (p *Pebble) Put(it overlay.Item) error {
	key := itemKey(it.Key)
	existed, err := p.has(key)
	if err != nil {
		return fmt.Errorf("pebble store: put %q: look up: %w", it.Key, err)
	}
	if err := p.db.Set(key, record(it), pebble.NoSync); err != nil {
		return fmt.Errorf("pebble store: put %q: %w", it.Key, err)
	}
	p.dirty = true
	if !existed {
		p.n++
	}
	return nil
}

// Delete removes k; deleting an absent key is not an error. Like Put, it does not sync.
func (p *Pebble) Delete(k overlay.Key) error {
	key := itemKey(k)
	existed, err := p.has(key)
	if err != nil {
		return fmt.Errorf("pebble store: delete %q: look up: %w", k, err)
	}
	if !existed {
		return nil // nothing to delete: no tombstone needed
	}
	if err := p.db.Delete(key, pebble.NoSync); err != nil {
		return fmt.Errorf("pebble store: delete %q: %w", k, err)
	}
	p.dirty = true
	p.n--
	return nil
}

// PutBatch writes items in one atomic Pebble batch; the caller may reuse the values afterwards.
// With sync, it returns only once the batch, and so every earlier write, is durable; an empty
// batch then still syncs the log, so that it serves as a durability barrier all the same. When a
// key repeats, its last occurrence wins.
func (p *Pebble) PutBatch(items []overlay.Item, sync bool) error {
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if len(items) == 0 {
		if !sync {
			return nil
		}
		// Pebble skips empty batches without touching the log; a log-only record makes it sync.
		if err := p.db.LogData(nil, pebble.Sync); err != nil {
			return fmt.Errorf("pebble store: sync empty batch: %w", err)
		}
		p.dirty = false
		return nil
	}
	b := p.db.NewBatch()
	defer b.Close()
	added := 0
	seen := make(map[overlay.Key]struct{}, len(items))
	for _, it := range items {
		key := itemKey(it.Key)
		if _, dup := seen[it.Key]; !dup {
			seen[it.Key] = struct{}{}
			existed, err := p.has(key)
			if err != nil {
				return fmt.Errorf("pebble store: put batch: look up %q: %w", it.Key, err)
			}
			if !existed {
				added++
			}
		}
		if err := b.Set(key, record(it), nil); err != nil {
			return fmt.Errorf("pebble store: put batch: add %q: %w", it.Key, err)
		}
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("pebble store: put batch of %d items: %w", len(items), err)
	}
	p.n += added
	p.dirty = !sync
	return nil
}

// bounds returns the database key bounds [lower, upper) of the items in s.
func (s span) bounds() (lower, upper []byte) {
	if s.top {
		return itemKey(s.lo), []byte{itemsEnd}
	}
	return itemKey(s.lo), itemKey(s.hi)
}

// walk positions one iterator on each item of r in circular order and calls visit, until visit
// returns false. A wrapping range is walked as two spans, reusing the iterator.
func (p *Pebble) walk(r overlay.Range, visit func(it *pebble.Iterator) bool) error {
	first, second, n := spans(r)
	lower, upper := first.bounds()
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	more := walkIter(it, visit)
	if more && n == 2 {
		it.SetBounds(second.bounds())
		walkIter(it, visit)
	}
	// Close reports any error the iterator met, which also ended its walk.
	return it.Close()
}

// walkIter calls visit on each position of it from the first, and reports whether it reached
// the end (false when visit stopped the walk).
func walkIter(it *pebble.Iterator, visit func(it *pebble.Iterator) bool) bool {
	for valid := it.First(); valid; valid = it.Next() {
		if !visit(it) {
			return false
		}
	}
	return true
}

// DeleteRange removes every key in r, both parts of a wrapping range in one atomic batch of
// Pebble range deletions. It first counts the keys it removes, to keep Len exact, so it costs time
// linear in their number. Like Put, it does not sync.
func (p *Pebble) DeleteRange(r overlay.Range) error {
	n, err := p.count(r)
	if err != nil {
		return fmt.Errorf("pebble store: delete range %s: count: %w", r, err)
	}
	if n == 0 {
		return nil // nothing to delete: no tombstone needed
	}
	b := p.db.NewBatch()
	defer b.Close()
	first, second, parts := spans(r)
	for _, s := range []span{first, second}[:parts] {
		lower, upper := s.bounds()
		if err := b.DeleteRange(lower, upper, nil); err != nil {
			return fmt.Errorf("pebble store: delete range %s: %w", r, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("pebble store: delete range %s: %w", r, err)
	}
	p.dirty = true
	p.n -= n
	return nil
}

// Ascend calls fn for each item in r in circular order until fn returns false: a wrapping range
// is visited from its Start up to the largest key, then from the smallest key up to its End; the
// full range is visited in key order from the smallest key. Each value is a fresh copy that fn
// may keep; fn must not modify the store.
func (p *Pebble) Ascend(r overlay.Range, fn func(it overlay.Item) bool) error {
	var valueErr error
	err := p.walk(r, func(iter *pebble.Iterator) bool {
		v, err := iter.ValueAndErr()
		var it overlay.Item
		if err == nil {
			it, err = fromRecord(overlay.Key(iter.Key()[1:]), bytes.Clone(v))
		}
		if err != nil {
			valueErr = err
			return false
		}
		return fn(it)
	})
	if err = errors.Join(valueErr, err); err != nil {
		return fmt.Errorf("pebble store: ascend %s: %w", r, err)
	}
	return nil
}

// Count returns the number of keys in r. The full range is answered from the counter; other
// ranges are walked without reading values, in time linear in the count.
func (p *Pebble) Count(r overlay.Range) (int, error) {
	if r.IsFull() {
		return p.n, nil
	}
	n, err := p.count(r)
	if err != nil {
		return 0, fmt.Errorf("pebble store: count %s: %w", r, err)
	}
	return n, nil
}

// count walks the keys of r and returns their number; it does not trust the counter.
func (p *Pebble) count(r overlay.Range) (int, error) {
	n := 0
	err := p.walk(r, func(*pebble.Iterator) bool {
		n++
		return true
	})
	return n, err
}

// Len returns the number of keys stored, from the counter.
func (p *Pebble) Len() int { return p.n }

// GetMeta returns a copy of the metadata entry name. Metadata lives beside the items but is not
// one: Len, Count, Ascend and DeleteRange do not see it.
func (p *Pebble) GetMeta(name string) (value []byte, found bool, err error) {
	value, found, err = p.get(metaKey(name))
	if err != nil {
		return nil, false, fmt.Errorf("pebble store: get meta %q: %w", name, err)
	}
	return value, found, nil
}

// SetMeta stores value as the metadata entry name, durably: it returns once the write, and every
// earlier one, is synced. The runtime records the node's state there (its range start, version,
// neighbours), which must match the items it keeps after a restart.
func (p *Pebble) SetMeta(name string, value []byte) error {
	if err := p.db.Set(metaKey(name), value, pebble.Sync); err != nil {
		return fmt.Errorf("pebble store: set meta %q: %w", name, err)
	}
	p.dirty = false
	return nil
}

// Sync makes every write so far durable. It does nothing when nothing was written since the
// last synced write.
func (p *Pebble) Sync() error {
	if !p.dirty {
		return nil
	}
	if err := p.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("pebble store: sync: %w", err)
	}
	p.dirty = false
	return nil
}

// Close closes the database. Unsynced writes reach the disk as Pebble shuts down. Closing again
// does nothing and returns nil.
func (p *Pebble) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("close pebble store %s: %w", p.dir, err)
	}
	return nil
}
