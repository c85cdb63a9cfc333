package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	chart "github.com/sandboxd/sandboxd/helm/sandboxd"
)

// result is deploy's last line on stdout.
type result struct {
	URLs       []string `json:"urls"`
	Token      string   `json:"token"`
	Namespace  string   `json:"namespace"`
	Deployment string   `json:"deployment"`
}

// deploy installs or upgrades the release with a fresh token (so every
// deploy also restarts every replica on the node's current image), waits
// until every replica is ready, and prints the result.
func deploy(ctx context.Context, o options, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rc, cs, err := connect(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	vals, err := chartValues(o, rc.Host, token)
	if err != nil {
		return err
	}
	chrt, err := chart.Load()
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, o.namespace, time.Second); err != nil {
		return err
	}
	cfg, err := helmConfig(o.kubeconfig, o.namespace, helmLog(o, stderr))
	if err != nil {
		return err
	}
	rel, err := installOrUpgrade(ctx, cfg, chrt, o.release, o.namespace, vals, o.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sandboxd-cluster: release %s revision %d in %s; waiting for %d replicas (up to %s)\n", rel.Name, rel.Version, o.namespace, o.replicas, o.timeout)
	us := urls(o)
	if err := waitReady(ctx, cs, o.namespace, o.release, us, httpProbe, stderr, time.Second); err != nil {
		return err
	}
	line, err := json.Marshal(result{URLs: us, Token: token, Namespace: o.namespace, Deployment: o.release})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

// helmLog is where Helm's own log goes: stderr with --verbose, else nowhere.
func helmLog(o options, stderr io.Writer) io.Writer {
	if o.verbose {
		return stderr
	}
	return io.Discard
}
