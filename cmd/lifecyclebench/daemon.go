package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	// startTimeout bounds how long sandboxd may take to say where it serves
	// and to be ready.
	startTimeout = 60 * time.Second
	// stopTimeout is longer than sandboxd's own 20 s drain, so a clean stop
	// is never cut short by a SIGKILL.
	stopTimeout = 25 * time.Second
	// logTail is how much of sandboxd's stderr is kept to explain a failure.
	logTail = 16 << 10
	// cleanupTimeout bounds the deletion of what a run leaves.
	cleanupTimeout = 3 * time.Minute
)

var servingLine = regexp.MustCompile(`^sandboxd (\S+) serving on (http://127\.0\.0\.1:[0-9]+)`)

// daemon is one `sandboxd serve` child on a free loopback port with its own
// temporary data dir and config, and the Go client of its admin token.
//
// Goroutines: one reads stdout until the serving line and then drains it,
// one waits for the child; both end when the child exits. stop deletes
// every sandbox the daemon lists, signals the child, waits for it (SIGKILL
// after stopTimeout) and removes the data dir.
type daemon struct {
	Backend string
	URL     string
	Version string
	Client  *client.Client

	cmd     *exec.Cmd
	dir     string
	stderr  *tailBuffer
	exited  chan struct{} // closed when Wait returns
	waitErr error         // valid after exited is closed
}

// startDaemon runs bin with backend (docker or containerd), the agent
// binary agent and the config text cfg, and waits until it is ready.
func startDaemon(ctx context.Context, bin, agent, backend, cfg string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "sandboxd-lifecyclebench-")
	if err != nil {
		return nil, fmt.Errorf("a temporary data dir cannot be made: %w", err)
	}
	d := &daemon{Backend: backend, dir: dir, stderr: &tailBuffer{max: logTail}, exited: make(chan struct{})}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Not CommandContext: stop decides when the child ends, with a SIGTERM
	// that lets it close its pipes; Pdeathsig ends it should this program die.
	d.cmd = exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--backend", backend, "--agent-binary", agent, "--config", cfgPath, "--log-level", "warn")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	d.cmd.Stderr = d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandboxd (%s) cannot start: %w; build it with `make build` or name it with -sandboxd", bin, err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	serving := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	wait := time.NewTimer(startTimeout)
	defer wait.Stop()
	select {
	case m := <-serving:
		d.Version, d.URL = m[1], m[2]
	case <-d.exited:
		err = fmt.Errorf("sandboxd exited before serving (%v): %s", d.waitErr, d.stderr.String())
	case <-wait.C:
		err = fmt.Errorf("sandboxd did not say where it serves within %s: %s", startTimeout, d.stderr.String())
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		err = d.connect(ctx)
	}
	if err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// connect reads the admin token sandboxd wrote and waits for /readyz.
func (d *daemon) connect(ctx context.Context) error {
	tok, err := os.ReadFile(filepath.Join(d.dir, "data", "token"))
	if err != nil {
		return fmt.Errorf("sandboxd wrote no admin token: %w", err)
	}
	if strings.TrimSpace(string(tok)) == "" {
		return errors.New("sandboxd wrote an empty admin token")
	}
	if d.Client, err = client.New(d.URL, strings.TrimSpace(string(tok))); err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := d.Client.Readyz(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandboxd (%s backend) was not ready within %s: %v; %s", d.Backend, startTimeout, err, d.stderr.String())
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
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-d.exited:
		if d.waitErr != nil {
			errs = append(errs, fmt.Errorf("sandboxd exited with %v: %s", d.waitErr, d.stderr.String()))
		}
	case <-t.C:
		_ = d.cmd.Process.Kill()
		<-d.exited
		errs = append(errs, fmt.Errorf("sandboxd did not stop within %s of SIGTERM and was killed", stopTimeout))
	}
	os.RemoveAll(d.dir)
	return errors.Join(errs...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "(no output on stderr)"
	}
	return s
}
