package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Changes made in the sandbox outside the write tools (shell, eval cells,
// workers) come from the agent's workspace watch (agent.Subscribe). Each
// server is told of those under its root that its registrations ask for
// (workspace/didChangeWatchedFiles), its open documents changed on disk
// are synced from it, and when a change can affect its open documents (a
// file of its language, or one it watches, such as go.mod) every open
// document is re-sent as a new version, so that the server publishes for
// it again and the diagnostics of before the change no longer count as
// fresh (see syncState.strict).

const (
	// watchApplyTimeout bounds the reads and the walk that one batch of
	// changes costs.
	watchApplyTimeout = 20 * time.Second
	// watchSyncTimeout bounds the wait, before a diagnostics result, for
	// the changes made so far to have been applied.
	watchSyncTimeout = 2 * time.Second
	// maxWatchedNotify caps the changes sent in one notification.
	maxWatchedNotify = 2000
	// maxRescan caps the files re-announced after an overflow.
	maxRescan = 20000
)

// register records the server's dynamic registrations that this client
// serves (workspace/didChangeWatchedFiles).
func (s *server) register(params json.RawMessage) {
	var p struct {
		Registrations []struct {
			ID              string          `json:"id"`
			Method          string          `json:"method"`
			RegisterOptions json.RawMessage `json:"registerOptions"`
		} `json:"registrations"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	for _, r := range p.Registrations {
		if r.Method == "workspace/didChangeWatchedFiles" {
			s.watchers[r.ID] = parseWatchers(r.RegisterOptions)
		}
	}
}

// unregister drops registrations (LSP spells the field "unregisterations").
func (s *server) unregister(params json.RawMessage) {
	var p struct {
		Unregisterations []struct {
			ID string `json:"id"`
		} `json:"unregisterations"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	for _, u := range p.Unregisterations {
		delete(s.watchers, u.ID)
	}
}

// wantsChange reports whether a registration of the server asks for the change.
func (s *server) wantsChange(file string, kind proto.ChangeKind) bool {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	for _, ws := range s.watchers {
		for _, w := range ws {
			if w.matches(file, s.root, int(kind)) {
				return true
			}
		}
	}
	return false
}

// watcherCount is how many watchers the server registered.
func (s *server) watcherCount() int {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	n := 0
	for _, ws := range s.watchers {
		n += len(ws)
	}
	return n
}

// touchOpen re-sends every open document but those in skip as a new
// version with the same text, and marks all of them changed after
// publish counter since: a dependency changed under them.
func (s *server) touchOpen(since uint64, skip map[string]bool) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for uri, d := range s.docs {
		d.extSeq = since
		if skip[uriPath(uri)] {
			continue
		}
		d.version++
		if err := s.conn.Notify("textDocument/didChange", map[string]any{
			"textDocument":   map[string]any{"uri": uri, "version": d.version},
			"contentChanges": []map[string]string{{"text": d.text}},
		}); err != nil {
			return err
		}
	}
	return nil
}

// extSeqOf is the publish counter before the last outside change that
// affected an open document (0: none).
func (s *server) extSeqOf(file string) uint64 {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if d := s.docs[fileURI(file)]; d != nil {
		return d.extSeq
	}
	return 0
}

// subscribe starts the supervisor's subscription to its sandbox's
// workspace watch.
func (s *supervisor) subscribe() {
	if s.agent == nil || !s.m.cfg.watch {
		return
	}
	s.watch = s.agent.Subscribe(s.workspace, "lsp", s.onWatch)
}

// syncWatch waits, briefly, until every change made in the sandbox so far
// has been applied to the servers. Without a watch (an older agent, or
// one not yet established) it returns at once: results then rest on the
// disk reads each call makes of the open documents.
//
// A server that started before the watch was established may have missed
// changes made meanwhile: once the watch is, it is resynced as after an
// overflow (the files changed since it started, and its open documents).
func (s *supervisor) syncWatch(ctx context.Context) {
	if s.watch == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, watchSyncTimeout)
	defer cancel()
	if s.watch.Sync(ctx) != nil {
		return
	}
	for _, srv := range s.running() {
		if srv.takeUnwatched() {
			s.apply(ctx, srv, proto.WatchEvent{Overflow: true})
		}
	}
}

// takeUnwatched reports whether the server still awaits its resync after
// starting unwatched, and clears it; the resync's rescan then reaches back
// to the server's start.
func (s *server) takeUnwatched() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unwatched
	if u {
		s.unwatched, s.applied = false, time.Time{}
	}
	return u
}

// watchStatus is the watch's line for lsp status.
func (s *supervisor) watchStatus() string {
	if s.watch == nil {
		return "file watching: off; changes made outside the write tools are seen only when a call re-reads the open files"
	}
	st := s.watch.Status()
	switch {
	case !st.Active:
		return fmt.Sprintf("file watching: not active (%s); changes made outside the write tools are seen only when a call re-reads the open files", orNone(st.Err))
	case st.Limited:
		return fmt.Sprintf("file watching: LIMITED to %d directories (the cap was hit); changes in the others are seen only when a call re-reads the open files", st.Dirs)
	}
	return fmt.Sprintf("file watching: %d directories, %d change batches (%d full resyncs)", st.Dirs, st.Events, st.Resyncs)
}

// onWatch applies one batch of changes to every running server, and keeps
// it for the servers still starting (applied once they run).
func (s *supervisor) onWatch(ev proto.WatchEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), watchApplyTimeout)
	defer cancel()
	s.mu.Lock()
	for _, op := range s.starting {
		if len(op.missed) >= maxMissed {
			op.missed = []proto.WatchEvent{{Overflow: true}}
		}
		op.missed = append(op.missed, ev)
	}
	s.mu.Unlock()
	for _, srv := range s.running() {
		s.apply(ctx, srv, ev)
	}
}

// apply tells one server of the changes under its root.
func (s *supervisor) apply(ctx context.Context, srv *server, ev proto.WatchEvent) {
	since := srv.seq()
	var changes []proto.WatchChange
	if ev.Overflow {
		changes = s.rescan(ctx, srv)
	} else {
		for _, c := range ev.Changes {
			if within(srv.root, c.Path) {
				changes = append(changes, c)
			}
		}
	}
	srv.noteApplied()
	if len(changes) == 0 && !ev.Overflow {
		return
	}
	changed := map[string]bool{}
	for _, c := range changes {
		changed[c.Path] = true
	}
	var reread []string
	for _, f := range srv.openFiles() {
		if ev.Overflow || changed[f] {
			reread = append(reread, f)
		}
	}
	texts := map[string]string{}
	if len(reread) > 0 {
		res, err := s.agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.workspace, Paths: reread, MaxBytesEach: maxFileBytes})
		if err != nil {
			return // the next call re-reads its open documents itself
		}
		for i, f := range res.Files {
			if i < len(reread) && f.Skipped == "" {
				texts[reread[i]] = string(f.Data)
			}
		}
	}
	known, fresh := map[string]bool{}, map[string]string{}
	for _, f := range reread {
		text, ok := texts[f]
		if !ok {
			srv.closeDoc(f)
			continue
		}
		if cur, _ := srv.docText(f); cur == text {
			known[f] = true // the write tools synced it already
			continue
		}
		fresh[f] = text
	}
	affects := ev.Overflow || len(fresh) > 0
	var notify []map[string]any
	for _, c := range changes {
		if known[c.Path] {
			continue
		}
		if c.IsDir || s.m.cfg.langs.forFile(c.Path) == srv.lang {
			affects = true
		}
		if srv.wantsChange(c.Path, c.Kind) {
			affects = true
			notify = append(notify, map[string]any{"uri": fileURI(c.Path), "type": int(c.Kind)})
		}
	}
	if ev.Overflow {
		// The rescan cannot tell deletions; the root announced as a changed
		// directory makes gopls re-read every file it knows under it, which
		// finds the deleted ones gone.
		notify = append(notify, map[string]any{"uri": fileURI(srv.root), "type": int(proto.Changed)})
	}
	for len(notify) > 0 {
		n := min(len(notify), maxWatchedNotify)
		if srv.conn.Notify("workspace/didChangeWatchedFiles", map[string]any{"changes": notify[:n]}) != nil {
			return
		}
		notify = notify[n:]
	}
	if !affects {
		return
	}
	if srv.isVersioned() {
		// A new version makes a versioned server publish for it, changed
		// or not (gopls, pyright).
		synced := map[string]bool{}
		for f, text := range fresh {
			if _, _, err := srv.syncDoc(f, text, false); err != nil {
				return
			}
			synced[f] = true
		}
		_ = srv.touchOpen(since, synced)
		return
	}
	// An unversioned server may say nothing when a clean file stays clean
	// (typescript-language-server), which would leave the result pending
	// for good: its documents are closed and opened again instead, which
	// makes it report on each afresh.
	_ = srv.reopenAll(ctx, fresh)
}

// isVersioned reports whether the server has sent a versioned publish.
func (s *server) isVersioned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versioned
}

// reopenAll closes every open document and opens it again (with the text
// in texts where given), marking each changed after the closes. Between
// the two a request the server does not know makes a round trip: a server
// that publishes an empty report as it closes a document (typescript-
// language-server) has sent it before its response, so that report falls
// before the mark and is not taken for a fresh one.
func (s *server) reopenAll(ctx context.Context, texts map[string]string) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for uri := range s.docs {
		if err := s.conn.Notify("textDocument/didClose", map[string]any{"textDocument": textDocumentIdentifier{URI: uri}}); err != nil {
			return err
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, _ = s.conn.CallRaw(bctx, "sandboxd/barrier", nil) // any response, an error included, will do
	cancel()
	mark := s.seq()
	for uri, d := range s.docs {
		if t, ok := texts[uriPath(uri)]; ok {
			d.text = t
		}
		d.version++
		d.extSeq = mark
		if err := s.conn.Notify("textDocument/didOpen", map[string]any{"textDocument": textDocumentItem{
			URI: uri, LanguageID: s.lang.languageID(uriPath(uri)), Version: d.version, Text: d.text,
		}}); err != nil {
			return err
		}
	}
	return nil
}

// rescan handles an overflow ("many files changed"): the files under the
// server's root modified since its last batch (less a margin for coarse
// clocks) are announced as changed. Deletions within the burst are not
// known (apply announces the root itself for them).
func (s *supervisor) rescan(ctx context.Context, srv *server) []proto.WatchChange {
	res, err := s.agent.Walk(ctx, &proto.WalkRequest{Root: s.workspace, Path: srv.root, Gitignore: true, MaxEntries: 200000})
	if err != nil {
		return nil
	}
	after := srv.appliedAt().Add(-2 * time.Second)
	var out []proto.WatchChange
	for _, f := range res.Files {
		if f.ModTime.Before(after) {
			continue
		}
		out = append(out, proto.WatchChange{Path: res.Base + "/" + f.Path, Kind: proto.Changed})
		if len(out) >= maxRescan {
			break
		}
	}
	return out
}

// noteApplied records when the server last took a batch.
func (s *server) noteApplied() {
	s.mu.Lock()
	s.applied = time.Now()
	s.mu.Unlock()
}

func (s *server) appliedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied.IsZero() {
		return s.started
	}
	return s.applied
}
