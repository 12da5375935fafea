package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.5, time.Millisecond}} {
		got, err := percentile(ds, c.p)
		if err != nil || got != c.want {
			t.Errorf("p%v = %v, %v; want %v", c.p, got, err, c.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input in place")
	}
	three := []time.Duration{3, 1, 2}
	if got, _ := percentile(three, 99); got != 3 {
		t.Errorf("p99 of 3 samples = %v, want the largest", got)
	}
	if got, _ := percentile(three, 50); got != 2 {
		t.Errorf("p50 of 3 samples = %v, want the middle one", got)
	}
	if _, err := percentile(nil, 50); err == nil {
		t.Error("percentile of no samples: no error")
	}
	if _, err := percentile(three, 0); err == nil {
		t.Error("p0: no error")
	}
}

func TestMedian(t *testing.T) {
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
}
