package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/callrec"
)

func TestWhoAmINamesTheTokensTenant(t *testing.T) {
	h := newHarness(t)
	var me WhoAmI
	h.must("GET", "/v1/whoami", tokenB, "", 200, &me)
	if me.Tenant != "b" {
		t.Fatalf("whoami = %+v, want tenant b", me)
	}
	if a := h.do("GET", "/v1/whoami", "", ""); a.status != 401 {
		t.Fatalf("whoami without a token = %d, want 401", a.status)
	}
}

func TestFaviconIsServed(t *testing.T) {
	h := newHarness(t)
	a := h.do("GET", "/ui/favicon.svg", "", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "image/svg+xml") || !strings.Contains(string(a.body), "<svg") {
		t.Fatalf("favicon: %d %q %.60s", a.status, a.header.Get("Content-Type"), a.body)
	}
	if ico := h.do("GET", "/favicon.ico", "", ""); ico.status != 200 || !strings.Contains(string(ico.body), "<svg") {
		t.Fatalf("/favicon.ico does not lead to the icon: %d", ico.status)
	}
	page := h.do("GET", "/ui/", "", "")
	if !strings.Contains(string(page.body), `href="favicon.svg"`) {
		t.Fatal("the console's page does not link its favicon")
	}
}

// callsHarness is a harness whose registry records into a Recorder.
func callsHarness(t *testing.T) (*harness, *callrec.Recorder) {
	rec := callrec.New()
	h := newHarness(t, WithCalls(rec))
	h.srv.tools.(*tools.Registry).AddObserver(rec)
	return h, rec
}

func TestCallsListsTheRunsCallsForItsTenantOnly(t *testing.T) {
	if a := newHarness(t).do("GET", "/v1/runs/x/calls", tokenA, ""); a.status != 503 {
		t.Fatalf("without a recorder: %d %s", a.status, a.body)
	}
	h, _ := callsHarness(t)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{"path":"src/main.go"}`, 200, nil)
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{"bogus":1}`, 200, nil)

	var calls []callrec.Call
	h.must("GET", "/v1/runs/"+run.ID+"/calls", tokenA, "", 200, &calls)
	if len(calls) != 2 {
		t.Fatalf("calls %+v, want 2", calls)
	}
	if c := calls[0]; c.Seq != 1 || c.Tool != "peek" || c.Args != `path="src/main.go"` || c.Outcome != "ok" || c.Run != run.ID || c.StartedAt.IsZero() {
		t.Fatalf("first call %+v", c)
	}
	if calls[1].Outcome != "invalid_arguments" {
		t.Fatalf("second call %+v", calls[1])
	}
	if a := h.do("GET", "/v1/runs/"+run.ID+"/calls", tokenB, ""); a.status != 404 {
		t.Fatalf("another tenant reads the run's calls: %d %s", a.status, a.body)
	}
}

func TestCallsStreamsTheBacklogThenLiveCalls(t *testing.T) {
	h, rec := callsHarness(t)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{"path":"before"}`, 200, nil)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.http.URL+"/v1/runs/"+run.ID+"/calls", nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, ct)
	}
	events := make(chan callrec.Call, 8)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "call":
				var c callrec.Call
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c) == nil {
					events <- c
				}
			}
		}
	}()
	next := func(what string) callrec.Call {
		t.Helper()
		select {
		case c, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			return c
		case <-ctx.Done():
			t.Fatalf("no event for %s", what)
		}
		return callrec.Call{}
	}
	if c := next("the backlog"); c.Seq != 1 || c.Args != `path="before"` {
		t.Fatalf("backlog event %+v", c)
	}
	h.must("POST", "/v1/runs/"+run.ID+"/tools/peek", tokenA, `{"path":"after"}`, 200, nil)
	if c := next("the live call"); c.Seq != 2 || c.Args != `path="after"` {
		t.Fatalf("live event %+v", c)
	}
	// The run ends: its stream ends too.
	rec.Forget(run.ID)
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("an event after the run was forgotten")
		}
	case <-ctx.Done():
		t.Fatal("the stream of a forgotten run stayed open")
	}
}

// statsSandboxes is leakySandboxes with resource use.
type statsSandboxes struct {
	*leakySandboxes
	err error
}

func (f *statsSandboxes) Stats(ctx context.Context, tenant, id string) (sandbox.Stats, error) {
	if f.err != nil {
		return sandbox.Stats{}, f.err
	}
	return sandbox.Stats{CPUPercent: 12.5, MemoryBytes: 64 << 20, MemoryLimitBytes: 4 << 30, Pids: 7, ReadAt: time.Now()}, nil
}

func statsServer(t *testing.T, sb Sandboxes) *harness {
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	b, _ := ParseTenantToken("b", HashToken(tokenB))
	h := &harness{t: t}
	h.srv = New(sb, newRegistry(), NewTokenAuth(a, b))
	h.http = httptest.NewServer(h.srv)
	t.Cleanup(h.http.Close)
	return h
}

func TestSandboxStats(t *testing.T) {
	fake := &statsSandboxes{leakySandboxes: newLeaky()}
	h := statsServer(t, fake)
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)

	var st SandboxStats
	h.must("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenA, "", 200, &st)
	if !st.Available || st.MemoryBytes != 64<<20 || st.Pids != 7 || st.CPUPercent != 12.5 || st.ReadAt == nil || st.State != "running" {
		t.Fatalf("stats %+v", st)
	}
	if a := h.do("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenB, ""); a.status != 404 {
		t.Fatalf("another tenant reads the stats: %d %s", a.status, a.body)
	}

	// A backend without the capability: not available, with why.
	fake.err = errdefsNoStats()
	st = SandboxStats{}
	h.must("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenA, "", 200, &st)
	if st.Available || !strings.Contains(st.Reason, "does not report") {
		t.Fatalf("stats without the capability %+v", st)
	}
	// An engine failure is an error, not a silent blank.
	fake.err = errdefs.Unavailable("the engine does not answer")
	if a := h.do("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenA, ""); a.status != 503 {
		t.Fatalf("engine failure: %d %s", a.status, a.body)
	}

	// A stopped sandbox reports nothing, and says so.
	fake.err = nil
	fake.mu.Lock()
	in := fake.byID[sb.ID]
	in.State = sandbox.StateStopped
	fake.byID[sb.ID] = in
	fake.mu.Unlock()
	st = SandboxStats{}
	h.must("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenA, "", 200, &st)
	if st.Available || !strings.Contains(st.Reason, "stopped") {
		t.Fatalf("stats of a stopped sandbox %+v", st)
	}

	// A manager with no stats at all.
	plain := statsServer(t, newLeaky())
	plain.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1"}`, 201, &sb)
	st = SandboxStats{}
	plain.must("GET", "/v1/sandboxes/"+sb.ID+"/stats", tokenA, "", 200, &st)
	if st.Available || st.Reason == "" {
		t.Fatalf("stats from a manager without them %+v", st)
	}
}

func errdefsNoStats() error {
	return fmt.Errorf("the kubernetes backend does not report resource use: %w", sandbox.ErrNoStats)
}
