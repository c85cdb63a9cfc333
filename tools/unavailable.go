package tools

import (
	"fmt"
	"strconv"
)

// Unavailable is a group of tools a run does not see, and why: what is
// missing and what would bring them in. Runs report it next to their tool
// list, and a call of one of these tools gets 404 with the same reason.
type Unavailable struct {
	Tools  []string `json:"tools"`
	Reason string   `json:"reason"`
}

// Explainer is implemented by a tool whose registration condition can fail
// for a run. Why returns, for a run the tool is not Available to, one clause
// saying what is missing and what to do; it must be cheap and start nothing.
type Explainer interface {
	Why(env *Env) string
}

// WhyNoSandbox is the reason of every tool that stands on the
// conversation's sandbox, for a run whose conversation has none.
func WhyNoSandbox(env *Env) string { return WhyNoSandboxAnd(env, "") }

// WhyNoSandboxAnd is WhyNoSandbox for a tool that could also have run
// elsewhere; also says why it cannot ("kernels on the host are off").
func WhyNoSandboxAnd(env *Env, also string) string {
	if HasSandbox(env) {
		return ""
	}
	conv := ""
	if env != nil && env.Run != nil {
		conv = env.Run.Conversation
	}
	if also != "" {
		also = " and " + also
	}
	return fmt.Sprintf("the conversation %s has no sandbox%s; create one with POST /v1/sandboxes {\"conversation\": %s} and these tools join this run's list (the run need not be made again)",
		strconv.Quote(conv), also, strconv.Quote(conv))
}

// Omit records a family that wiring left out (its config is off, or this
// build lacks what it stands on), so runs can say why its tools are absent.
// Like Register, call it at start-up.
func (r *Registry) Omit(reason string, names ...string) {
	r.omitted = append(r.omitted, Unavailable{Tools: names, Reason: reason})
}

// Unavailable lists the tools the run does not see, grouped by reason in
// registration order, then the families wiring left out.
func (r *Registry) Unavailable(env *Env) []Unavailable {
	var out []Unavailable
	at := map[string]int{} // reason -> index in out
	for _, e := range r.entries {
		if r.visible(env, e) {
			continue
		}
		why := r.why(env, e)
		if i, ok := at[why]; ok {
			out[i].Tools = append(out[i].Tools, e.spec.Name)
			continue
		}
		at[why] = len(out)
		out = append(out, Unavailable{Tools: []string{e.spec.Name}, Reason: why})
	}
	for _, o := range r.omitted {
		out = append(out, Unavailable{Tools: append([]string(nil), o.Tools...), Reason: o.Reason})
	}
	return out
}

// why says why a registered tool is not visible to the run.
func (r *Registry) why(env *Env, e *entry) string {
	surface := ""
	if env != nil && env.Run != nil {
		surface = env.Run.Surface
	}
	if !LevelAllowed(surface, e.spec.Level) {
		return fmt.Sprintf("the run's surface %q allows read-level tools only; create a run with surface \"default\" for %s-level tools", surface, e.spec.Level)
	}
	if x, ok := e.tool.(Explainer); ok {
		if why := x.Why(env); why != "" {
			return why
		}
	}
	return "this run does not meet the tool's registration condition (DESIGN.md §4)"
}

// omittedWhy returns the reason wiring gave for leaving name out, if it did.
func (r *Registry) omittedWhy(name string) (string, bool) {
	for _, o := range r.omitted {
		for _, n := range o.Tools {
			if n == name {
				return o.Reason, true
			}
		}
	}
	return "", false
}
