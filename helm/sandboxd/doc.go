// Package chart holds the tests of the sandboxd Helm chart in this
// directory: lint, templates rendered with Helm's own engine and checked
// field by field, the values schema, and the Grafana dashboard's metrics.
package chart
