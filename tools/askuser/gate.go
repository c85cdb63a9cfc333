package askuser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
)

// The permission card's options, in this order (numbered 1 to 3).
const (
	AllowOnce   = "Allow once"
	AllowForRun = "Allow for this run"
	Deny        = "Deny"
)

// ApprovalAsk is the run approval policy that consults the gate.
const ApprovalAsk = "ask"

// Caps on how much of a call's arguments a permission card shows.
const (
	maxArgValue = 300
	maxArgsText = 2000
)

// Gate is the approval gate (DESIGN.md §4 intro): for a run with approval
// "ask", every write or exec call first puts a permission card on the
// run's space and waits. With nobody connected the call fails at once
// (closed). "Allow for this run" is remembered per (run, tool) until the
// run ends (Forget). It starts no goroutines.
type Gate struct {
	port Port

	mu      sync.Mutex                 // guards allowed
	allowed map[string]map[string]bool // run id -> tool names allowed for the run
}

var _ tools.Gate = (*Gate)(nil)

// NewGate returns the gate over port.
func NewGate(port Port) *Gate { return &Gate{port: port, allowed: map[string]map[string]bool{}} }

// Forget drops what the run was allowed (call it when the run ends).
func (g *Gate) Forget(runID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.allowed, runID)
}

// Check implements tools.Gate.
func (g *Gate) Check(ctx context.Context, env *tools.Env, spec tools.Spec, args json.RawMessage) *tools.Result {
	if env == nil || env.Run == nil || env.Run.Approval != ApprovalAsk || spec.Level == tools.LevelRead {
		return nil
	}
	run := env.Run
	g.mu.Lock()
	ok := g.allowed[run.ID][spec.Name]
	g.mu.Unlock()
	if ok {
		return nil
	}
	if run.Space == "" {
		r := tools.Error(fmt.Sprintf("the %s call was not run: this run asks for approval of write and exec calls but has no space where a human could give it; create the run with a space, or with approval \"auto\"", spec.Name))
		return &r
	}
	q := questions.Question{
		Space:    run.Space,
		Run:      run.ID,
		Kind:     questions.KindPermission,
		Question: fmt.Sprintf("Allow %s (%s level) in conversation %s?", spec.Name, spec.Level, run.Conversation),
		Context:  fmt.Sprintf("Run %s wants to call %s with:\n%s", run.ID, spec.Name, SummarizeArgs(args)),
		Options: []questions.Option{
			{Label: AllowOnce, Description: "Run this one call."},
			{Label: AllowForRun, Description: fmt.Sprintf("Run it, and every later %s call of this run, without asking.", spec.Name)},
			{Label: Deny, Description: "Do not run it; the agent is told you refused."},
		},
	}
	_, res, err := g.port.Ask(ctx, run.Tenant, q, 0)
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		tools.NoteApproval(ctx, tools.ApprovalNoHuman)
		r := tools.Error(fmt.Sprintf("the %s call was not run: it needs a human's approval and no human is connected to space %q to give it, so it was refused; do not retry it until someone is connected, and say what you would have done", spec.Name, run.Space))
		return &r
	}
	if err != nil {
		tools.NoteApproval(ctx, tools.ApprovalFailed)
		r := tools.Error(fmt.Sprintf("the %s call was not run: it needs a human's approval and %s", spec.Name, lowerFirst(failText(ctx, err))))
		return &r
	}
	switch res.Status {
	case questions.StatusAnswered:
		switch {
		case has(res.Choices, 1):
			tools.NoteApproval(ctx, tools.ApprovalAllowOnce)
			return nil
		case has(res.Choices, 2):
			tools.NoteApproval(ctx, tools.ApprovalAllowForRun)
			g.mu.Lock()
			if g.allowed[run.ID] == nil {
				g.allowed[run.ID] = map[string]bool{}
			}
			g.allowed[run.ID][spec.Name] = true
			g.mu.Unlock()
			return nil
		}
		tools.NoteApproval(ctx, tools.ApprovalDenied)
		r := tools.Error(fmt.Sprintf("denied by the user: the %s call was not run; do not retry it, choose another way or ask the user what they want", spec.Name))
		return &r
	case questions.StatusSkipped:
		tools.NoteApproval(ctx, tools.ApprovalSkipped)
		r := tools.Error(fmt.Sprintf("denied by the user: the permission question for %s was skipped, so the call was not run", spec.Name))
		return &r
	case questions.StatusExpired:
		tools.NoteApproval(ctx, tools.ApprovalExpired)
		r := tools.Error(fmt.Sprintf("the %s call was not run: nobody answered its permission question before it expired; %s", spec.Name, SkipInstruction))
		return &r
	}
	tools.NoteApproval(ctx, tools.ApprovalWithdrawn)
	r := tools.Error(fmt.Sprintf("the %s call was not run: its permission question was withdrawn because the run ended", spec.Name))
	return &r
}

func failText(ctx context.Context, err error) string {
	res, _ := askFailed(ctx, err)
	if len(res.Content) == 0 {
		return err.Error()
	}
	return res.Content[0].Text
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func has(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// SummarizeArgs renders a call's arguments for a person: one "key: value"
// line per argument in key order, long values cut in the middle.
func SummarizeArgs(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || len(m) == 0 {
		return "(no arguments)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := string(m[k])
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			v = s
		}
		if len(v) > maxArgValue {
			v = strings.ToValidUTF8(fmt.Sprintf("%s … (%d bytes left out) … %s", v[:maxArgValue/2], len(v)-maxArgValue, v[len(v)-maxArgValue/2:]), "")
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
		if b.Len() > maxArgsText {
			return strings.ToValidUTF8(b.String()[:maxArgsText], "") + "\n… (more arguments left out)"
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
