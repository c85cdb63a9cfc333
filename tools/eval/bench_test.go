package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// BenchmarkHostKernels measures a trivial cell (1+1) and a kernel cold
// start (reset: kill the kernel, start a new one, run 1+1) of host kernels
// confined in their jail beside the same kernels started unconfined by the
// same host agent (the path host kernels took before the jail), in one run:
//
//	go test ./tools/eval -run '^$' -bench HostKernels -benchtime 200x
func BenchmarkHostKernels(b *testing.B) {
	h := newHostKernels(b, eval.WithInterpreters("/usr/bin/python3", "/usr/bin/node"))
	ws := filepath.Join(b.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	envs := map[string]*tools.Env{
		"confined": h.env("bench"),
		// The unconfined kernel: the host agent spawns the interpreter
		// itself, as for a sandbox whose workspace is a host folder.
		"unconfined": {
			Run:        &tools.Run{ID: "run-bench-u", Tenant: "acme", Conversation: "bench-u", Surface: tools.SurfaceDefault},
			HasSandbox: true,
			Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
				c, err := h.la.Agent(ctx)
				if err != nil {
					return nil, err
				}
				return &tools.SandboxConn{ID: "unconfined", Backend: "host", Workspace: ws, Agent: c}, nil
			},
		},
	}
	for _, lang := range []string{"python", "javascript"} {
		for _, mode := range []string{"confined", "unconfined"} {
			env := envs[mode]
			run := func(b *testing.B, extra map[string]any) {
				r := h.eval(env, lang, "1+1", extra)
				if r.IsError || strings.TrimSpace(text(r)) != "2" {
					b.Fatalf("%s %s 1+1: %s", mode, lang, text(r))
				}
			}
			b.Run(lang+"/cell/"+mode, func(b *testing.B) {
				run(b, nil)
				b.ResetTimer()
				for range b.N {
					run(b, nil)
				}
			})
			b.Run(lang+"/cold/"+mode, func(b *testing.B) {
				for range b.N {
					run(b, map[string]any{"reset": true})
				}
			})
		}
	}
}
