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
)

const (
	// startTimeout bounds how long sandboxd may take to say where it serves.
	startTimeout = 30 * time.Second
	// stopTimeout is longer than sandboxd's own 20 s drain, so a clean stop
	// is never cut short by a SIGKILL.
	stopTimeout = 25 * time.Second
	// logTail is how much of sandboxd's stderr is kept to explain a failure.
	logTail = 16 << 10
)

var servingLine = regexp.MustCompile(`^sandboxd (\S+) serving on (http://127\.0\.0\.1:[0-9]+)`)

// daemon is one sandboxd child serving on a free loopback port with its own
// temporary data dir.
//
// Goroutines: one drains stdout (after the serving line) and one keeps the
// tail of stderr; both end when the child closes its pipes. stop signals
// the child, waits for it (SIGKILL after stopTimeout), then removes the data
// dir.
type daemon struct {
	cmd     *exec.Cmd
	URL     string
	Version string
	Token   string
	dataDir string
	stderr  *tailBuffer
	exited  chan struct{} // closed when Wait returns
	waitErr error         // valid after exited is closed
}

// startDaemon runs `sandboxd serve` with the docker backend and waits until
// it prints its URL and has written the admin token.
func startDaemon(ctx context.Context, bin, agent string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "sandboxd-bench-")
	if err != nil {
		return nil, fmt.Errorf("a temporary data dir cannot be made: %w", err)
	}
	d := &daemon{dataDir: dir, stderr: &tailBuffer{max: logTail}, exited: make(chan struct{})}
	// Not CommandContext: an interrupt must lead to a clean SIGTERM in stop,
	// not a SIGKILL that leaves sandboxd's pipes half closed.
	d.cmd = exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--backend", "docker", "--agent-binary", agent, "--log-level", "warn")
	// Its own process group keeps a terminal's Ctrl-C away from it (stop
	// decides when it ends); Pdeathsig ends it should this program die.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	d.cmd.Stderr = d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandboxd (%s) cannot start: %w; build it with `make build` or leave --sandboxd unset", bin, err)
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
		var tok []byte
		tok, err = os.ReadFile(filepath.Join(dir, "token"))
		d.Token = strings.TrimSpace(string(tok))
		if err == nil && d.Token == "" {
			err = errors.New("sandboxd wrote an empty admin token")
		}
	}
	if err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// Pid is the child's process id.
func (d *daemon) Pid() int { return d.cmd.Process.Pid }

// stop sends SIGTERM, waits for the exit (SIGKILL after stopTimeout) and
// removes the data dir. It returns sandboxd's exit error, if any.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	killed := false
	select {
	case <-d.exited:
	case <-t.C:
		_ = d.cmd.Process.Kill()
		killed = true
		<-d.exited
	}
	os.RemoveAll(d.dataDir)
	if killed {
		return fmt.Errorf("sandboxd did not stop within %s of SIGTERM and was killed", stopTimeout)
	}
	if d.waitErr != nil {
		return fmt.Errorf("sandboxd exited with %v: %s", d.waitErr, d.stderr.String())
	}
	return nil
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
