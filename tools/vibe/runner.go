package vibe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// Caps on what is kept of a worker's output: the tail, since the final
// lines are the result.
const (
	maxResultBytes = 64 << 10
	maxStderrBytes = 8 << 10
	// killGrace bounds the kill and the draining of output after it.
	killGrace = 5 * time.Second
	// waitSlice is how long one agent Wait call blocks; the loop re-checks
	// the attempt's context between slices.
	waitSlice = 10 * time.Second
)

// attemptSpec is one execution of a worker's command.
type attemptSpec struct {
	argv    []string
	dir     string
	env     map[string]string
	stdin   string
	labels  map[string]string
	attempt int
	live    func(stream string, p []byte) // gets the output as it comes (nil: none)
}

// attemptResult is how an execution ended.
type attemptResult struct {
	stdout   string
	stderr   string
	exitCode int
	signal   string
	err      error // the command could not be run, or contact was lost
	canceled bool  // ctx ended and the process group was killed
}

// runner executes an attempt to completion, or until ctx ends, when it
// kills the whole process group and returns with canceled set.
type runner func(ctx context.Context, s attemptSpec) attemptResult

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex // guards b and dropped
	b       []byte
	max     int
	dropped int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.dropped += over
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.ToValidUTF8(string(t.b), "")
	if t.dropped > 0 {
		return fmt.Sprintf("[%d earlier bytes left out]\n%s", t.dropped, s)
	}
	return s
}

// sandboxRunner runs attempts in the conversation's sandbox through its
// agent: the agent daemon owns the process; this side feeds stdin, reads
// stdout and stderr, and waits for the exit.
func sandboxRunner(a *agent.Client) runner {
	return func(ctx context.Context, s attemptSpec) attemptResult {
		info, err := a.Spawn(ctx, &proto.SpawnRequest{Argv: s.argv, Dir: s.dir, Env: s.env, Labels: s.labels, Stdin: true})
		if err != nil {
			return attemptResult{err: err}
		}
		kill := func() {
			kctx, cancel := context.WithTimeout(context.Background(), killGrace)
			defer cancel()
			a.Signal(kctx, &proto.SignalRequest{ID: info.ID, Signal: "KILL", Group: true})
		}
		var out, errb = &tailBuffer{max: maxResultBytes}, &tailBuffer{max: maxStderrBytes}
		var streams []io.Closer
		defer func() {
			for _, c := range streams {
				c.Close()
			}
		}()
		var copies sync.WaitGroup
		for _, sc := range []struct {
			name string
			dst  io.Writer
		}{{"stdout", tee(s.live, "stdout", out)}, {"stderr", tee(s.live, "stderr", errb)}} {
			st, err := a.Attach(ctx, info.ID, sc.name)
			if err != nil {
				kill()
				return attemptResult{err: fmt.Errorf("attaching to the worker's %s: %w", sc.name, err)}
			}
			streams = append(streams, st)
			copies.Add(1)
			go func() {
				defer copies.Done()
				io.Copy(sc.dst, st)
			}()
		}
		in, err := a.Attach(ctx, info.ID, "stdin")
		if err != nil {
			kill()
			return attemptResult{err: fmt.Errorf("attaching to the worker's stdin: %w", err)}
		}
		streams = append(streams, in)
		go func() {
			// Closing gives the worker EOF after the brief; a worker that
			// never reads leaves this blocked until its streams close.
			io.WriteString(in, s.stdin)
			in.Close()
		}()

		var pi *proto.ProcessInfo
		for {
			pi, err = a.Wait(ctx, &proto.WaitRequest{ID: info.ID, Timeout: waitSlice})
			if ctx.Err() != nil {
				kill()
				drain(&copies)
				return attemptResult{stdout: out.String(), stderr: errb.String(), canceled: true}
			}
			if err != nil {
				kill()
				return attemptResult{stdout: out.String(), stderr: errb.String(), err: fmt.Errorf("lost contact with the worker: %w", err)}
			}
			if !pi.Running {
				break
			}
		}
		drain(&copies)
		return attemptResult{stdout: out.String(), stderr: errb.String(), exitCode: pi.ExitCode, signal: pi.Signal}
	}
}

// drain waits (bounded) for the output copies to reach EOF.
func drain(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killGrace):
	}
}

// hostRunner runs attempts as local processes, for conversations without
// a sandbox. Each is the leader of its own process group, which is killed
// whole.
func hostRunner(baseEnv []string) runner {
	return func(ctx context.Context, s attemptSpec) attemptResult {
		cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
		cmd.Dir = s.dir
		cmd.Env = append([]string(nil), baseEnv...)
		for k, v := range s.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = strings.NewReader(s.stdin)
		out, errb := &tailBuffer{max: maxResultBytes}, &tailBuffer{max: maxStderrBytes}
		cmd.Stdout, cmd.Stderr = tee(s.live, "stdout", out), tee(s.live, "stderr", errb)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = killGrace
		err := cmd.Run()
		r := attemptResult{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			r.canceled = true
		case errors.As(err, &ee):
			r.exitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.signal = ws.Signal().String()
			}
		case err != nil:
			r.err = err
		}
		return r
	}
}
