package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// BenchmarkHostKernels measures a trivial cell (1+1) and a kernel cold
// start (reset: kill the kernel, start a new one, run 1+1) of host kernels
// confined in their jail beside the same kernels started unconfined by the
// same host agent (the path host kernels took before the jail), in one
// loop, under the default limits (1 GiB, 1 CPU); ns/op is the pair,
// confined-ms/op and unconfined-ms/op each:
//
//	go test ./tools/eval -run '^$' -bench HostKernels -benchtime 200x
func BenchmarkHostKernels(b *testing.B) {
	// The default memory limit: V8 sizes its heap to it, and a small one
	// makes Node's cells slower.
	h := newHostKernels(b, 0, eval.WithInterpreters("/usr/bin/python3", "/usr/bin/node"))
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
	modes := []string{"confined", "unconfined"}
	for _, lang := range []string{"python", "javascript"} {
		for _, kind := range []string{"cell", "cold"} {
			extra := map[string]any(nil)
			if kind == "cold" {
				extra = map[string]any{"reset": true}
			}
			one := func(b *testing.B, mode string) time.Duration {
				start := time.Now()
				r := h.eval(envs[mode], lang, "1+1", extra)
				el := time.Since(start)
				if r.IsError || strings.TrimSpace(text(r)) != "2" {
					b.Fatalf("%s %s 1+1: %s", mode, lang, text(r))
				}
				return el
			}
			// Both paths in the same loop, in alternating order, so the
			// machine's load falls on both alike.
			b.Run(lang+"/"+kind, func(b *testing.B) {
				for _, m := range modes {
					one(b, m)
				}
				total := map[string]time.Duration{}
				b.ResetTimer()
				for i := range b.N {
					for j := range modes {
						m := modes[(i+j)%2]
						total[m] += one(b, m)
					}
				}
				for _, m := range modes {
					b.ReportMetric(float64(total[m].Microseconds())/1000/float64(b.N), m+"-ms/op")
				}
			})
		}
	}
}
