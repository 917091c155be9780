// Package nixmig is the per-node load balancer: it tracks the load of the keys the node owns
// (LoadTracker), and runs NIXMIG waves (SPEC §3–§7) — leases on locks, the local wave, the
// remote wave, the NIX chain and the MIG phase, back-off, direction choice, SmartUNL and
// SmartRNP — and the baselines beside it (NIX-only, MIG-only, Item Balancing).
//
// Like the skip graph it drives, a Balancer is a deterministic state machine: it never blocks,
// starts goroutines, reads the wall clock or touches the network; it sends through the skip
// graph node and sets timers through overlay.Env. It moves items only through the skip graph's
// own handoffs (NIX, migration = leave and exact join), so ownership flips on acknowledgement
// and nothing is lost or duplicated. It knows only its own load and what its messages tell it.
package nixmig
