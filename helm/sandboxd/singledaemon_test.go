package chart

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/cluster"
)

// singleDaemonScrape is the first scrape of a daemon without replication:
// the metrics serve wires, and the replica series at a lone daemon's
// values (cluster.RegisterSingleReplica) instead of cluster.NewMetrics.
func singleDaemonScrape(t *testing.T) string {
	t.Helper()
	return scrapeWith(t, func(reg prometheus.Registerer) {
		if err := cluster.RegisterSingleReplica(reg, func() int { return 0 }); err != nil {
			t.Fatal(err)
		}
	})
}

// emptyReason is what a panel's description must say when a daemon
// without replication leaves its query empty.
const emptyReason = "empty without replication"

// unexplainedGaps returns the problems CheckScrape finds for qs against
// scrape, except those of a panel whose description (descs, by "panel
// TITLE") says it is empty without replication, and why. An alert has no
// description to say so: its gaps always count.
func unexplainedGaps(qs []Query, descs map[string]string, scrape string) ([]string, error) {
	var out []string
	for _, q := range qs {
		problems, err := CheckScrape([]Query{q}, scrape)
		if err != nil {
			return nil, err
		}
		if len(problems) == 0 {
			continue
		}
		if d := descs[q.Where]; strings.HasPrefix(q.Where, "panel ") && explainsEmpty(d) {
			continue
		}
		out = append(out, problems...)
	}
	return out, nil
}

// explainsEmpty: the description says the panel is empty without
// replication and gives a reason after a colon or "because".
func explainsEmpty(desc string) bool {
	_, why, ok := strings.Cut(strings.ToLower(desc), emptyReason)
	why = strings.TrimSpace(why)
	return ok && (strings.HasPrefix(why, ":") || strings.HasPrefix(why, "because")) && len(strings.Trim(why, ":. ")) > len("because")
}

// panelDescriptions maps "panel TITLE" to the panel's description.
func panelDescriptions(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("dashboards/sandboxd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if title, ok := x["title"].(string); ok && x["type"] != nil {
				d, _ := x["description"].(string)
				out["panel "+title] = d
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(dash)
	return out
}

// Every series, label and label value the dashboard and the alerts select
// is in the first scrape of a daemon without replication, the replica
// panels included, or the panel's description says why it is empty there.
func TestDashboardOnSingleDaemon(t *testing.T) {
	qs, err := Queries(".")
	if err != nil {
		t.Fatal(err)
	}
	descs := panelDescriptions(t)
	var replica []string
	for _, q := range qs {
		if q.Replication() {
			replica = append(replica, q.Where)
		}
	}
	for _, want := range []string{"panel Conversations owned by replica", "panel Replicas seen", "panel Conversation hand-overs per minute",
		"panel Forwarded requests", "panel Lease renewal failures per minute", "alert SandboxdLeaseRenewFailing"} {
		if !slices.Contains(replica, want) {
			t.Errorf("no query of %s selects a replica series (found %v)", want, replica)
		}
	}
	// A flat line on a lone daemon is explained where it is drawn.
	for _, where := range replica {
		if strings.HasPrefix(where, "panel ") && !strings.Contains(strings.ToLower(descs[where]), "without replication") {
			t.Errorf("%s's description %q does not say what a daemon without replication shows", where, descs[where])
		}
	}
	gaps, err := unexplainedGaps(qs, descs, singleDaemonScrape(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gaps {
		t.Errorf("a daemon without replication: %s", g)
	}
}

// unexplainedGaps lets through only a panel that says why it is empty.
func TestUnexplainedGaps(t *testing.T) {
	scrape := "sandboxd_runs_active 0\n"
	qs := []Query{
		{"panel Runs", `sum(sandboxd_runs_active)`},
		{"panel Explained", `sum(sandboxd_replica_peers)`},
		{"panel Said empty, not why", `sum(sandboxd_replica_peers)`},
		{"panel Silent", `sum(sandboxd_replica_peers)`},
		{"alert Replicas", `sandboxd_replica_peers < 2`},
	}
	descs := map[string]string{
		"panel Explained":           "Replicas seen. Empty without replication: a lone daemon has no member Lease.",
		"panel Said empty, not why": "Replicas seen; empty without replication.",
		"panel Silent":              "Replicas seen.",
	}
	got, err := unexplainedGaps(qs, descs, scrape)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"panel Said empty, not why: sandboxd_replica_peers is not in the scrape",
		"panel Silent: sandboxd_replica_peers is not in the scrape",
		"alert Replicas: sandboxd_replica_peers is not in the scrape",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unexplainedGaps =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
