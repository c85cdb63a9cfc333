package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// Activity: the last output of any long-lived process and how many run.
func TestActivity(t *testing.T) {
	_, c := startPair(t)
	a, err := c.Activity(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !a.LastOutput.IsZero() || a.Running != 0 || a.At.IsZero() {
		t.Fatalf("activity before any process: %+v", a)
	}
	quiet := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "600"}})
	beforeTicks := time.Now()
	ticker := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "while :; do echo tick; sleep 0.05; done"}})
	waitOutput(t, c, ticker.ID, "tick")
	a1, err := c.Activity(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if a1.Running != 2 || a1.LastOutput.Before(beforeTicks) || a1.LastOutput.After(a1.At) {
		t.Fatalf("activity with a ticker and a quiet process: %+v (ticker started after %s)", a1, beforeTicks)
	}
	// Output moves it on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a2, err := c.Activity(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if a2.LastOutput.After(a1.LastOutput) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ticker printed for 10 s but the last output stayed at %s", a1.LastOutput)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []*proto.ProcInfo{quiet, ticker} {
		if _, err := c.ProcKill(testCtx(t), p.ID); err != nil {
			t.Fatal(err)
		}
	}
	a3, err := c.Activity(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if a3.Running != 0 || a3.LastOutput.IsZero() {
		t.Fatalf("activity once both were killed: %+v; want none running, the last output kept", a3)
	}
}

// waitOutput waits up to 10 s for process id to have printed want.
func waitOutput(t *testing.T, c *agent.Client, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, ch := range r.Chunks {
			got.Write(ch.Data)
		}
		if strings.Contains(got.String(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s printed %q in 10 s, not %q", id, got.String(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
