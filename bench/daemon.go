package bench

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
	// DefaultStartTimeout bounds how long sandboxd may take to say where it
	// serves when DaemonOptions leaves StartTimeout unset.
	DefaultStartTimeout = 30 * time.Second
	// StopTimeout is longer than sandboxd's own 20 s drain, so a clean stop
	// is never cut short by a SIGKILL.
	StopTimeout = 25 * time.Second
	// logTail is how much of sandboxd's stderr is kept to explain a failure.
	logTail = 16 << 10
)

var servingLine = regexp.MustCompile(`^sandboxd (\S+) serving on (http://127\.0\.0\.1:[0-9]+)`)

// DaemonOptions says which sandboxd to start and how.
type DaemonOptions struct {
	// Binary is the sandboxd binary, Agent the sandbox-agent binary it
	// bind-mounts into its sandboxes; both should be absolute paths.
	Binary string
	Agent  string
	// Backend is docker (when empty) or containerd.
	Backend string
	// Config is the text of a config file given with --config; empty gives
	// none.
	Config string
	// DataDirPrefix names the temporary directory (os.MkdirTemp's pattern)
	// holding the data dir and the config.
	DataDirPrefix string
	// StartTimeout bounds the wait for the serving line; zero is
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// BinaryHint ends the error given when Binary cannot be run, telling
	// how to get one (a flag of the command, say).
	BinaryHint string
}

// Daemon is one `sandboxd serve` child on a free loopback port with its own
// temporary data dir, started by StartDaemon.
//
// Goroutines: StartDaemon leaves two, one waiting for the child (cmd.Wait,
// which also waits for os/exec's copy of stderr into the kept tail) and one
// reading stdout until the serving line and draining it after; both end
// when the child exits and its pipes close.
//
// Shutdown order (Stop): SIGTERM to the child, wait for it to exit (SIGKILL
// after StopTimeout), then remove the temporary dir. Whatever the child
// left outside that dir (sandboxes, snapshots) outlives it; deleting those
// is the caller's job, before Stop.
type Daemon struct {
	Backend string
	URL     string // where it serves, from its serving line
	Version string // its version, from its serving line
	Token   string // the admin token it wrote into its data dir

	cmd     *exec.Cmd
	dir     string
	stderr  *tailBuffer
	exited  chan struct{} // closed when Wait returns
	waitErr error         // valid after exited is closed
}

// StartDaemon runs `sandboxd serve` as o says and waits until it prints
// where it serves and has written its admin token. On an error the child is
// already stopped and its dir removed.
func StartDaemon(ctx context.Context, o DaemonOptions) (*Daemon, error) {
	if o.Backend == "" {
		o.Backend = "docker"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.DataDirPrefix == "" {
		o.DataDirPrefix = "sandboxd-bench-"
	}
	dir, err := os.MkdirTemp("", o.DataDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("a temporary data dir cannot be made: %w", err)
	}
	d := &Daemon{Backend: o.Backend, dir: dir, stderr: &tailBuffer{max: logTail}, exited: make(chan struct{})}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--backend", o.Backend, "--agent-binary", o.Agent, "--log-level", "warn"}
	if o.Config != "" {
		cfgPath := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfgPath, []byte(o.Config), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, "--config", cfgPath)
	}
	// Not CommandContext: an interrupt must lead to a clean SIGTERM in Stop,
	// not a SIGKILL that leaves sandboxd's pipes half closed.
	d.cmd = exec.Command(o.Binary, args...)
	// Its own process group keeps a terminal's Ctrl-C away from it (Stop
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
		hint := ""
		if o.BinaryHint != "" {
			hint = "; " + o.BinaryHint
		}
		return nil, fmt.Errorf("sandboxd (%s) cannot start: %w%s", o.Binary, err, hint)
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
	wait := time.NewTimer(o.StartTimeout)
	defer wait.Stop()
	select {
	case m := <-serving:
		d.Version, d.URL = m[1], m[2]
	case <-d.exited:
		err = fmt.Errorf("sandboxd exited before serving (%v): %s", d.waitErr, d.stderr.String())
	case <-wait.C:
		err = fmt.Errorf("sandboxd did not say where it serves within %s: %s", o.StartTimeout, d.stderr.String())
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		err = d.readToken()
	}
	if err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

// readToken reads the admin token sandboxd wrote into its data dir.
func (d *Daemon) readToken() error {
	tok, err := os.ReadFile(filepath.Join(d.dir, "data", "token"))
	if err != nil {
		return fmt.Errorf("sandboxd wrote no admin token: %w", err)
	}
	d.Token = strings.TrimSpace(string(tok))
	if d.Token == "" {
		return errors.New("sandboxd wrote an empty admin token")
	}
	return nil
}

// Pid is the child's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stderr is the kept tail of the child's stderr, to explain a failure.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// Stop sends SIGTERM, waits for the exit (SIGKILL after StopTimeout) and
// removes the temporary dir. It returns sandboxd's exit error, if any.
func (d *Daemon) Stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(StopTimeout)
	defer t.Stop()
	killed := false
	select {
	case <-d.exited:
	case <-t.C:
		_ = d.cmd.Process.Kill()
		killed = true
		<-d.exited
	}
	os.RemoveAll(d.dir)
	if killed {
		return fmt.Errorf("sandboxd did not stop within %s of SIGTERM and was killed", StopTimeout)
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
