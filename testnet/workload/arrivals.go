package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Arrivals is a Poisson arrival process: the gaps between queries are exponential with mean 1/rate.
type Arrivals struct {
	rate float64
}

// NewArrivals returns a Poisson process of rate arrivals per second (rate > 0, finite).
func NewArrivals(rate float64) (*Arrivals, error) {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil, fmt.Errorf("workload: arrivals: rate = %g, need a finite rate > 0", rate)
	}
	return &Arrivals{rate: rate}, nil
}

// Rate returns the arrival rate per second.
func (a *Arrivals) Rate() float64 {
	if a == nil {
		return 0
	}
	return a.rate
}

// Next returns the time (s) from the previous arrival to the next one. A nil process or source
// never produces an arrival: the gap is +Inf.
func (a *Arrivals) Next(r *rand.Rand) float64 {
	if a == nil || r == nil {
		return math.Inf(1)
	}
	return r.ExpFloat64() / a.rate
}
