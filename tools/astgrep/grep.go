package astgrep

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

type grepTool struct{ c *config }

const patternHelp = "$NAME matches any one node, $$$NAME a run of sibling nodes (possibly empty), $_ any node without capturing; " +
	"a name used twice must match the same code both times. Layout and comments between tokens do not matter, and code inside strings or comments never matches."

func (t *grepTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "ast_grep",
		Description: "Search code by its syntax-tree shape rather than its text, with tree-sitter grammars. The pattern is a code fragment " +
			"in the files' language: " + patternHelp + " Example (Go): `fmt.Errorf($MSG, $$$ARGS)`; (Python): `open($F).read()`. " +
			"path defaults to the whole workspace; for a directory give language (" + strings.Join(t.c.eng.Registry().Names(), ", ") + "). " +
			"Respects .gitignore (the result names the directories not searched and why) and skips binary and very large files. Results are path:line, the matched code and the captures. " +
			"A pattern that does not parse is reported as unparseable, never searched silently; fix it rather than falling back to text search.",
		Level:        tools.LevelRead,
		ParallelSafe: true,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern":     {"type": "string", "minLength": 1, "description": "Code fragment with metavariables ($NAME, $$$NAME, $_), e.g. ` + "`if err != nil { return $$$ }`" + `."},
    "path":        {"type": "string", "description": "File or directory to search: relative to the working directory, or absolute inside the workspace (default: the whole workspace)."},
    "language":    {"type": "string", "description": ` + jsonString(grammarHelp(t.c.eng.Registry())) + `},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Matches to show (default 50); the rest are counted."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	}
}

func (t *grepTool) Available(env *tools.Env) bool { return available(env) }

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Language   string `json:"language"`
	MaxResults int    `json:"max_results"`
}

// searchOutcome is a finished search, shared by ast_grep and ast_edit.
type searchOutcome struct {
	conn    *tools.SandboxConn
	src     *agentSource
	target  *target
	pattern *engine.Pattern
	found   []engine.FileResult
}

// search runs the common part of ast_grep and ast_edit; a non-empty string
// is an error message for the model.
func (c *config) search(ctx context.Context, env *tools.Env, pattern, p, lang string) (*searchOutcome, *tools.Result, error) {
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return nil, res, err
	}
	abs, msg := resolvePath(env, conn, p)
	if msg != "" {
		r := tools.Error(msg)
		return nil, &r, nil
	}
	src := &agentSource{conn: conn, max: c.maxFileSize}
	tg, msg, err := c.findTarget(ctx, src, abs, lang)
	if err != nil {
		r, e := fail(err)
		return nil, &r, e
	}
	if msg != "" {
		r := tools.Error(msg)
		return nil, &r, nil
	}
	pat, err := c.eng.Compile(ctx, tg.lang, pattern)
	if err != nil {
		r, e := fail(err)
		return nil, &r, e
	}
	found, err := c.eng.Search(ctx, pat, src, tg.files)
	if err != nil {
		r, e := fail(err)
		return nil, &r, e
	}
	return &searchOutcome{conn: conn, src: src, target: tg, pattern: pat, found: found}, nil, nil
}

func (t *grepTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a grepArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	if a.MaxResults <= 0 {
		a.MaxResults = 50
	}
	out, res, err := t.c.search(ctx, env, a.Pattern, a.Path, a.Language)
	if out == nil {
		return tools.Deref(res), err
	}
	total, files := 0, len(out.found)
	for _, f := range out.found {
		total += len(f.Matches)
	}
	var b strings.Builder
	where := display(env, out.conn, out.target.abs)
	if where == out.conn.Workspace {
		where = "the workspace"
	}
	if total == 0 {
		fmt.Fprintf(&b, "No matches for the %s pattern in %s (%d %s files searched).", out.pattern.Lang.Name, where, len(out.target.files), out.pattern.Lang.Name)
		if out.target.truncated {
			fmt.Fprintf(&b, " The walk stopped at %d files; give a narrower path.", t.c.maxFiles)
		}
		if note := out.target.skippedNote(); note != "" {
			b.WriteString(" " + note)
		}
		return tools.Text(b.String()), nil
	}
	fmt.Fprintf(&b, "%d %s in %d %s (%s, %d files searched)\n", total, plural(total, "match", "matches"), files, plural(files, "file", "files"), out.pattern.Lang.Name, len(out.target.files))
	shown := 0
	for _, f := range out.found {
		name := display(env, out.conn, out.src.abs(f.File.Path))
		for _, m := range f.Matches {
			if shown == a.MaxResults {
				break
			}
			shown++
			fmt.Fprintf(&b, "\n%s:%d: %s\n", name, m.Line, clipMatch(m.Text))
			for _, c := range m.Captures {
				dollars := "$"
				if c.Multi {
					dollars = "$$$"
				}
				fmt.Fprintf(&b, "    %s%s = %s\n", dollars, c.Name, clipLine(c.Text, 160))
			}
		}
	}
	if rest := total - shown; rest > 0 {
		fmt.Fprintf(&b, "\n%d more %s not shown; narrow path or raise max_results.\n", rest, plural(rest, "match", "matches"))
	}
	if out.target.truncated {
		fmt.Fprintf(&b, "\nThe walk stopped at %d files, so some files were not searched; give a narrower path.\n", t.c.maxFiles)
	}
	if note := out.target.skippedNote(); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	return tools.Text(strings.TrimRight(b.String(), "\n")), nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clipMatch trims a match and keeps at most 6 lines of it.
func clipMatch(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 6 {
		s = strings.Join(lines[:6], "\n") + fmt.Sprintf("\n    … (%d more lines)", len(lines)-6)
	}
	return s
}

// clipLine shows a capture on one line.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
