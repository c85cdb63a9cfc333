package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

var navMethods = map[string]string{
	"definition":      "textDocument/definition",
	"type_definition": "textDocument/typeDefinition",
	"implementation":  "textDocument/implementation",
	"references":      "textDocument/references",
	"hover":           "textDocument/hover",
}

// navigate runs the position-based actions.
func (s *session) navigate(ctx context.Context, a lspArgs) (string, error) {
	if err := need(a, true, true); err != nil {
		return "", err
	}
	t, err := s.target(ctx, a.File)
	if err != nil {
		return "", err
	}
	var out string
	err = s.withServerFast(ctx, t, func(ctx context.Context, srv *server, doc *document) error {
		tg, err := locate(doc, s.rel(t.abs), a.Line, a.Symbol)
		if err != nil {
			return &userError{err.Error()}
		}
		params := map[string]any{
			"textDocument": textDocumentIdentifier{URI: fileURI(t.abs)},
			"position":     doc.position(tg.line, tg.byteCol, srv.enc),
		}
		if a.Action == "references" {
			params["context"] = map[string]bool{"includeDeclaration": true}
		}
		raw, err := srv.conn.CallRaw(ctx, navMethods[a.Action], params)
		if err != nil {
			return serverError(t.lang, a.Action, err)
		}
		what := fmt.Sprintf("%s of %s (%s:%d)", strings.ReplaceAll(a.Action, "_", " "), symbolName(a.Symbol), s.rel(t.abs), a.Line)
		if a.Action == "hover" {
			out = formatHover(raw, what)
			return nil
		}
		locs, err := parseLocations(raw)
		if err != nil {
			return err
		}
		limit := 0
		if a.Action == "references" {
			limit = s.m.cfg.refsCap
		}
		out, err = s.formatLocations(ctx, srv, locs, what, limit)
		return err
	})
	return out, err
}

// serverError turns a server's error response into an error message; a
// method the server lacks says so.
func serverError(lang *Language, action string, err error) error {
	if rpc, ok := err.(*jsonrpc.Error); ok {
		if rpc.Code == jsonrpc.CodeMethodNotFound {
			return userErrorf("the %s language server does not support %s", lang.Name, action)
		}
		return userErrorf("the %s language server could not answer %s: %s", lang.Name, action, rpc.Message)
	}
	return err
}

func symbolName(sym string) string {
	n, _ := splitOrdinal(sym)
	return fmt.Sprintf("%q", n)
}

// parseLocations accepts every shape navigation responses take: null, a
// Location, a list of Locations, or a list of LocationLinks.
func parseLocations(raw json.RawMessage) ([]Location, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("the server's locations cannot be decoded: %w", err)
		}
	} else {
		items = []json.RawMessage{raw}
	}
	var out []Location
	for _, it := range items {
		var probe struct {
			URI       string `json:"uri"`
			TargetURI string `json:"targetUri"`
		}
		if json.Unmarshal(it, &probe) != nil {
			continue
		}
		if probe.TargetURI != "" {
			var l LocationLink
			if json.Unmarshal(it, &l) == nil {
				out = append(out, Location{URI: l.TargetURI, Range: l.TargetSelectionRange})
			}
			continue
		}
		var l Location
		if json.Unmarshal(it, &l) == nil && l.URI != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// formatLocations prints "path:line: text" per location, sorted and
// de-duplicated by line, capped at limit (0: no cap) with "N more".
func (s *session) formatLocations(ctx context.Context, srv *server, locs []Location, what string, limit int) (string, error) {
	if len(locs) == 0 {
		return "no " + what + " found", nil
	}
	type hit struct {
		file string
		line int
	}
	seen := map[hit]bool{}
	var hits []hit
	for _, l := range locs {
		h := hit{uriPath(l.URI), int(l.Range.Start.Line)}
		if !seen[h] {
			seen[h] = true
			hits = append(hits, h)
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].file != hits[j].file {
			return s.rel(hits[i].file) < s.rel(hits[j].file)
		}
		return hits[i].line < hits[j].line
	})
	total := len(hits)
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	texts := s.lineTexts(ctx, srv, func() []string {
		var fs []string
		for _, h := range hits {
			fs = append(fs, h.file)
		}
		return fs
	}())
	var b strings.Builder
	if total == 1 {
		fmt.Fprintf(&b, "%s:\n", what)
	} else {
		fmt.Fprintf(&b, "%s: %d locations\n", what, total)
	}
	for _, h := range hits {
		text := ""
		if d := texts[h.file]; d != nil {
			text = strings.TrimSpace(d.line(h.line))
		}
		fmt.Fprintf(&b, "%s:%d: %s\n", s.rel(h.file), h.line+1, clip(text, 200))
	}
	if total > len(hits) {
		fmt.Fprintf(&b, "... %d more\n", total-len(hits))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// lineTexts gets the text of each file: from the server's open documents,
// else from the disk in one round trip. Files outside the workspace (a
// library's source) are read with / as the root.
func (s *session) lineTexts(ctx context.Context, srv *server, files []string) map[string]*document {
	if s.readDone != nil {
		select {
		case <-s.readDone:
		case <-ctx.Done():
			return map[string]*document{}
		}
	}
	out := map[string]*document{}
	var inWS, outside []string
	for _, f := range files {
		if _, ok := out[f]; ok {
			continue
		}
		if text, ok := srv.docText(f); ok {
			out[f] = newDocument(text)
			continue
		}
		if text, ok := s.read[f]; ok {
			out[f] = newDocument(text)
			continue
		}
		out[f] = nil
		if within(s.conn.Workspace, f) {
			inWS = append(inWS, f)
		} else {
			outside = append(outside, f)
		}
	}
	for _, batch := range []struct {
		root  string
		files []string
	}{{s.conn.Workspace, inWS}, {"/", outside}} {
		if len(batch.files) == 0 {
			continue
		}
		res, err := s.conn.Agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: batch.root, Paths: batch.files, MaxBytesEach: maxFileBytes})
		if err != nil {
			continue
		}
		for i, f := range res.Files {
			if f.Skipped == "" && i < len(batch.files) {
				out[batch.files[i]] = newDocument(string(f.Data))
				if batch.root != "/" && f.Size <= maxRecentBytes {
					srv.noteRecent(batch.files[i])
				}
			}
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// formatHover prints a hover's contents as plain text, capped.
func formatHover(raw json.RawMessage, what string) string {
	var h struct {
		Contents json.RawMessage `json:"contents"`
	}
	if json.Unmarshal(raw, &h) != nil || len(h.Contents) == 0 || string(h.Contents) == "null" {
		return "no hover information for " + strings.TrimPrefix(what, "hover of ")
	}
	text := strings.TrimSpace(markupText(h.Contents))
	if text == "" {
		return "no hover information for " + strings.TrimPrefix(what, "hover of ")
	}
	const maxHover = 4000
	if len(text) > maxHover {
		text = clip(text, maxHover) + "\n(hover cut at 4000 bytes)"
	}
	return what + ":\n" + text
}

// markupText flattens MarkupContent, MarkedString or a list of them.
func markupText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		var parts []string
		for _, it := range list {
			if t := strings.TrimSpace(markupText(it)); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n\n")
	}
	var obj struct {
		Kind     string `json:"kind"`
		Language string `json:"language"`
		Value    string `json:"value"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if obj.Language != "" {
			return "```" + obj.Language + "\n" + obj.Value + "\n```"
		}
		return obj.Value
	}
	return ""
}
