package main

import (
	"errors"
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds:
// the smallest value with at least p% of the samples at or below it.
func percentile(ds []time.Duration, p float64) (time.Duration, error) {
	if len(ds) == 0 {
		return 0, errors.New("percentile of no samples")
	}
	if p <= 0 || p > 100 {
		return 0, errors.New("percentile outside (0, 100]")
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[rank-1], nil
}

// median of xs (the mean of the middle two for an even count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// rate is n per second over d (0 for no time).
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
