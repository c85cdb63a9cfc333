package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/sandbox"
)

// The small file every timed call reads; the marker proves the read saw it.
const (
	noteFile = "note.txt"
	noteText = "lifecyclebench: this line is kept through every pause and hibernation\n"
	// stateTimeout bounds the wait for a sandbox to reach a state by itself
	// (an automatic pause is due within about 1.5 s of pause_after_s 1).
	stateTimeout = 30 * time.Second
	// pollEvery is how often GET asks for a sandbox's state while waiting.
	pollEvery = 25 * time.Millisecond
)

// backendFigures are the samples of one backend, each a client-side round
// trip through sandboxd's HTTP API (see the section's How).
type backendFigures struct {
	Pause, Resume []time.Duration // the verbs on a running / paused sandbox
	// AutoCall is the first read after an automatic pause; Running the same
	// read on the same sandbox right after, running.
	AutoCall, Running []time.Duration
	// Hibernate and Wake are the verbs; HibernatedCall the first read after
	// a hibernation (the wake included).
	Hibernate, Wake, HibernatedCall []time.Duration
	// Cold is POST /v1/sandboxes until 201 and the first read answered.
	Cold []time.Duration
}

// session is one sandbox with a run of its conversation and the note
// written in its workspace.
type session struct {
	c   *client.Client
	sb  api.Sandbox
	run string
}

// openSession creates a sandbox as req asks, a run of its conversation,
// writes the note and reads it once (the agent's pipe is then open).
func openSession(ctx context.Context, c *client.Client, req api.CreateSandboxRequest) (*session, error) {
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create a sandbox for %s: %w", req.Conversation, err)
	}
	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: req.Conversation})
	if err != nil {
		return nil, fmt.Errorf("create a run for %s: %w", req.Conversation, err)
	}
	s := &session{c: c, sb: sb, run: run.ID}
	if _, err := s.call(ctx, "write", map[string]any{"path": noteFile, "content": noteText}); err != nil {
		return nil, err
	}
	return s, s.read(ctx)
}

// call runs one tool of the session's run; an is_error result is an error.
func (s *session) call(ctx context.Context, tool string, args map[string]any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	res, err := s.c.CallTool(ctx, s.run, tool, raw)
	if err != nil {
		return "", fmt.Errorf("%s in sandbox %s: %w", tool, s.sb.ID, err)
	}
	if res.IsError {
		return "", fmt.Errorf("%s in sandbox %s answered an error: %s", tool, s.sb.ID, res.Text())
	}
	return res.Text(), nil
}

// read is the timed call: a read of the note, checked for its marker.
func (s *session) read(ctx context.Context) error {
	out, err := s.call(ctx, "read", map[string]any{"path": noteFile})
	if err == nil && !strings.Contains(out, strings.TrimSpace(noteText)) {
		err = fmt.Errorf("read of %s in sandbox %s did not return the note: %q", noteFile, s.sb.ID, out)
	}
	return err
}

// verb runs a lifecycle verb and checks the state it answers with.
func (s *session) verb(ctx context.Context, name, want string) (time.Duration, error) {
	do := map[string]func(context.Context, string) (api.Sandbox, error){
		"pause": s.c.PauseSandbox, "hibernate": s.c.HibernateSandbox, "resume": s.c.ResumeSandbox,
	}[name]
	start := time.Now()
	sb, err := do(ctx, s.sb.ID)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s of sandbox %s: %w", name, s.sb.ID, err)
	}
	if sb.State != want {
		return 0, fmt.Errorf("%s of sandbox %s answered state %q, want %q", name, s.sb.ID, sb.State, want)
	}
	return d, nil
}

// timedRead times one read.
func (s *session) timedRead(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := s.read(ctx)
	return time.Since(start), err
}

// waitState polls GET until the sandbox is in state want (a GET is not use:
// it does not restart the idle time).
func (s *session) waitState(ctx context.Context, want string) error {
	deadline := time.Now().Add(stateTimeout)
	for {
		sb, err := s.c.GetSandbox(ctx, s.sb.ID)
		if err != nil {
			return fmt.Errorf("GET of sandbox %s: %w", s.sb.ID, err)
		}
		if sb.State == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox %s is still %s after %s; want %s", s.sb.ID, sb.State, stateTimeout, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// pauseCycles pauses and resumes one running sandbox n times, reading the
// note (untimed) after each resume to prove it works.
func pauseCycles(ctx context.Context, c *client.Client, image string, n int, out *backendFigures) error {
	s, err := openSession(ctx, c, api.CreateSandboxRequest{Conversation: "pause", Image: image})
	if err != nil {
		return err
	}
	for i := range n {
		d, err := s.verb(ctx, "pause", sandbox.StatePaused)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		out.Pause = append(out.Pause, d)
		if d, err = s.verb(ctx, "resume", sandbox.StateRunning); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		out.Resume = append(out.Resume, d)
		if err := s.read(ctx); err != nil {
			return fmt.Errorf("cycle %d, after the resume: %w", i, err)
		}
	}
	return c.DeleteSandbox(ctx, s.sb.ID)
}

// autoPauseCycles waits n times for a sandbox created with pause_after_s 1
// to be paused by sandboxd, then times the read that resumes it and, right
// after, running reads of the same file in the same sandbox.
func autoPauseCycles(ctx context.Context, c *client.Client, image string, n, running int, out *backendFigures) error {
	s, err := openSession(ctx, c, api.CreateSandboxRequest{Conversation: "autopause", Image: image, Lifecycle: &api.Lifecycle{PauseAfterS: 1}})
	if err != nil {
		return err
	}
	for i := range n {
		if err := s.waitState(ctx, sandbox.StatePaused); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		d, err := s.timedRead(ctx)
		if err != nil {
			return fmt.Errorf("cycle %d, the read that resumes: %w", i, err)
		}
		out.AutoCall = append(out.AutoCall, d)
		for range running {
			d, err := s.timedRead(ctx)
			if err != nil {
				return fmt.Errorf("cycle %d, a read of the running sandbox: %w", i, err)
			}
			out.Running = append(out.Running, d)
		}
	}
	return c.DeleteSandbox(ctx, s.sb.ID)
}

// hibernateCycles hibernates one sandbox 2n times: each cycle times a
// hibernation, the resume verb, another hibernation and the first read
// after it (which wakes the sandbox).
func hibernateCycles(ctx context.Context, c *client.Client, image string, n int, out *backendFigures) error {
	s, err := openSession(ctx, c, api.CreateSandboxRequest{Conversation: "hibernate", Image: image})
	if err != nil {
		return err
	}
	for i := range n {
		d, err := s.verb(ctx, "hibernate", sandbox.StateHibernated)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		out.Hibernate = append(out.Hibernate, d)
		if d, err = s.verb(ctx, "resume", sandbox.StateRunning); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		out.Wake = append(out.Wake, d)
		if err := s.read(ctx); err != nil {
			return fmt.Errorf("cycle %d, after the resume: %w", i, err)
		}
		if d, err = s.verb(ctx, "hibernate", sandbox.StateHibernated); err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		out.Hibernate = append(out.Hibernate, d)
		if d, err = s.timedRead(ctx); err != nil {
			return fmt.Errorf("cycle %d, the read that wakes: %w", i, err)
		}
		out.HibernatedCall = append(out.HibernatedCall, d)
	}
	return c.DeleteSandbox(ctx, s.sb.ID)
}

// coldCycles times what a platform without a lifecycle does when a
// conversation comes back: POST /v1/sandboxes, then the first read. The
// workspace is a host directory already holding the note (the config
// allows hostRoot), so the read is the same call as the others and no
// restore is counted. The run is made first, untimed: a run needs no
// sandbox, and a platform with a lifecycle has one already.
func coldCycles(ctx context.Context, c *client.Client, image, hostRoot string, n int, out *backendFigures) error {
	for i := range n {
		conv := fmt.Sprintf("cold-%d", i)
		ws := filepath.Join(hostRoot, conv)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ws, noteFile), []byte(noteText), 0o644); err != nil {
			return err
		}
		run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
		if err != nil {
			return fmt.Errorf("create a run for %s: %w", conv, err)
		}
		start := time.Now()
		sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv, Image: image, Workspace: &api.Workspace{HostPath: ws}})
		if err != nil {
			return fmt.Errorf("cold create %d: %w", i, err)
		}
		s := &session{c: c, sb: sb, run: run.ID}
		if err := s.read(ctx); err != nil {
			return fmt.Errorf("cold create %d, the first read: %w", i, err)
		}
		out.Cold = append(out.Cold, time.Since(start))
		if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
			return err
		}
		if err := c.DeleteRun(ctx, run.ID); err != nil {
			return err
		}
	}
	return nil
}
