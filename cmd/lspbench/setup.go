package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/internal/txtar"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// stack is sandboxd assembled as serve assembles it (manager, registry with
// the file and lsp tools, diagnostics on write as an env hook, the HTTP API)
// on a loopback port, plus a client of it.
type stack struct {
	backend *docker.Backend
	mgr     *sandbox.Manager
	lsp     *lsp.Manager
	reg     *tools.Registry
	srv     *http.Server
	client  *client.Client
	tenant  string
	cleanup []func()
}

func newStack(ctx context.Context, image string) (*stack, error) {
	dir, err := os.MkdirTemp("", "lspbench-")
	if err != nil {
		return nil, err
	}
	st := &stack{cleanup: []func(){func() { os.RemoveAll(dir) }}}
	var stop func()
	if st.backend, st.mgr, stop, err = bench.DockerManager(ctx, dir, image); err != nil {
		st.close()
		return nil, err
	}
	st.cleanup = append(st.cleanup, stop)
	st.lsp = lsp.New()
	st.cleanup = append(st.cleanup, st.lsp.Close)
	st.reg = tools.NewRegistry()
	for _, t := range files.Tools() {
		st.reg.Register(t)
	}
	for _, t := range st.lsp.Tools() {
		st.reg.Register(t)
	}
	token := randHex(16)
	st.tenant = "lspbench-" + randHex(3)
	hook := api.EnvHook(func(_ context.Context, env *tools.Env) {
		if env.Run != nil && env.Run.ID != "" {
			env.AfterWrite = st.lsp.AfterWrite(env)
		}
	})
	tt, err := api.ParseTenantToken(st.tenant, api.HashToken(token))
	if err != nil {
		st.close()
		return nil, err
	}
	a := api.New(st.mgr, st.reg, api.NewTokenAuth(tt),
		api.WithEnvHooks(hook), api.WithDefaultImage(image))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.close()
		return nil, err
	}
	st.srv = &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go st.srv.Serve(ln)
	st.cleanup = append(st.cleanup, func() { st.srv.Close() })
	st.client, err = client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// close undoes newStack in reverse, deleting the tenant's sandboxes first.
func (st *stack) close() {
	if st.mgr != nil && st.tenant != "" {
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

// sandbox creates a sandbox for conv with the Go fixture in its workspace.
func (st *stack) sandbox(ctx context.Context, conv string) (sandbox.Info, error) {
	info, err := st.mgr.Create(ctx, sandbox.Spec{Tenant: st.tenant, Conversation: conv})
	if err != nil {
		return info, err
	}
	ag, info, err := st.mgr.Agent(ctx, st.tenant, conv)
	if err != nil {
		return info, err
	}
	fixture, err := txtar.ReadFile("tools/lsp/testdata/go.txtar")
	if err != nil {
		return info, err
	}
	var ws []proto.WriteFile
	for name, data := range fixture {
		ws = append(ws, proto.WriteFile{Path: path.Join(info.Workspace, name), Data: []byte(data), MkdirAll: true})
	}
	return info, ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: info.Workspace, Files: ws})
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// conn is the sandbox as a tool sees it.
func (st *stack) conn(ctx context.Context, conv string, info sandbox.Info) (*tools.SandboxConn, error) {
	ag, info, err := st.mgr.Agent(ctx, st.tenant, conv)
	if err != nil {
		return nil, err
	}
	return &tools.SandboxConn{ID: info.ID, Backend: "docker", Workspace: info.Workspace, Agent: ag}, nil
}
