// Package cluster makes several sandboxd replicas of one deployment act as
// one service on Kubernetes (DESIGN.md §9).
//
// Every conversation (tenant, conversation) that has live state — its
// sandbox's agent pipe, language servers, kernels, debug session, workers,
// pending questions — is owned by exactly one replica, through a
// coordination.k8s.io/v1 Lease in sandboxd's namespace: holderIdentity is
// the replica, leaseTransitions is the fencing epoch the owner claims at
// the sandbox's agent, and an annotation says where the holder is reached.
// A request for a conversation owned elsewhere is forwarded to the owner
// (Router, Forwarder); a conversation whose lease expired or was released
// is taken over by the replica that gets the next request for it.
//
// The rules that keep two replicas from acting for one conversation:
//   - a lease is taken or renewed only by an update that names the
//     resourceVersion read (optimistic concurrency in the API server);
//   - another replica's lease counts as expired only after this replica
//     has seen it unchanged for the whole lease duration on its own
//     monotonic clock (never by comparing wall clocks), or when its renew
//     time is older than the duration plus a generous skew allowance;
//   - the owner serves a conversation only while its last successful
//     renewal, timed from when the request was sent, is younger than the
//     duration minus a margin — a replica that was paused or cut off from
//     the API server stands down by itself before anyone else may take over;
//   - the new owner claims the sandbox's agent with the higher epoch, and
//     the agent closes the old owner's session.
package cluster
