package cluster

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterSingleReplica registers on reg the series NewMetrics registers
// (same names, types and labels), at the values a daemon without
// replication has, so that dashboards and alerts written for replicas read
// true values off a lone daemon instead of showing no data:
//
//   - sandboxd_replica_conversations_owned is conversations(): a lone
//     daemon owns every conversation it serves; pass the number of
//     conversations with a sandbox (a conversation has at most one, so the
//     sum of the sandbox manager's counts by state);
//   - sandboxd_replica_peers is 1: the daemon sees itself and no other;
//   - hand-overs, forwarded requests and lease renewal failures stay at 0
//     for every label value: nothing changes hands, nothing is forwarded,
//     no lease is renewed.
//
// Call it instead of NewMetrics, never with it: both register the same
// names, and reg refuses the second (the error says which series).
func RegisterSingleReplica(reg prometheus.Registerer, conversations func() int) error {
	if conversations == nil {
		return errors.New("cluster.RegisterSingleReplica needs the count of conversations with a sandbox (sandboxd_replica_conversations_owned); pass a function that returns it")
	}
	return newMetrics(conversations, func() int { return 1 }, true).register(reg)
}
