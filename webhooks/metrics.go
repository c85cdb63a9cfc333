package webhooks

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a delivery attempt or of an event (the counter's label, a
// closed set).
const (
	OutcomeDelivered = "delivered" // the receiver answered 2xx
	OutcomeRetried   = "retried"   // an attempt failed; another follows after a backoff
	OutcomeFailed    = "failed"    // the event was older than its max age and is given up
	OutcomeDropped   = "dropped"   // the endpoint's queue was full, or it was in memory only at shutdown
)

// Metrics are the deliveries' series, at zero from the first scrape also
// with no webhook configured. It is a prometheus.Collector.
type Metrics struct {
	deliveries *prometheus.CounterVec
	queued     *prometheus.GaugeVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics makes the series, at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_webhook_deliveries_total",
			Help: "Webhook deliveries by outcome: delivered (2xx), retried (an attempt failed and is retried), " +
				"failed (given up at the max age), dropped (the queue was full, or the event was held in memory only at shutdown)."}, []string{"outcome"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sandboxd_webhook_queued_events",
			Help: "Events waiting for delivery, all endpoints together."}, nil),
	}
	for _, o := range []string{OutcomeDelivered, OutcomeRetried, OutcomeFailed, OutcomeDropped} {
		m.deliveries.WithLabelValues(o)
	}
	m.queued.WithLabelValues()
	return m
}

func (m *Metrics) count(outcome string) { m.deliveries.WithLabelValues(outcome).Inc() }
func (m *Metrics) queue(delta float64)  { m.queued.WithLabelValues().Add(delta) }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.deliveries.Describe(ch)
	m.queued.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.deliveries.Collect(ch)
	m.queued.Collect(ch)
}
