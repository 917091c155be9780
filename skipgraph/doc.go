// Package skipgraph is the per-node protocol of a circular skip graph: membership-vector levels
// where every level is a ring ordered by range start, greedy clockwise search that stays correct
// with stale starts, range walks and batched writes over level 0, joins through any introducer,
// graceful leaves, range handoffs acknowledged before ownership flips, failure detection by
// probes, successor lists, and repair of every level.
//
// A Node is a deterministic state machine. It reacts to Handle (a message), HandleTimer (a timer
// it set) and the client calls (Get, Put, Delete, Scan, PutBatch, Join, Leave), and acts only
// through overlay.Env and overlay.Store. It never blocks, starts goroutines, reads the wall clock
// or global randomness, or touches the network. It knows nothing of load balancing: the balancer
// drives it through its exported handoff and link views.
package skipgraph
