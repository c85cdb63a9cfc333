package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	rand.Shuffle(len(hundred), func(i, j int) { hundred[i], hundred[j] = hundred[j], hundred[i] })
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of odd count", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even count is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p99 of 10 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p0 is the min", ms(9, 4, 6), 0, 4 * time.Millisecond},
		{"out of range clamps", ms(9, 4, 6), 250, 9 * time.Millisecond},
	} {
		if got := Percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("%s: Percentile(p%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	in := ms(30, 10, 20)
	s := Summarize(in)
	if s.N != 3 || s.Min != 10*time.Millisecond || s.P50 != 20*time.Millisecond || s.Max != 30*time.Millisecond {
		t.Errorf("Summarize = %+v", s)
	}
	if in[0] != 30*time.Millisecond {
		t.Errorf("Summarize sorted its input in place: %v", in)
	}
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Check
		want bool
	}{
		{"under the limit", AtMost("p50 < 2 ms", 1500*time.Microsecond, 2*time.Millisecond), true},
		{"at the limit is not under it", AtMost("p50 < 2 ms", 2*time.Millisecond, 2*time.Millisecond), false},
		{"nothing measured", AtMost("p50 < 2 ms", 0, 2*time.Millisecond), false},
		{"25x faster", RatioAtLeast("20x", 25*time.Millisecond, time.Millisecond, 20), true},
		{"exactly 20x", RatioAtLeast("20x", 20*time.Millisecond, time.Millisecond, 20), true},
		{"19x", RatioAtLeast("20x", 19*time.Millisecond, time.Millisecond, 20), false},
		{"fast side missing", RatioAtLeast("20x", 19*time.Millisecond, 0, 20), false},
	} {
		if tc.c.Met != tc.want {
			t.Errorf("%s: Met = %v (got %s), want %v", tc.name, tc.c.Met, tc.c.Got, tc.want)
		}
	}
	if m := AtMost("x", time.Millisecond, 2*time.Millisecond).Mark(); m != "met" {
		t.Errorf("Mark = %q", m)
	}
	if m := AtMost("x", 3*time.Millisecond, 2*time.Millisecond).Mark(); m != "NOT met" {
		t.Errorf("Mark = %q", m)
	}
}

func TestMs(t *testing.T) {
	for d, want := range map[time.Duration]string{
		412 * time.Microsecond:   "0.412 ms",
		37900 * time.Microsecond: "37.9 ms",
		1204 * time.Millisecond:  "1204 ms",
	} {
		if got := Ms(d); got != want {
			t.Errorf("Ms(%v) = %q, want %q", d, got, want)
		}
	}
}
