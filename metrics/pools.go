package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/sandbox"
)

// Pools exports the warm pools, read at scrape time from stats (the
// manager's PoolStats): sandboxd_pool_size{image}, sandboxd_pool_ready{image},
// sandboxd_pool_refill_blocked{image} (1 while the pool cannot refill),
// sandboxd_pool_claims_total{image,outcome} and
// sandboxd_pool_refill_failures_total{image}. images is the closed set of
// the image label: the configured pools' images.
func Pools(images []string, stats func() []sandbox.PoolStat) prometheus.Collector {
	return newPoolCollector(images, stats)
}

var (
	poolSizeDesc = prometheus.NewDesc("sandboxd_pool_size",
		"Warm sandboxes a pool keeps, by image.", []string{"image"}, nil)
	poolReadyDesc = prometheus.NewDesc("sandboxd_pool_ready",
		"Warm sandboxes started, attached and waiting for a claim, by image.", []string{"image"}, nil)
	poolBlockedDesc = prometheus.NewDesc("sandboxd_pool_refill_blocked",
		"1 while a pool cannot refill (its last warm-up failed; /readyz says why), by image.", []string{"image"}, nil)
	poolClaimsDesc = prometheus.NewDesc("sandboxd_pool_claims_total",
		"Creates of a pooled image by outcome: claimed (a warm sandbox was handed out), empty (none was ready: created cold), "+
			"failed (warm ones failed the hello or the engine's claim: created cold).", []string{"image", "outcome"}, nil)
	poolFailuresDesc = prometheus.NewDesc("sandboxd_pool_refill_failures_total",
		"Pool sandboxes that could not be made or attached, by image.", []string{"image"}, nil)
)

// poolCollector exports the pools of a closed set of images; a stat of
// any other image is dropped (the manager only reports configured ones).
type poolCollector struct {
	images []string
	stats  func() []sandbox.PoolStat
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolSizeDesc, poolReadyDesc, poolBlockedDesc, poolClaimsDesc, poolFailuresDesc} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	by := map[string]sandbox.PoolStat{}
	for _, s := range c.stats() {
		by[s.Image] = s
	}
	for _, img := range c.images {
		s := by[img]
		blocked := 0.0
		if s.Problem != "" {
			blocked = 1
		}
		ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(s.Size), img)
		ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(s.Ready), img)
		ch <- prometheus.MustNewConstMetric(poolBlockedDesc, prometheus.GaugeValue, blocked, img)
		ch <- prometheus.MustNewConstMetric(poolFailuresDesc, prometheus.CounterValue, float64(s.RefillFailures), img)
		for _, o := range sandbox.PoolOutcomes() {
			ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(s.Claims[o]), img, o)
		}
	}
}

func newPoolCollector(images []string, stats func() []sandbox.PoolStat) *poolCollector {
	var set []string
	for _, img := range images {
		if img != "" && !slices.Contains(set, img) {
			set = append(set, img)
		}
	}
	return &poolCollector{images: set, stats: stats}
}
