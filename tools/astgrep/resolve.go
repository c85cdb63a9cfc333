package astgrep

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/changeset"
)

type resolveTool struct{ c *config }

func (t *resolveTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "resolve",
		Description: "Finish an edit that ast_edit prepared. action \"accept\" writes every file of it at once, all or nothing, " +
			"after checking that none changed since ast_edit read it (if one did, nothing is written and the files are named: prepare the edit again); " +
			"\"discard\" drops it. An edit_id works once and only in the run that made it.",
		Level:        tools.LevelWrite,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "edit_id": {"type": "string", "minLength": 1, "description": "The edit_id ast_edit returned."},
    "action":  {"type": "string", "enum": ["accept", "discard"], "description": "accept: write the change; discard: drop it."}
  },
  "required": ["edit_id", "action"],
  "additionalProperties": false
}`),
	}
}

func (t *resolveTool) Available(env *tools.Env) bool { return available(env) }

type resolveArgs struct {
	EditID string `json:"edit_id"`
	Action string `json:"action"`
}

func (t *resolveTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a resolveArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	var conn *tools.SandboxConn
	p, why := t.c.store.lookup(runID(env), a.EditID)
	if why == "" && p.saved {
		// The copy is the edit's truth across replicas: gone means another
		// replica resolved it after the conversation moved there and back.
		c, res, err := connect(ctx, env)
		if c == nil {
			return tools.Deref(res), err
		}
		conn = c
		if conn.ID == p.sandbox && t.c.copyGone(ctx, conn, p.id) {
			t.c.store.remove(p.id)
			p, why = nil, "unknown"
		}
	}
	if why == "unknown" && conn == nil {
		// Another replica may have prepared it before the conversation
		// moved here: its copy is in the sandbox.
		c, res, err := connect(ctx, env)
		if c == nil {
			return tools.Deref(res), err
		}
		conn = c
		if p, why, err = t.c.loadCopy(ctx, conn, runID(env), a.EditID); err != nil {
			return fail(err)
		}
	}
	switch why {
	case "unknown":
		return tools.Error(fmt.Sprintf("edit_id %q is not a prepared edit of this run (it was already resolved, or never existed); prepare the change with ast_edit", a.EditID)), nil
	case "expired":
		t.forgetCopy(ctx, env, conn, a.EditID)
		return tools.Error(fmt.Sprintf("edit_id %q expired (prepared edits live %s); prepare the change again with ast_edit", a.EditID, t.c.store.ttl)), nil
	}
	if a.Action == "discard" {
		t.forget(ctx, env, conn, p.id)
		return tools.Text(fmt.Sprintf("discarded %s; nothing was written", p.id)), nil
	}
	if conn == nil {
		c, res, err := connect(ctx, env)
		if c == nil {
			return tools.Deref(res), err
		}
		conn = c
	}
	if conn.ID != p.sandbox {
		t.forget(ctx, env, conn, p.id)
		return tools.Error(fmt.Sprintf("edit_id %q was prepared in another sandbox; prepare the change again with ast_edit", a.EditID)), nil
	}
	// The edit was computed from the files as ast_edit read them: commit it
	// against their hashes, first naming every file changed since.
	cs := changeset.New(conn.Agent, conn.Workspace, changeset.Limits{FileBytes: t.c.maxFileSize * 4, TotalBytes: 256 << 20})
	paths := make([]string, len(p.files))
	for i, f := range p.files {
		paths[i] = f.abs
		cs.Expect(f.abs, f.oldSHA).Put(string(f.newData))
	}
	stale, err := cs.Stale(ctx)
	if err != nil {
		return fail(err)
	}
	if len(stale) > 0 {
		changed := make([]string, len(stale))
		for i, st := range stale {
			changed[i] = display(env, conn, st.Path)
			if st.Gone {
				changed[i] += " (gone or unreadable)"
			}
		}
		t.forget(ctx, env, conn, p.id)
		return tools.Error(fmt.Sprintf("nothing was written: %s changed since ast_edit prepared %s; run ast_edit again to prepare the change on the current files",
			strings.Join(changed, ", "), p.id)), nil
	}
	// A change between that check and the write also rejects the whole.
	if err := cs.Commit(ctx); err != nil {
		r, e := fail(err)
		if e == nil {
			r = tools.Error("nothing was written: " + r.Text())
		}
		return r, e
	}
	t.forget(ctx, env, conn, p.id)
	names := make([]string, len(p.files))
	for i, f := range p.files {
		names[i] = fmt.Sprintf("%s (%d)", display(env, conn, f.abs), f.edits)
	}
	out := tools.Text(fmt.Sprintf("applied %s: %d %s in %d %s: %s", p.id, p.count, plural(p.count, "replacement", "replacements"),
		len(p.files), plural(len(p.files), "file", "files"), strings.Join(names, ", ")))
	if env.AfterWrite != nil {
		out.Content = append(out.Content, env.AfterWrite(ctx, conn, paths)...)
	}
	return out, nil
}

// forget drops a resolved edit from memory and its copy from the sandbox.
func (t *resolveTool) forget(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, id string) {
	t.c.store.remove(id)
	t.forgetCopy(ctx, env, conn, id)
}

// forgetCopy removes the sandbox copy of id, connecting first when the
// call has not (a discard or an expiry found in memory). Without a
// sandbox there is nothing to remove it from.
func (t *resolveTool) forgetCopy(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, id string) {
	if conn == nil {
		conn, _, _ = connect(ctx, env)
	}
	t.c.removeCopy(ctx, conn, id)
}
