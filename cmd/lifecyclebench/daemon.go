package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	// startTimeout bounds how long sandboxd may take to say where it serves
	// and, after that, to be ready.
	startTimeout = 60 * time.Second
	// cleanupTimeout bounds the deletion of what a run leaves.
	cleanupTimeout = 3 * time.Minute
)

// daemon is a bench.Daemon with the Go client of its admin token; stop also
// deletes every sandbox and snapshot the daemon still lists.
type daemon struct {
	*bench.Daemon
	Client *client.Client
}

// startDaemon runs bin with backend (docker or containerd), the agent
// binary agent and the config text cfg, and waits until it is ready.
func startDaemon(ctx context.Context, bin, agent, backend, cfg string) (*daemon, error) {
	bd, err := bench.StartDaemon(ctx, bench.DaemonOptions{
		Binary:        bin,
		Agent:         agent,
		Backend:       backend,
		Config:        cfg,
		DataDirPrefix: "sandboxd-lifecyclebench-",
		StartTimeout:  startTimeout,
		BinaryHint:    "build it with `make build` or name it with -sandboxd",
	})
	if err != nil {
		return nil, err
	}
	d := &daemon{Daemon: bd}
	if err := d.connect(ctx); err != nil {
		// Not ready: it made nothing to delete; stop says nothing more.
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

// connect makes the client of the admin token and waits for /readyz.
func (d *daemon) connect(ctx context.Context) error {
	c, err := client.New(d.URL, d.Token)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Readyz(rctx)
		cancel()
		if err == nil {
			d.Client = c
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandboxd (%s backend) was not ready within %s: %v; %s", d.Backend, startTimeout, err, d.Stderr())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop deletes the sandboxes and snapshots the daemon still lists (both
// outlive their daemon on purpose, so a run cut short would leave
// containers, images and volumes), then stops the child and removes the
// data dir. It reports what went wrong.
func (d *daemon) stop() error {
	var errs []error
	if d.Client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		if sbs, err := d.Client.ListSandboxes(ctx, ""); err != nil {
			errs = append(errs, fmt.Errorf("listing the sandboxes left to delete: %w", err))
		} else {
			for _, sb := range sbs {
				if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
					errs = append(errs, fmt.Errorf("sandbox %s is left on the %s engine (delete it by hand): %w", sb.ID, d.Backend, err))
				}
			}
		}
		// A backend without snapshots answers FailedPrecondition: none to delete.
		if snaps, err := d.Client.ListSnapshots(ctx); err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			errs = append(errs, fmt.Errorf("listing the snapshots left to delete: %w", err))
		} else {
			for _, s := range snaps {
				if err := d.Client.DeleteSnapshot(ctx, s.ID); err != nil {
					errs = append(errs, fmt.Errorf("snapshot %s is left on the %s engine (delete it by hand): %w", s.ID, d.Backend, err))
				}
			}
		}
		cancel()
	}
	if err := d.Stop(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
