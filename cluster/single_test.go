package cluster

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A lone daemon's replica series read what is true of it: it owns every
// conversation with a sandbox, sees one replica (itself), and never hands
// over, forwards or renews anything.
func TestRegisterSingleReplica(t *testing.T) {
	reg := prometheus.NewRegistry()
	var conversations atomic.Int64
	if err := RegisterSingleReplica(reg, func() int { return int(conversations.Load()) }); err != nil {
		t.Fatal(err)
	}
	want := `# HELP sandboxd_replica_conversations_owned Conversations whose lease this replica holds. Without replication: every conversation with a sandbox, all owned by this one daemon.
# TYPE sandboxd_replica_conversations_owned gauge
sandboxd_replica_conversations_owned 0
# HELP sandboxd_replica_forwarded_requests_total Requests forwarded to the owning replica, by outcome; refused counts forged or stale forwarded requests received. Without replication: always 0, every request is served where it arrives.
# TYPE sandboxd_replica_forwarded_requests_total counter
sandboxd_replica_forwarded_requests_total{outcome="ok"} 0
sandboxd_replica_forwarded_requests_total{outcome="peer_unavailable"} 0
sandboxd_replica_forwarded_requests_total{outcome="refused"} 0
# HELP sandboxd_replica_handovers_total Conversation leases taken, released (graceful hand-off) or lost (expired or taken by another replica). Without replication: always 0, no conversation changes hands.
# TYPE sandboxd_replica_handovers_total counter
sandboxd_replica_handovers_total{direction="lost"} 0
sandboxd_replica_handovers_total{direction="released"} 0
sandboxd_replica_handovers_total{direction="taken"} 0
# HELP sandboxd_replica_lease_renew_failures_total Lease renewals (conversation and replica leases) that the API server did not accept. Without replication: always 0, there is no lease to renew.
# TYPE sandboxd_replica_lease_renew_failures_total counter
sandboxd_replica_lease_renew_failures_total 0
# HELP sandboxd_replica_peers Live replicas of this deployment this replica sees, itself included. Without replication: 1, this daemon alone.
# TYPE sandboxd_replica_peers gauge
sandboxd_replica_peers 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// Read at scrape time: three conversations got a sandbox since.
	conversations.Store(3)
	want = `# HELP sandboxd_replica_conversations_owned Conversations whose lease this replica holds. Without replication: every conversation with a sandbox, all owned by this one daemon.
# TYPE sandboxd_replica_conversations_owned gauge
sandboxd_replica_conversations_owned 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandboxd_replica_conversations_owned"); err != nil {
		t.Error(err)
	}
}

// The lone daemon's series are the replicated daemon's: same names, types,
// label sets and help (with a sentence added), so every query written for
// one reads the other.
func TestSingleReplicaSeriesAreTheReplicas(t *testing.T) {
	replicated := prometheus.NewRegistry()
	if _, err := NewMetrics(replicated, func() int { return 2 }, func() int { return 3 }); err != nil {
		t.Fatal(err)
	}
	single := prometheus.NewRegistry()
	if err := RegisterSingleReplica(single, func() int { return 2 }); err != nil {
		t.Fatal(err)
	}
	a, b := shapes(t, replicated), shapes(t, single)
	if len(a) != 5 {
		t.Fatalf("NewMetrics registered %d families, want 5: %v", len(a), a)
	}
	for name, sa := range a {
		sb, ok := b[name]
		switch {
		case !ok:
			t.Errorf("RegisterSingleReplica does not register %s", name)
		case sa.typ != sb.typ || !slices.Equal(sa.labels, sb.labels):
			t.Errorf("%s: replicated %s %v, single %s %v", name, sa.typ, sa.labels, sb.typ, sb.labels)
		case !strings.HasPrefix(sb.help, sa.help+" Without replication: "):
			t.Errorf("%s: single help %q does not extend the replicated %q", name, sb.help, sa.help)
		}
	}
	if len(b) != len(a) {
		t.Errorf("RegisterSingleReplica registers %d families, NewMetrics %d", len(b), len(a))
	}
}

// Both on one registry is a mistake the registry reports, and so is a
// missing count.
func TestSingleReplicaRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg, func() int { return 0 }, func() int { return 1 }); err != nil {
		t.Fatal(err)
	}
	if err := RegisterSingleReplica(reg, func() int { return 0 }); err == nil {
		t.Error("RegisterSingleReplica beside NewMetrics on one registry succeeded")
	}
	err := RegisterSingleReplica(prometheus.NewRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), "pass a function that returns it") {
		t.Errorf("RegisterSingleReplica(reg, nil) = %v, want the sentence saying what to pass", err)
	}
}

type shape struct {
	typ, help string
	labels    []string // every sample's label pairs, sorted
}

func shapes(t *testing.T, g prometheus.Gatherer) map[string]shape {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]shape{}
	for _, f := range fams {
		s := shape{typ: f.GetType().String(), help: f.GetHelp()}
		for _, m := range f.GetMetric() {
			var ps []string
			for _, l := range m.GetLabel() {
				ps = append(ps, l.GetName()+"="+l.GetValue())
			}
			s.labels = append(s.labels, strings.Join(ps, ","))
		}
		slices.Sort(s.labels)
		out[f.GetName()] = s
	}
	return out
}
