package lsp

import (
	"context"
	"encoding/json"
	"time"
)

// syncState is what a file's diagnostics must follow to count as fresh:
// the document version sent, and the publish counter before it was sent.
type syncState struct {
	version int32
	since   uint64
	opened  bool // first sync of the file into this server
	// strict refuses the unversioned server's earlier report after the
	// settle time: since marks a change made outside the write tools,
	// and a report from before it may be wrong now.
	strict bool
}

type freshResult struct {
	diags   map[string][]Diagnostic // files with fresh diagnostics
	stale   map[string]bool         // files whose earlier report was taken as unchanged
	pending []string                // files the server has not reported on in time
}

// versionOf is the version of an open document (0 if not open).
func (s *server) versionOf(file string) int32 {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if d := s.docs[fileURI(file)]; d != nil {
		return d.version
	}
	return 0
}

// fresh waits for diagnostics that reflect the given versions. A publish is
// fresh when its version matches, or, unversioned, when it came after the
// sync. After every file is fresh it waits for a quiet period with no more
// publishes (gopls sends type errors first and analysis findings a moment
// later), all capped by the diagnostics wait. Servers that offer pull
// diagnostics are asked directly.
func (s *session) fresh(ctx context.Context, srv *server, files map[string]syncState) freshResult {
	res := freshResult{diags: map[string][]Diagnostic{}, stale: map[string]bool{}}
	waitFor := map[string]syncState{}
	for f, st := range files {
		if srv.caps.pullDiagnostics() {
			if ds, ok := pull(ctx, srv, f, s.m.cfg.diagWait); ok {
				res.diags[f] = ds
				continue
			}
		}
		waitFor[f] = st
	}
	if len(waitFor) == 0 {
		return res
	}
	quiet := time.Duration(srv.lang.Quiet) * time.Millisecond
	started := time.Now()
	wait := s.m.cfg.diagWait
	for _, st := range waitFor {
		if st.opened {
			// A file new to the server may pull in packages it has not
			// checked yet; give the first report more room.
			wait = 3 * s.m.cfg.diagWait
		}
	}
	deadline := started.Add(wait)
	// A server that never versions its publishes may also not republish
	// diagnostics that did not change (typescript-language-server): after
	// settle with nothing new, its earlier report for the file stands.
	settle := min(2*quiet+500*time.Millisecond, s.m.cfg.diagWait)
	// While the server reports work in progress (loading the project) the
	// wait is extended, up to the start timeout: a busy server is not a
	// wedged one.
	hardStop := time.Now().Add(max(s.m.cfg.startTimeout, s.m.cfg.diagWait))
	for {
		srv.mu.Lock()
		if len(srv.progress) > 0 && time.Now().Before(hardStop) {
			if next := time.Now().Add(time.Second); next.After(deadline) {
				deadline = next
				if deadline.After(hardStop) {
					deadline = hardStop
				}
			}
		}
		allFresh := true
		var last time.Time
		for f, st := range waitFor {
			p := srv.diags[fileURI(f)]
			ok := p != nil && ((p.version != nil && *p.version == st.version) || (p.version == nil && p.seq > st.since) ||
				(p.version != nil && *p.version > st.version))
			if !ok && p != nil && !srv.versioned && st.since > 0 && !st.strict && time.Since(started) >= settle {
				ok = true
				res.stale[f] = true
			}
			if !ok {
				allFresh = false
				continue
			}
			res.diags[f] = append([]Diagnostic(nil), p.items...)
			if p.at.After(last) {
				last = p.at
			}
		}
		ch := srv.changed
		srv.mu.Unlock()
		now := time.Now()
		if allFresh && now.Sub(last) >= quiet {
			return res
		}
		if now.After(deadline) {
			if !allFresh {
				for f := range waitFor {
					if _, ok := res.diags[f]; !ok {
						res.pending = append(res.pending, f)
					}
				}
			}
			return res
		}
		wait := time.Until(deadline)
		if allFresh {
			wait = min(wait, quiet-now.Sub(last))
		} else if untilSettle := settle - now.Sub(started); untilSettle > 0 {
			wait = min(wait, untilSettle)
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			for f := range waitFor {
				if _, ok := res.diags[f]; !ok {
					res.pending = append(res.pending, f)
				}
			}
			return res
		case <-srv.conn.Done():
		}
		timer.Stop()
		if !srv.alive() {
			for f := range waitFor {
				if _, ok := res.diags[f]; !ok {
					res.pending = append(res.pending, f)
				}
			}
			return res
		}
	}
}

// pull asks for a document's diagnostics (LSP 3.17 textDocument/diagnostic).
func pull(ctx context.Context, srv *server, file string, limit time.Duration) ([]Diagnostic, bool) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var rep struct {
		Kind  string       `json:"kind"`
		Items []Diagnostic `json:"items"`
	}
	raw, err := srv.conn.CallRaw(ctx, "textDocument/diagnostic", map[string]any{"textDocument": textDocumentIdentifier{URI: fileURI(file)}})
	if err != nil || json.Unmarshal(raw, &rep) != nil || rep.Kind != "full" {
		return nil, false
	}
	return rep.Items, true
}
