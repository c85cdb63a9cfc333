package lsp

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// maxNewShown caps the new diagnostics listed after one write.
const maxNewShown = 30

// AfterWrite returns the diagnostics-on-write hook for a run: after a write
// the changed files are synced to their servers and only diagnostics that
// are new by the run's ledger are returned.
func (m *Manager) AfterWrite(env *tools.Env) func(ctx context.Context, conn *tools.SandboxConn, paths []string) []tools.Block {
	return func(ctx context.Context, conn *tools.SandboxConn, paths []string) []tools.Block {
		if !m.cfg.enabled || env == nil || env.Run == nil || conn == nil || conn.Agent == nil {
			return nil
		}
		s := &session{m: m, env: env, conn: conn, sup: m.supervisor(conn)}
		s.wd = workdir(env, conn)
		s.rel = relTo(s.wd, path.Clean(conn.Workspace))
		text := s.afterWrite(ctx, m.ledger(env.Run.ID), paths)
		if text == "" {
			return nil
		}
		return []tools.Block{{Type: "text", Text: text}}
	}
}

type writeGroup struct {
	lang  *Language
	root  string
	files []string
}

func (s *session) afterWrite(ctx context.Context, led *ledger, paths []string) string {
	groups := map[string]*writeGroup{}
	var order []string
	for _, p := range paths {
		lang := s.m.cfg.langs.forFile(p)
		if lang == nil {
			continue
		}
		root, err := s.sup.findRoot(ctx, lang, path.Dir(p))
		if err != nil || root == "" {
			continue
		}
		k := key(lang, root)
		if groups[k] == nil {
			groups[k] = &writeGroup{lang: lang, root: root}
			order = append(order, k)
		}
		groups[k].files = append(groups[k].files, p)
	}
	var parts []string
	for _, k := range order {
		if t := s.groupDiagnostics(ctx, led, groups[k]); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// groupDiagnostics syncs one server's files and reports what is new.
func (s *session) groupDiagnostics(ctx context.Context, led *ledger, g *writeGroup) string {
	if argv, _, err := s.sup.binary(ctx, g.lang); err != nil || argv == nil {
		return "" // no server for this language here: nothing to say
	}
	srv, err := s.sup.server(ctx, g.lang, g.root)
	if err != nil {
		return fmt.Sprintf("diagnostics unavailable (%s): %v", g.lang.Name, err)
	}
	texts, err := s.readDocsLenient(ctx, g.files)
	if err != nil {
		return fmt.Sprintf("diagnostics unavailable (%s): %v", g.lang.Name, err)
	}
	// What the server said before this write: the baseline for files this
	// run has not written yet.
	before := map[string][]Diagnostic{}
	srv.mu.Lock()
	for uri, p := range srv.diags {
		before[uriPath(uri)] = p.items
	}
	srv.mu.Unlock()
	since := srv.seq()
	states := map[string]syncState{}
	for _, f := range g.files {
		if !led.known(f) {
			if ds, ok := before[f]; ok && srv.versionOf(f) > 0 {
				led.seed(f, ds)
			}
		}
		text, ok := texts[f]
		if !ok {
			srv.closeDoc(f)
			continue
		}
		opened := srv.versionOf(f) == 0
		v, _, err := srv.syncDoc(f, text, true)
		if err != nil {
			return fmt.Sprintf("diagnostics unavailable (%s): the server's connection failed: %v", g.lang.Name, err)
		}
		states[f] = syncState{version: v, since: since, opened: opened}
	}
	res := s.fresh(ctx, srv, states)
	var lines []string
	shown := 0
	report := func(f string, diags []Diagnostic) {
		for _, d := range led.update(f, diags) {
			if d.Severity > SeverityWarning && d.Severity != 0 {
				continue
			}
			if shown < maxNewShown {
				lines = append(lines, formatDiagnostic(s.rel(f), d))
			}
			shown++
		}
	}
	written := map[string]bool{}
	for _, f := range g.files {
		written[f] = true
		if ds, ok := res.diags[f]; ok {
			report(f, ds)
		}
	}
	// Other files the write affected (a changed signature breaks callers):
	// judged against what the server said about them before.
	srv.mu.Lock()
	others := map[string][]Diagnostic{}
	for uri, p := range srv.diags {
		f := uriPath(uri)
		if p.seq > since && !written[f] {
			others[f] = append([]Diagnostic(nil), p.items...)
		}
	}
	srv.mu.Unlock()
	var otherFiles []string
	for f := range others {
		otherFiles = append(otherFiles, f)
	}
	sort.Strings(otherFiles)
	for _, f := range otherFiles {
		if !led.known(f) {
			prev, ok := before[f]
			if !ok {
				led.seed(f, others[f]) // no baseline: remember, report nothing
				continue
			}
			led.seed(f, prev)
		}
		report(f, others[f])
	}
	var b strings.Builder
	switch {
	case shown == 0 && len(res.pending) == 0 && len(res.stale) > 0:
		fmt.Fprintf(&b, "diagnostics (%s): no new problems (the server did not republish, so its last report stands)", g.lang.Name)
	case shown == 0 && len(res.pending) == 0:
		fmt.Fprintf(&b, "diagnostics (%s): no new problems", g.lang.Name)
	case shown > 0:
		fmt.Fprintf(&b, "diagnostics (%s): %d new problem(s):\n%s", g.lang.Name, shown, strings.Join(lines, "\n"))
		if shown > len(lines) {
			fmt.Fprintf(&b, "\n... %d more", shown-len(lines))
		}
	}
	if len(res.pending) > 0 {
		var rel []string
		for _, f := range res.pending {
			rel = append(rel, s.rel(f))
		}
		sort.Strings(rel)
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "diagnostics pending for %s: the %s server did not report within %s, so this is NOT a clean result; check with lsp action \"diagnostics\"",
			strings.Join(rel, ", "), g.lang.Name, s.m.cfg.diagWait)
	}
	return b.String()
}

// readDocsLenient reads files in one round trip; missing ones (deleted by
// the write) are left out.
func (s *session) readDocsLenient(ctx context.Context, files []string) (map[string]string, error) {
	if len(files) == 0 {
		return map[string]string{}, nil
	}
	res, err := s.conn.Agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.conn.Workspace, Paths: files, MaxBytesEach: maxFileBytes})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, f := range res.Files {
		if f.Skipped == "" && i < len(files) {
			out[files[i]] = string(f.Data)
		}
	}
	return out, nil
}
