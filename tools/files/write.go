package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

type writeTool struct{ c *config }

func (t *writeTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "write",
		Description: "Write a whole file in the sandbox's workspace, replacing it if it exists and creating missing parent " +
			"directories. To change part of an existing file prefer edit or apply_patch. Paths are relative to the run's " +
			"working directory, or absolute inside the workspace; nothing outside the workspace can be written.",
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path":    {"type": "string", "minLength": 1, "description": "File to write: relative to the working directory, or absolute inside the workspace."},
    "content": {"type": "string", "description": "The complete new contents of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	}
}

func (t *writeTool) Available(env *tools.Env) bool { return available(env) }

// Scope lets calls that change other files of the conversation go side by
// side with this one (tools.Scoped).
func (t *writeTool) Scope(_ *tools.Env, raw json.RawMessage) ([]string, bool) { return pathScope(raw) }

var _ tools.Scoped = (*writeTool)(nil)

func (t *writeTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	abs, msg := resolve(env, conn, "path", a.Path)
	if msg != "" {
		return tools.Error(msg), nil
	}
	if strings.HasSuffix(a.Path, "/") {
		return tools.Error(fmt.Sprintf("path %q ends in /, so it names a directory; give a file name", a.Path)), nil
	}
	fctx, cancel := t.c.fileCtx(ctx)
	defer cancel()
	err = conn.Agent.WriteFiles(fctx, &proto.WriteFilesRequest{Root: conn.Workspace, Files: []proto.WriteFile{
		{Path: abs, Data: []byte(a.Content), MkdirAll: true},
	}})
	if err != nil {
		return t.c.failFile(ctx, fctx, err, "the write of "+abs, "the file holds either its old content or the new one; read it before retrying")
	}
	res2 := tools.Text(fmt.Sprintf("wrote %d bytes (%d lines) to %s", len(a.Content), countLines(a.Content), abs))
	return afterWrite(ctx, env, conn, res2, []string{abs}), nil
}

// countLines counts lines as an editor shows them: a last line without a
// newline still counts.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
