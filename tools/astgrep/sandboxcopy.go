package astgrep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// DefaultEditDir is where a prepared edit is copied inside its sandbox, one
// JSON file per edit. It is outside the workspace (nothing lands in the
// user's tree) and in the sandbox rather than in a sandboxd replica, so a
// replica that takes the conversation over can still resolve the edit.
const DefaultEditDir = "/tmp/.sandboxd-edits"

// copyTimeout bounds each agent call about a sandbox copy: the copy is a
// fallback and must not hold ast_edit or resolve for long.
const copyTimeout = 10 * time.Second

// idPattern is what newID makes; anything else is not looked up in the
// sandbox (an edit_id is joined into a path there).
var idPattern = regexp.MustCompile(`^edit-[0-9a-f]{12}$`)

// editRecord is the sandbox copy of a prepared edit.
type editRecord struct {
	ID       string       `json:"id"`
	RunID    string       `json:"run_id"`
	Sandbox  string       `json:"sandbox_id"`
	Created  time.Time    `json:"created"`
	Language string       `json:"language"`
	Count    int          `json:"count"`
	Files    []recordFile `json:"files"`
}

type recordFile struct {
	Abs     string `json:"abs"`
	OldSHA  string `json:"old_sha256"`
	NewData []byte `json:"new_data"` // base64 (encoding/json)
	Edits   int    `json:"edits"`
}

// recordCap bounds a record's size: maxBytes of new content grows by a
// third in base64, plus room for paths and hashes.
func recordCap(maxBytes int64) int64 { return maxBytes/3*4 + 8 + 4<<20 }

func (c *config) copyPath(id string) string { return path.Join(c.editDir, id+".json") }

// copyRoot is the agent root the copies are confined to: the directory
// holding editDir, which exists (for the default, /tmp) when editDir may not.
func (c *config) copyRoot() string { return path.Dir(path.Clean(c.editDir)) }

// saveCopy writes p to the sandbox and sets p.saved, before p is shared
// through the store. A failure is logged only: the memory copy still
// serves this replica.
func (c *config) saveCopy(ctx context.Context, conn *tools.SandboxConn, p *prepared) {
	rec := editRecord{ID: p.id, RunID: p.runID, Sandbox: p.sandbox, Created: p.created, Language: p.language, Count: p.count}
	for _, f := range p.files {
		rec.Files = append(rec.Files, recordFile{Abs: f.abs, OldSHA: f.oldSHA, NewData: f.newData, Edits: f.edits})
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		c.log.Warn("ast_edit: encoding the sandbox copy failed", "edit_id", p.id, "err", err)
		return
	}
	if int64(len(data)) > recordCap(c.store.maxBytes) {
		c.log.Warn("ast_edit: the sandbox copy is too large; the edit lives only in this replica", "edit_id", p.id, "bytes", len(data))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	err = conn.Agent.WriteFiles(ctx, &proto.WriteFilesRequest{Root: c.copyRoot(), Files: []proto.WriteFile{
		{Path: c.copyPath(p.id), Data: data, Mode: 0o600, MkdirAll: true},
	}})
	if err != nil {
		c.log.Warn("ast_edit: writing the sandbox copy failed; the edit lives only in this replica", "edit_id", p.id, "sandbox", conn.ID, "err", err)
		return
	}
	p.saved = true
}

// copyGone reports whether the sandbox copy of a saved edit is known to be
// gone: another replica resolved the edit (or it expired there). An
// unanswered stat is not proof, so the memory copy is used then.
func (c *config) copyGone(ctx context.Context, conn *tools.SandboxConn, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	_, err := conn.Agent.Stat(ctx, &proto.StatRequest{Root: c.copyRoot(), Path: c.copyPath(id)})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		c.log.Warn("resolve: cannot check the sandbox copy; using the memory copy", "edit_id", id, "err", err)
	}
	return errors.Is(err, errdefs.ErrNotFound)
}

// loadCopy reads the sandbox copy of edit id for runID and checks it as
// store.lookup checks a memory copy: why is "unknown" or "expired" when
// there is none to use. A corrupt copy is removed here, an expired one by
// the caller.
func (c *config) loadCopy(ctx context.Context, conn *tools.SandboxConn, runID, id string) (*prepared, string, error) {
	if !idPattern.MatchString(id) {
		return nil, "unknown", nil
	}
	rctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	limit := recordCap(c.store.maxBytes)
	res, err := conn.Agent.ReadFiles(rctx, &proto.ReadFilesRequest{Root: c.copyRoot(), Paths: []string{c.copyPath(id)}, MaxBytesEach: limit, MaxTotal: limit})
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, "unknown", nil // no copy directory yet
		}
		return nil, "", fmt.Errorf("reading the sandbox copy of %s: %w", id, err)
	}
	if len(res.Files) != 1 || res.Files[0].Skipped != "" {
		if len(res.Files) == 1 && res.Files[0].Skipped != "not found" {
			c.log.Warn("resolve: the sandbox copy is unusable", "edit_id", id, "skipped", res.Files[0].Skipped)
		}
		return nil, "unknown", nil
	}
	var rec editRecord
	if err := json.Unmarshal(res.Files[0].Data, &rec); err != nil || rec.ID != id {
		c.log.Warn("resolve: the sandbox copy is corrupt; removing it", "edit_id", id, "err", err)
		c.removeCopy(ctx, conn, id)
		return nil, "unknown", nil
	}
	if rec.RunID != runID {
		return nil, "unknown", nil
	}
	if c.store.now().Sub(rec.Created) > c.store.ttl {
		return nil, "expired", nil // the caller removes it
	}
	p := &prepared{id: rec.ID, runID: rec.RunID, sandbox: rec.Sandbox, created: rec.Created, count: rec.Count, language: rec.Language}
	for _, f := range rec.Files {
		p.files = append(p.files, preparedFile{abs: f.Abs, oldSHA: f.OldSHA, newData: f.NewData, edits: f.Edits})
		p.bytes += int64(len(f.NewData))
	}
	return p, "", nil
}

// removeCopy deletes the sandbox copy of id; one that is already gone is
// fine, other failures are logged (the copy expires anyway).
func (c *config) removeCopy(ctx context.Context, conn *tools.SandboxConn, id string) {
	if conn == nil || !idPattern.MatchString(id) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	err := conn.Agent.WriteFiles(ctx, &proto.WriteFilesRequest{Root: c.copyRoot(), Files: []proto.WriteFile{{Path: c.copyPath(id), Delete: true}}})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		c.log.Warn("resolve: removing the sandbox copy failed", "edit_id", id, "sandbox", conn.ID, "err", err)
	}
}
