package overlay

// Item is one key with its value.
type Item struct {
	Key   Key
	Value []byte
	// Written is the write's stamp, a hybrid logical clock in nanoseconds (skipgraph/stamp.go):
	// of two copies of a key that meet, the one written later stands. Stores keep it with the
	// value; 0 is a copy of unknown age, older than any stamped one.
	Written uint64
	// Deleted marks a delete in a batch write between nodes (Value empty): a re-admission's
	// deletes go with its items. Stores never see one.
	Deleted bool
}

// Store is the ordered key-value store a node keeps its items in. Implementations: an in-memory
// B-tree and Pebble (node/store). Iteration over a Range follows the circle: a wrapping range is
// visited from its Start up to the largest key, then from the smallest key up to its End.
type Store interface {
	// Get returns the item stored under k, with its stamp.
	Get(k Key) (it Item, found bool, err error)
	// Put stores it, replacing any previous value of its key.
	Put(it Item) error
	Delete(k Key) error
	// PutBatch writes items atomically; sync asks for durability before returning (handoff
	// boundaries).
	PutBatch(items []Item, sync bool) error
	// DeleteRange removes every key in r.
	DeleteRange(r Range) error
	// Ascend calls fn for each item in r in circular order until fn returns false.
	Ascend(r Range, fn func(it Item) bool) error
	// Count returns the number of keys in r.
	Count(r Range) (int, error)
	// Len returns the number of keys stored.
	Len() int
	Close() error
}
