// Package sim is the simulated runtime: a deterministic discrete-event network that drives the
// same node code as the libp2p runtime. It owns the virtual clock, per-node seeded randomness,
// the latency, jitter and loss model, partitions, crashes and restarts, message accounting, and
// the checker of the invariants of SPEC §8. One goroutine runs everything; the same seed gives
// the same run, event for event.
package sim
