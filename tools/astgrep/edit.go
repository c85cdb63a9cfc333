package astgrep

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
	"github.com/sandboxd/sandboxd/tools/changeset"
)

type editTool struct{ c *config }

func (t *editTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "ast_edit",
		Description: "Prepare a structural rewrite: every match of pattern (as in ast_grep: " + patternHelp + ") is replaced by rewrite, " +
			"with the captures substituted ($$$NAME gives the whole run's source; multi-line captures are re-indented to where they land). " +
			"Overlapping matches: the outermost wins. NOTHING is written: the result is an edit_id, counts and a diff preview; " +
			"call resolve with that edit_id and action \"accept\" to write all files at once (refused if any file changed meanwhile), or \"discard\". " +
			"Prepared edits expire after a while and belong to this run.",
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern":  {"type": "string", "minLength": 1, "description": "Code fragment to find, with metavariables ($NAME, $$$NAME, $_)."},
    "rewrite":  {"type": "string", "description": "Replacement code; $NAME and $$$NAME are replaced by what they captured. May be empty to delete the matches."},
    "path":     {"type": "string", "description": "File or directory: relative to the working directory, or absolute inside the workspace (default: the whole workspace)."},
    "language": {"type": "string", "description": ` + jsonString(grammarHelp(t.c.eng.Registry())) + `}
  },
  "required": ["pattern", "rewrite"],
  "additionalProperties": false
}`),
	}
}

func (t *editTool) Available(env *tools.Env) bool { return available(env) }

type editArgs struct {
	Pattern  string `json:"pattern"`
	Rewrite  string `json:"rewrite"`
	Path     string `json:"path"`
	Language string `json:"language"`
}

func (t *editTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a editArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	out, res, err := t.c.search(ctx, env, a.Pattern, a.Path, a.Language)
	if out == nil {
		return tools.Deref(res), err
	}
	names := out.pattern.Names()
	for _, v := range engine.TemplateVars(a.Rewrite) {
		if v != "" && !slices.Contains(names, v) {
			return tools.Error(fmt.Sprintf("rewrite uses $%s, which the pattern does not capture; use only %s", v, listVars(names))), nil
		}
	}
	if len(out.found) == 0 {
		return tools.Error(fmt.Sprintf("the pattern matches nothing in %s, so there is nothing to rewrite; check it with ast_grep", display(env, out.conn, out.target.abs))), nil
	}
	// Re-read the matched files: the contents a change is computed from
	// and later compared against must be the same bytes.
	paths := make([]string, len(out.found))
	for i, f := range out.found {
		paths[i] = out.src.abs(f.File.Path)
	}
	data, err := out.conn.Agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: out.conn.Workspace, Paths: paths, MaxBytesEach: t.c.maxFileSize, MaxTotal: 256 << 20})
	if err != nil {
		return fail(err)
	}
	p := &prepared{runID: runID(env), sandbox: out.conn.ID, language: out.pattern.Lang.Name, conn: out.conn}
	var diff strings.Builder
	for i, f := range out.found {
		if i >= len(data.Files) || data.Files[i].Skipped != "" {
			return tools.Error(fmt.Sprintf("%s could not be read again while preparing the edit; retry", paths[i])), nil
		}
		src := data.Files[i].Data
		ms := f.Matches
		if fd := data.Files[i]; fd.Size != f.File.Size || !fd.ModTime.Equal(f.File.ModTime) {
			// Changed since the walk: match the content just read.
			t2, err := t.c.eng.Parse(ctx, out.pattern.Lang, src)
			if err != nil {
				return fail(err)
			}
			ms = out.pattern.FindAll(t2)
		}
		edits := engine.PlanEdits(src, ms, a.Rewrite)
		newData := engine.ApplyEdits(src, edits)
		if string(newData) == string(src) {
			continue
		}
		abs := out.src.abs(f.File.Path)
		p.files = append(p.files, preparedFile{abs: abs, oldSHA: changeset.Hash(src), newData: newData, edits: len(edits)})
		p.count += len(edits)
		p.bytes += int64(len(newData))
		if p.bytes > t.c.store.maxBytes {
			return tools.Error(fmt.Sprintf("the rewrite touches more than %d bytes of files; give a narrower path", t.c.store.maxBytes)), nil
		}
		name := display(env, out.conn, abs)
		if diff.Len() < t.c.maxPreview {
			diff.WriteString(unifiedDiff(name, src, edits))
		}
	}
	if len(p.files) == 0 {
		return tools.Error("every match already reads as the rewrite, so nothing would change"), nil
	}
	// The id is made before the store holds p, so the copy can be written
	// (and p.saved set) while no other call sees p.
	p.id, p.created = newID(), t.c.store.now()
	// A copy in the sandbox lets another replica resolve the edit after
	// the conversation moves; without it only this replica can.
	t.c.saveCopy(ctx, out.conn, p)
	if old := t.c.store.put(p); old != nil && old.sandbox == out.conn.ID {
		t.c.removeCopy(ctx, out.conn, old.id)
	}
	preview := diff.String()
	if len(preview) > t.c.maxPreview {
		preview = preview[:t.c.maxPreview] + "\n… (diff preview cut; the prepared edit is complete)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "edit_id: %s\nPrepared %d %s in %d %s; nothing is written yet. Call resolve with this edit_id and action \"accept\" to write all of it, or \"discard\". It expires in %s.\n\n",
		p.id, p.count, plural(p.count, "replacement", "replacements"), len(p.files), plural(len(p.files), "file", "files"), t.c.store.ttl)
	b.WriteString(preview)
	if note := out.target.skippedNote(); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	return tools.Text(strings.TrimRight(b.String(), "\n")), nil
}

func listVars(names []string) string {
	if len(names) == 0 {
		return "literal text (the pattern has no metavariables)"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "$" + n
	}
	return strings.Join(out, ", ")
}

func runID(env *tools.Env) string {
	if env.Run == nil {
		return ""
	}
	return env.Run.ID
}
