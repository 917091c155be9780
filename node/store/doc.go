// Package store owns the ordered item stores a node keeps its items in: implementations of
// overlay.Store. This file set holds the in-memory B-tree one, Memory; a Pebble one will be added
// later.
package store
