package audit

import "github.com/prometheus/client_golang/prometheus"

// Reasons a record is dropped (the dropped counter's label, a closed set).
const (
	dropQueueFull  = "queue_full"  // a buffered record found the queue full for EnqueueWait
	dropClosed     = "closed"      // appended after Close
	dropWriteError = "write_error" // the file could not be written
)

// Metrics are the audit record's series. They exist at zero from the first
// scrape, also with the record turned off. It is a prometheus.Collector.
type Metrics struct {
	records     *prometheus.CounterVec
	bytes       prometheus.Counter
	fsyncs      prometheus.Counter
	drops       *prometheus.CounterVec
	lateDurable prometheus.Counter
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics makes the series, at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_audit_records_written_total",
			Help: "Audit records written to the audit files, by kind (api: an HTTP request; tool: a tool call)."}, []string{"kind"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxd_audit_bytes_written_total",
			Help: "Bytes written to the audit files."}),
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxd_audit_fsyncs_total",
			Help: "fsyncs of the audit files; one fsync commits every record waiting at the time (group commit)."}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_audit_records_dropped_total",
			Help: "Audit records not written, by reason: queue_full (a buffered record found the queue full for 50 ms), " +
				"closed (made while sandboxd stopped), write_error (the disk refused the write). Alert on any increase."}, []string{"reason"}),
		lateDurable: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxd_audit_durable_timeouts_total",
			Help: "Write or exec calls answered before their audit record was on disk, because it took longer than 5 s (the record stays queued)."}),
	}
	for _, k := range []string{KindAPI, KindTool} {
		m.records.WithLabelValues(k)
	}
	for _, r := range []string{dropQueueFull, dropClosed, dropWriteError} {
		m.drops.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) written(kind string) {
	if kind != KindAPI && kind != KindTool {
		kind = KindAPI
	}
	m.records.WithLabelValues(kind).Inc()
}

func (m *Metrics) dropped(reason string) { m.drops.WithLabelValues(reason).Inc() }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.records.Describe(ch)
	m.bytes.Describe(ch)
	m.fsyncs.Describe(ch)
	m.drops.Describe(ch)
	m.lateDurable.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.records.Collect(ch)
	m.bytes.Collect(ch)
	m.fsyncs.Collect(ch)
	m.drops.Collect(ch)
	m.lateDurable.Collect(ch)
}
