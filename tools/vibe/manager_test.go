package vibe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

type fakeRuns struct {
	mu   sync.Mutex // guards n and made
	n    int
	made []tools.Run
}

func (f *fakeRuns) Create(_ context.Context, r tools.Run) (tools.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	r.ID = fmt.Sprintf("child%d", f.n)
	f.made = append(f.made, r)
	return r, nil
}

type fakeTokens struct {
	mu   sync.Mutex // guards live
	live map[string]string
}

func (f *fakeTokens) Issue(tenant, run string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[run] = "tok-" + run
	return f.live[run], nil
}

func (f *fakeTokens) Revoke(run string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, run)
}

func (f *fakeTokens) has(run string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.live[run]
	return ok
}

func newTestManager(t *testing.T, max int) (*Manager, *fakeRuns, *fakeTokens) {
	runs, toks := &fakeRuns{}, &fakeTokens{live: map[string]string{}}
	m := NewManager(Config{
		Commands:  map[string][]string{TierGood: {"sh", "-c", `script=$(cat); eval "$script"`}},
		MaxPerRun: max,
		URL:       func(context.Context) string { return "http://sandboxd.test" },
		HostDir:   t.TempDir(),
	}, runs, toks)
	t.Cleanup(m.Close)
	return m, runs, toks
}

var parent = &tools.Env{Run: &tools.Run{ID: "p1", Tenant: "t", Conversation: "c", Surface: tools.SurfacePlan, Approval: "ask", Space: "s", Vibe: true}}

func TestWorkerLifecycle(t *testing.T) {
	m, runs, toks := newTestManager(t, 3)
	if got := m.Tiers(); len(got) != 1 || got[0] != TierGood {
		t.Fatalf("tiers %v", got)
	}
	id, err := m.Spawn(context.Background(), parent, `echo "$SANDBOXD_URL $SANDBOXD_RUN $SANDBOXD_TOKEN"`, "env", "")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := m.Wait(context.Background(), "p1", id, 10*time.Second)
	if st.State != StateDone || st.Result != "http://sandboxd.test child1 tok-child1" {
		t.Fatalf("status %+v", st)
	}
	if toks.has("child1") {
		t.Fatal("the token outlived the attempt")
	}
	c := runs.made[0]
	if c.Parent != "p1" || c.Surface != tools.SurfaceDefault || c.Approval != "ask" || c.Space != "s" || c.Vibe {
		t.Fatalf("child run %+v", c)
	}

	id2, _ := m.Spawn(context.Background(), parent, "echo one; sleep 30", "slow", TierGood)
	st, _ = m.Wait(context.Background(), "p1", id2, 50*time.Millisecond)
	if st.State != StateRunning {
		t.Fatalf("status %+v", st)
	}
	if err := m.Send("p1", id2, "echo two"); err != nil {
		t.Fatal(err)
	}
	// The re-run executes the whole longer brief: it sleeps again, so kill it.
	st, _ = m.Wait(context.Background(), "p1", id2, 50*time.Millisecond)
	if running, err := m.Kill("p1", id2); err != nil || !running {
		t.Fatalf("kill: %v %v", running, err)
	}
	st, _ = m.Wait(context.Background(), "p1", id2, time.Second)
	if st.State != StateKilled {
		t.Fatalf("after kill: %+v", st)
	}
	if _, err := m.Spawn(context.Background(), parent, "true", "x", "fast"); err == nil || !strings.Contains(err.Error(), "good") {
		t.Fatalf("unconfigured tier: %v", err)
	}
	id3, _ := m.Spawn(context.Background(), parent, "sleep 30", "third", "")
	if _, err := m.Spawn(context.Background(), parent, "true", "fourth", ""); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("over the bound: %v", err)
	}
	if l := m.List("p1"); len(l) != 3 || l[0].ID != "w1" || l[2].ID != id3 || l[2].State != StateRunning {
		t.Fatalf("list %+v", l)
	}
	m.EndRun("p1")
	if l := m.List("p1"); len(l) != 0 {
		t.Fatalf("workers outlived their run: %+v", l)
	}
	if _, err := m.Wait(context.Background(), "p1", id3, time.Millisecond); err == nil {
		t.Fatal("a forgotten worker is still found")
	}
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		r      attemptResult
		killed bool
		state  string
		has    string
	}{
		{attemptResult{stdout: " ok \n"}, false, StateDone, "ok"},
		{attemptResult{stdout: "half", stderr: "boom", exitCode: 2}, false, StateFailed, "exit status 2"},
		{attemptResult{err: fmt.Errorf("no such program")}, false, StateFailed, "no such program"},
		{attemptResult{canceled: true}, true, StateKilled, ""},
	} {
		st, res := outcome(c.r, c.killed)
		if st != c.state || !strings.Contains(res, c.has) {
			t.Errorf("outcome(%+v) = %s %q", c.r, st, res)
		}
	}
}
