package metrics

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sandboxd/sandboxd/sandbox"
)

func TestPoolMetrics(t *testing.T) {
	var mu sync.Mutex
	stats := []sandbox.PoolStat{
		{Image: "ok:1", Size: 2, Ready: 2, Claims: map[string]uint64{sandbox.PoolClaimed: 5, sandbox.PoolEmpty: 1}},
		{Image: "gone:1", Size: 3, RefillFailures: 4, Problem: "image gone:1 is not on the Docker engine"},
		{Image: "unconfigured", Size: 9, Ready: 9}, // outside the closed set: dropped
	}
	_, reg := newTest(t, withCollectors(Pools([]string{"ok:1", "gone:1"}, func() []sandbox.PoolStat {
		mu.Lock()
		defer mu.Unlock()
		return stats
	})))
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_pool_ready Warm sandboxes started, attached and waiting for a claim, by image.
# TYPE sandboxd_pool_ready gauge
sandboxd_pool_ready{image="gone:1"} 0
sandboxd_pool_ready{image="ok:1"} 2
# HELP sandboxd_pool_refill_blocked 1 while a pool cannot refill (its last warm-up failed; /readyz says why), by image.
# TYPE sandboxd_pool_refill_blocked gauge
sandboxd_pool_refill_blocked{image="gone:1"} 1
sandboxd_pool_refill_blocked{image="ok:1"} 0
# HELP sandboxd_pool_refill_failures_total Pool sandboxes that could not be made or attached, by image.
# TYPE sandboxd_pool_refill_failures_total counter
sandboxd_pool_refill_failures_total{image="gone:1"} 4
sandboxd_pool_refill_failures_total{image="ok:1"} 0
`), "sandboxd_pool_ready", "sandboxd_pool_refill_blocked", "sandboxd_pool_refill_failures_total")
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sandboxd_pool_claims_total" {
			continue
		}
		if len(mf.GetMetric()) != 6 {
			t.Errorf("claims series = %d, want 2 images x 3 outcomes, all present at zero", len(mf.GetMetric()))
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["image"] == "ok:1" && l["outcome"] == sandbox.PoolClaimed && m.GetCounter().GetValue() != 5 {
				t.Errorf("claimed claims of ok:1 = %v, want 5", m.GetCounter().GetValue())
			}
		}
	}
}
