package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/changeset"
)

type editTool struct{ c *config }

func (t *editTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "edit",
		Description: "Replace text in an existing file of the sandbox's workspace. old must match the file exactly, " +
			"whitespace and indentation included (read the file first and copy the text); it must occur once unless " +
			"replace_all is true, so include enough surrounding lines to make it unique. If the file changed since this " +
			"call read it, nothing is written. Paths are relative to the run's working directory, or absolute inside the workspace.",
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path":        {"type": "string", "minLength": 1, "description": "File to edit: relative to the working directory, or absolute inside the workspace."},
    "old":         {"type": "string", "minLength": 1, "description": "Exact text to replace, as it appears in the file."},
    "new":         {"type": "string", "description": "Text to put in its place (may be empty to delete)."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old instead of requiring exactly one (default false)."}
  },
  "required": ["path", "old", "new"],
  "additionalProperties": false
}`),
	}
}

func (t *editTool) Available(env *tools.Env) bool { return available(env) }

type editArgs struct {
	Path       string `json:"path"`
	Old        string `json:"old"`
	New        string `json:"new"`
	ReplaceAll bool   `json:"replace_all"`
}

// Scope lets calls that change other files of the conversation go side by
// side with this one (tools.Scoped).
func (t *editTool) Scope(_ *tools.Env, raw json.RawMessage) ([]string, bool) { return pathScope(raw) }

var _ tools.Scoped = (*editTool)(nil)

func (t *editTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a editArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	if a.Old == a.New {
		return tools.Error("old and new are identical, so the edit would change nothing; give the replacement text in new"), nil
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	abs, msg := resolve(env, conn, "path", a.Path)
	if msg != "" {
		return tools.Error(msg), nil
	}
	fctx, cancel := t.c.fileCtx(ctx)
	defer cancel()
	cs := changeset.New(conn.Agent, conn.Workspace, changeset.Limits{FileBytes: t.c.maxFileBytes})
	file, err := cs.Load(fctx, abs)
	if big := (*changeset.TooLargeError)(nil); errors.As(err, &big) {
		return tools.Error(fmt.Sprintf("%s has %d bytes, more than the %d bytes edit can handle; change it with shell (e.g. sed)", abs, big.Size, t.c.maxFileBytes)), nil
	}
	if err != nil {
		return t.c.failFile(ctx, fctx, err, "the edit of "+abs, "nothing was written; retry, or look at the file with shell")
	}
	if isBinary(file.Text()) {
		return tools.Error(fmt.Sprintf("%s is a binary file; edit changes text files only", abs)), nil
	}
	out, summary, msg := replace(file.Text(), a)
	if msg != "" {
		return tools.Error(fmt.Sprintf("%s: %s", abs, msg)), nil
	}
	file.Put(out)
	if t.c.beforeWrite != nil {
		t.c.beforeWrite()
	}
	if err := cs.Commit(fctx); err != nil {
		return t.c.failFile(ctx, fctx, err, "the edit of "+abs, "the file holds either its old content or the edited one; read it before retrying")
	}
	return afterWrite(ctx, env, conn, tools.Text(fmt.Sprintf("edited %s: %s", abs, summary)), []string{abs}), nil
}

// replace applies an edit to text. It returns the new text and a summary,
// or an error message saying why the edit cannot be made.
func replace(text string, a editArgs) (string, string, string) {
	old, repl := a.Old, a.New
	n := strings.Count(text, old)
	if n == 0 && strings.Contains(text, "\r\n") && !strings.Contains(old, "\r") {
		// The file has CRLF endings that read does not show; match what
		// the model saw and keep the file's own line endings.
		old = strings.ReplaceAll(old, "\n", "\r\n")
		repl = strings.ReplaceAll(strings.ReplaceAll(repl, "\r\n", "\n"), "\n", "\r\n")
		n = strings.Count(text, old)
	}
	switch {
	case n == 0:
		return "", "", notFound(text, a.Old)
	case n > 1 && !a.ReplaceAll:
		return "", "", fmt.Sprintf("old occurs %d times (at lines %s); include more surrounding text to make it unique, or set replace_all to replace all of them",
			n, lineList(occurrenceLines(text, old)))
	}
	lines := occurrenceLines(text, old)
	out := strings.ReplaceAll(text, old, repl)
	if n == 1 {
		return out, fmt.Sprintf("replaced 1 occurrence at line %d", lines[0]), ""
	}
	return out, fmt.Sprintf("replaced %d occurrences at lines %s", n, lineList(lines)), ""
}

// notFound explains a missing old, pointing at a near miss when the text is
// there with other indentation or spacing.
func notFound(text, old string) string {
	base := "old was not found in the file; read the file again and copy the text exactly, whitespace and indentation included"
	want := squash(old)
	if want == "" {
		return base
	}
	lines := strings.Split(text, "\n")
	k := len(strings.Split(strings.TrimRight(old, "\n"), "\n"))
	if len(lines)*k > 4_000_000 {
		return base // too big to scan for a hint
	}
	for i := 0; i+k <= len(lines); i++ {
		if squash(strings.Join(lines[i:i+k], "\n")) == want {
			return fmt.Sprintf("old was not found exactly, but the same text with different whitespace is at line %d; copy it exactly as the file has it (read the file to see its indentation)", i+1)
		}
	}
	return base
}

// squash drops all whitespace, for near-miss detection only.
func squash(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// occurrenceLines returns the 1-based line of each non-overlapping occurrence.
func occurrenceLines(text, sub string) []int {
	var out []int
	line, pos := 1, 0
	for {
		i := strings.Index(text[pos:], sub)
		if i < 0 {
			return out
		}
		line += strings.Count(text[pos:pos+i], "\n")
		out = append(out, line)
		line += strings.Count(sub, "\n")
		pos += i + len(sub)
	}
}

func lineList(lines []int) string {
	const show = 20
	parts := make([]string, 0, min(len(lines), show))
	for i, l := range lines {
		if i == show {
			return strings.Join(parts, ", ") + fmt.Sprintf(" and %d more", len(lines)-show)
		}
		parts = append(parts, fmt.Sprint(l))
	}
	return strings.Join(parts, ", ")
}
