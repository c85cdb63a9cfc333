package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
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

// fileState is one path touched by the patch, as loaded and as changed.
type fileState struct {
	abs     string
	existed bool
	sha     string
	content string
	exists  bool // after the patch so far
	mode    uint32
	added   int
	removed int
}

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
	states := map[string]*fileState{}
	var order []string // touched paths, first-touch order
	load := func(p string) (*fileState, *tools.Result, error) {
		abs, msg := resolve(env, conn, "the patch path", p)
		if msg != "" {
			r := tools.Error(msg + "; nothing was written")
			return nil, &r, nil
		}
		if s := states[abs]; s != nil {
			return s, nil, nil
		}
		s := &fileState{abs: abs}
		f, err := conn.Agent.ReadFile(fctx, &proto.ReadFileRequest{Root: conn.Workspace, Path: abs, MaxBytes: t.c.maxFileBytes})
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
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
		case f.Truncated:
			r := tools.Error(fmt.Sprintf("%s has %d bytes, more than the %d bytes apply_patch can handle; nothing was written", abs, f.Size, t.c.maxFileBytes))
			return nil, &r, nil
		default:
			sum := sha256.Sum256(f.Data)
			s.existed, s.exists, s.sha, s.content = true, true, hex.EncodeToString(sum[:]), string(f.Data)
		}
		states[abs] = s
		order = append(order, abs)
		return s, nil, nil
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
		case fp.isNew && src.exists:
			return refuse("the patch creates %s, but it already exists; patch it as a change instead", src.abs)
		case !fp.isNew && !src.exists:
			return refuse("the patch changes %s, which does not exist; create it with '--- /dev/null'", src.abs)
		case fp.rename && dst.exists:
			return refuse("the patch renames %s to %s, which already exists", src.abs, dst.abs)
		}
		if !fp.isNew && isBinary([]byte(src.content)) {
			return refuse("%s is a binary file; apply_patch changes text files only", src.abs)
		}
		out, err := applyHunks(src.abs, src.content, fp.hunks, t.c.patchFuzzLines)
		if err != nil {
			return refuse("%s", err.Error())
		}
		if fp.isDelete && out != "" {
			return refuse("the patch deletes %s, but its hunks leave %d lines of it; include every line as removed", src.abs, len(splitKeep(out)))
		}
		for _, h := range fp.hunks {
			dst.added += h.added
			dst.removed += h.removed
		}
		if fp.rename || fp.isDelete {
			src.exists, src.content = false, ""
		}
		if !fp.isDelete {
			dst.exists, dst.content = true, out
			if fp.mode != 0 {
				dst.mode = fp.mode
			}
		}
	}

	var writes []proto.WriteFile
	var changed, summary []string
	for _, abs := range order {
		s := states[abs]
		w := proto.WriteFile{Path: abs, ExpectSHA256: s.sha}
		switch {
		case s.existed && !s.exists:
			w.Delete = true
			summary = append(summary, fmt.Sprintf("D %s (-%d)", abs, s.removed))
		case !s.existed && s.exists:
			w.Data, w.MkdirAll, w.ExpectAbsent, w.Mode = []byte(s.content), true, true, s.mode
			summary = append(summary, fmt.Sprintf("A %s (+%d)", abs, s.added))
		case s.existed && s.exists:
			w.Data, w.Mode = []byte(s.content), s.mode
			summary = append(summary, fmt.Sprintf("M %s (+%d -%d)", abs, s.added, s.removed))
		default:
			continue // created and deleted within the same patch
		}
		writes = append(writes, w)
		changed = append(changed, abs)
	}
	if len(writes) == 0 {
		return tools.Text("the patch changes nothing"), nil
	}
	if t.c.beforeWrite != nil {
		t.c.beforeWrite()
	}
	if err := conn.Agent.WriteFiles(fctx, &proto.WriteFilesRequest{Root: conn.Workspace, Files: writes}); err != nil {
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
