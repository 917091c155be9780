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
