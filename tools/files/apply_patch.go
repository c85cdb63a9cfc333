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

type patchTool struct{ c *config }

func (t *patchTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "apply_patch",
		Description: fmt.Sprintf("Apply a unified diff to files of the sandbox's workspace, all or nothing: if any hunk does not apply, "+
			"no file is changed and the error names the file and hunk. Accepts git-style diffs (diff --git, --- a/path, +++ b/path, "+
			"@@ -l,n +l,n @@ hunks) for several files at once; new files come from /dev/null, deletions go to /dev/null. "+
			"Context and removed lines must match the file exactly; a hunk may sit up to %d lines away from its stated line. "+
			"Paths in the diff are relative to the run's working directory.", t.c.patchFuzzLines),
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "patch": {"type": "string", "minLength": 1, "description": "The unified diff text, with '--- a/path' and '+++ b/path' headers and '@@' hunks for each file."}
  },
  "required": ["patch"],
  "additionalProperties": false
}`),
	}
}

func (t *patchTool) Available(env *tools.Env) bool { return available(env) }

func (t *patchTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		Patch string `json:"patch"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	fps, err := parsePatch(a.Patch)
	if err != nil {
		return tools.Error("the patch cannot be parsed: " + err.Error() + "; nothing was written"), nil
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	fctx, cancel := t.c.fileCtx(ctx)
	defer cancel()
	cs := changeset.New(conn.Agent, conn.Workspace, changeset.Limits{FileBytes: t.c.maxFileBytes})
	added, removed := map[string]int{}, map[string]int{}
	load := func(p string) (*changeset.File, *tools.Result, error) {
		abs, msg := resolve(env, conn, "the patch path", p)
		if msg != "" {
			r := tools.Error(msg + "; nothing was written")
			return nil, &r, nil
		}
		f, err := cs.LoadOrAbsent(fctx, abs)
		var big *changeset.TooLargeError
		switch {
		case errors.As(err, &big):
			r := tools.Error(fmt.Sprintf("%s has %d bytes, more than the %d bytes apply_patch can handle; nothing was written", abs, big.Size, t.c.maxFileBytes))
			return nil, &r, nil
		case err != nil:
			if fileTimedOut(ctx, fctx) {
				r, _ := t.c.failFile(ctx, fctx, err, "apply_patch's read of "+abs, "nothing was written")
				return nil, &r, nil
			}
			r, gerr := fail(err)
			if gerr == nil {
				r = tools.Error(r.Content[0].Text + "; nothing was written")
			}
			return nil, &r, gerr
		}
		return f, nil, nil
	}
	refuse := func(format string, args ...any) (tools.Result, error) {
		return tools.Error(fmt.Sprintf(format, args...) + "; nothing was written"), nil
	}

	for _, fp := range fps {
		src, r, err := load(fp.source())
		if src == nil {
			return tools.Deref(r), err
		}
		dst := src
		if fp.target() != fp.source() {
			if dst, r, err = load(fp.target()); dst == nil {
				return tools.Deref(r), err
			}
		}
		switch {
		case fp.isNew && src.Exists():
			return refuse("the patch creates %s, but it already exists; patch it as a change instead", src.Path())
		case !fp.isNew && !src.Exists():
			return refuse("the patch changes %s, which does not exist; create it with '--- /dev/null'", src.Path())
		case fp.rename && dst.Exists():
			return refuse("the patch renames %s to %s, which already exists", src.Path(), dst.Path())
		}
		if !fp.isNew && isBinary(src.Text()) {
			return refuse("%s is a binary file; apply_patch changes text files only", src.Path())
		}
		out, err := applyHunks(src.Path(), src.Text(), fp.hunks, t.c.patchFuzzLines)
		if err != nil {
			return refuse("%s", err.Error())
		}
		if fp.isDelete && out != "" {
			return refuse("the patch deletes %s, but its hunks leave %d lines of it; include every line as removed", src.Path(), len(splitKeep(out)))
		}
		for _, h := range fp.hunks {
			added[dst.Path()] += h.added
			removed[dst.Path()] += h.removed
		}
		if fp.rename || fp.isDelete {
			src.Delete()
		}
		if !fp.isDelete {
			dst.Put(out)
			if fp.mode != 0 {
				dst.SetMode(fp.mode)
			}
		}
	}

	// Every file the patch touched is written, in the order the patch
	// names them, but one created and deleted within the same patch.
	writes := cs.Changes()
	var changed, summary []string
	for _, f := range writes {
		abs := f.Path()
		switch {
		case !f.Exists():
			summary = append(summary, fmt.Sprintf("D %s (-%d)", abs, removed[abs]))
		case !f.Existed():
			summary = append(summary, fmt.Sprintf("A %s (+%d)", abs, added[abs]))
		default:
			summary = append(summary, fmt.Sprintf("M %s (+%d -%d)", abs, added[abs], removed[abs]))
		}
		changed = append(changed, abs)
	}
	if len(writes) == 0 {
		return tools.Text("the patch changes nothing"), nil
	}
	if t.c.beforeWrite != nil {
		t.c.beforeWrite()
	}
	if err := cs.Commit(fctx); err != nil {
		if fileTimedOut(ctx, fctx) {
			return t.c.failFile(ctx, fctx, err, "apply_patch's write", "the files hold either all their old contents or all the patched ones; read them before retrying")
		}
		r, gerr := fail(err)
		if gerr == nil {
			r = tools.Error(r.Content[0].Text + "; nothing was written")
		}
		return r, gerr
	}
	res2 := tools.Text(fmt.Sprintf("applied the patch to %d files:\n%s", len(writes), strings.Join(summary, "\n")))
	return afterWrite(ctx, env, conn, res2, changed), nil
}
