// Package chart holds the tests of the sandboxd Helm chart in this
// directory: lint, templates rendered with Helm's own engine and checked
// field by field, the values schema, and the Grafana dashboard's metrics.
// Queries and CheckScrape read what the alerts and the dashboard select,
// so that the e2e tests can check it against a real daemon's first scrape.
// Load returns
// the chart compiled into the binary, for programs that install it.
package chart
