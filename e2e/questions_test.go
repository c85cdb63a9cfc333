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
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	qTokenA = "sbx_e2e-questions-tenant-a-token"
	qTokenB = "sbx_e2e-questions-tenant-b-token"
)

// qDaemon starts sandboxd (host backend) with two tenants, a and b; the
// harness's client is tenant a's, and the second return is tenant b's.
// extraConfig is appended to the YAML config.
func qDaemon(t *testing.T, extraConfig string) (*daemon, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	// The harness reads DATA_DIR/token: make it tenant a's token.
	if err := os.WriteFile(filepath.Join(data, "token"), []byte(qTokenA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("tenants:\n  - {name: a, token_sha256: %s}\n  - {name: b, token_sha256: %s}\nquestions:\n  heartbeat: 1s\n%s",
		api.HashToken(qTokenA), api.HashToken(qTokenB), extraConfig)
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "host", data, "--config", cfgPath)
	b, err := client.New(d.URL, qTokenB)
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// human opens a stream on space as a console would; it stays connected
// until the returned cancel is called (or the test ends).
func human(t *testing.T, c *client.Client, space string) (<-chan client.QuestionEvent, context.CancelFunc) {
	t.Helper()
	cctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := c.WatchQuestions(cctx, space)
	if err != nil {
		t.Fatalf("watch %s: %v", space, err)
	}
	return ch, cancel
}

// nextCard waits for the next new card on a stream.
func nextCard(t *testing.T, ch <-chan client.QuestionEvent) api.Question {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the question stream ended")
			}
			if ev.Type == "question" {
				return *ev.Question
			}
		case <-deadline:
			t.Fatal("no question card within 30s")
		}
	}
}

// toolCall is a call running in the background.
type toolCall struct {
	res chan api.ToolResult
	err chan error
}

func callAsync(d *daemon, c *client.Client, run, tool string, args any) *toolCall {
	raw, _ := json.Marshal(args)
	tc := &toolCall{res: make(chan api.ToolResult, 1), err: make(chan error, 1)}
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := c.CallTool(cctx, run, tool, raw)
		tc.res <- r
		tc.err <- err
	}()
	return tc
}

// wait returns the call's text and whether it was is_error.
func (tc *toolCall) wait(t *testing.T) (string, bool) {
	t.Helper()
	select {
	case r := <-tc.res:
		if err := <-tc.err; err != nil {
			t.Fatalf("tool call: %v", err)
		}
		return r.Text(), r.IsError
	case <-time.After(60 * time.Second):
		t.Fatal("the blocked tool call did not return within 60s")
	}
	return "", false
}

func TestAskUser(t *testing.T) {
	d, other := qDaemon(t, "")
	c := d.Client

	noSpace, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-q"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(toolNames(noSpace.Tools), "ask_user") {
		t.Fatal("ask_user is listed for a run without a space")
	}
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-q", Space: "desk"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "ask_user") {
		t.Fatalf("ask_user missing from %v", toolNames(run.Tools))
	}

	t.Run("no human fails at once", func(t *testing.T) {
		start := time.Now()
		_, err := call(t, d, run.ID, "ask_user", map[string]any{"question": "Anyone there?"})
		if err == nil || !strings.Contains(err.Error(), "no human is connected") {
			t.Fatalf("err = %v, want 'no human is connected'", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("took %v; it must fail at once", time.Since(start))
		}
	})

	events, _ := human(t, c, "desk")

	t.Run("answered with options and text", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "ask_user", map[string]any{
			"question": "Which databases should the service support?", "context": "the config loader is being rewritten",
			"options":         []map[string]string{{"label": "Postgres"}, {"label": "SQLite", "description": "for tests"}, {"label": "MySQL"}},
			"multi_select":    true,
			"allow_free_text": true,
		})
		q := nextCard(t, events)
		if q.Kind != "question" || q.Run != run.ID || q.Space != "desk" || len(q.Options) != 3 || !q.MultiSelect || !q.AllowFreeText ||
			q.Options[1].Description != "for tests" || time.Until(q.ExpiresAt) < 9*time.Minute {
			t.Fatalf("card = %+v", q)
		}
		list, err := c.Questions(ctx(t), "desk")
		if err != nil || len(list) != 1 || list[0].ID != q.ID {
			t.Fatalf("pending = %+v, %v", list, err)
		}
		// Another tenant neither sees the space nor can answer the card.
		if l, err := other.Questions(ctx(t), "desk"); err != nil || len(l) != 0 {
			t.Fatalf("tenant b sees %+v, %v", l, err)
		}
		if _, err := other.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1}}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("tenant b's answer: %v, want not_found", err)
		}
		// Invalid answers are 400 and the question stays open.
		for _, bad := range []api.Answer{{Choices: []int{4}}, {Choices: []int{0}}, {Choices: []int{2, 2}}, {}, {Skip: true, Choices: []int{1}}} {
			if _, err := c.AnswerQuestion(ctx(t), q.ID, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("answer %+v: %v, want invalid_argument", bad, err)
			}
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1, 3}, Text: "and maybe CockroachDB"}); err != nil {
			t.Fatal(err)
		}
		out, isErr := tc.wait(t)
		if isErr || !strings.Contains(out, "1. Postgres") || !strings.Contains(out, "3. MySQL") || strings.Contains(out, "SQLite") ||
			!strings.Contains(out, "and maybe CockroachDB") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{2}}); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("second answer: %v, want conflict", err)
		}
	})

	t.Run("single select refuses two choices and text", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "ask_user", map[string]any{
			"question": "Tabs or spaces?", "options": []map[string]string{{"label": "tabs"}, {"label": "spaces"}},
		})
		q := nextCard(t, events)
		for _, bad := range []api.Answer{{Choices: []int{1, 2}}, {Text: "both"}} {
			if _, err := c.AnswerQuestion(ctx(t), q.ID, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("answer %+v: %v, want invalid_argument", bad, err)
			}
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{2}}); err != nil {
			t.Fatal(err)
		}
		if out, isErr := tc.wait(t); isErr || !strings.Contains(out, "2. spaces") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
	})

	t.Run("free text only", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "ask_user", map[string]any{"question": "What should the CLI be called?"})
		q := nextCard(t, events)
		if !q.AllowFreeText || len(q.Options) != 0 {
			t.Fatalf("card = %+v", q)
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Text: "sbx"}); err != nil {
			t.Fatal(err)
		}
		if out, isErr := tc.wait(t); isErr || !strings.Contains(out, "Text: sbx") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
	})

	t.Run("skipped", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "ask_user", map[string]any{"question": "Rename the package?", "options": []map[string]string{{"label": "yes"}, {"label": "no"}}})
		q := nextCard(t, events)
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Skip: true}); err != nil {
			t.Fatal(err)
		}
		out, isErr := tc.wait(t)
		if isErr || !strings.Contains(out, "the user skipped this question: continue on a stated assumption and do not ask again") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
	})

	t.Run("expired", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "ask_user", map[string]any{"question": "Quick one?", "expires_in_s": 1})
		q := nextCard(t, events)
		out, isErr := tc.wait(t)
		if !isErr || !strings.Contains(out, "expired") || !strings.Contains(out, "continue on a stated assumption and do not ask again") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Text: "late"}); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("answer after expiry: %v, want conflict", err)
		}
	})

	t.Run("run end cancels its questions", func(t *testing.T) {
		r2, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-q", Space: "desk"})
		if err != nil {
			t.Fatal(err)
		}
		tc := callAsync(d, c, r2.ID, "ask_user", map[string]any{"question": "Still there?"})
		nextCard(t, events)
		if err := c.DeleteRun(ctx(t), r2.ID); err != nil {
			t.Fatal(err)
		}
		if out, isErr := tc.wait(t); !isErr || !strings.Contains(out, "run ended") {
			t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
		}
		if l, _ := c.Questions(ctx(t), "desk"); len(l) != 0 {
			t.Fatalf("pending after run end: %+v", l)
		}
	})
}

func TestStreamDisconnectEndsConnected(t *testing.T) {
	d, _ := qDaemon(t, "")
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-sse", Space: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	events, hangUp := human(t, d.Client, "s1")
	tc := callAsync(d, d.Client, run.ID, "ask_user", map[string]any{"question": "connected?"})
	q := nextCard(t, events)
	d.Client.AnswerQuestion(ctx(t), q.ID, api.Answer{Text: "yes"})
	if out, isErr := tc.wait(t); isErr {
		t.Fatalf("with a human connected: %q", out)
	}

	hangUp()
	// The server notices the dropped stream; from then on asking fails at once.
	waitFor(t, 10*time.Second, "the space counts as disconnected", func() error {
		_, err := call(t, d, run.ID, "ask_user", map[string]any{"question": "still connected?", "expires_in_s": 1})
		if err == nil || !strings.Contains(err.Error(), "no human is connected") {
			return fmt.Errorf("ask_user: %v", err)
		}
		return nil
	})
}

func TestApprovalGate(t *testing.T) {
	d, _ := qDaemon(t, "")
	c := d.Client
	sb, err := c.CreateSandbox(ctx(t), createReq("host", "conv-ok"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(context.Background(), sb.ID) })
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ok", Space: "ops", Approval: "ask"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no human fails closed at once", func(t *testing.T) {
		_, err := call(t, d, run.ID, "write", map[string]any{"path": "a.txt", "content": "x"})
		if err == nil || !strings.Contains(err.Error(), "no human is connected") {
			t.Fatalf("write without a human: %v", err)
		}
		if _, err := call(t, d, run.ID, "read", map[string]any{"path": "a.txt"}); err == nil {
			t.Fatal("the refused write happened anyway")
		}
	})

	events, _ := human(t, c, "ops")

	t.Run("read level never asks", func(t *testing.T) {
		if _, err := call(t, d, run.ID, "read", map[string]any{"path": "missing.txt"}); err == nil || strings.Contains(err.Error(), "denied") {
			t.Fatalf("read of a missing file: %v", err)
		}
		if l, _ := c.Questions(ctx(t), "ops"); len(l) != 0 {
			t.Fatalf("a read call asked: %+v", l)
		}
	})
	t.Run("allow once", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "write", map[string]any{"path": "once.txt", "content": "first"})
		q := nextCard(t, events)
		if q.Kind != "permission" || q.Run != run.ID || len(q.Options) != 3 || q.Options[0].Label != "Allow once" ||
			q.Options[1].Label != "Allow for this run" || q.Options[2].Label != "Deny" || q.AllowFreeText || q.MultiSelect ||
			!strings.Contains(q.Question, "write") || !strings.Contains(q.Context, "once.txt") || !strings.Contains(q.Context, run.ID) {
			t.Fatalf("permission card = %+v", q)
		}
		if _, err := c.AnswerQuestion(ctx(t), q.ID, api.Answer{Text: "ok"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("free text on a permission card: %v, want invalid_argument", err)
		}
		c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1}})
		if out, isErr := tc.wait(t); isErr {
			t.Fatalf("allowed write: %q", out)
		}
		// Once means once: the next write asks again.
		tc = callAsync(d, c, run.ID, "write", map[string]any{"path": "once.txt", "content": "second"})
		q = nextCard(t, events)
		c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{3}})
		out, isErr := tc.wait(t)
		if !isErr || !strings.Contains(out, "denied by the user") {
			t.Fatalf("denied write = %q (is_error %v)", out, isErr)
		}
		if got := mustCall(t, d, run.ID, "read", map[string]any{"path": "once.txt"}); !strings.Contains(got, "first") || strings.Contains(got, "second") {
			t.Fatalf("after allow then deny the file reads %q", got)
		}
	})

	t.Run("allow for this run", func(t *testing.T) {
		tc := callAsync(d, c, run.ID, "edit", map[string]any{"path": "once.txt", "old": "first", "new": "edited"})
		q := nextCard(t, events)
		c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{2}})
		if out, isErr := tc.wait(t); isErr {
			t.Fatalf("allowed edit: %q", out)
		}
		// Remembered for edit in this run: no card, it just runs.
		mustCall(t, d, run.ID, "edit", map[string]any{"path": "once.txt", "old": "edited", "new": "edited twice"})
		if l, _ := c.Questions(ctx(t), "ops"); len(l) != 0 {
			t.Fatalf("a remembered tool asked again: %+v", l)
		}
		// Only for that tool: write still asks.
		tc = callAsync(d, c, run.ID, "write", map[string]any{"path": "b.txt", "content": "b"})
		q = nextCard(t, events)
		if !strings.Contains(q.Question, "write") {
			t.Fatalf("card = %+v", q)
		}
		c.AnswerQuestion(ctx(t), q.ID, api.Answer{Skip: true})
		if out, isErr := tc.wait(t); !isErr || !strings.Contains(out, "denied by the user") {
			t.Fatalf("skipped permission = %q (is_error %v)", out, isErr)
		}
		// And only for that run.
		r2, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ok", Space: "ops", Approval: "ask"})
		if err != nil {
			t.Fatal(err)
		}
		tc = callAsync(d, c, r2.ID, "edit", map[string]any{"path": "once.txt", "old": "edited twice", "new": "x"})
		q = nextCard(t, events)
		if q.Run != r2.ID {
			t.Fatalf("card = %+v", q)
		}
		c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{3}})
		tc.wait(t)
	})

	t.Run("plan run never asked", func(t *testing.T) {
		plan, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ok", Space: "ops", Approval: "ask", Surface: "plan"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range plan.Tools {
			if s.Level != "read" {
				t.Fatalf("plan run lists %s (%s)", s.Name, s.Level)
			}
		}
		if _, err := c.CallTool(ctx(t), plan.ID, "write", json.RawMessage(`{"path":"p.txt","content":"p"}`)); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("write in a plan run: %v, want not_found", err)
		}
		if out := mustCall(t, d, plan.ID, "read", map[string]any{"path": "once.txt"}); !strings.Contains(out, "edited twice") {
			t.Fatalf("read = %q", out)
		}
		if l, _ := c.Questions(ctx(t), "ops"); len(l) != 0 {
			t.Fatalf("a plan run asked: %+v", l)
		}
	})
}

// TestRestartExpiresPendingQuestions: when sandboxd stops, a call blocked
// on a question returns "expired" at once, the console's stream ends, and
// the stop does not wait for the shutdown deadline; after the restart no
// question is left pending.
func TestRestartExpiresPendingQuestions(t *testing.T) {
	d, _ := qDaemon(t, "")
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-restart", Space: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := human(t, d.Client, "s1")
	tc := callAsync(d, d.Client, run.ID, "ask_user", map[string]any{"question": "Deploy now?"})
	nextCard(t, events)

	start := time.Now()
	d.stop()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("stopping took %v with a question pending; it must not wait for the shutdown deadline", took)
	}
	out, isErr := tc.wait(t)
	if !isErr || !strings.Contains(out, "expired") || !strings.Contains(out, "continue on a stated assumption") {
		t.Fatalf("the blocked call returned %q (is_error %v), want expired", out, isErr)
	}
	d.start()
	if l, err := d.Client.Questions(ctx(t), "s1"); err != nil || len(l) != 0 {
		t.Fatalf("after restart: %+v, %v", l, err)
	}
}

// TestEvalBridgeIsGated: a write made from inside an eval cell with
// tool("write", ...) raises its own permission card, like a direct call.
func TestEvalBridgeIsGated(t *testing.T) {
	d, _ := qDaemon(t, "")
	c := d.Client
	sb, err := c.CreateSandbox(ctx(t), createReq("host", "conv-eval-gate"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(context.Background(), sb.ID) })
	run, err := c.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-eval-gate", Space: "ev", Approval: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "eval") {
		t.Skip("eval is not wired in this build")
	}
	events, _ := human(t, c, "ev")
	tc := callAsync(d, c, run.ID, "eval", map[string]any{
		"code": `r = tool("write", {"path": "from-eval.txt", "content": "bridged"}); print("wrote")`, "description": "write a file through the bridge"})
	q := nextCard(t, events)
	if !strings.Contains(q.Question, "eval") {
		t.Fatalf("first card %+v, want eval's", q)
	}
	c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1}})
	q = nextCard(t, events)
	if q.Kind != "permission" || !strings.Contains(q.Question, "write") || !strings.Contains(q.Context, "from-eval.txt") {
		t.Fatalf("bridged write card %+v", q)
	}
	c.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{3}})
	out, isErr := tc.wait(t)
	if !strings.Contains(out, "denied by the user") {
		t.Fatalf("eval = %q (is_error %v), want the bridged write denied", out, isErr)
	}
	if _, err := call(t, d, run.ID, "read", map[string]any{"path": "from-eval.txt"}); err == nil {
		t.Fatal("the denied bridged write happened")
	}
}
