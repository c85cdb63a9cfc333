package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

const (
	read4KSize = 4096
	read4KFile = "bench.txt"
)

// read4KResult holds every timed call of each side.
type read4KResult struct {
	http, exec, pipe []time.Duration
	rounds           int
	elapsed          time.Duration
}

// reader is one side of the comparison: a call that reads the file, timed,
// and a check (not timed) that what came back is the file.
type reader struct {
	name    string
	n       int // timed calls
	warm    int // untimed calls first
	call    func(ctx context.Context) (check func() error, err error)
	samples *[]time.Duration
}

// runRead4K writes a 4 KiB file into one sandbox and reads it back through
// sandboxd (HTTP, the read tool), through a fresh docker exec cat, and
// through a raw agent pipe, interleaved in rounds.
func runRead4K(ctx context.Context, e *env, sd *sandboxd) (read4KResult, error) {
	var r read4KResult
	conv := e.conversation("read4k", 0)
	sb, err := sd.api.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv, Image: e.opts.image})
	if err != nil {
		return r, fmt.Errorf("create the sandbox: %w", err)
	}
	defer func() { _ = sd.api.DeleteSandbox(context.WithoutCancel(ctx), sb.ID) }()
	run, err := sd.api.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
	if err != nil {
		return r, fmt.Errorf("open a run: %w", err)
	}
	content := bench.Content(read4KSize)
	lines := bench.Lines(content)
	if err := writeAndCheck(ctx, sd.api, run.ID, read4KFile, content); err != nil {
		return r, err
	}
	cid, err := containerOf(ctx, e, conv)
	if err != nil {
		return r, err
	}

	readArgs := json.RawMessage(`{"path": "` + read4KFile + `"}`)
	sides := []reader{{
		name: "sandboxd read", n: e.opts.reads, warm: e.opts.warmup, samples: &r.http,
		call: func(ctx context.Context) (func() error, error) {
			res, err := sd.api.CallTool(ctx, run.ID, "read", readArgs)
			return func() error {
				if res.IsError {
					return fmt.Errorf("the read tool answered an error: %s", res.Text())
				}
				return bench.CheckNumbered(res.Text(), lines)
			}, err
		},
	}, {
		name: "docker exec cat", n: e.opts.execs, warm: max(e.opts.warmup/10, min(e.opts.warmup, 3)), samples: &r.exec,
		call: func(ctx context.Context) (func() error, error) {
			out, stderr, code, err := bench.Exec(ctx, bench.DockerExec{Client: e.docker}, cid, "cat", docker.Workspace+"/"+read4KFile)
			return func() error {
				if code != 0 || !bytes.Equal(out, content) {
					return fmt.Errorf("docker exec cat exited %d with %d bytes (want the %d written), stderr %q", code, len(out), len(content), stderr)
				}
				return nil
			}, err
		},
	}}
	if e.opts.pipeReads > 0 {
		ac, err := openPipe(ctx, e, sb.ID)
		if err != nil {
			return r, err
		}
		defer ac.Close()
		req := &proto.ReadFileRequest{Root: docker.Workspace, Path: read4KFile}
		sides = append(sides, reader{
			name: "raw agent pipe", n: e.opts.pipeReads, warm: e.opts.warmup, samples: &r.pipe,
			call: func(ctx context.Context) (func() error, error) {
				resp, err := ac.ReadFile(ctx, req)
				return func() error {
					if !bytes.Equal(resp.Data, content) {
						return fmt.Errorf("the agent pipe read %d bytes, not the %d written", len(resp.Data), len(content))
					}
					return nil
				}, err
			},
		})
	}

	for _, s := range sides {
		for range s.warm {
			if err := timeOne(ctx, s, nil); err != nil {
				return r, err
			}
		}
	}
	start := time.Now()
	r.rounds = e.opts.rounds
	for round := range r.rounds {
		// Rotate who goes first, so no side always follows the slowest.
		for k := range sides {
			s := sides[(round+k)%len(sides)]
			for range share(s.n, r.rounds, round) {
				if err := timeOne(ctx, s, s.samples); err != nil {
					return r, err
				}
			}
		}
		if (round+1)%max(r.rounds/4, 1) == 0 {
			progress(e.log, "read4k: round %d/%d", round+1, r.rounds)
		}
	}
	r.elapsed = time.Since(start)
	return r, nil
}

// timeOne times one call and then checks what it returned; samples nil
// means a warm-up call.
func timeOne(ctx context.Context, s reader, samples *[]time.Duration) error {
	t0 := time.Now()
	check, err := s.call(ctx)
	d := time.Since(t0)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if err := check(); err != nil {
		return fmt.Errorf("%s returned the wrong content: %w", s.name, err)
	}
	if samples != nil {
		*samples = append(*samples, d)
	}
	return nil
}

// share is how many of n calls fall in round i of rounds (the remainder
// goes to the first rounds).
func share(n, rounds, i int) int {
	s := n / rounds
	if i < n%rounds {
		s++
	}
	return s
}

// containerOf finds the engine's id of the conversation's sandbox by the
// labels sandboxd put on it, as an operator would with `docker ps`.
func containerOf(ctx context.Context, e *env, conv string) (string, error) {
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelConversation+"="+conv))})
	if err != nil {
		return "", fmt.Errorf("the sandbox's container cannot be listed: %w", err)
	}
	if len(cs) != 1 {
		return "", fmt.Errorf("%d running containers carry conversation %s, want 1", len(cs), conv)
	}
	return cs[0].ID, nil
}

// openPipe attaches a second agent session to the sandbox, with no manager
// and no HTTP in between: the floor that sandboxd's read cannot go under.
func openPipe(ctx context.Context, e *env, sandboxID string) (*agent.Client, error) {
	// The backend works for the daemon's deployment, or it would not see
	// the daemon's sandbox at all.
	cj, err := e.docker.ContainerInspect(ctx, docker.NamePrefix+sandboxID)
	if err != nil {
		return nil, fmt.Errorf("inspect the sandbox's container: %w", err)
	}
	dep := sandbox.Deployment{Name: cj.Config.Labels[sandbox.LabelDeployment]}
	b, err := docker.New(docker.WithAgentBinary(e.opts.agentBin), docker.WithClient(e.docker), docker.WithDeployment(dep))
	if err != nil {
		return nil, err
	}
	rwc, err := b.AttachAgent(ctx, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("attach a raw agent pipe: %w", err)
	}
	ac, err := agent.NewClient(ctx, rwc)
	if err != nil {
		return nil, fmt.Errorf("open a raw agent session: %w", err)
	}
	return ac, nil
}
