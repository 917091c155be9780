package overlay

import "unsafe"

// aliasString returns b's bytes as a string without copying them, and aliasBytes a string's bytes
// as a slice. Descriptors are never modified once built or decoded (messages are not changed after
// they are sent), so a node's identity and start can share one copy of their bytes between its
// wire descriptor and every Peer read from it. That is what makes identity comparisons cheap:
// two strings with the same data pointer compare equal without reading their bytes, and on the
// routing path those reads were cache misses on memory far from the node being visited.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// WireBytes returns k's bytes for a field of a message without copying them: the slice shares
// k's memory and must not be modified (messages are not, once built). Routing sets a route's
// previous start on every hop, and the copy was an allocation a hop.
func (k Key) WireBytes() []byte { return aliasBytes(string(k)) }

func aliasBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
