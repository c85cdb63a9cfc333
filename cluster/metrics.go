package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Hand-over directions and forwarding outcomes: the closed label sets.
var (
	handoverDirections = []string{"taken", "released", "lost"}
	forwardOutcomes    = []string{"ok", "peer_unavailable", "refused"}
)

// Metrics are the replica's series. Every series exists at zero from the
// first scrape.
type Metrics struct {
	owned         prometheus.GaugeFunc
	peers         prometheus.GaugeFunc
	handovers     *prometheus.CounterVec
	forwarded     *prometheus.CounterVec
	renewFailures prometheus.Counter
}

// NewMetrics registers the replica's series on reg; owned and peers are
// read at scrape time.
func NewMetrics(reg prometheus.Registerer, owned, peers func() int) (*Metrics, error) {
	m := newMetrics(owned, peers, false)
	if err := m.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// newMetrics builds the series, each at zero for every label value. lone
// (RegisterSingleReplica) adds to each help text what the series reads on
// a daemon without replication.
func newMetrics(owned, peers func() int, lone bool) *Metrics {
	help := func(replicated, single string) string {
		if lone {
			return replicated + " Without replication: " + single
		}
		return replicated
	}
	m := &Metrics{
		owned: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_replica_conversations_owned",
			Help: help("Conversations whose lease this replica holds.",
				"every conversation with a sandbox, all owned by this one daemon."),
		}, func() float64 { return float64(owned()) }),
		peers: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_replica_peers",
			Help: help("Live replicas of this deployment this replica sees, itself included.",
				"1, this daemon alone."),
		}, func() float64 { return float64(peers()) }),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_replica_handovers_total",
			Help: help("Conversation leases taken, released (graceful hand-off) or lost (expired or taken by another replica).",
				"always 0, no conversation changes hands."),
		}, []string{"direction"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_replica_forwarded_requests_total",
			Help: help("Requests forwarded to the owning replica, by outcome; refused counts forged or stale forwarded requests received.",
				"always 0, every request is served where it arrives."),
		}, []string{"outcome"}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandboxd_replica_lease_renew_failures_total",
			Help: help("Lease renewals (conversation and replica leases) that the API server did not accept.",
				"always 0, there is no lease to renew."),
		}),
	}
	for _, d := range handoverDirections {
		m.handovers.WithLabelValues(d)
	}
	for _, o := range forwardOutcomes {
		m.forwarded.WithLabelValues(o)
	}
	return m
}

func (m *Metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.owned, m.peers, m.handovers, m.forwarded, m.renewFailures} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) handover(direction string) {
	if m != nil {
		m.handovers.WithLabelValues(direction).Inc()
	}
}

func (m *Metrics) forward(outcome string) {
	if m != nil {
		m.forwarded.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) renewFailed() {
	if m != nil {
		m.renewFailures.Inc()
	}
}
