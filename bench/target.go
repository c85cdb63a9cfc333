package bench

import (
	"fmt"
	"time"
)

// Check is one target of the issue, evaluated against measured figures:
// the mark in BENCHMARKS.md comes from Met, never from prose.
type Check struct {
	Target string // what the issue asks, e.g. "sandboxd p50 < 2 ms"
	Got    string // what was measured
	Met    bool
}

// Mark is the cell BENCHMARKS.md shows for c.
func (c Check) Mark() string {
	if c.Met {
		return "met"
	}
	return "NOT met"
}

// AtMost checks got < limit (a strict bound: "under 2 ms"). Nothing
// measured (got 0) is not met.
func AtMost(target string, got, limit time.Duration) Check {
	return Check{Target: target, Got: Ms(got), Met: got > 0 && got < limit}
}

// RatioAtLeast checks slow/fast >= want ("at least 20x faster"). Nothing
// measured on either side is not met.
func RatioAtLeast(target string, slow, fast time.Duration, want float64) Check {
	r := Ratio(slow, fast)
	return Check{Target: target, Got: fmt.Sprintf("%.1fx", r), Met: fast > 0 && slow > 0 && r >= want}
}
