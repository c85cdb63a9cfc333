package lsp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

// fakeServerEnv selects the fake language server mode when this test binary
// is started by the agent as a server (see TestMain).
const fakeServerEnv = "SANDBOXD_LSP_FAKE_SERVER"

// runFakeServer is a minimal language server on stdio whose diagnostics
// are one error per line containing BAD and one warning per line containing
// WARN. Modes shape how it publishes, after the servers met in practice:
//
//	twice:  versioned; errors at once, then errors and warnings 150 ms later (gopls' default)
//	dedup:  unversioned, and nothing when the diagnostics did not change (typescript-language-server)
//	silent: never publishes
//	deps:   versioned, as twice; registers a watcher for **/*.dep and adds
//	        an error "dependency broken" to a document while the dep file
//	        beside it held BROKEN when the server last read it: at its
//	        first use, then only when told by didChangeWatchedFiles (as
//	        gopls caches files it has not open); it republishes only on
//	        a document's own change
//	loaddeps: deps, that reads every .dep file of its root as it starts
//	        (a workspace load, reported as work in progress) and ends
//	        that load only once the file .go appears in its root (10 s
//	        at most), so a test can change a dep while it starts
func runFakeServer(mode string) {
	f := &fakeServer{mode: mode, last: map[string]string{}, deps: map[string]string{}}
	f.conn = jsonrpc.New(stdio{}, f)
	<-f.conn.Done()
}

type fakeServer struct {
	mode string
	conn *jsonrpc.Conn
	mu   sync.Mutex // guards last and deps
	last map[string]string
	deps map[string]string // dep file -> contents as last read (mode deps)
}

// depText is a dep file's contents as the server knows them.
func (f *fakeServer) depText(file string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.deps[file]
	if !ok {
		b, _ := os.ReadFile(file)
		t = string(b)
		f.deps[file] = t
	}
	return t
}

type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error                { return os.Stdin.Close() }

func (f *fakeServer) Request(_ context.Context, method string, _ json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return map[string]any{"capabilities": map[string]any{
			"textDocumentSync": map[string]any{"openClose": true, "change": 1, "save": true},
		}, "serverInfo": map[string]string{"name": "fake-" + f.mode}}, nil
	case "shutdown":
		return nil, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method}
}

func (f *fakeServer) Notify(method string, params json.RawMessage) {
	var p struct {
		TextDocument struct {
			URI     string `json:"uri"`
			Version int32  `json:"version"`
			Text    string `json:"text"`
		} `json:"textDocument"`
		ContentChanges []struct {
			Text string `json:"text"`
		} `json:"contentChanges"`
	}
	_ = json.Unmarshal(params, &p)
	text := p.TextDocument.Text
	switch method {
	case "exit":
		os.Exit(0)
	case "initialized":
		if f.mode == "loaddeps" {
			go f.load()
		}
		if f.usesDeps() {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = f.conn.Call(ctx, "client/registerCapability", map[string]any{"registrations": []map[string]any{{
					"id": "deps", "method": "workspace/didChangeWatchedFiles",
					"registerOptions": map[string]any{"watchers": []map[string]any{{"globPattern": "**/*.dep"}}},
				}}}, nil)
			}()
		}
		return
	case "workspace/didChangeWatchedFiles":
		var w struct {
			Changes []struct {
				URI string `json:"uri"`
			} `json:"changes"`
		}
		_ = json.Unmarshal(params, &w)
		f.mu.Lock()
		for _, c := range w.Changes {
			delete(f.deps, strings.TrimPrefix(c.URI, "file://"))
		}
		f.mu.Unlock()
		return
	case "textDocument/didOpen":
	case "textDocument/didChange":
		if len(p.ContentChanges) > 0 {
			text = p.ContentChanges[len(p.ContentChanges)-1].Text
		}
	default:
		return
	}
	uri, version := p.TextDocument.URI, p.TextDocument.Version
	diags := func(withWarnings bool) []map[string]any {
		out := []map[string]any{}
		for i, line := range strings.Split(text, "\n") {
			r := map[string]any{"start": map[string]int{"line": i, "character": 0}, "end": map[string]int{"line": i, "character": 1}}
			if strings.Contains(line, "BAD") {
				out = append(out, map[string]any{"range": r, "severity": 1, "code": "bad", "message": "bad thing"})
			}
			if withWarnings && strings.Contains(line, "WARN") {
				out = append(out, map[string]any{"range": r, "severity": 2, "code": "vet", "message": "analysis finding"})
			}
			if f.usesDeps() && strings.HasPrefix(line, "use ") {
				dep := filepath.Join(filepath.Dir(strings.TrimPrefix(uri, "file://")), strings.TrimPrefix(line, "use ")+".dep")
				if strings.Contains(f.depText(dep), "BROKEN") {
					out = append(out, map[string]any{"range": r, "severity": 1, "code": "dep", "message": "dependency broken"})
				}
			}
		}
		return out
	}
	switch f.mode {
	case "twice", "deps", "loaddeps":
		_ = f.conn.Notify("textDocument/publishDiagnostics", map[string]any{"uri": uri, "version": version, "diagnostics": diags(false)})
		go func() {
			time.Sleep(150 * time.Millisecond)
			_ = f.conn.Notify("textDocument/publishDiagnostics", map[string]any{"uri": uri, "version": version, "diagnostics": diags(true)})
		}()
	case "dedup":
		d := diags(true)
		b, _ := json.Marshal(d)
		f.mu.Lock()
		same := f.last[uri] == string(b)
		f.last[uri] = string(b)
		f.mu.Unlock()
		if !same {
			_ = f.conn.Notify("textDocument/publishDiagnostics", map[string]any{"uri": uri, "diagnostics": d})
		}
	}
}

func (f *fakeServer) usesDeps() bool { return f.mode == "deps" || f.mode == "loaddeps" }

// load is mode loaddeps' workspace load: every .dep file in the root (its
// working directory) is read, the file .loaded says so, and the load ends
// once .go appears.
func (f *fakeServer) load() {
	_ = f.conn.Notify("$/progress", map[string]any{"token": "load", "value": map[string]any{"kind": "begin", "title": "loading"}})
	dir, _ := os.Getwd()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.dep"))
	for _, m := range matches {
		f.depText(m)
	}
	_ = os.WriteFile(filepath.Join(dir, ".loaded"), nil, 0o644)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, ".go")); err == nil {
			break
		}
	}
	_ = f.conn.Notify("$/progress", map[string]any{"token": "load", "value": map[string]any{"kind": "end"}})
}
