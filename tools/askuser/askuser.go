// Package askuser is the human in the loop as tools see it: the ask_user
// tool (DESIGN.md §4 "ask_user") and the approval gate that puts a
// permission card in front of every write or exec call of an "ask" run.
// Both stand on the question port (package questions).
package askuser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
)

// Port is what these tools need of the question port.
type Port interface {
	Ask(ctx context.Context, tenant string, q questions.Question, expiry time.Duration) (questions.Question, questions.Resolution, error)
	MaxExpiry() time.Duration
}

var _ Port = (*questions.Port)(nil)

// SkipInstruction is what a skipped or expired question tells the model.
const SkipInstruction = "continue on a stated assumption and do not ask again"

// Tool is ask_user.
type Tool struct{ port Port }

var _ tools.Tool = (*Tool)(nil)

// New returns ask_user over port.
func New(port Port) *Tool { return &Tool{port: port} }

func (t *Tool) Spec() tools.Spec {
	maxS := int(t.port.MaxExpiry() / time.Second)
	return tools.Spec{
		Name: "ask_user",
		Description: "Ask the human operator a question and wait for the answer. This is the ONLY way to ask the operator " +
			"anything: never ask in a chat message instead, that ends your turn. The question appears as a numbered card " +
			"in the run's space; give options (numbered from 1) when the choices are known, allow_free_text when a typed " +
			"answer is welcome, multi_select when several options may be picked. The call blocks until the human answers, " +
			"skips, or the question expires (default 10 minutes). The answer names the chosen options (number and label) " +
			"and/or the typed text. A skip is not an error: continue on a stated assumption and do not ask again; expiry " +
			"means the same. With nobody connected to the space the call fails at once: then decide yourself and say what " +
			"you assumed. Ask only what you cannot find out with your other tools, one clear question at a time.",
		Level:        tools.LevelRead,
		ParallelSafe: true,
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "question": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The question, in one or two sentences."},
    "context": {"type": "string", "maxLength": %d, "description": "What the human needs to know to answer: what you found, what is at stake."},
    "options": {"type": "array", "maxItems": %d, "description": "The choices, numbered from 1 in this order.", "items": {
      "type": "object",
      "properties": {
        "label": {"type": "string", "minLength": 1, "maxLength": %d, "description": "A short label."},
        "description": {"type": "string", "description": "What picking it means."}
      },
      "required": ["label"],
      "additionalProperties": false
    }},
    "allow_free_text": {"type": "boolean", "description": "Whether the human may type an answer (always true without options)."},
    "multi_select": {"type": "boolean", "description": "Whether several options may be chosen."},
    "expires_in_s": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Seconds before the question expires (default 600)."}
  },
  "required": ["question"],
  "additionalProperties": false
}`, questions.MaxQuestionBytes, questions.MaxContextBytes, questions.MaxOptions, questions.MaxLabelBytes, maxS)),
	}
}

// Available: the port is wired (this tool exists) and the run has a space.
func (t *Tool) Available(env *tools.Env) bool {
	return env != nil && env.Run != nil && env.Run.Space != ""
}

// Why (tools.Explainer): questions need a space where people answer them.
func (t *Tool) Why(env *tools.Env) string {
	if t.Available(env) {
		return ""
	}
	return `the run has no space for its questions to go to; create the run with "space": "<name>" (people answer in the web console at /ui/)`
}

func (t *Tool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		Question      string             `json:"question"`
		Context       string             `json:"context"`
		Options       []questions.Option `json:"options"`
		AllowFreeText bool               `json:"allow_free_text"`
		MultiSelect   bool               `json:"multi_select"`
		ExpiresInS    int                `json:"expires_in_s"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	q := questions.Question{
		Space: env.Run.Space, Run: env.Run.ID, Kind: questions.KindQuestion,
		Question: a.Question, Context: a.Context, Options: a.Options,
		AllowFreeText: a.AllowFreeText, MultiSelect: a.MultiSelect,
	}
	q, r, err := t.port.Ask(ctx, env.Run.Tenant, q, time.Duration(a.ExpiresInS)*time.Second)
	if res, done := askFailed(ctx, err); done {
		return res, nil
	}
	switch r.Status {
	case questions.StatusAnswered:
		var b strings.Builder
		b.WriteString("The user answered.")
		if chosen := r.Chosen(q); len(chosen) > 0 {
			b.WriteString("\nChosen:\n" + strings.Join(chosen, "\n"))
		}
		if r.Text != "" {
			b.WriteString("\nText: " + r.Text)
		}
		return tools.Text(b.String()), nil
	case questions.StatusSkipped:
		return tools.Text("the user skipped this question: " + SkipInstruction), nil
	case questions.StatusExpired:
		return tools.Error("the question expired without an answer: " + SkipInstruction), nil
	}
	return tools.Error("the question was withdrawn because the run ended; do not wait for an answer"), nil
}

// askFailed turns an Ask error into the model's error message.
func askFailed(ctx context.Context, err error) (tools.Result, bool) {
	switch {
	case err == nil:
		return tools.Result{}, false
	case ctx.Err() != nil:
		return tools.Error("the question was withdrawn: the call was canceled before anyone answered"), true
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return tools.Error(err.Error()), true
	}
	return tools.Error("the question could not be asked: " + err.Error()), true
}
