package askuser

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
)

// countTool counts the calls that got past the gate.
type countTool struct {
	name  string
	level tools.Level
	n     atomic.Int32
}

func (c *countTool) Spec() tools.Spec {
	return tools.Spec{Name: c.name, Description: c.name, Level: c.level, ParallelSafe: true}
}
func (c *countTool) Available(env *tools.Env) bool { return true }
func (c *countTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	c.n.Add(1)
	return tools.Text("ran " + c.name), nil
}

type fixture struct {
	port              *questions.Port
	reg               *tools.Registry
	gate              *Gate
	read, write, exec *countTool
	sub               *questions.Subscription
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{port: questions.New(), read: &countTool{name: "look", level: tools.LevelRead},
		write: &countTool{name: "change", level: tools.LevelWrite}, exec: &countTool{name: "run", level: tools.LevelExec}}
	f.gate = NewGate(f.port)
	f.reg = tools.NewRegistry(tools.WithGate(f.gate))
	for _, tl := range []tools.Tool{f.read, f.write, f.exec, New(f.port)} {
		f.reg.Register(tl)
	}
	f.sub, _ = f.port.Subscribe("t", "s")
	t.Cleanup(f.sub.Close)
	return f
}

func env(id, approval, space string) *tools.Env {
	return &tools.Env{Run: &tools.Run{ID: id, Tenant: "t", Conversation: "c", Surface: tools.SurfaceDefault, Approval: approval, Space: space}}
}

type result struct {
	res tools.Result
	err error
}

func (f *fixture) callAsync(e *tools.Env, name string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := f.reg.Call(context.Background(), e, name, json.RawMessage(`{}`))
		ch <- result{r, err}
	}()
	return ch
}

// answerNext answers the next card with choice (0: skip).
func (f *fixture) answerNext(t *testing.T, choice int) questions.Question {
	t.Helper()
	for {
		select {
		case ev := <-f.sub.Events():
			if ev.Type != questions.EventQuestion {
				continue
			}
			a := questions.Answer{Skip: choice == 0}
			if choice > 0 {
				a.Choices = []int{choice}
			}
			if err := f.port.Answer("t", ev.Question.ID, a); err != nil {
				t.Fatal(err)
			}
			return *ev.Question
		case <-time.After(5 * time.Second):
			t.Fatal("no card within 5s")
		}
	}
}

func got(t *testing.T, ch <-chan result) tools.Result {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.res
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return within 5s")
	}
	return tools.Result{}
}

func TestGate(t *testing.T) {
	f := newFixture(t)
	ask := env("r1", ApprovalAsk, "s")

	// Read level and auto runs never ask (nobody answers here: they would hang).
	if r := got(t, f.callAsync(ask, "look")); r.IsError {
		t.Fatalf("read call: %+v", r)
	}
	if r := got(t, f.callAsync(env("r2", "auto", "s"), "change")); r.IsError || f.write.n.Load() != 1 {
		t.Fatalf("auto run: %+v", r)
	}

	ch := f.callAsync(ask, "change")
	q := f.answerNext(t, 1)
	if q.Kind != questions.KindPermission || q.Run != "r1" || q.Options[0].Label != AllowOnce || q.Options[1].Label != AllowForRun || q.Options[2].Label != Deny {
		t.Fatalf("card %+v", q)
	}
	if r := got(t, ch); r.IsError || f.write.n.Load() != 2 {
		t.Fatalf("allow once: %+v", r)
	}
	ch = f.callAsync(ask, "run")
	f.answerNext(t, 3)
	if r := got(t, ch); !r.IsError || !strings.Contains(r.Content[0].Text, "denied by the user") || f.exec.n.Load() != 0 {
		t.Fatalf("deny: %+v", r)
	}
	ch = f.callAsync(ask, "run")
	f.answerNext(t, 2)
	got(t, ch)
	// Remembered: runs without a card (a card would block: nobody answers).
	if r := got(t, f.callAsync(ask, "run")); r.IsError || f.exec.n.Load() != 2 {
		t.Fatalf("allowed for the run: %+v", r)
	}
	f.gate.Forget("r1")
	ch = f.callAsync(ask, "run")
	f.answerNext(t, 0)
	if r := got(t, ch); !r.IsError || !strings.Contains(r.Content[0].Text, "denied by the user") {
		t.Fatalf("skip after forget: %+v", r)
	}

	// Closed stance: no human, or no space at all.
	if r := got(t, f.callAsync(env("r3", ApprovalAsk, "empty-room"), "change")); !r.IsError || !strings.Contains(r.Content[0].Text, "no human is connected") {
		t.Fatalf("no human: %+v", r)
	}
	if r := got(t, f.callAsync(env("r4", ApprovalAsk, ""), "change")); !r.IsError || !strings.Contains(r.Content[0].Text, "no space") {
		t.Fatalf("no space: %+v", r)
	}
	if f.write.n.Load() != 2 {
		t.Fatalf("refused calls ran: %d", f.write.n.Load())
	}
}

func TestSummarizeArgs(t *testing.T) {
	long := strings.Repeat("x", 5000)
	s := SummarizeArgs(json.RawMessage(`{"path":"a.go","content":"` + long + `","n":3}`))
	if !strings.Contains(s, "path: a.go") || !strings.Contains(s, "n: 3") || !strings.Contains(s, "bytes left out") || len(s) > 1000 {
		t.Fatalf("summary %q", s)
	}
	if SummarizeArgs(json.RawMessage(`{}`)) != "(no arguments)" {
		t.Fatal("empty args")
	}
}

func TestAskUserAvailability(t *testing.T) {
	tl := New(questions.New())
	if tl.Available(env("r", "auto", "")) || !tl.Available(env("r", "auto", "s")) {
		t.Fatal("ask_user must register exactly when the run has a space")
	}
	if tl.Spec().Level != tools.LevelRead {
		t.Fatal("ask_user must be read level")
	}
}
