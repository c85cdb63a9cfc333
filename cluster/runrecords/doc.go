// Package runrecords keeps sandboxd's top-level runs in Kubernetes, so that
// every replica of a deployment serves a run any replica created and runs
// outlive the pod that created them. Store implements runstore.Records.
//
// Each run is one ConfigMap in sandboxd's namespace, named
// sandboxd-<deployment>-run-<run id without "run_">, labelled
// io.sandboxd.deployment=<deployment>, io.sandboxd.kind=run and
// io.sandboxd.tenant-hash=<first 20 hex of sha256(tenant)>, with the run as
// JSON under the data key run.json.
//
// Why ConfigMaps: runs hold no secrets (run tokens are kept apart, in
// memory), so nothing here needs a Secret's handling. One object per run
// means a create or a delete never conflicts with another replica's, as
// one shared object would on every write. And label-selected informers
// give every replica a cache of all runs, with no CustomResourceDefinition
// to install or upgrade with the chart.
package runrecords
