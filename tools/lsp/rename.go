package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/changeset"
)

type renameTool struct{ m *Manager }

func (t *renameTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "lsp_rename",
		Description: "Rename a symbol across the whole project through its language server, applied to every file all or nothing, " +
			"then report any new diagnostics. Point at the symbol with a 1-based line and the name as written on that line — never a column; " +
			"add #N when the name occurs more than once on the line. Renaming a keyword or a name the server cannot rename is an error that says why.",
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "file":     {"type": "string", "minLength": 1, "description": "File with an occurrence of the symbol, relative to the working directory or absolute inside the workspace."},
    "line":     {"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "1-based line of that occurrence."},
    "symbol":   {"type": "string", "minLength": 1, "description": "The current name as written on that line; \"name#2\" picks its second occurrence."},
    "new_name": {"type": "string", "minLength": 1, "description": "The new name."}
  },
  "required": ["file", "line", "symbol", "new_name"],
  "additionalProperties": false
}`),
	}
}

func (t *renameTool) Available(env *tools.Env) bool { return t.m.available(env) }

// Why (tools.Explainer): as for lsp.
func (t *renameTool) Why(env *tools.Env) string { return t.m.why(env) }

func (t *renameTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Symbol  string `json:"symbol"`
		NewName string `json:"new_name"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	s, err := t.m.session(ctx, env)
	if err != nil {
		return result("", err)
	}
	tg, err := s.target(ctx, a.File)
	if err != nil {
		return result("", err)
	}
	var (
		edit *WorkspaceEdit
		old  string
		enc  string
	)
	err = s.withServer(ctx, tg, func(ctx context.Context, srv *server, doc *document) error {
		loc, err := locate(doc, s.rel(tg.abs), a.Line, a.Symbol)
		if err != nil {
			return &userError{err.Error()}
		}
		old = doc.line(loc.line)[loc.startCol:loc.endCol]
		pos := doc.position(loc.line, loc.byteCol, srv.enc)
		td := textDocumentIdentifier{URI: fileURI(tg.abs)}
		enc = srv.enc
		if srv.caps.prepareRename() {
			raw, err := srv.conn.CallRaw(ctx, "textDocument/prepareRename", textDocumentPositionParams{TextDocument: td, Position: pos})
			if err != nil {
				var ue *userError
				if e := serverError(tg.lang, "rename", err); errors.As(e, &ue) {
					return userErrorf("%q on line %d of %s cannot be renamed: %s", old, a.Line, s.rel(tg.abs), renameRefusal(tg.lang, ue.msg))
				}
				return err
			}
			if r := strings.TrimSpace(string(raw)); r == "" || r == "null" {
				return userErrorf("%q on line %d of %s cannot be renamed: %s", old, a.Line, s.rel(tg.abs), noRenamable(tg.lang))
			}
			if elsewhere, ok := preparedElsewhere(raw, pos, doc, srv.enc); ok {
				return userErrorf("%q on line %d of %s cannot be renamed: %s; the server would rename %q instead", old, a.Line, s.rel(tg.abs), noRenamable(tg.lang), elsewhere)
			}
		}
		var we WorkspaceEdit
		raw, err := srv.conn.CallRaw(ctx, "textDocument/rename", map[string]any{"textDocument": td, "position": pos, "newName": a.NewName})
		if err != nil {
			var ue *userError
			if e := serverError(tg.lang, "rename", err); errors.As(e, &ue) {
				return userErrorf("%q on line %d of %s cannot be renamed to %q: %s", old, a.Line, s.rel(tg.abs), a.NewName, renameRefusal(tg.lang, ue.msg))
			}
			return err
		}
		if r := strings.TrimSpace(string(raw)); r == "" || r == "null" {
			return userErrorf("the %s server offers no rename for %q on line %d", tg.lang.Name, old, a.Line)
		}
		if err := json.Unmarshal(raw, &we); err != nil {
			return fmt.Errorf("the server's rename edit cannot be decoded: %w", err)
		}
		edit = &we
		return nil
	})
	if err != nil {
		return result("", err)
	}
	plan, err := s.planEdit(ctx, edit, enc)
	if err != nil {
		return result("", err)
	}
	if len(plan.changed) == 0 {
		return tools.Text(fmt.Sprintf("renaming %q to %q changes nothing", old, a.NewName)), nil
	}
	if err := plan.set.Commit(ctx); err != nil {
		return result("", fmt.Errorf("the rename was not applied (no file changed): %w", err))
	}
	srv := s.sup.existing(tg.lang, tg.root)
	if srv != nil {
		for _, f := range plan.deleted {
			srv.closeDoc(f)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "renamed %q to %q: %d edit(s) in %d file(s)\n", old, a.NewName, plan.edits, len(plan.changed))
	shown := 0
	for _, c := range plan.lines {
		if shown == 50 {
			fmt.Fprintf(&b, "... %d more\n", len(plan.lines)-shown)
			break
		}
		fmt.Fprintf(&b, "%s:%d: %s\n", s.rel(c.file), c.line+1, clip(strings.TrimSpace(c.text), 200))
		shown++
	}
	for _, op := range plan.ops {
		b.WriteString(op + "\n")
	}
	res := tools.Text(strings.TrimRight(b.String(), "\n"))
	if env.AfterWrite != nil {
		res.Content = append(res.Content, env.AfterWrite(ctx, s.conn, plan.changed)...)
	}
	return res, nil
}

// editPlan is a WorkspaceEdit turned into one all-or-nothing write.
type editPlan struct {
	set     *changeset.Set
	changed []string // files written or deleted, for diagnostics
	deleted []string
	edits   int
	lines   []changedLine
	ops     []string // file operations, described
}

type changedLine struct {
	file string
	line int
	text string
}

// planEdit applies a WorkspaceEdit to the files in memory, in order, and
// returns the write; any file outside the workspace, overlapping edits or
// an impossible file operation fails the whole edit before anything is written.
func (s *session) planEdit(ctx context.Context, we *WorkspaceEdit, enc string) (*editPlan, error) {
	var steps []documentChange
	if len(we.DocumentChanges) > 0 {
		for _, raw := range we.DocumentChanges {
			var dc documentChange
			if err := json.Unmarshal(raw, &dc); err != nil {
				return nil, fmt.Errorf("the server's edit cannot be decoded: %w", err)
			}
			steps = append(steps, dc)
		}
	} else {
		uris := make([]string, 0, len(we.Changes))
		for u := range we.Changes {
			uris = append(uris, u)
		}
		sort.Strings(uris)
		for _, u := range uris {
			steps = append(steps, documentChange{TextDocument: &versionedTextDocumentIdentifier{URI: u}, Edits: we.Changes[u]})
		}
	}
	var need []string
	for _, st := range steps {
		for _, u := range []string{st.URI, st.OldURI, st.NewURI} {
			if u != "" {
				need = append(need, uriPath(u))
			}
		}
		if st.TextDocument != nil {
			need = append(need, uriPath(st.TextDocument.URI))
		}
	}
	for _, f := range need {
		if !within(s.conn.Workspace, f) {
			return nil, userErrorf("the rename would change %s, outside the workspace %s; nothing was changed", f, s.conn.Workspace)
		}
	}
	// Read every file the edit starts from in one round trip, in name
	// order, which is the order of the write and of the report.
	sort.Strings(need)
	set := changeset.New(s.conn.Agent, s.conn.Workspace, changeset.Limits{FileBytes: maxFileBytes})
	if err := set.LoadAll(ctx, need); err != nil {
		return nil, err
	}
	touched := map[string]map[int]bool{} // lines where edits landed, by file
	mark := func(f string, lines []int) {
		if touched[f] == nil {
			touched[f] = map[int]bool{}
		}
		for _, l := range lines {
			touched[f][l] = true
		}
	}
	plan := &editPlan{set: set}
	for _, st := range steps {
		switch st.Kind {
		case "":
			if st.TextDocument == nil {
				continue
			}
			f := uriPath(st.TextDocument.URI)
			v := set.File(f)
			if !v.Exists() {
				return nil, userErrorf("the rename edits %s, which does not exist; nothing was changed", s.rel(f))
			}
			text, lines, err := applyEdits(v.Text(), st.Edits, enc)
			if err != nil {
				return nil, userErrorf("the server's edit to %s cannot be applied (%v); nothing was changed", s.rel(f), err)
			}
			v.Put(text)
			mark(f, lines)
			plan.edits += len(st.Edits)
		case "create":
			f := uriPath(st.URI)
			v := set.File(f)
			if v.Exists() {
				if st.Options != nil && st.Options.IgnoreIfExists {
					continue
				}
				if st.Options == nil || !st.Options.Overwrite {
					return nil, userErrorf("the rename would create %s, which exists; nothing was changed", s.rel(f))
				}
			}
			v.Put("")
			plan.ops = append(plan.ops, "created "+s.rel(f))
		case "rename":
			from, to := uriPath(st.OldURI), uriPath(st.NewURI)
			src, dst := set.File(from), set.File(to)
			if !src.Exists() {
				if st.Options != nil && st.Options.IgnoreIfNotExists {
					continue
				}
				return nil, userErrorf("the rename would move %s, which does not exist; nothing was changed", s.rel(from))
			}
			if dst.Exists() && (st.Options == nil || !st.Options.Overwrite) {
				if st.Options != nil && st.Options.IgnoreIfExists {
					continue
				}
				return nil, userErrorf("the rename would move %s onto %s, which exists; nothing was changed", s.rel(from), s.rel(to))
			}
			dst.Put(src.Text())
			src.Delete()
			mark(to, slices.Collect(maps.Keys(touched[from])))
			plan.ops = append(plan.ops, fmt.Sprintf("moved %s to %s", s.rel(from), s.rel(to)))
		case "delete":
			f := uriPath(st.URI)
			v := set.File(f)
			if !v.Exists() && (st.Options == nil || !st.Options.IgnoreIfNotExists) {
				return nil, userErrorf("the rename would delete %s, which does not exist; nothing was changed", s.rel(f))
			}
			v.Delete()
			plan.ops = append(plan.ops, "deleted "+s.rel(f))
		}
	}
	// A file the edit leaves as it was is not written.
	for _, v := range set.Changes() {
		if v.Unchanged() {
			v.Revert()
		}
	}
	for _, v := range set.Changes() {
		f := v.Path()
		plan.changed = append(plan.changed, f)
		if !v.Exists() {
			plan.deleted = append(plan.deleted, f)
			continue
		}
		doc := newDocument(v.Text())
		ls := slices.Sorted(maps.Keys(touched[f]))
		for _, l := range ls {
			plan.lines = append(plan.lines, changedLine{file: f, line: l, text: doc.line(l)})
		}
	}
	return plan, nil
}

// applyEdits applies LSP text edits (positions in enc) to text; they must
// not overlap. It returns the new text and the lines (in the new text)
// where edits landed.
func applyEdits(text string, edits []TextEdit, enc string) (string, []int, error) {
	doc := newDocument(text)
	type span struct {
		start, end int
		text       string
	}
	spans := make([]span, 0, len(edits))
	for _, e := range edits {
		a, b := doc.offset(e.Range.Start, enc), doc.offset(e.Range.End, enc)
		if b < a {
			return "", nil, fmt.Errorf("an edit ends before it starts")
		}
		spans = append(spans, span{a, b, e.NewText})
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var out strings.Builder
	prev := 0
	var lines []int
	for i, sp := range spans {
		if sp.start < prev {
			return "", nil, fmt.Errorf("edits %d and %d overlap", i, i+1)
		}
		out.WriteString(text[prev:sp.start])
		lines = append(lines, strings.Count(out.String(), "\n"))
		out.WriteString(sp.text)
		prev = sp.end
	}
	out.WriteString(text[prev:])
	return out.String(), lines, nil
}
