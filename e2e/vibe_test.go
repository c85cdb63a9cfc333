package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// vibeDaemon serves workers: tier fast is the shipped example worker,
// tier good runs its brief as a shell script (so each test says what its
// worker does).
func vibeDaemon(t *testing.T) *daemon {
	t.Helper()
	grep, err := filepath.Abs("../examples/workers/grep-worker.py")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`workers:
  fast: {command: [python3, %q]}
  good: {command: [sh, -c, 'script=$(cat); eval "$script"']}
`, grep)
	d, _ := qDaemon(t, cfg)
	return d
}

func TestVibeWorkers(t *testing.T) {
	d := vibeDaemon(t)
	c := d.Client
	sb, err := c.CreateSandbox(ctx(t), createReq("host", "conv-vibe"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(ctx(t), sb.ID) })

	plain, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(toolNames(plain.Tools), "vibe_spawn") {
		t.Fatal("vibe tools are listed for a run without vibe: true")
	}
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe", Vibe: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list"} {
		if !slices.Contains(toolNames(run.Tools), n) {
			t.Fatalf("run tools %v lack %s", toolNames(run.Tools), n)
		}
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "pkg/app.py", "content": "def main():\n    return NEEDLE_42\n"})

	t.Run("spawn wait done", func(t *testing.T) {
		out := mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "NEEDLE_42\nfind where it is used", "label": "find the needle", "tier": "fast"})
		if !strings.Contains(out, "w1") {
			t.Fatalf("vibe_spawn = %q", out)
		}
		out = mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 120})
		if !strings.Contains(out, "done") || !strings.Contains(out, "app.py") || !strings.Contains(out, "NEEDLE_42") {
			t.Fatalf("vibe_wait = %q, want done with the match in pkg/app.py", out)
		}
		t.Logf("the example worker reported: %s", out)
		list := mustCall(t, d, run.ID, "vibe_list", map[string]any{})
		if !strings.Contains(list, "w1\tfind the needle\tfast\tdone\t") {
			t.Fatalf("vibe_list = %q", list)
		}
		// The worker's child run is listed under its parent.
		runs, err := c.Runs(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(runs, func(r api.RunSummary) bool { return r.Parent == run.ID && r.Surface == "default" }) {
			t.Fatalf("no child run of %s in %+v", run.ID, runs)
		}
	})

	t.Run("send re-runs with the appended brief", func(t *testing.T) {
		mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "echo first-part", "label": "echo", "tier": "good"})
		out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w2"})
		if !strings.Contains(out, "first-part") {
			t.Fatalf("first result %q", out)
		}
		mustCall(t, d, run.ID, "vibe_send", map[string]any{"worker_id": "w2", "message": "echo second-part"})
		out = mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w2"})
		if !strings.Contains(out, "done") || !strings.Contains(out, "first-part\nsecond-part") {
			t.Fatalf("after send: %q", out)
		}
	})

	t.Run("wait timeout and kill", func(t *testing.T) {
		mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "echo started; sleep 120; echo never", "label": "sleeper", "tier": "good"})
		start := time.Now()
		out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w3", "timeout_seconds": 1})
		if !strings.Contains(out, "still running") || time.Since(start) > 30*time.Second {
			t.Fatalf("vibe_wait with timeout = %q after %v", out, time.Since(start))
		}
		out = mustCall(t, d, run.ID, "vibe_kill", map[string]any{"worker_id": "w3"})
		if !strings.Contains(out, "killed") {
			t.Fatalf("vibe_kill = %q", out)
		}
		out = mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w3", "timeout_seconds": 10})
		if !strings.Contains(out, "killed") || strings.Contains(out, "never") {
			t.Fatalf("after kill: %q", out)
		}
		if _, err := call(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w99"}); err == nil {
			t.Fatal("vibe_wait on an unknown worker succeeded")
		}
	})

	t.Run("failed worker", func(t *testing.T) {
		mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "echo partial; echo broken >&2; exit 3", "label": "fails", "tier": "good"})
		_, err := call(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w4"})
		if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "broken") {
			t.Fatalf("vibe_wait on a failing worker: %v", err)
		}
	})

	t.Run("worker token is scoped to its run", func(t *testing.T) {
		other, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-elsewhere"})
		if err != nil {
			t.Fatal(err)
		}
		probe := `code() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SANDBOXD_TOKEN" "$@"; }
echo "own-tools=$(code "$SANDBOXD_URL/v1/runs/$SANDBOXD_RUN/tools")"
echo "own-read=$(code -X POST -d '{"path":"pkg/app.py"}' "$SANDBOXD_URL/v1/runs/$SANDBOXD_RUN/tools/read")"
echo "other-run=$(code -X POST -d '{"path":"x"}' "$SANDBOXD_URL/v1/runs/` + other.ID + `/tools/read")"
echo "parent-run=$(code "$SANDBOXD_URL/v1/runs/` + run.ID + `/tools")"
echo "sandboxes=$(code "$SANDBOXD_URL/v1/sandboxes")"
echo "new-run=$(code -X POST -d '{"conversation":"conv-elsewhere"}' "$SANDBOXD_URL/v1/runs")"
echo "questions=$(code "$SANDBOXD_URL/v1/spaces/s1/questions")"
echo "delete-own=$(code -X DELETE "$SANDBOXD_URL/v1/runs/$SANDBOXD_RUN")"
`
		mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": probe, "label": "probe", "tier": "good"})
		out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w5"})
		for _, want := range []string{"own-tools=200", "own-read=200", "other-run=404", "parent-run=404", "sandboxes=401", "new-run=401", "questions=401", "delete-own=401"} {
			if !strings.Contains(out, want) {
				t.Fatalf("probe result %q lacks %s", out, want)
			}
		}
	})

	t.Run("bounded per run", func(t *testing.T) {
		for i := 6; i <= 8; i++ {
			mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "true", "label": fmt.Sprint("n", i), "tier": "good"})
		}
		_, err := call(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "true", "label": "one too many", "tier": "good"})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("ninth worker: %v", err)
		}
	})

	t.Run("workers die with their run", func(t *testing.T) {
		r2, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe", Vibe: true})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, d, r2.ID, "vibe_spawn", map[string]any{"brief": "echo $$ > sleeper.pid; sleep 300", "label": "orphan?", "tier": "good"})
		waitFor(t, 20*time.Second, "the worker wrote its pid", func() error {
			_, err := call(t, d, run.ID, "read", map[string]any{"path": "sleeper.pid"})
			return err
		})
		var child string
		runs, _ := c.Runs(ctx(t))
		for _, r := range runs {
			if r.Parent == r2.ID {
				child = r.ID
			}
		}
		if err := c.DeleteRun(ctx(t), r2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Tools(ctx(t), child); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("the child run outlived its parent: %v", err)
		}
		waitFor(t, 20*time.Second, "the worker process is gone", func() error {
			out := mustCall(t, d, run.ID, "shell", map[string]any{"command": `kill -0 "$(cat sleeper.pid)" 2>/dev/null && echo alive || echo gone`})
			if !strings.Contains(out, "gone") {
				return errNotYet
			}
			return nil
		})
	})

	t.Run("workers die with the sandbox", func(t *testing.T) {
		r3, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe", Vibe: true})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, d, r3.ID, "vibe_spawn", map[string]any{"brief": "echo up; sleep 300", "label": "long", "tier": "good"})
		if out := mustCall(t, d, r3.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 1}); !strings.Contains(out, "still running") {
			t.Fatalf("before the sandbox went: %q", out)
		}
		if err := c.DeleteSandbox(ctx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		_, err = call(t, d, r3.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 60})
		if err == nil || !strings.Contains(err.Error(), "failed") {
			t.Fatalf("after the sandbox was removed: %v, want failed", err)
		}
	})
}

// TestWorkerCallsAreGated shows a worker's tool calls are calls of its own
// child run: in an "ask" run, the worker's write raises a permission card
// naming the child run, and goes through only once allowed.
func TestWorkerCallsAreGated(t *testing.T) {
	d := vibeDaemon(t)
	c := d.Client
	sb, err := c.CreateSandbox(ctx(t), createReq("host", "conv-gated"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(ctx(t), sb.ID) })
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-gated", Vibe: true, Approval: "ask", Space: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := human(t, c, "gate")
	brief := `curl -s -X POST -H "Authorization: Bearer $SANDBOXD_TOKEN" -d '{"path":"from-worker.txt","content":"written by w1"}' "$SANDBOXD_URL/v1/runs/$SANDBOXD_RUN/tools/write"`
	mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": brief, "label": "writer", "tier": "good"})
	q := nextCard(t, events)
	if q.Kind != "permission" || q.Run == run.ID || !strings.Contains(q.Context, "from-worker.txt") {
		t.Fatalf("card = %+v; want a permission card of the worker's child run", q)
	}
	runs, err := c.Runs(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(runs, func(r api.RunSummary) bool { return r.ID == q.Run && r.Parent == run.ID && r.Approval == "ask" }) {
		t.Fatalf("card's run %s is not a child run of %s with approval ask: %+v", q.Run, run.ID, runs)
	}
	// The child run has the default surface but no vibe tools of its own.
	tl, err := c.Tools(ctx(t), q.Run)
	if err != nil {
		t.Fatal(err)
	}
	if names := toolNames(tl); !slices.Contains(names, "write") || slices.Contains(names, "vibe_spawn") {
		t.Fatalf("child run tools %v", names)
	}
	if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1}}); err != nil {
		t.Fatal(err)
	}
	out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w1"})
	var res api.ToolResult
	if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &res) != nil || res.IsError {
		t.Fatalf("worker's write result: %q", out)
	}
	if got := mustCall(t, d, run.ID, "read", map[string]any{"path": "from-worker.txt"}); !strings.Contains(got, "written by w1") {
		t.Fatalf("read = %q", got)
	}
}

// TestVibeWorkerInDockerSandbox runs the shipped example worker inside a
// Docker sandbox without networking: it reaches sandboxd only through the
// relay the worker manager starts inside the sandbox.
func TestVibeWorkerInDockerSandbox(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the Docker case")
	}
	script, err := os.ReadFile("../examples/workers/grep-worker.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	os.WriteFile(cfgPath, []byte("workers:\n  fast: {command: [python3, /workspace/.workers/grep-worker.py]}\n"), 0o600)
	d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfgPath)
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-vibe-docker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe-docker", Vibe: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".workers/grep-worker.py", "content": string(script)})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "src/main.py", "content": "print(NEEDLE_DOCKER)\n"})
	mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "NEEDLE_DOCKER", "label": "docker search", "tier": "fast"})
	out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 120})
	t.Logf("worker in the docker sandbox: %s", out)
	if !strings.Contains(out, "done") || !strings.Contains(out, "main.py") {
		t.Fatalf("vibe_wait = %q", out)
	}
}

// TestShutdownEndsWorkers: stopping sandboxd kills its workers at once and
// ends a vibe_wait in flight, rather than waiting for the deadline.
func TestShutdownEndsWorkers(t *testing.T) {
	d := vibeDaemon(t)
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-vibe-stop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe-stop", Vibe: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "echo $$ > long.pid; sleep 300", "label": "long", "tier": "good"})
	waitFor(t, 20*time.Second, "the worker wrote its pid", func() error {
		_, err := call(t, d, run.ID, "read", map[string]any{"path": "long.pid"})
		return err
	})
	pidText := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat long.pid"})
	tc := callAsync(d, d.Client, run.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 600})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	d.stop()
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("stopping took %v with a worker running", took)
	}
	if out, _ := tc.wait(t); !strings.Contains(out, "killed") {
		t.Fatalf("vibe_wait in flight returned %q, want killed", out)
	}
	var pid int
	for _, f := range strings.Fields(pidText) {
		if n, err := fmt.Sscan(f, &pid); n == 1 && err == nil && pid > 1 {
			break
		}
	}
	if pid > 1 {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Fatalf("worker process %d still runs after sandboxd stopped", pid)
		}
	}
	// The sandbox's agent outlives a stopped sandboxd by design: start it
	// again on the same data dir so the cleanup can delete the sandbox.
	d.start()
}

// TestVibeWorkerInBareSandbox: the relay is the agent's own, so a worker
// reaches sandboxd from an image with neither python3 nor curl (the bare
// Debian base): here a bash worker speaks HTTP over /dev/tcp.
func TestVibeWorkerInBareSandbox(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the Docker case")
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	os.WriteFile(cfgPath, []byte("workers:\n  fast: {command: [bash, /workspace/w.sh]}\n"), 0o600)
	d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfgPath)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "conv-vibe-bare", Image: "sandboxd-base:bookworm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vibe-bare", Vibe: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := call(t, d, run.ID, "shell", map[string]any{"command": "command -v python3 curl || echo bare"}); err != nil || !strings.Contains(out, "--- stdout ---\nbare\n") {
		t.Fatalf("the base image is expected to lack python3 and curl: %q, %v", out, err)
	}
	worker := `port=${SANDBOXD_URL##*:}
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'GET /v1/runs/%s/tools HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n' "$SANDBOXD_RUN" "$SANDBOXD_TOKEN" >&3
status=$(head -n 1 <&3 | tr -d '\r')
echo "sandboxd answered: $status"
`
	mustCall(t, d, run.ID, "write", map[string]any{"path": "w.sh", "content": worker})
	mustCall(t, d, run.ID, "vibe_spawn", map[string]any{"brief": "ping", "label": "bare", "tier": "fast"})
	out := mustCall(t, d, run.ID, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 60})
	if !strings.Contains(out, "done") || !strings.Contains(out, "sandboxd answered: HTTP/1.") || !strings.Contains(out, " 200 OK") {
		t.Fatalf("vibe_wait = %q, want the worker's 200 from sandboxd", out)
	}
}
