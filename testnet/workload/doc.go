// Package workload owns the query workloads of the experiments (SPEC §12): the integer workloads
// pulse, zipf, dynamic, hot-ranges and uniform over keys 0..K-1, the words workload over string
// keys read from a "word count" file, Poisson arrivals, and the analytic side that goes with them —
// the expected load of every key, whether a workload is feasible at all (the fewest nodes able to
// carry it), the lower bound on moved items of SPEC §10, and the Gini coefficient of SPEC §11.
// WeightedMove is a centralized reference balancer (Google Slicer's Weighted-Move), run with global
// knowledge to set beside the items the distributed balancer moves.
//
// Everything is deterministic given the *rand.Rand (math/rand/v2) passed in: the package reads no
// wall clock and uses no global randomness, so the same seed gives the same queries. Time is
// simulated time in seconds (SPEC §11: one unit = 1 s), passed in as a float64.
//
// Bad parameters are reported by Validate (or a constructor) as errors, never by a panic; a
// workload that fails Validate draws empty queries and has nil key loads.
package workload
