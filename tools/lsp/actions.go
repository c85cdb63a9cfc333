package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// diagnostics reports a file's problems, or with "*" the project check.
func (s *session) diagnostics(ctx context.Context, a lspArgs) (string, error) {
	if err := need(a, true, false); err != nil {
		return "", err
	}
	if a.File == "*" {
		return s.projectCheck(ctx)
	}
	t, err := s.target(ctx, a.File)
	if err != nil {
		return "", err
	}
	// Changes made so far outside the write tools reach the server first;
	// after one, only a report newer than it counts.
	s.sup.syncWatch(ctx)
	var out string
	err = s.withServer(ctx, t, func(ctx context.Context, srv *server, doc *document) error {
		since := srv.extSeqOf(t.abs)
		res := s.fresh(ctx, srv, map[string]syncState{t.abs: {version: srv.versionOf(t.abs), since: since, strict: since > 0}})
		diags, ok := res.diags[t.abs]
		if !ok {
			out = fmt.Sprintf("diagnostics pending: the %s server has not reported on %s yet; ask again in a moment", t.lang.Name, s.rel(t.abs))
			return nil
		}
		if len(diags) == 0 {
			out = fmt.Sprintf("%s: no problems", s.rel(t.abs))
			return nil
		}
		sortDiags(diags)
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d problem(s)\n", s.rel(t.abs), len(diags))
		for i, d := range diags {
			if i == 200 {
				fmt.Fprintf(&b, "... %d more\n", len(diags)-i)
				break
			}
			b.WriteString(formatDiagnostic(s.rel(t.abs), d) + "\n")
		}
		out = strings.TrimRight(b.String(), "\n")
		return nil
	})
	return out, err
}

func sortDiags(ds []Diagnostic) {
	sort.SliceStable(ds, func(i, j int) bool { return less(ds[i].Range.Start, ds[j].Range.Start) })
}

// projectCheck runs each language's checker in every root found from the
// workdir up, or for languages without one, lists the published diagnostics.
func (s *session) projectCheck(ctx context.Context) (string, error) {
	var b strings.Builder
	ran := 0
	projects, err := s.projects(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range projects {
		lang, root := p.lang, p.root
		ran++
		if len(lang.Checker) == 0 {
			srv := s.sup.existing(lang, root)
			fmt.Fprintf(&b, "%s (%s): no project checker; diagnostics the server has published:\n", lang.Name, s.rel(root))
			if srv == nil {
				b.WriteString("  (server not started; open a file with lsp first)\n")
				continue
			}
			n := 0
			for f, ds := range srv.allPublished() {
				for _, d := range ds {
					if n < 200 {
						b.WriteString(formatDiagnostic(s.rel(f), d) + "\n")
					}
					n++
				}
			}
			if n > 200 {
				fmt.Fprintf(&b, "... %d more\n", n-200)
			}
			continue
		}
		res, err := s.conn.Agent.Exec(ctx, &proto.ExecRequest{
			Argv: lang.Checker, Dir: root, Env: lang.Env, Timeout: 3 * time.Minute, MaxBytes: 32 << 10,
		})
		if err != nil {
			fmt.Fprintf(&b, "%s (%s): %s could not run: %v\n", lang.Name, s.rel(root), strings.Join(lang.Checker, " "), err)
			continue
		}
		text := strings.TrimSpace(string(res.Stdout) + "\n" + string(res.Stderr))
		text = strings.ReplaceAll(text, root+"/", relDir(s.rel(root)))
		status := "passed"
		if res.ExitCode != 0 || res.TimedOut {
			status = fmt.Sprintf("exit status %d", res.ExitCode)
			if res.TimedOut {
				status = "timed out"
			}
		}
		fmt.Fprintf(&b, "%s (%s): `%s` %s\n", lang.Name, s.rel(root), strings.Join(lang.Checker, " "), status)
		if text != "" {
			b.WriteString(text + "\n")
		}
	}
	if ran == 0 {
		return "", userErrorf("no language project found at or above %s (no root marker with its server installed); call lsp with action \"status\" to see what is missing", s.rel(s.wd))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func relDir(r string) string {
	if r == "." {
		return ""
	}
	return r + "/"
}

// symbols lists a workspace search (query) or a file's outline (file).
func (s *session) symbols(ctx context.Context, a lspArgs) (string, error) {
	if a.Query == nil && a.File == "" {
		return "", userErrorf("action \"symbols\" needs query (workspace search) or file (its outline)")
	}
	if a.Query != nil {
		return s.workspaceSymbols(ctx, a)
	}
	t, err := s.target(ctx, a.File)
	if err != nil {
		return "", err
	}
	var out string
	err = s.withServer(ctx, t, func(ctx context.Context, srv *server, doc *document) error {
		var syms []documentSymbol
		if err := srv.conn.Call(ctx, "textDocument/documentSymbol", map[string]any{"textDocument": textDocumentIdentifier{URI: fileURI(t.abs)}}, &syms); err != nil {
			return serverError(t.lang, "symbols", err)
		}
		var lines []string
		var walk func(ss []documentSymbol, depth int)
		walk = func(ss []documentSymbol, depth int) {
			for _, sy := range ss {
				r := sy.SelectionRange
				if sy.Location != nil {
					r = sy.Location.Range
				}
				lines = append(lines, fmt.Sprintf("%s%s:%d: %s %s%s", strings.Repeat("  ", depth), s.rel(t.abs), r.Start.Line+1,
					symbolKind(sy.Kind), sy.Name, detail(sy.Detail)))
				walk(sy.Children, depth+1)
			}
		}
		walk(syms, 0)
		out = capLines(lines, s.m.cfg.docSymbolsCap, fmt.Sprintf("symbols in %s", s.rel(t.abs)))
		return nil
	})
	return out, err
}

func detail(d string) string {
	d = strings.TrimSpace(strings.ReplaceAll(d, "\n", " "))
	if d == "" {
		return ""
	}
	return " — " + clip(d, 120)
}

func capLines(lines []string, limit int, what string) string {
	if len(lines) == 0 {
		return "no " + what
	}
	head := fmt.Sprintf("%s: %d\n", what, len(lines))
	if len(lines) > limit {
		return head + strings.Join(lines[:limit], "\n") + fmt.Sprintf("\n... %d more", len(lines)-limit)
	}
	return head + strings.Join(lines, "\n")
}

// workspaceSymbols searches with workspace/symbol in the server for file's
// root, or, without file, every running server (starting the workdir's).
func (s *session) workspaceSymbols(ctx context.Context, a lspArgs) (string, error) {
	var targets []*fileTarget
	if a.File != "" {
		t, err := s.target(ctx, a.File)
		if err != nil {
			return "", err
		}
		targets = append(targets, t)
	} else {
		var err error
		if targets, err = s.projects(ctx); err != nil {
			return "", err
		}
		if len(targets) == 0 {
			return "", userErrorf("no language server runs and no project is found at or above %s; give file to pick a project, or call lsp with action \"status\"", s.rel(s.wd))
		}
	}
	var lines []string
	for _, t := range targets {
		srv, err := s.sup.server(ctx, t.lang, t.root)
		if err != nil {
			return "", err
		}
		rctx, cancel := context.WithTimeout(ctx, s.m.cfg.requestTimeout)
		var syms []workspaceSymbol
		err = srv.conn.Call(rctx, "workspace/symbol", map[string]string{"query": *a.Query}, &syms)
		cancel()
		if err != nil {
			return "", serverError(t.lang, "symbols", err)
		}
		var locs []Location
		for _, sy := range syms {
			var l Location
			_ = json.Unmarshal(sy.Location, &l)
			locs = append(locs, l)
		}
		texts := s.lineTexts(ctx, srv, func() []string {
			var fs []string
			for i, l := range locs {
				if i < s.m.cfg.symbolsCap {
					fs = append(fs, uriPath(l.URI))
				}
			}
			return fs
		}())
		for i, sy := range syms {
			l := locs[i]
			file := uriPath(l.URI)
			text := ""
			if d := texts[file]; d != nil {
				text = ": " + clip(strings.TrimSpace(d.line(int(l.Range.Start.Line))), 160)
			}
			cont := ""
			if sy.ContainerName != "" {
				cont = " in " + sy.ContainerName
			}
			lines = append(lines, fmt.Sprintf("%s:%d: %s %s%s%s", s.rel(file), l.Range.Start.Line+1, symbolKind(sy.Kind), sy.Name, cont, text))
		}
	}
	return capLines(lines, s.m.cfg.symbolsCap, fmt.Sprintf("workspace symbols matching %q", *a.Query)), nil
}

// codeActions lists what the server offers for the line (or the symbol's
// occurrence on it), with the line's diagnostics as context.
func (s *session) codeActions(ctx context.Context, a lspArgs) (string, error) {
	if err := need(a, true, false); err != nil {
		return "", err
	}
	if a.Line == 0 {
		return "", userErrorf("action \"code_actions\" needs line (1-based); symbol narrows it to one name on the line")
	}
	t, err := s.target(ctx, a.File)
	if err != nil {
		return "", err
	}
	var out string
	err = s.withServer(ctx, t, func(ctx context.Context, srv *server, doc *document) error {
		if a.Line > doc.lineCount() {
			return userErrorf("line %d is out of range: %s has %d lines", a.Line, s.rel(t.abs), doc.lineCount())
		}
		line := a.Line - 1
		rng := Range{Start: Position{Line: uint32(line)}, End: doc.position(line, len(doc.line(line)), srv.enc)}
		if a.Symbol != "" {
			tg, err := locate(doc, s.rel(t.abs), a.Line, a.Symbol)
			if err != nil {
				return &userError{err.Error()}
			}
			rng = Range{Start: doc.position(line, tg.startCol, srv.enc), End: doc.position(line, tg.endCol, srv.enc)}
		}
		// The line's diagnostics are the context many quick fixes need.
		res := s.fresh(ctx, srv, map[string]syncState{t.abs: {version: srv.versionOf(t.abs)}})
		var onLine []Diagnostic
		for _, d := range res.diags[t.abs] {
			if int(d.Range.Start.Line) <= line && line <= int(d.Range.End.Line) {
				onLine = append(onLine, d)
			}
		}
		if onLine == nil {
			onLine = []Diagnostic{}
		}
		var acts []json.RawMessage
		if err := srv.conn.Call(ctx, "textDocument/codeAction", map[string]any{
			"textDocument": textDocumentIdentifier{URI: fileURI(t.abs)},
			"range":        rng,
			"context":      map[string]any{"diagnostics": onLine},
		}, &acts); err != nil {
			return serverError(t.lang, "code_actions", err)
		}
		var lines []string
		for _, raw := range acts {
			var ca codeAction
			if json.Unmarshal(raw, &ca) != nil || ca.Title == "" {
				continue
			}
			l := "- " + ca.Title
			if ca.Kind != "" {
				l += " (" + ca.Kind + ")"
			}
			if ca.IsPreferred {
				l += " [preferred]"
			}
			if ca.Disabled != nil {
				l += " [unavailable: " + ca.Disabled.Reason + "]"
			}
			lines = append(lines, l)
		}
		head := fmt.Sprintf("code actions at %s:%d", s.rel(t.abs), a.Line)
		if len(lines) == 0 {
			out = "no " + head
			return nil
		}
		out = head + " (listed only; make the change with edit or lsp_rename):\n" + strings.Join(lines, "\n")
		return nil
	})
	return out, err
}

// status lists running servers and, per language, why none runs here.
func (s *session) status(ctx context.Context, a lspArgs) (string, error) {
	dir := s.wd
	if a.File != "" && a.File != "*" {
		abs, msg := resolve(s.env, s.conn, a.File)
		if msg != "" {
			return "", &userError{msg}
		}
		dir = path.Dir(abs)
	}
	var b strings.Builder
	running := s.sup.running()
	sort.Slice(running, func(i, j int) bool {
		return key(running[i].lang, running[i].root) < key(running[j].lang, running[j].root)
	})
	if len(running) == 0 {
		b.WriteString("running servers: none\n")
	} else {
		b.WriteString("running servers:\n")
		for _, srv := range running {
			b.WriteString("- " + srv.describe(s.rel) + "\n")
		}
	}
	b.WriteString(s.sup.watchStatus() + "\n")
	fmt.Fprintf(&b, "languages for %s:\n", s.rel(dir))
	for _, lang := range s.m.cfg.langs {
		root, err := s.sup.findRoot(ctx, lang, dir)
		if err != nil {
			return "", err
		}
		argv, missing, err := s.sup.binary(ctx, lang)
		if err != nil {
			return "", err
		}
		var problems []string
		if root == "" {
			problems = append(problems, fmt.Sprintf("no root marker (%s) at or above %s", strings.Join(lang.RootMarkers, ", "), s.rel(dir)))
		}
		if argv == nil {
			problems = append(problems, missing)
		}
		switch {
		case len(problems) > 0:
			fmt.Fprintf(&b, "- %s: cannot start: %s\n", lang.Name, strings.Join(problems, "; "))
		case s.sup.existing(lang, root) != nil:
			fmt.Fprintf(&b, "- %s: running for root %s (%s)\n", lang.Name, s.rel(root), strings.Join(argv, " "))
		default:
			fmt.Fprintf(&b, "- %s: can start for root %s (%s); starts on first use\n", lang.Name, s.rel(root), strings.Join(argv, " "))
		}
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// reload restarts the server for file's root, or every running server.
func (s *session) reload(ctx context.Context, a lspArgs) (string, error) {
	if a.File != "" && a.File != "*" {
		t, err := s.target(ctx, a.File)
		if err != nil {
			return "", err
		}
		srv, err := s.sup.restart(ctx, t.lang, t.root)
		if err != nil {
			return "", err
		}
		return "restarted " + srv.describe(s.rel), nil
	}
	running := s.sup.running()
	if len(running) == 0 {
		return "no servers are running; they start on the next lsp call", nil
	}
	var lines []string
	for _, old := range running {
		srv, err := s.sup.restart(ctx, old.lang, old.root)
		if err != nil {
			return "", err
		}
		lines = append(lines, "restarted "+srv.describe(s.rel))
	}
	return strings.Join(lines, "\n"), nil
}

// projects are the (language, root) pairs a project-wide action covers: the
// running servers' and those found at or above the workdir whose binary exists.
func (s *session) projects(ctx context.Context) ([]*fileTarget, error) {
	var out []*fileTarget
	seen := map[string]bool{}
	for _, srv := range s.sup.running() {
		seen[key(srv.lang, srv.root)] = true
		out = append(out, &fileTarget{lang: srv.lang, root: srv.root})
	}
	for _, lang := range s.m.cfg.langs {
		root, err := s.sup.findRoot(ctx, lang, s.wd)
		if err != nil {
			return nil, err
		}
		if root == "" || seen[key(lang, root)] {
			continue
		}
		if argv, _, err := s.sup.binary(ctx, lang); err != nil || argv == nil {
			continue
		}
		out = append(out, &fileTarget{lang: lang, root: root})
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i].lang, out[i].root) < key(out[j].lang, out[j].root) })
	return out, nil
}
