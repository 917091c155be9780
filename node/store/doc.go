// Package store owns the ordered item stores a node keeps its items in: implementations of
// overlay.Store. Memory, an in-memory B-tree (btree.go), serves simulations and tests; Pebble, a
// Pebble database on disk (pebble.go), serves real nodes, and keeps the node's metadata beside
// its items so that a restarted node finds both. Both share one conformance suite.
package store
