package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary is a latency distribution reduced to what BENCHMARKS.md shows.
type Summary struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
}

// Summarize sorts a copy of samples and reads the percentiles off it.
func Summarize(samples []time.Duration) Summary {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return Summary{}
	}
	return Summary{
		N:   len(s),
		Min: s[0],
		P50: percentileSorted(s, 50),
		P90: percentileSorted(s, 90),
		P99: percentileSorted(s, 99),
		Max: s[len(s)-1],
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// samples: the smallest sample with at least p% of all samples at or below
// it. Nearest rank never invents a value between two samples, so a p99 of
// 300 samples is a latency that really happened. It returns 0 for none.
func Percentile(samples []time.Duration, p float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Ratio is a / b, or 0 when b is 0 (nothing measured).
func Ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Ms formats d in milliseconds with enough digits for sub-millisecond
// figures ("0.412 ms", "37.9 ms", "1204 ms").
func Ms(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.3f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// MiB formats a byte count in MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
