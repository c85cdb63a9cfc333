package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandboxd/sandboxd/tools"
)

type lspTool struct{ m *Manager }

var (
	_ tools.Tool = (*lspTool)(nil)
	_ tools.Tool = (*renameTool)(nil)
)

func (t *lspTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "lsp",
		Description: "Ask the project's language server (gopls, pyright, typescript-language-server, clangd, ...) running in the sandbox. " +
			"Point at code with a 1-based line and a symbol: a name exactly as it appears on that line — NEVER a column. " +
			"If the name occurs more than once on the line, add #N for the N-th occurrence (e.g. \"x#2\"). " +
			"Navigation actions (definition, type_definition, implementation, references, hover) need file, line and symbol. " +
			"diagnostics: problems in file, or file \"*\" for the whole project check. symbols: query searches the workspace, " +
			"file lists the file's outline. code_actions: fixes and refactorings offered for a line (listed, not applied). " +
			"status: which servers run for which project roots, and for each language why it cannot start. " +
			"reload: restart the server for file's project (or all). Results are path:line plus that line's text. " +
			"A server starts only inside a project (go.mod, pyproject.toml/requirements.txt/setup.py, tsconfig.json/package.json, compile_commands.json/CMakeLists.txt, ...).",
		Level:        tools.LevelRead,
		ParallelSafe: true,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["diagnostics", "definition", "type_definition", "implementation", "references", "hover", "symbols", "code_actions", "status", "reload"], "description": "What to ask."},
    "file":   {"type": "string", "minLength": 1, "description": "Source file, relative to the working directory or absolute inside the workspace; \"*\" with diagnostics checks the whole project."},
    "line":   {"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "1-based line number in file."},
    "symbol": {"type": "string", "minLength": 1, "description": "The name as written on that line (never a column); \"name#2\" picks its second occurrence on the line."},
    "query":  {"type": "string", "description": "With symbols: a workspace symbol search instead of a file outline."}
  },
  "required": ["action"],
  "additionalProperties": false
}`),
	}
}

func (t *lspTool) Available(env *tools.Env) bool { return t.m.available(env) }

// Why (tools.Explainer): supervision is on (the tool is registered), so
// only the run's workdir can be missing.
func (t *lspTool) Why(env *tools.Env) string { return t.m.why(env) }

type lspArgs struct {
	Action string  `json:"action"`
	File   string  `json:"file"`
	Line   int     `json:"line"`
	Symbol string  `json:"symbol"`
	Query  *string `json:"query"`
}

func (t *lspTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a lspArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	s, err := t.m.session(ctx, env)
	if err != nil {
		return result("", err)
	}
	var out string
	switch a.Action {
	case "definition", "type_definition", "implementation", "references", "hover":
		out, err = s.navigate(ctx, a)
	case "diagnostics":
		out, err = s.diagnostics(ctx, a)
	case "symbols":
		out, err = s.symbols(ctx, a)
	case "code_actions":
		out, err = s.codeActions(ctx, a)
	case "status":
		out, err = s.status(ctx, a)
	case "reload":
		out, err = s.reload(ctx, a)
	default:
		err = userErrorf("unknown action %q", a.Action)
	}
	return result(out, err)
}

// result turns an action's outcome into a tool result: problems the model
// can act on become is_error results, failures of sandboxd stay errors.
func result(out string, err error) (tools.Result, error) {
	if err == nil {
		return tools.Text(out), nil
	}
	var ue *userError
	if errors.As(err, &ue) {
		return tools.Error(ue.msg), nil
	}
	var re *resultError
	if errors.As(err, &re) {
		return re.res, nil
	}
	if r, ok := tools.ModelError(err); ok {
		return r, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return tools.Error(fmt.Sprintf("the language server request did not finish: %v", err)), nil
	}
	return tools.Result{}, err
}

// need checks that an action got the arguments it needs.
func need(a lspArgs, file, position bool) error {
	if file && a.File == "" {
		return userErrorf("action %q needs file", a.Action)
	}
	if position {
		if a.Line == 0 {
			return userErrorf("action %q needs line (1-based) and symbol (the name as written on that line)", a.Action)
		}
		if a.Symbol == "" {
			return userErrorf("action %q needs symbol: the name as written on line %d (positions are never guessed; there is no column argument)", a.Action, a.Line)
		}
	}
	return nil
}
