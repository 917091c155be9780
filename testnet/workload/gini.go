package workload

import "sort"

// Gini returns the Gini coefficient ΣΣ|x_i − x_j| / (2 n² μ) of SPEC §11, in O(n log n): with x
// sorted ascending, ΣΣ|x_i − x_j| = 2 Σ_i (2i − n − 1) x_i (i 1-based). It is 0 for an empty
// vector or when the total is not positive; loads are meant to be non-negative.
func Gini(loads []float64) float64 {
	n := len(loads)
	if n == 0 {
		return 0
	}
	x := append([]float64(nil), loads...)
	sort.Float64s(x)
	sum, weighted := 0.0, 0.0
	for i, v := range x {
		sum += v
		weighted += float64(2*(i+1)-n-1) * v
	}
	if !(sum > 0) {
		return 0
	}
	return weighted / (float64(n) * sum)
}
