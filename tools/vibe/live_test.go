package vibe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/tools"
)

// gateSink records what it is shown and creates the gate file once it saw
// "first", which the worker waits for before it goes on.
type gateSink struct {
	gate string
	mu   sync.Mutex // guards got
	got  []string
}

func (g *gateSink) Output(stream, text string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, stream+":"+text)
	if strings.Contains(text, "first") {
		os.WriteFile(g.gate, nil, 0o644)
	}
}

// TestWaitStreamsWorkerOutput: a vibe_wait whose caller streams shows the
// worker's output while it waits; the worker prints its second line only
// after its first was shown, so the first was shown while it ran.
func TestWaitStreamsWorkerOutput(t *testing.T) {
	t.Run("host", func(t *testing.T) { testWaitStreams(t, parent) })
	t.Run("sandbox agent", func(t *testing.T) {
		client, _ := agenttest.New(t)
		conn := &tools.SandboxConn{ID: "sb1", Backend: "test", Workspace: t.TempDir(), Agent: client}
		testWaitStreams(t, &tools.Env{Run: parent.Run, HasSandbox: true, Sandbox: func(context.Context) (*tools.SandboxConn, error) { return conn, nil }})
	})
}

func testWaitStreams(t *testing.T, env *tools.Env) {
	m, _, _ := newTestManager(t, 3)
	dir := t.TempDir()
	start, gate := filepath.Join(dir, "start"), filepath.Join(dir, "gate")
	id, err := m.Spawn(context.Background(), env,
		`while [ ! -e '`+start+`' ]; do sleep 0.05; done; echo first; while [ ! -e '`+gate+`' ]; do sleep 0.05; done; echo oops >&2; echo second`, "gated", "")
	if err != nil {
		t.Fatal(err)
	}
	sink := &gateSink{gate: gate}
	type waited struct {
		st  Status
		err error
	}
	done := make(chan waited, 1)
	go func() {
		st, err := m.Wait(tools.WithOutputSink(context.Background(), sink), "p1", id, 20*time.Second)
		done <- waited{st, err}
	}()
	// The worker starts printing once the wait watches it.
	for watching := false; !watching; time.Sleep(10 * time.Millisecond) {
		m.mu.Lock()
		w := m.workers[key("p1", id)]
		m.mu.Unlock()
		w.live.mu.Lock()
		watching = len(w.live.sinks) > 0
		w.live.mu.Unlock()
	}
	os.WriteFile(start, nil, 0o644)
	wr := <-done
	st, err := wr.st, wr.err
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	got := strings.Join(sink.got, "|")
	sink.mu.Unlock()
	if st.State != StateDone || !strings.HasPrefix(got, "stdout:first\n") || !strings.Contains(got, "stderr:oops\n") || !strings.Contains(got, "stdout:second\n") {
		t.Fatalf("state %s, shown %q", st.State, got)
	}
	// A plain wait (no sink) is what it was.
	if st, _ := m.Wait(context.Background(), "p1", id, time.Second); st.Result != "first\nsecond" {
		t.Fatalf("result %q", st.Result)
	}
}
