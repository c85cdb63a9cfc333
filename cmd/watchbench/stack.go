package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/internal/txtar"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// stack is a sandbox manager on the Docker backend.
type stack struct {
	backend *docker.Backend
	mgr     *sandbox.Manager
	tenant  string
	image   string
	cleanup []func()
}

func newStack(ctx context.Context, image string) (*stack, error) {
	dir, err := os.MkdirTemp("", "watchbench-")
	if err != nil {
		return nil, err
	}
	st := &stack{image: image, tenant: "watchbench-" + randHex(3), cleanup: []func(){func() { os.RemoveAll(dir) }}}
	var stop func()
	if st.backend, st.mgr, stop, err = bench.DockerManager(ctx, dir, image); err != nil {
		st.close()
		return nil, err
	}
	st.cleanup = append(st.cleanup, stop)
	return st, nil
}

// close deletes the tenant's sandboxes, then undoes newStack in reverse.
func (st *stack) close() {
	if st.mgr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if infos, err := st.mgr.List(ctx, st.tenant, ""); err == nil {
			for _, in := range infos {
				_ = st.mgr.Delete(ctx, st.tenant, in.ID)
			}
		}
		cancel()
	}
	for i := len(st.cleanup) - 1; i >= 0; i-- {
		st.cleanup[i]()
	}
}

// sandbox creates a sandbox for conv with a fixture's files in its workspace.
func (st *stack) sandbox(ctx context.Context, conv, fixture string) (*agent.Client, sandbox.Info, error) {
	info, err := st.mgr.Create(ctx, sandbox.Spec{Tenant: st.tenant, Conversation: conv, Image: st.image})
	if err != nil {
		return nil, info, err
	}
	ag, info, err := st.mgr.Agent(ctx, st.tenant, conv)
	if err != nil {
		return nil, info, err
	}
	if fixture == "" {
		return ag, info, nil
	}
	files, err := txtar.ReadFile(fixture)
	if err != nil {
		return nil, info, err
	}
	var ws []proto.WriteFile
	for name, data := range files {
		ws = append(ws, proto.WriteFile{Path: path.Join(info.Workspace, name), Data: []byte(data), MkdirAll: true})
	}
	return ag, info, ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: info.Workspace, Files: ws})
}

// sh runs a shell script in the sandbox's workspace.
func sh(ctx context.Context, ag *agent.Client, dir, script string, timeout time.Duration) (string, error) {
	res, err := ag.Exec(ctx, &proto.ExecRequest{Argv: []string{"/bin/sh", "-c", script}, Dir: dir, Timeout: timeout, MaxBytes: 64 << 10})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return "", fmt.Errorf("%q: exit %d (timed out %v): %s %s", script, res.ExitCode, res.TimedOut, res.Stdout, res.Stderr)
	}
	return string(res.Stdout), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
