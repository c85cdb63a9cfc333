package tools

import "encoding/json"

// Scoped is an optional capability of a Tool that is not parallel-safe: the
// files a call will change, named so that two calls changing the same file
// always share a name (write and edit use the file's base name, so two
// spellings of one path — relative, absolute, through the documented
// /workspace — still meet). The registry then queues the call only behind
// the conversation's calls that change one of those names or take the
// whole conversation (shell, eval, a structural rewrite), and never lets a
// later one of those overtake it. ok false means the reach is not known:
// the call takes the whole conversation's turn, as every non-scoped tool's
// call does.
type Scoped interface {
	Scope(env *Env, args json.RawMessage) (names []string, ok bool)
}
