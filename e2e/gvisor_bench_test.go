package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// TestGVisorBenchmark measures gVisor next to runc through the built
// daemon on Docker: create, read 4 KiB, `shell true`, eval `1+1`, a warm
// gopls definition, and the memory of an idle sandbox. It runs only when
// asked (make bench's family gvisor), and writes its section of
// BENCHMARKS.md (SANDBOXD_BENCH_OUT names the file; SANDBOXD_BENCH_SMOKE=1
// only checks the section renders):
//
//	SANDBOXD_TEST_DOCKER=1 SANDBOXD_BENCH_EVAL=1 go test ./e2e -run TestGVisorBenchmark -v
func TestGVisorBenchmark(t *testing.T) {
	if os.Getenv("SANDBOXD_BENCH_EVAL") != "1" || os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_BENCH_EVAL=1 to run the gVisor benchmark")
	}
	needGVisor(t)
	smoke := bench.SmokeFromEnv()
	creates, trips := 5, 50
	if smoke {
		creates, trips = 1, 3
	}
	d := startDaemon(t, "docker", t.TempDir())
	cli := dockerClient(t)
	type figures struct {
		create, read, shell, eval, lsp bench.Summary
		mem                            int64
	}
	got := map[string]figures{}
	timed := func(n int, f func()) bench.Summary {
		var s []time.Duration
		for range n {
			start := time.Now()
			f()
			s = append(s, time.Since(start))
		}
		return bench.Summarize(s)
	}
	callRaw := func(run, tool string, args map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := d.Client.CallTool(ctx(t), run, tool, raw)
		if err != nil || res.IsError {
			t.Fatalf("%s %v: %v %s", tool, args, err, res.Text())
		}
	}
	for _, rt := range []string{"runc", "gvisor"} {
		var f figures
		i := 0
		f.create = timed(creates, func() {
			i++
			req := createReq("docker", fmt.Sprintf("bench-%s-%d", rt, i))
			req.Runtime = rt
			sb, err := d.Client.CreateSandbox(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
		})
		conv := fmt.Sprintf("bench-%s-1", rt)
		run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, d, run.ID, "write", map[string]any{"path": "k4.txt", "content": strings.Repeat("0123456789abcde\n", 256)})
		f.read = timed(trips, func() { callRaw(run.ID, "read", map[string]any{"path": "k4.txt"}) })
		f.shell = timed(trips, func() { callRaw(run.ID, "shell", map[string]any{"command": "true"}) })
		mustCall(t, d, run.ID, "eval", evalArgs("python", "0"))
		f.eval = timed(trips, func() { callRaw(run.ID, "eval", evalArgs("python", "1+1")) })
		mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/go.mod", "content": "module example.com/calc\n\ngo 1.22\n"})
		mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/add.go", "content": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"})
		mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/use.go", "content": "package calc\n\nfunc Twice(x int) int { return Add(x, x) }\n"})
		def := map[string]any{"action": "definition", "file": "calc/use.go", "line": 3, "symbol": "Add"}
		mustCall(t, d, run.ID, "lsp", def) // starts gopls: not part of the warm figure
		f.lsp = timed(trips, func() { callRaw(run.ID, "lsp", def) })

		// Memory of a sandbox that was made and left alone, its agent
		// attached (the second one: the first carries gopls and kernels).
		idle := fmt.Sprintf("bench-%s-2", rt)
		if creates < 2 {
			idle = conv
		}
		list, err := d.Client.ListSandboxes(ctx(t), idle)
		if err != nil || len(list) != 1 {
			t.Fatalf("the idle sandbox %s: %v %v", idle, list, err)
		}
		time.Sleep(5 * time.Second) // let start-up allocations settle before reading
		if f.mem, err = bench.ContainerMemory(ctx(t), cli, docker.NamePrefix+list[0].ID); err != nil {
			t.Fatal(err)
		}
		got[rt] = f
	}

	r, g := got["runc"], got["gvisor"]
	var b strings.Builder
	fmt.Fprintf(&b, "## gVisor next to runc: what the stronger wall costs\n\n")
	fmt.Fprintf(&b, "gVisor (Debian 12's runsc 0.0~20221219, ptrace platform, `--network=none`) next to runc on Docker, through the built daemon's HTTP API; p50 of %d calls (%d creates), one machine.\n\n", trips, creates)
	b.WriteString("| | runc | gVisor | gVisor / runc |\n|---|---|---|---|\n")
	row := func(name string, a, c time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f× |\n", name, bench.Ms(a), bench.Ms(c), bench.Ratio(c, a))
	}
	row("create (API, to running)", r.create.P50, g.create.P50)
	row("read 4 KiB", r.read.P50, g.read.P50)
	row("shell `true`", r.shell.P50, g.shell.P50)
	row("eval `1+1` (Python)", r.eval.P50, g.eval.P50)
	row("lsp definition (warm gopls)", r.lsp.P50, g.lsp.P50)
	ratio := 0.0
	if r.mem > 0 {
		ratio = float64(g.mem) / float64(r.mem)
	}
	fmt.Fprintf(&b, "| memory of an idle sandbox (docker stats) | %s | %s | %.2f× |\n", bench.MiB(r.mem), bench.MiB(g.mem), ratio)
	t.Logf("gvisor section:\n%s", b.String())
	out := os.Getenv("SANDBOXD_BENCH_OUT")
	if out == "" {
		out = "../BENCHMARKS.md"
	}
	if err := bench.Publish(out, "gvisor", b.String(), smoke, os.Stderr); err != nil {
		t.Fatal(err)
	}
}
