package vibe

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
)

// TestWorkerInSandboxThroughRelay runs a worker through a real agent
// daemon; the worker calls "sandboxd" (here a small handler) through the
// relay, as a worker in a sandbox without networking does.
func TestWorkerInSandboxThroughRelay(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("this test's worker uses curl")
	}
	// The in-process daemon runs the relay from a built agent, as the
	// agent in a sandbox runs its own executable.
	agentBin, err := sandboxtest.BuildAgent(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client, _ := agenttest.New(t, daemon.WithSelf(agentBin))
	ws := t.TempDir()
	conn := &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: ws, Agent: client}
	var seen []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		w.Write([]byte("hello from sandboxd"))
	})
	m, _, _ := newTestManager(t, 4)
	m.cfg.Handler = func() http.Handler { return h }
	env := &tools.Env{Run: parent.Run, HasSandbox: true, Sandbox: func(context.Context) (*tools.SandboxConn, error) { return conn, nil }}

	id, err := m.Spawn(context.Background(), env, `curl -sS -H "Authorization: Bearer $SANDBOXD_TOKEN" "$SANDBOXD_URL/v1/runs/$SANDBOXD_RUN/tools"; echo; pwd`, "relay", "")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := m.Wait(context.Background(), "p1", id, 30*time.Second)
	if st.State != StateDone || !strings.Contains(st.Result, "hello from sandboxd") || !strings.Contains(st.Result, ws) {
		t.Fatalf("status %+v", st)
	}
	if len(seen) != 1 || seen[0] != "GET /v1/runs/child1/tools Bearer tok-child1" {
		t.Fatalf("requests %q", seen)
	}
}
