package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/egress"
)

// collector exports the egress decisions. Every series exists at zero from
// the first scrape; the label sets are closed.
type collector struct {
	conns *prometheus.CounterVec // decision: allow, deny
	bytes *prometheus.CounterVec // direction: up (out of the sandbox), down
	open  func() int             // connections open now; nil: none
}

var _ prometheus.Collector = (*collector)(nil)

func newCollector() *collector {
	c := &collector{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_egress_connections_total",
			Help: "Egress decisions of network-proxy sandboxes (a tunnel, or a proxied or intercepted HTTP request), by decision (allow or deny).",
		}, []string{"decision"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_egress_bytes_total",
			Help: "Bytes carried through the egress proxy: up leaves the sandbox, down reaches it.",
		}, []string{"direction"}),
	}
	for _, d := range []string{"allow", "deny"} {
		c.conns.WithLabelValues(d)
	}
	for _, d := range []string{"up", "down"} {
		c.bytes.WithLabelValues(d)
	}
	return c
}

var openDesc = prometheus.NewDesc("sandboxd_egress_open_connections",
	"Client connections of network-proxy sandboxes open through the egress proxy now.", nil, nil)

func (c *collector) add(d egress.Decision) {
	if d.Allowed {
		c.conns.WithLabelValues("allow").Inc()
	} else {
		c.conns.WithLabelValues("deny").Inc()
	}
	if d.Kind == "intercept" {
		return // its bytes are its tunnel's, counted by the tunnel's record
	}
	c.bytes.WithLabelValues("up").Add(float64(d.BytesUp))
	c.bytes.WithLabelValues("down").Add(float64(d.BytesDown))
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.conns.Describe(ch)
	c.bytes.Describe(ch)
	ch <- openDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.conns.Collect(ch)
	c.bytes.Collect(ch)
	n := 0
	if c.open != nil {
		n = c.open()
	}
	ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(n))
}

// Collector is the egress series at zero, for a daemon whose gateway is
// off (they exist on every daemon, so dashboards never miss one).
func Collector() prometheus.Collector { return newCollector() }
