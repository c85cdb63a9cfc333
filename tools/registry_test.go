package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// fakeTool is a scriptable tool for registry tests.
type fakeTool struct {
	spec      Spec
	available func(*Env) bool
	call      func(ctx context.Context, env *Env, args json.RawMessage) (Result, error)
	calls     int
	mu        sync.Mutex // guards calls
}

func (f *fakeTool) Spec() Spec { return f.spec }

func (f *fakeTool) Available(env *Env) bool {
	if f.available == nil {
		return true
	}
	return f.available(env)
}

func (f *fakeTool) Call(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.call == nil {
		return Text("ok " + string(args)), nil
	}
	return f.call(ctx, env, args)
}

func (f *fakeTool) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func newFake(name string, level Level, parallel bool) *fakeTool {
	return &fakeTool{spec: Spec{
		Name: name, Description: name + " tool", Level: level, ParallelSafe: parallel,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"],"additionalProperties":false}`),
	}}
}

type record struct {
	tool    string
	level   Level
	outcome string
}

type recorder struct {
	mu   sync.Mutex // guards recs
	recs []record
}

func (r *recorder) ObserveToolCall(tool string, level Level, outcome string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, record{tool, level, outcome})
}

func (r *recorder) last() record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		return record{}
	}
	return r.recs[len(r.recs)-1]
}

func envFor(surface string, sandbox bool) *Env {
	return &Env{Run: &Run{ID: "r1", Tenant: "t1", Conversation: "c1", Surface: surface}, HasSandbox: sandbox}
}

func names(specs []Spec) string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestVisiblePerSurface(t *testing.T) {
	r := NewRegistry()
	needsSandbox := func(e *Env) bool { return e.HasSandbox }
	for _, f := range []*fakeTool{
		newFake("read", LevelRead, true), newFake("write", LevelWrite, false),
		newFake("shell", LevelExec, false), newFake("ask_user", LevelRead, true),
	} {
		if f.spec.Name != "ask_user" {
			f.available = needsSandbox
		}
		r.Register(f)
	}
	cases := []struct {
		surface string
		sandbox bool
		want    string
	}{
		{"default", true, "read,write,shell,ask_user"},
		{"", true, "read,write,shell,ask_user"},
		{"plan", true, "read,ask_user"},
		{"readonly", true, "read,ask_user"},
		{"bogus", true, "read,ask_user"},
		{"default", false, "ask_user"},
		{"plan", false, "ask_user"},
	}
	for _, c := range cases {
		if got := names(r.Visible(envFor(c.surface, c.sandbox))); got != c.want {
			t.Errorf("surface %q sandbox %v: visible %q, want %q", c.surface, c.sandbox, got, c.want)
		}
	}
}

func TestHiddenToolIsNotFound(t *testing.T) {
	r := NewRegistry()
	w := newFake("write", LevelWrite, true)
	r.Register(w)
	sb := newFake("needs_sandbox", LevelRead, true)
	sb.available = func(e *Env) bool { return e.HasSandbox }
	r.Register(sb)
	for _, c := range []struct {
		env  *Env
		name string
	}{
		{envFor("plan", true), "write"},
		{envFor("readonly", true), "write"},
		{envFor("default", false), "needs_sandbox"},
		{envFor("default", true), "no_such_tool"},
	} {
		_, err := r.Call(context.Background(), c.env, c.name, json.RawMessage(`{"path":"a"}`))
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("call %s on %q: err %v, want NotFound", c.name, c.env.Run.Surface, err)
		}
	}
	if w.count() != 0 || sb.count() != 0 {
		t.Fatalf("hidden tools were called: write %d, needs_sandbox %d", w.count(), sb.count())
	}
	if _, err := r.Call(context.Background(), envFor("default", true), "write", json.RawMessage(`{"path":"a"}`)); err != nil {
		t.Fatalf("visible call failed: %v", err)
	}
}

func TestValidationBeforeTool(t *testing.T) {
	rec := &recorder{}
	r := NewRegistry(WithObserver(rec))
	f := newFake("read", LevelRead, true)
	r.Register(f)
	cases := []struct{ args, want string }{
		{`{"path":"a","n":"ten"}`, `argument "n" must be an integer, got the string "ten"`},
		{`{"n":1}`, `missing required argument "path"`},
		{`{"path":"a","pth":"b"}`, `unknown argument "pth" (known: path, n)`},
		{`[]`, `arguments must be a JSON object, got an array`},
		{`{"path":`, `arguments are not valid JSON`},
		{``, `missing required argument "path"`}, // empty body means {}
	}
	for _, c := range cases {
		res, err := r.Call(context.Background(), envFor("default", true), "read", json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("%s: Go error %v, want an is_error result", c.args, err)
		}
		if !res.IsError || len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, c.want) {
			t.Errorf("%s: result %+v, want is_error %q", c.args, res, c.want)
		}
		if got := rec.last(); got != (record{"read", LevelRead, OutcomeInvalidArguments}) {
			t.Errorf("%s: observed %+v", c.args, got)
		}
	}
	if f.count() != 0 {
		t.Fatalf("tool saw invalid arguments %d times", f.count())
	}
	res, err := r.Call(context.Background(), envFor("default", true), "read", json.RawMessage(`{"path":"a","n":2}`))
	if err != nil || res.IsError || res.Content[0].Text != `ok {"path":"a","n":2}` {
		t.Fatalf("valid call: %+v %v", res, err)
	}
	if got := rec.last(); got.outcome != OutcomeOK {
		t.Fatalf("observed %+v", got)
	}
}

func TestEmptyBodyIsEmptyObject(t *testing.T) {
	r := NewRegistry()
	f := &fakeTool{spec: Spec{Name: "list", Level: LevelRead, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}}
	r.Register(f)
	for _, body := range []string{"", "  \n"} {
		res, err := r.Call(context.Background(), envFor("default", true), "list", json.RawMessage(body))
		if err != nil || res.IsError || res.Content[0].Text != "ok {}" {
			t.Errorf("body %q: %+v %v", body, res, err)
		}
	}
}

func TestToolErrorsAndPanics(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{}
	r := NewRegistry(WithObserver(rec), WithLogger(slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))))
	boom := newFake("boom", LevelExec, false)
	boom.call = func(context.Context, *Env, json.RawMessage) (Result, error) { panic("index out of range") }
	fails := newFake("fails", LevelRead, true)
	fails.call = func(context.Context, *Env, json.RawMessage) (Result, error) {
		return Result{}, errors.New("agent pipe closed")
	}
	modelErr := newFake("model_err", LevelRead, true)
	modelErr.call = func(context.Context, *Env, json.RawMessage) (Result, error) { return Error("no such file"), nil }
	r.Register(boom)
	r.Register(fails)
	r.Register(modelErr)
	env := envFor("default", true)

	res, err := r.Call(context.Background(), env, "boom", json.RawMessage(`{"path":"a"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].Text, "internal error") || !strings.Contains(res.Content[0].Text, "index out of range") {
		t.Fatalf("panic: %+v %v", res, err)
	}
	if rec.last() != (record{"boom", LevelExec, OutcomeFailure}) {
		t.Fatalf("panic observed as %+v", rec.last())
	}
	if !strings.Contains(logs.String(), "tool panicked") || !strings.Contains(logs.String(), "registry_test.go") {
		t.Fatalf("panic not logged with a stack: %s", logs.String())
	}
	// The serial queue must have been released by the panicking call.
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Call(context.Background(), env, "boom", json.RawMessage(`{"path":"a"}`))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("queue stayed locked after a panic")
	}

	res, err = r.Call(context.Background(), env, "fails", json.RawMessage(`{"path":"a"}`))
	if err != nil || !res.IsError || res.Content[0].Text != "internal error: agent pipe closed" {
		t.Fatalf("go error: %+v %v", res, err)
	}
	if rec.last().outcome != OutcomeFailure || !strings.Contains(logs.String(), "agent pipe closed") {
		t.Fatalf("go error not observed/logged: %+v", rec.last())
	}

	res, err = r.Call(context.Background(), env, "model_err", json.RawMessage(`{"path":"a"}`))
	if err != nil || !res.IsError || res.Content[0].Text != "no such file" || rec.last().outcome != OutcomeToolError {
		t.Fatalf("tool error: %+v %v %+v", res, err, rec.last())
	}
}

// TestSerialFIFO queues many callers behind a held call and checks that
// they run one at a time in the order they arrived.
func TestSerialFIFO(t *testing.T) {
	r := NewRegistry()
	var mu sync.Mutex // guards order, running, overlap
	var order []int
	running, overlap := 0, false
	gate := make(chan struct{})
	slow := newFake("edit", LevelWrite, false)
	slow.call = func(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
		var a struct{ N int }
		json.Unmarshal(args, &a)
		mu.Lock()
		running++
		if running > 1 {
			overlap = true
		}
		order = append(order, a.N)
		mu.Unlock()
		if a.N == 0 {
			<-gate
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return Text("done"), nil
	}
	r.Register(slow)
	env := envFor("default", true)
	const n = 30
	var wg sync.WaitGroup
	call := func(i int) {
		defer wg.Done()
		res, err := r.Call(context.Background(), env, "edit", json.RawMessage(fmt.Sprintf(`{"path":"a","n":%d}`, i)))
		if err != nil || res.IsError {
			t.Errorf("call %d: %+v %v", i, res, err)
		}
	}
	wg.Add(1)
	go call(0)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 1 })
	key := serialKey(env)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go call(i)
		// Arrival order is made explicit: each caller is queued before the next starts.
		waitFor(t, func() bool { return r.serial.queued(key) == i })
	}
	close(gate)
	wg.Wait()
	if overlap {
		t.Fatal("two non-parallel-safe calls ran at the same time")
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("calls ran in order %v, want arrival order", order)
		}
	}
	if r.serial.queued(key) != 0 || len(r.serial.lines) != 0 {
		t.Fatalf("queue not cleaned up: %d lines", len(r.serial.lines))
	}
}

func TestSerialIsPerConversation(t *testing.T) {
	r := NewRegistry()
	gate := make(chan struct{})
	hold := newFake("edit", LevelWrite, false)
	hold.call = func(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
		if env.Run.Tenant == "t1" && env.Run.Conversation == "c1" {
			<-gate
		}
		return Text("done"), nil
	}
	r.Register(hold)
	par := newFake("read", LevelRead, true)
	r.Register(par)
	defer close(gate)
	go r.Call(context.Background(), envFor("default", true), "edit", json.RawMessage(`{"path":"a"}`))
	waitFor(t, func() bool { return hold.count() == 1 })

	other := &Env{Run: &Run{ID: "r2", Tenant: "t1", Conversation: "c2"}}
	otherTenant := &Env{Run: &Run{ID: "r3", Tenant: "t2", Conversation: "c1"}}
	for _, env := range []*Env{other, otherTenant} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := r.Call(ctx, env, "edit", json.RawMessage(`{"path":"a"}`)); err != nil {
			t.Fatalf("conversation %s/%s blocked by another: %v", env.Run.Tenant, env.Run.Conversation, err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Call(ctx, envFor("default", true), "read", json.RawMessage(`{"path":"a"}`)); err != nil {
		t.Fatalf("parallel-safe tool was queued: %v", err)
	}
}

func TestCancelWhileQueued(t *testing.T) {
	rec := &recorder{}
	r := NewRegistry(WithObserver(rec))
	gate := make(chan struct{})
	var mu sync.Mutex // guards order
	var order []int
	tool := newFake("shell", LevelExec, false)
	tool.call = func(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
		var a struct{ N int }
		json.Unmarshal(args, &a)
		mu.Lock()
		order = append(order, a.N)
		mu.Unlock()
		if a.N == 0 {
			<-gate
		}
		return Text("done"), nil
	}
	r.Register(tool)
	env := envFor("default", true)
	key := serialKey(env)
	var wg sync.WaitGroup
	start := func(ctx context.Context, i int, errs chan<- error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Call(ctx, env, "shell", json.RawMessage(fmt.Sprintf(`{"path":"a","n":%d}`, i)))
			errs <- err
		}()
	}
	errs := make(chan error, 4)
	start(context.Background(), 0, errs)
	waitFor(t, func() bool { return tool.count() == 1 })
	start(context.Background(), 1, errs)
	waitFor(t, func() bool { return r.serial.queued(key) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	start(ctx, 2, errs)
	waitFor(t, func() bool { return r.serial.queued(key) == 2 })
	start(context.Background(), 3, errs)
	waitFor(t, func() bool { return r.serial.queued(key) == 3 })

	cancel()
	err := <-errs
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("canceled waiter: err %v", err)
	}
	if rec.last() != (record{"shell", LevelExec, OutcomeCanceled}) {
		t.Fatalf("observed %+v", rec.last())
	}
	if q := r.serial.queued(key); q != 2 {
		t.Fatalf("queue has %d waiters after a cancel, want 2", q)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
	}
	if fmt.Sprint(order) != "[0 1 3]" {
		t.Fatalf("order %v, want [0 1 3] (the canceled call never runs)", order)
	}
}

func TestCancelRaceKeepsQueueWorking(t *testing.T) {
	// Many waiters canceled at random moments must never wedge or skip the line.
	s := newSerializer()
	for round := 0; round < 200; round++ {
		rel, err := s.acquire(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() {
			r, err := s.acquire(ctx, "k")
			if err == nil {
				r()
			}
			got <- err
		}()
		if round%2 == 0 {
			waitFor(t, func() bool { return s.queued("k") == 1 })
		}
		go cancel()
		rel()
		<-got
		ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		r2, err := s.acquire(ctx2, "k")
		cancel2()
		if err != nil {
			t.Fatalf("round %d: queue wedged: %v", round, err)
		}
		r2()
	}
	if len(s.lines) != 0 {
		t.Fatalf("%d lines left", len(s.lines))
	}
}

func TestRegisterPanics(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"duplicate": func(r *Registry) {
			r.Register(newFake("a", LevelRead, true))
			r.Register(newFake("a", LevelRead, true))
		},
		"bad schema": func(r *Registry) {
			t := newFake("a", LevelRead, true)
			t.spec.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"tpye":"string"}}}`)
			r.Register(t)
		},
		"bad level": func(r *Registry) { r.Register(newFake("a", "admin", true)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f(NewRegistry())
		}()
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex // guards w
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestNestedCallRunsInsideTheTurn: a non-parallel-safe tool that calls the
// registry again for its own conversation (eval's tool() bridge) does not
// queue behind itself, while an outside call still waits its turn.
func TestNestedCallRunsInsideTheTurn(t *testing.T) {
	r := NewRegistry()
	inner := newFake("edit", LevelWrite, false)
	r.Register(inner)
	release := make(chan struct{})
	outer := newFake("eval", LevelExec, false)
	outer.call = func(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
		res, err := r.Call(ctx, env, "edit", json.RawMessage(`{"path":"nested"}`))
		if err != nil {
			return Result{}, err
		}
		<-release
		return Text("outer saw: " + res.Content[0].Text), nil
	}
	r.Register(outer)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		res, err := r.Call(ctx, envFor("default", true), "eval", json.RawMessage(`{"path":"x"}`))
		if err != nil {
			t.Errorf("outer call: %v", err)
		}
		done <- res
	}()
	waitFor(t, func() bool { return inner.count() == 1 })

	// An outside call of the same conversation waits for the outer one.
	outside := make(chan struct{})
	go func() {
		r.Call(ctx, envFor("default", true), "edit", json.RawMessage(`{"path":"outside"}`))
		close(outside)
	}()
	select {
	case <-outside:
		t.Fatal("an outside call ran while the conversation's turn was held")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	res := <-done
	if got := res.Content[0].Text; !strings.Contains(got, "nested") {
		t.Fatalf("outer result %q lacks the nested call's answer", got)
	}
	select {
	case <-outside:
	case <-ctx.Done():
		t.Fatal("the outside call never got its turn after the outer call ended")
	}
}

// Result.Text is what a reader sees: text blocks joined, images left out.
func TestResultText(t *testing.T) {
	r := Result{Content: []Block{{Type: "text", Text: "a"}, {Type: "image", MimeType: "image/png", Data: "AAAA"}, {Type: "text", Text: "b"}}}
	if got := r.Text(); got != "a\nb" {
		t.Errorf("Text() = %q, want \"a\\nb\"", got)
	}
	if got := (Result{}).Text(); got != "" {
		t.Errorf("Text() of an empty result = %q", got)
	}
}
