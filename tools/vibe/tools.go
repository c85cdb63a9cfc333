// Package vibe is the background workers (DESIGN.md §4 "vibe_*"):
// vibe_spawn, vibe_send, vibe_wait, vibe_kill and vibe_list. A worker is a
// child run executed by the command configured for its tier, in the
// conversation's sandbox (on the host where it has none); it gets its brief
// on stdin and, in its environment, SANDBOXD_URL, SANDBOXD_RUN (its child
// run) and SANDBOXD_TOKEN (valid for that child run only), so every tool it
// calls passes sandboxd's gates. Its final stdout is its result.
package vibe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Wait bounds of vibe_wait, in seconds.
const (
	defaultWaitS = 60
	maxWaitS     = 600
	// listResult is how much of a last result vibe_list shows.
	listResult = 200
)

// Tools returns the five tools over m.
func Tools(m *Manager) []tools.Tool {
	return []tools.Tool{&spawnTool{m}, &sendTool{m}, &waitTool{m}, &killTool{m}, &listTool{m}}
}

// available: only runs created with vibe: true (the manager exists only
// when workers are configured).
func available(env *tools.Env) bool { return env != nil && env.Run != nil && env.Run.Vibe }

// whyNot is the reason of all five for a run without vibe (tools.Explainer).
func whyNot(env *tools.Env) string {
	if available(env) {
		return ""
	}
	return `the run was created without "vibe": true; create a run with "vibe": true to start background workers`
}

func (t *spawnTool) Why(env *tools.Env) string { return whyNot(env) }
func (t *sendTool) Why(env *tools.Env) string  { return whyNot(env) }
func (t *waitTool) Why(env *tools.Env) string  { return whyNot(env) }
func (t *killTool) Why(env *tools.Env) string  { return whyNot(env) }
func (t *listTool) Why(env *tools.Env) string  { return whyNot(env) }

func spec(name, desc, schema string) tools.Spec {
	return tools.Spec{Name: name, Description: desc, Level: tools.LevelRead, ParallelSafe: true, InputSchema: json.RawMessage(schema)}
}

// toolErr turns a manager error into the model's error message; anything not
// classed is sandboxd's own failure.
func toolErr(err error) (tools.Result, error) {
	switch errdefs.Code(err) {
	case "invalid_argument", "not_found", "resource_exhausted", "unavailable", "failed_precondition":
		return tools.ErrorFrom(err), nil
	}
	return tools.Result{}, err
}

type spawnTool struct{ m *Manager }

func (t *spawnTool) Spec() tools.Spec {
	tiers := t.m.Tiers()
	quoted := make([]string, len(tiers))
	for i, s := range tiers {
		quoted[i] = `"` + s + `"`
	}
	return spec("vibe_spawn",
		"Start a background worker on a task and return its id at once; the worker goes on running while you do other "+
			"things. The brief is all it knows: say what to do, where, what done looks like, and what to report. Tier "+
			"\"fast\" is for mechanical work with a clear spec; \"good\" is for design, judgment, or reviewing a fast "+
			"worker's output. The worker runs in this conversation's sandbox and calls tools itself (its writes are checked "+
			"like yours). Collect its result with vibe_wait; steer it with vibe_send; stop it with vibe_kill.",
		fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "brief": {"type": "string", "minLength": 1, "description": "The task, complete and self-contained."},
    "label": {"type": "string", "minLength": 1, "maxLength": 80, "description": "A short name for lists, 2-6 words."},
    "tier":  {"type": "string", "enum": [%s], "description": "fast: mechanical work; good: judgment and review (default %s)."}
  },
  "required": ["brief", "label"],
  "additionalProperties": false
}`, strings.Join(quoted, ", "), tiers[0]))
}

func (t *spawnTool) Available(env *tools.Env) bool { return available(env) }

func (t *spawnTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct{ Brief, Label, Tier string }
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	id, err := t.m.Spawn(ctx, env, a.Brief, a.Label, a.Tier)
	if err != nil {
		return toolErr(err)
	}
	return tools.Text(fmt.Sprintf("worker %s started (%q). It runs in the background: collect its result with vibe_wait {\"worker_id\": %q}.", id, a.Label, id)), nil
}

type sendTool struct{ m *Manager }

func (t *sendTool) Spec() tools.Spec {
	return spec("vibe_send",
		"Send a worker more instructions: the message is appended to its brief and the worker runs again from the start "+
			"with the longer brief (a run still going is stopped first). Use it to correct course or to ask for a follow-up.",
		`{
  "type": "object",
  "properties": {
    "worker_id": {"type": "string", "minLength": 1, "description": "The id vibe_spawn returned, such as \"w1\"."},
    "message":   {"type": "string", "minLength": 1, "description": "What to add to the brief."}
  },
  "required": ["worker_id", "message"],
  "additionalProperties": false
}`)
}

func (t *sendTool) Available(env *tools.Env) bool { return available(env) }

func (t *sendTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		WorkerID string `json:"worker_id"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	if err := t.m.Send(env.Run.ID, a.WorkerID, a.Message); err != nil {
		return toolErr(err)
	}
	return tools.Text(fmt.Sprintf("worker %s is running again with the message appended to its brief; collect the new result with vibe_wait.", a.WorkerID)), nil
}

type waitTool struct{ m *Manager }

func (t *waitTool) Spec() tools.Spec {
	return spec("vibe_wait",
		fmt.Sprintf("Wait for a worker to finish and return its state and result (its final output). Waits at most "+
			"timeout_seconds (default %d, at most %d); if the worker is still running then, it says so — that is not an "+
			"error, wait again or do something else meanwhile.", defaultWaitS, maxWaitS),
		fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "worker_id":       {"type": "string", "minLength": 1, "description": "The id vibe_spawn returned."},
    "timeout_seconds": {"type": "integer", "minimum": 0, "maximum": %d, "description": "How long to wait (default %d)."}
  },
  "required": ["worker_id"],
  "additionalProperties": false
}`, maxWaitS, defaultWaitS))
}

func (t *waitTool) Available(env *tools.Env) bool { return available(env) }

func (t *waitTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	a := struct {
		WorkerID       string `json:"worker_id"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
	}{}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	timeout := defaultWaitS
	if a.TimeoutSeconds != nil {
		timeout = *a.TimeoutSeconds
	}
	st, err := t.m.Wait(ctx, env.Run.ID, a.WorkerID, time.Duration(timeout)*time.Second)
	if err != nil {
		return toolErr(err)
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return tools.Result{}, ctx.Err()
	}
	head := fmt.Sprintf("worker %s (%s, %s): %s after %s", st.ID, st.Label, st.Tier, st.State, st.Elapsed)
	switch st.State {
	case StateRunning:
		return tools.Text(head + "; still running — wait again later, or go on with other work."), nil
	case StateFailed:
		return tools.Error(head + "\n" + st.Result), nil
	}
	if st.Result == "" {
		return tools.Text(head + "; it printed no result."), nil
	}
	return tools.Text(head + "\nresult:\n" + st.Result), nil
}

type killTool struct{ m *Manager }

func (t *killTool) Spec() tools.Spec {
	return spec("vibe_kill",
		"Stop a worker now (its whole process tree). Its state becomes killed; vibe_send can start it again.",
		`{
  "type": "object",
  "properties": {"worker_id": {"type": "string", "minLength": 1, "description": "The id vibe_spawn returned."}},
  "required": ["worker_id"],
  "additionalProperties": false
}`)
}

func (t *killTool) Available(env *tools.Env) bool { return available(env) }

func (t *killTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		WorkerID string `json:"worker_id"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	running, err := t.m.Kill(env.Run.ID, a.WorkerID)
	if err != nil {
		return toolErr(err)
	}
	if !running {
		return tools.Text(fmt.Sprintf("worker %s was not running; nothing to stop.", a.WorkerID)), nil
	}
	return tools.Text(fmt.Sprintf("worker %s killed.", a.WorkerID)), nil
}

type listTool struct{ m *Manager }

func (t *listTool) Spec() tools.Spec {
	return spec("vibe_list", "List this run's workers: id, label, tier, state, elapsed time and the start of the last result.",
		`{"type": "object", "properties": {}, "additionalProperties": false}`)
}

func (t *listTool) Available(env *tools.Env) bool { return available(env) }

func (t *listTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	ws := t.m.List(env.Run.ID)
	if len(ws) == 0 {
		return tools.Text("this run has no workers; start one with vibe_spawn."), nil
	}
	var b strings.Builder
	for _, w := range ws {
		res := strings.Join(strings.Fields(w.Result), " ")
		if r := []rune(res); len(r) > listResult {
			res = string(r[:listResult]) + "…"
		}
		if res == "" {
			res = "-"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%s\n", w.ID, w.Label, w.Tier, w.State, w.Elapsed, res)
	}
	return tools.Text("id\tlabel\ttier\tstate\telapsed\tlast result\n" + b.String()), nil
}
