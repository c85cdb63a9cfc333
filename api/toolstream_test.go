package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// sseEv is one event as a client reads it ("" name: a comment line).
type sseEv struct {
	name, data, comment string
}

// sseReader reads events off a stream, one at a time.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &sseReader{sc: sc}
}

// next returns the next event or comment; ok is false at the end.
func (r *sseReader) next() (ev sseEv, ok bool) {
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if ev.name != "" {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			return sseEv{comment: strings.TrimSpace(line[1:])}, true
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[len("data: "):]
		}
	}
	return ev, false
}

// streamHarness is an API whose registry has the tools a test gives.
func streamHarness(t *testing.T, tl Tools, opts ...Option) (*harness, string) {
	t.Helper()
	a, _ := ParseTenantToken("a", HashToken(tokenA))
	sb := newLeaky()
	h := &harness{t: t, sb: sb}
	h.srv = New(sb, tl, NewTokenAuth(a), opts...)
	h.http = httptest.NewServer(h.srv)
	t.Cleanup(h.http.Close)
	var run Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &run)
	return h, run.ID
}

func streamPost(t *testing.T, ctx context.Context, h *harness, run, tool, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", h.http.URL+"/v1/runs/"+run+"/tools/"+tool, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func registryWith(ts ...*testTool) *tools.Registry {
	reg := tools.NewRegistry()
	for _, tt := range ts {
		if tt.spec.Level == "" {
			tt.spec.Level = tools.LevelRead
		}
		reg.Register(tt)
	}
	return reg
}

// TestStreamedCallShowsOutputWhileItRuns: the first output event arrives
// while the tool still waits (it goes on only once the test has read it),
// the result event is byte for byte a plain call's response, and a plain
// call of the same tool is unchanged.
func TestStreamedCallShowsOutputWhileItRuns(t *testing.T) {
	release := make(chan struct{})
	talk := &testTool{spec: tools.Spec{Name: "talk", Description: "talks"},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			tools.EmitOutput(ctx, tools.StreamStdout, "first\n")
			select {
			case <-release:
			case <-ctx.Done():
				return tools.Result{}, ctx.Err()
			}
			tools.EmitOutput(ctx, tools.StreamStderr, "warn\n")
			tools.EmitOutput(ctx, tools.StreamStdout, "second\n")
			return tools.Text("exit status 0\n--- stdout ---\nfirst\nsecond"), nil
		}}
	h, run := streamHarness(t, registryWith(talk))

	resp := streamPost(t, context.Background(), h, run, "talk", `{}`)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("streamed call answered %d %q", resp.StatusCode, ct)
	}
	rd := newSSEReader(resp.Body)
	ev, ok := rd.next()
	if !ok || ev.name != EventOutput || ev.data != `{"stream":"stdout","text":"first\n"}` {
		t.Fatalf("first event %+v, want the first output while the call runs", ev)
	}
	close(release) // only now may the call end
	var got []OutputEvent
	var result string
	for {
		ev, ok := rd.next()
		if !ok {
			break
		}
		switch ev.name {
		case EventOutput:
			if result != "" {
				t.Fatalf("output after the result: %s", ev.data)
			}
			var o OutputEvent
			if err := json.Unmarshal([]byte(ev.data), &o); err != nil {
				t.Fatal(err)
			}
			got = append(got, o)
		case EventResult:
			result = ev.data
		}
	}
	want := []OutputEvent{{"stderr", "warn\n"}, {"stdout", "second\n"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("later output %+v, want %+v", got, want)
	}
	plain := h.do("POST", "/v1/runs/"+run+"/tools/talk", tokenA, `{}`)
	if plain.status != 200 || plain.header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain call: %d %s", plain.status, plain.body)
	}
	if result+"\n" != string(plain.body) {
		t.Fatalf("result event %s\nplain answer %s", result, plain.body)
	}
}

// TestStreamedCallHeartbeats: a silent call gets heartbeat comments, then
// its result.
func TestStreamedCallHeartbeats(t *testing.T) {
	quiet := &testTool{spec: tools.Spec{Name: "quiet", Description: "says nothing for a while"},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			time.Sleep(300 * time.Millisecond)
			return tools.Text("done"), nil
		}}
	h, run := streamHarness(t, registryWith(quiet), WithToolStream(20*time.Millisecond, 0))
	rd := newSSEReader(streamPost(t, context.Background(), h, run, "quiet", ``).Body)
	beats, result := 0, ""
	for {
		ev, ok := rd.next()
		if !ok {
			break
		}
		if ev.comment == "heartbeat" {
			if result != "" {
				t.Fatal("a heartbeat after the result")
			}
			beats++
		}
		if ev.name == EventResult {
			result = ev.data
		}
	}
	if beats < 2 || result != `{"content":[{"type":"text","text":"done"}],"is_error":false}` {
		t.Fatalf("%d heartbeats, result %s", beats, result)
	}
}

// TestStreamedCallErrors: what fails before anything is streamed keeps its
// HTTP status; an error after the stream began is an error event carrying
// the status and the plain error body.
func TestStreamedCallErrors(t *testing.T) {
	h, run := streamHarness(t, failingTools{registryWith(), 100 * time.Millisecond}, WithToolStream(20*time.Millisecond, 0))

	if a := h.do("POST", "/v1/runs/nope/tools/talk", tokenA, ""); a.status != 404 {
		t.Fatalf("unknown run: %d", a.status)
	}
	resp := streamPost(t, context.Background(), h, "nope", "talk", `{}`)
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("streamed call of an unknown run: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp = streamPost(t, context.Background(), h, run, "talk", `[1]`)
	if resp.StatusCode != 400 {
		t.Fatalf("streamed call with a body that is no object: %d", resp.StatusCode)
	}
	resp = streamPost(t, context.Background(), h, run, "missing", `{}`)
	if resp.StatusCode != 404 {
		t.Fatalf("streamed call of a tool the run lacks: %d", resp.StatusCode)
	}

	resp = streamPost(t, context.Background(), h, run, "slowfail", `{}`)
	if resp.StatusCode != 200 {
		t.Fatalf("slowfail: %d", resp.StatusCode)
	}
	rd := newSSEReader(resp.Body)
	var last sseEv
	for {
		ev, ok := rd.next()
		if !ok {
			break
		}
		last = ev
	}
	var se StreamError
	if last.name != EventError || json.Unmarshal([]byte(last.data), &se) != nil || se.Status != 503 || se.Error.Code != "unavailable" || !strings.Contains(se.Error.Message, "busy") {
		t.Fatalf("last event %+v, want an error event with status 503", last)
	}
}

// failingTools fails a call named slowfail after a delay, with an error
// (not an is_error result), and passes everything else on.
type failingTools struct {
	*tools.Registry
	delay time.Duration
}

func (f failingTools) Call(ctx context.Context, env *tools.Env, name string, args json.RawMessage) (tools.Result, error) {
	if name == "slowfail" {
		time.Sleep(f.delay)
		return tools.Result{}, errdefs.Unavailable("the sandbox is busy; retry")
	}
	return f.Registry.Call(ctx, env, name, args)
}

// TestStreamedCallClientGoes: a client that disconnects ends the call as
// it would end a plain one (its context is cancelled), and the
// conversation's next call runs.
func TestStreamedCallClientGoes(t *testing.T) {
	ended := make(chan error, 1)
	hold := &testTool{spec: tools.Spec{Name: "hold", Description: "waits", Level: tools.LevelExec},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			tools.EmitOutput(ctx, tools.StreamStdout, "started\n")
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
				return tools.Result{}, ctx.Err()
			case <-time.After(30 * time.Second):
				ended <- nil
				return tools.Text("not cancelled"), nil
			}
		}}
	next := &testTool{spec: tools.Spec{Name: "next", Description: "answers", Level: tools.LevelExec},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			return tools.Text("next ran"), nil
		}}
	h, run := streamHarness(t, registryWith(hold, next))
	ctx, cancel := context.WithCancel(context.Background())
	rd := newSSEReader(streamPost(t, ctx, h, run, "hold", `{}`).Body)
	if ev, _ := rd.next(); ev.name != EventOutput {
		t.Fatalf("first event %+v", ev)
	}
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call ended with %v, want its context cancelled as for a plain call", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end after its client went")
	}
	if a := h.do("POST", "/v1/runs/"+run+"/tools/next", tokenA, ""); a.status != 200 || !strings.Contains(string(a.body), "next ran") {
		t.Fatalf("next call: %d %s", a.status, a.body)
	}
}

// TestStreamedCallSlowClient: a client that reads nothing while the tool
// prints 8 MiB does not hold the tool up; when it reads, the text that did
// not fit is replaced by a marker saying so, and the result follows.
func TestStreamedCallSlowClient(t *testing.T) {
	finished := make(chan struct{})
	chunk := strings.Repeat("x", 64<<10)
	loud := &testTool{spec: tools.Spec{Name: "loud", Description: "prints a lot"},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			for range 128 {
				tools.EmitOutput(ctx, tools.StreamStdout, chunk)
			}
			close(finished)
			return tools.Text("printed 8 MiB"), nil
		}}
	h, run := streamHarness(t, registryWith(loud), WithToolStream(time.Hour, 64<<20))
	resp := streamPost(t, context.Background(), h, run, "loud", `{}`)
	select {
	case <-finished: // the client has read nothing past the headers
	case <-time.After(20 * time.Second):
		t.Fatal("the tool was held up by a client that does not read")
	}
	rd := newSSEReader(resp.Body)
	shown, markers, result := 0, 0, ""
	for {
		ev, ok := rd.next()
		if !ok {
			break
		}
		switch ev.name {
		case EventOutput:
			var o OutputEvent
			json.Unmarshal([]byte(ev.data), &o)
			if strings.Contains(o.Text, "bytes of output not shown: the client read the stream too slowly") {
				markers++
			}
			shown += strings.Count(o.Text, "x")
		case EventResult:
			result = ev.data
		}
	}
	if markers == 0 || shown >= 128*len(chunk) || !strings.Contains(result, "printed 8 MiB") {
		t.Fatalf("%d of %d bytes shown, %d drop markers, result %q", shown, 128*len(chunk), markers, result)
	}
}

// TestStreamedQuickCallIsAStream: a call that ends before it printed anything
// or heartbeat still responds with the stream asked for, its result as the
// one result event.
func TestStreamedQuickCallIsAStream(t *testing.T) {
	quick := &testTool{spec: tools.Spec{Name: "quick", Description: "answers at once"},
		call: func(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
			return tools.Text("at once"), nil
		}}
	h, run := streamHarness(t, registryWith(quick))
	resp := streamPost(t, context.Background(), h, run, "quick", `{}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("quick streamed call: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := newSSEReader(resp.Body)
	var names []string
	result := ""
	for {
		ev, ok := rd.next()
		if !ok {
			break
		}
		if ev.name != "" {
			names = append(names, ev.name)
		}
		if ev.name == EventResult {
			result = ev.data
		}
	}
	if len(names) != 1 || result != `{"content":[{"type":"text","text":"at once"}],"is_error":false}` {
		t.Fatalf("events %q, result %s; want one result event", names, result)
	}
}
