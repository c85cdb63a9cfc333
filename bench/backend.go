package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
)

// BackendFigures are one backend's timings: create until the first agent
// response, reads on the open pipe, and reads over a fresh exec each.
type BackendFigures struct {
	Create, Pipe, Fresh []time.Duration
}

// CreateToReady creates a sandbox through a Manager and waits for the first
// agent response, then removes it.
func CreateToReady(ctx context.Context, b sandbox.Backend, tenant, conv, image string) (time.Duration, error) {
	m := sandbox.NewManager(b)
	if err := m.Start(ctx); err != nil {
		return 0, err
	}
	defer m.Close()
	start := time.Now()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: conv, Image: image})
	if err != nil {
		return 0, err
	}
	defer b.Remove(context.WithoutCancel(ctx), info.ID)
	c, _, err := m.Agent(ctx, tenant, conv)
	if err == nil {
		_, err = c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."})
	}
	return time.Since(start), err
}

// PipeReads measures 4 KiB reads on one sandbox's open agent pipe (calls of
// them, after a warm-up) and over a fresh exec each (fresh of them), the
// peer a pipe is measured against.
func PipeReads(ctx context.Context, b sandbox.Backend, tenant, image string, calls, fresh int, out *BackendFigures) error {
	m := sandbox.NewManager(b)
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: "calls", Image: image})
	if err != nil {
		return err
	}
	defer b.Remove(context.WithoutCancel(ctx), info.ID)
	c, _, err := m.Agent(ctx, tenant, "calls")
	if err != nil {
		return err
	}
	data := []byte(strings.Repeat("0123456789abcdef", 256))
	if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{{Path: "bench.txt", Data: data}}}); err != nil {
		return err
	}
	read := func(c *agent.Client) error {
		r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: info.Workspace, Path: "bench.txt"})
		if err == nil && len(r.Data) != len(data) {
			err = fmt.Errorf("read %d bytes, want %d", len(r.Data), len(data))
		}
		return err
	}
	for range 20 { // warm-up
		if err := read(c); err != nil {
			return err
		}
	}
	for range calls {
		t := time.Now()
		if err := read(c); err != nil {
			return err
		}
		out.Pipe = append(out.Pipe, time.Since(t))
	}
	for range fresh {
		t := time.Now()
		rwc, err := b.AttachAgent(ctx, info.ID)
		if err != nil {
			return err
		}
		fc, err := agent.NewClient(ctx, rwc)
		if err == nil {
			err = read(fc)
			fc.Close()
		}
		rwc.Close()
		if err != nil {
			return err
		}
		out.Fresh = append(out.Fresh, time.Since(t))
	}
	return nil
}

// CompareBackends measures every backend the same way in one run: creates
// interleaved (one per backend in turn, so all see the same machine load),
// then reads on one open pipe and over fresh execs per backend. The
// figures are keyed by backend name.
func CompareBackends(ctx context.Context, backends []sandbox.Backend, image string, creates, calls, fresh int) (map[string]*BackendFigures, error) {
	got := map[string]*BackendFigures{}
	for _, b := range backends {
		got[b.Name()] = &BackendFigures{}
	}
	tenant := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	for i := range creates {
		for _, b := range backends {
			d, err := CreateToReady(ctx, b, tenant, fmt.Sprintf("c%d", i), image)
			if err != nil {
				return nil, fmt.Errorf("%s create: %w", b.Name(), err)
			}
			got[b.Name()].Create = append(got[b.Name()].Create, d)
		}
	}
	for _, b := range backends {
		if err := PipeReads(ctx, b, tenant, image, calls, fresh, got[b.Name()]); err != nil {
			return nil, fmt.Errorf("%s calls: %w", b.Name(), err)
		}
	}
	return got, nil
}
