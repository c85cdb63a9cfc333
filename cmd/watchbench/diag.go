package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// langCase is a dependency whose signature a sed breaks, and its consumer.
type langCase struct {
	key, name      string
	fixture        string
	consumer, dep  string
	breakIt, fixIt string
	wantErr        string
}

var langCases = []langCase{
	{
		key: "go", name: "Go (gopls)", fixture: "tools/lsp/testdata/go.txtar",
		consumer: "goproj/main.go", dep: "goproj/shapes/shape.go",
		breakIt: "s/func NewSquare(größe float64) Square/func NewSquare(größe float64, extra int) Square/",
		fixIt:   "s/func NewSquare(größe float64, extra int) Square/func NewSquare(größe float64) Square/",
		wantErr: "not enough arguments",
	},
	{
		key: "python", name: "Python (pyright)", fixture: "tools/lsp/testdata/python.txtar",
		consumer: "pyproj/main.py", dep: "pyproj/shapes/base.py",
		breakIt: "s/def new_square(größe: float) -> Square:/def new_square(größe: float, extra: int) -> Square:/",
		fixIt:   "s/def new_square(größe: float, extra: int) -> Square:/def new_square(größe: float) -> Square:/",
		wantErr: `"extra"`,
	},
}

// diagFigures are one (language, mode)'s edits.
type diagFigures struct {
	c       langCase
	watch   bool
	edits   int
	samples []time.Duration // edit -> the consumer's response shows the new error
	missed  int             // edits whose error did not show within the wait
	stale   int             // responses saying "no problems" between the edit and the error
	pending int             // responses saying "diagnostics pending" in that time
	calls   int
}

// measureDiag times shell edits of c.dep until c.consumer's diagnostics
// show the error, in a sandbox of its own (two managers in one sandbox
// would replace each other's servers).
func measureDiag(ctx context.Context, st *stack, c langCase, watch bool, n int, wait time.Duration) (diagFigures, error) {
	f := diagFigures{c: c, watch: watch, edits: n}
	conv := fmt.Sprintf("%s-watch-%v", c.key, watch)
	ag, info, err := st.sandbox(ctx, conv, c.fixture)
	if err != nil {
		return f, err
	}
	defer st.mgr.Delete(context.WithoutCancel(ctx), st.tenant, info.ID)
	m := lsp.New(lsp.WithWatch(watch))
	defer m.Close()
	reg := tools.NewRegistry()
	for _, t := range m.Tools() {
		reg.Register(t)
	}
	conn := &tools.SandboxConn{ID: info.ID, Backend: "docker", Workspace: info.Workspace, Agent: ag}
	env := &tools.Env{
		Run:        &tools.Run{ID: "run-" + conv, Tenant: st.tenant, Conversation: conv, Surface: tools.SurfaceDefault, Workdir: info.Workspace},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	args, _ := json.Marshal(map[string]any{"action": "diagnostics", "file": c.consumer})
	diag := func() (string, error) {
		res, err := reg.Call(ctx, env, "lsp", args)
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", fmt.Errorf("lsp diagnostics %s: %s", c.consumer, res.Text())
		}
		return res.Text(), nil
	}
	// Warm: the server started and the consumer reported clean.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := diag()
		if err != nil {
			return f, err
		}
		if strings.Contains(out, "no problems") {
			break
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("%s never came clean: %s", c.consumer, out)
		}
	}
	sed := func(script string) error {
		_, err := sh(ctx, ag, info.Workspace, fmt.Sprintf("sed -i '%s' %s", script, c.dep), 20*time.Second)
		return err
	}
	for range n {
		if err := sed(c.breakIt); err != nil {
			return f, err
		}
		t0 := time.Now()
		for {
			out, err := diag()
			if err != nil {
				return f, err
			}
			f.calls++
			if strings.Contains(out, c.wantErr) {
				f.samples = append(f.samples, time.Since(t0))
				break
			}
			switch {
			case strings.Contains(out, "no problems"):
				f.stale++
			case strings.Contains(out, "pending"):
				f.pending++
			}
			if time.Since(t0) > wait {
				f.missed++
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := sed(c.fixIt); err != nil {
			return f, err
		}
		// Back to clean before the next edit (untimed).
		t1 := time.Now()
		for {
			out, err := diag()
			if err != nil {
				return f, err
			}
			if strings.Contains(out, "no problems") || time.Since(t1) > wait {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return f, nil
}
