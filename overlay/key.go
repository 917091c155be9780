package overlay

import "encoding/binary"

// Key is an item key: an arbitrary byte string, ordered lexicographically. The key space is a circle:
// after the largest key comes the smallest, the empty key. A Go string holds arbitrary bytes, is
// immutable and comparable, which makes it the natural carrier.
type Key string

// MinKey is the smallest key; the seam of the circle lies just before it.
const MinKey Key = ""

// Uint64Key encodes i as an 8-byte big-endian key, so that integer order equals key order.
func Uint64Key(i uint64) Key {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return Key(b[:])
}

// KeyUint64 decodes the first 8 bytes of k as a big-endian integer, padding short keys with zeros.
// It is the inverse of Uint64Key and, for other keys, an order-preserving position estimate.
func KeyUint64(k Key) uint64 {
	if len(k) >= 8 {
		// Read in place: routing reads the prefix of every start it compares, and the padded
		// copy below cost a memmove each.
		return uint64(k[0])<<56 | uint64(k[1])<<48 | uint64(k[2])<<40 | uint64(k[3])<<32 |
			uint64(k[4])<<24 | uint64(k[5])<<16 | uint64(k[6])<<8 | uint64(k[7])
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// Between reports whether x lies in the circular open-closed interval (a, b]. When a == b the
// interval is the whole circle.
func Between(a, x, b Key) bool {
	switch {
	case a < b:
		return a < x && x <= b
	case a > b:
		return x > a || x <= b
	default:
		return true
	}
}

// StrictlyBetween reports whether x lies in the circular open interval (a, b). When a == b the
// interval is the whole circle except a.
func StrictlyBetween(a, x, b Key) bool {
	return x != b && Between(a, x, b)
}

// Clockwise orders keys by how far clockwise they lie from an origin: first the keys after the
// origin, then, past the seam, the keys before it, and the origin itself last (a full turn). For
// a ≠ b, x lies in (a, b] exactly when its position from a is at most b's; for a == b every key
// does. Routing compares every start it knows against one key per hop: a Clockwise decides most
// comparisons on the keys' first 8 bytes, read once, instead of comparing byte strings three
// times per candidate as Between does.
type Clockwise struct{ origin Position }

// Position is a key's place in a Clockwise order.
type Position struct {
	turn   uint8 // 0 after the origin, 1 past the seam, 2 the origin itself
	prefix uint64
	key    Key
}

// ClockwiseFrom returns the clockwise order from origin.
func ClockwiseFrom(origin Key) Clockwise {
	return Clockwise{origin: Position{prefix: KeyUint64(origin), key: origin}}
}

// Of returns k's position.
func (c Clockwise) Of(k Key) Position {
	return c.position(KeyUint64(k), k)
}

func (c Clockwise) position(prefix uint64, k Key) Position {
	p := Position{prefix: prefix, key: k}
	switch compareKeys(p, c.origin) {
	case 1:
		p.turn = 0
	case -1:
		p.turn = 1
	default:
		p.turn = 2
	}
	return p
}

// OfPeer returns the position of p's start, read from its cached prefix.
func (c Clockwise) OfPeer(p *Peer) Position {
	return c.position(p.StartPrefix(), p.Start)
}

// Before reports whether p comes strictly before q.
func (p Position) Before(q Position) bool {
	if p.turn != q.turn {
		return p.turn < q.turn
	}
	return compareKeys(p, q) < 0
}

// compareKeys compares the keys of p and q as byte strings, on their prefixes when they differ.
func compareKeys(p, q Position) int {
	switch {
	case p.prefix < q.prefix:
		return -1
	case p.prefix > q.prefix:
		return 1
	case p.key < q.key:
		return -1
	case p.key > q.key:
		return 1
	}
	return 0
}
