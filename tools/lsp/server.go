package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

// server is one running language server for one (language, root) of one
// sandbox, spoken to over its stdio streams through the agent.
//
// Goroutines: the jsonrpc reader; one stderr drain; one watcher that marks
// the server dead when its stdout ends. close() shuts the protocol down,
// kills the process group, then closes the streams, which ends all three.
type server struct {
	lang    *Language
	root    string
	procID  string
	pid     int
	argv    []string
	conn    *jsonrpc.Conn
	caps    serverCapabilities
	enc     string
	info    string // server name and version as it reported them
	started time.Time
	stderr  *tail

	syncMu sync.Mutex // guards docs and recent; serializes document sync so versions rise in order
	docs   map[string]*openDoc
	recent []string // files whose lines results quoted lately, newest last

	regMu    sync.Mutex               // guards watchers
	watchers map[string][]fileWatcher // didChangeWatchedFiles registrations by id (watched.go)

	mu        sync.Mutex // guards diags, pubSeq, versioned, progress, sawEnd, began, lastEvent, changed, readyAt, applied, unwatched
	diags     map[string]*published
	versioned bool // the server has sent a versioned publish
	pubSeq    uint64
	progress  map[string]bool
	sawEnd    bool
	began     bool
	lastEvent time.Time
	changed   chan struct{} // closed and replaced on every publish or progress event
	readyAt   time.Time
	applied   time.Time // when the last batch of outside changes was applied
	// unwatched: the server started before the workspace watch was
	// established, so changes made meanwhile are unknown to it.
	unwatched bool
}

type openDoc struct {
	version int32
	text    string
	// extSeq is the publish counter before the last change made outside
	// the write tools that could affect the document (0: none since it
	// opened): a publish from before it is not fresh.
	extSeq uint64
}

// published is the last diagnostics publish for one document.
type published struct {
	version *int32
	items   []Diagnostic
	seq     uint64
	at      time.Time
}

var _ jsonrpc.Handler = (*server)(nil)

func newServer(lang *Language, root string) *server {
	return &server{
		lang: lang, root: root, docs: map[string]*openDoc{}, diags: map[string]*published{},
		progress: map[string]bool{}, changed: make(chan struct{}), stderr: newTail(16 << 10), watchers: map[string][]fileWatcher{},
		enc: encUTF16,
	}
}

// alive reports whether the connection is still open.
func (s *server) alive() bool {
	select {
	case <-s.conn.Done():
		return false
	default:
		return true
	}
}

// Notify records what the server tells us.
func (s *server) Notify(method string, params json.RawMessage) {
	switch method {
	case "textDocument/publishDiagnostics":
		var p publishDiagnosticsParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		s.mu.Lock()
		s.pubSeq++
		s.versioned = s.versioned || p.Version != nil
		s.diags[normURI(p.URI)] = &published{version: p.Version, items: p.Diagnostics, seq: s.pubSeq, at: time.Now()}
		s.signalLocked()
		s.mu.Unlock()
	case "$/progress":
		var p progressParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		s.mu.Lock()
		switch p.Value.Kind {
		case "begin":
			s.progress[string(p.Token)] = true
			s.began = true
		case "end":
			delete(s.progress, string(p.Token))
			s.sawEnd = true
		}
		s.signalLocked()
		s.mu.Unlock()
	case "pyright/beginProgress":
		s.mu.Lock()
		s.progress["pyright"], s.began = true, true
		s.signalLocked()
		s.mu.Unlock()
	case "pyright/endProgress":
		s.mu.Lock()
		delete(s.progress, "pyright")
		s.sawEnd = true
		s.signalLocked()
		s.mu.Unlock()
	}
}

func (s *server) signalLocked() {
	s.lastEvent = time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

// Request responds to the server's own requests the way a plain editor would.
func (s *server) Request(_ context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "workspace/configuration":
		var p struct {
			Items []json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(params, &p)
		return make([]any, len(p.Items)), nil
	case "client/registerCapability":
		s.register(params)
		return nil, nil
	case "client/unregisterCapability":
		s.unregister(params)
		return nil, nil
	case "window/workDoneProgress/create":
		return nil, nil
	case "window/showMessageRequest", "window/showDocument":
		return nil, nil
	case "workspace/workspaceFolders":
		return []map[string]string{{"uri": fileURI(s.root), "name": baseName(s.root)}}, nil
	case "workspace/applyEdit":
		// Edits reach files only through lsp_rename, which applies them
		// all or nothing itself; a server-initiated edit is refused.
		return map[string]any{"applied": false, "failureReason": "this client applies edits only through lsp_rename"}, nil
	case "workspace/diagnostic/refresh", "workspace/semanticTokens/refresh", "workspace/inlayHint/refresh",
		"workspace/codeLens/refresh", "workspace/inlineValue/refresh", "workspace/foldingRange/refresh":
		return nil, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported by this client: " + method}
}

// initialize runs the LSP handshake.
func (s *server) initialize(ctx context.Context, pid int) error {
	params := map[string]any{
		"processId":  nil,
		"clientInfo": map[string]string{"name": "sandboxd"},
		"rootUri":    fileURI(s.root),
		"rootPath":   s.root,
		"workspaceFolders": []map[string]string{
			{"uri": fileURI(s.root), "name": baseName(s.root)},
		},
		"capabilities": clientCapabilities(),
	}
	if s.lang.InitOptions != nil {
		params["initializationOptions"] = s.lang.InitOptions
	}
	var res initializeResult
	if err := s.conn.Call(ctx, "initialize", params, &res); err != nil {
		return err
	}
	s.caps = res.Capabilities
	switch res.Capabilities.PositionEncoding {
	case encUTF8, encUTF32:
		s.enc = res.Capabilities.PositionEncoding
	default:
		s.enc = encUTF16
	}
	if res.ServerInfo != nil {
		s.info = serverLabel(res.ServerInfo.Name, res.ServerInfo.Version)
	}
	return s.conn.Notify("initialized", map[string]any{})
}

// clientCapabilities declares what this client handles. Pull diagnostics
// are not declared: some servers stop pushing when the client can pull,
// and pushes are what every server sends.
func clientCapabilities() map[string]any {
	return map[string]any{
		"general": map[string]any{"positionEncodings": []string{encUTF16, encUTF8, encUTF32}},
		"window":  map[string]any{"workDoneProgress": true},
		"workspace": map[string]any{
			"configuration":    true,
			"workspaceFolders": true,
			"applyEdit":        false,
			"workspaceEdit": map[string]any{
				"documentChanges":    true,
				"resourceOperations": []string{"create", "rename", "delete"},
			},
			"symbol": map[string]any{},
			// Changes made outside the write tools are forwarded from the
			// agent's workspace watch (watched.go).
			"didChangeWatchedFiles": map[string]any{"dynamicRegistration": true, "relativePatternSupport": true},
		},
		"textDocument": map[string]any{
			"synchronization": map[string]any{"didSave": true},
			"publishDiagnostics": map[string]any{
				"versionSupport": true, "relatedInformation": false,
			},
			"hover":          map[string]any{"contentFormat": []string{"plaintext", "markdown"}},
			"definition":     map[string]any{"linkSupport": true},
			"typeDefinition": map[string]any{"linkSupport": true},
			"implementation": map[string]any{"linkSupport": true},
			"references":     map[string]any{},
			"documentSymbol": map[string]any{"hierarchicalDocumentSymbolSupport": true},
			"codeAction": map[string]any{
				"codeActionLiteralSupport": map[string]any{"codeActionKind": map[string]any{"valueSet": []string{
					"", "quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite", "source", "source.organizeImports",
				}}},
			},
			"rename": map[string]any{"prepareSupport": true},
		},
	}
}

// waitReady waits for the server's own readiness signal: its work-done
// progress ends with nothing else running, or, for a server that reports no
// progress, a short silence. The wait is capped; a server that is still
// busy responds to requests late rather than not at all.
func (s *server) waitReady(ctx context.Context, limit time.Duration) {
	const silence = 700 * time.Millisecond
	deadline := time.Now().Add(limit)
	for {
		s.mu.Lock()
		idle := len(s.progress) == 0
		ready := idle && (s.sawEnd || (!s.began && time.Since(s.lastEvent) >= silence))
		ch := s.changed
		s.mu.Unlock()
		if ready || time.Now().After(deadline) {
			s.mu.Lock()
			s.readyAt = time.Now()
			s.mu.Unlock()
			return
		}
		wait := min(time.Until(deadline), silence)
		select {
		case <-ch:
		case <-time.After(wait):
		case <-ctx.Done():
			return
		case <-s.conn.Done():
			return
		}
	}
}

// syncDoc makes the server's copy of the file equal text. It returns the
// document's version and whether anything was sent.
func (s *server) syncDoc(file, text string, save bool) (int32, bool, error) {
	uri := fileURI(file)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	d := s.docs[uri]
	if d == nil {
		d = &openDoc{version: 1, text: text}
		if err := s.conn.Notify("textDocument/didOpen", map[string]any{"textDocument": textDocumentItem{
			URI: uri, LanguageID: s.lang.languageID(file), Version: 1, Text: text,
		}}); err != nil {
			return 0, false, err
		}
		s.docs[uri] = d
	} else if d.text != text {
		d.version++
		d.text = text
		if err := s.conn.Notify("textDocument/didChange", map[string]any{
			"textDocument":   map[string]any{"uri": uri, "version": d.version},
			"contentChanges": []map[string]string{{"text": text}},
		}); err != nil {
			return 0, false, err
		}
	} else if !save {
		return d.version, false, nil
	}
	if save && s.caps.wantsSave() {
		if err := s.conn.Notify("textDocument/didSave", map[string]any{"textDocument": textDocumentIdentifier{URI: uri}, "text": text}); err != nil {
			return 0, false, err
		}
	}
	return d.version, true, nil
}

// closeDoc tells the server a file is gone (deleted or renamed away).
func (s *server) closeDoc(file string) {
	uri := fileURI(file)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if _, ok := s.docs[uri]; ok {
		delete(s.docs, uri)
		_ = s.conn.Notify("textDocument/didClose", map[string]any{"textDocument": textDocumentIdentifier{URI: uri}})
	}
}

// openFiles lists the files open in the server.
func (s *server) openFiles() []string {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	out := make([]string, 0, len(s.docs))
	for uri := range s.docs {
		out = append(out, uriPath(uri))
	}
	return out
}

// Recent files ride along with each call's read (see syncFiles); a few
// small ones only, so that the read stays one cheap round trip.
const (
	maxRecent      = 8
	maxRecentBytes = 256 << 10
)

// noteRecent remembers a file a result quoted.
func (s *server) noteRecent(file string) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for i, f := range s.recent {
		if f == file {
			s.recent = append(s.recent[:i], s.recent[i+1:]...)
			break
		}
	}
	s.recent = append(s.recent, file)
	if len(s.recent) > maxRecent {
		s.recent = s.recent[len(s.recent)-maxRecent:]
	}
}

// recentFiles lists the files results quoted lately.
func (s *server) recentFiles() []string {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	return append([]string(nil), s.recent...)
}

// docText is the text the server has for a file, if open.
func (s *server) docText(file string) (string, bool) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	d, ok := s.docs[fileURI(file)]
	if !ok {
		return "", false
	}
	return d.text, true
}

// seq is the current publish counter, taken before a sync so that later
// publishes can be told from earlier ones.
func (s *server) seq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pubSeq
}

// allPublished returns every file's latest diagnostics.
func (s *server) allPublished() map[string][]Diagnostic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]Diagnostic{}
	for uri, p := range s.diags {
		if len(p.items) > 0 {
			out[uriPath(uri)] = p.items
		}
	}
	return out
}

// shutdown asks the server to exit, bounded by ctx.
func (s *server) shutdown(ctx context.Context) {
	if !s.alive() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if s.conn.Call(ctx, "shutdown", nil, nil) == nil {
		_ = s.conn.Notify("exit", nil)
	}
}

// fileURI turns an absolute path inside the sandbox into a file URI.
func fileURI(p string) string {
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// uriPath turns a file URI back into a path; other URIs come back as is.
func uriPath(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return uri
	}
	return u.Path
}

// normURI re-encodes a URI so that servers that escape differently
// (file:///a%3Ab vs file:///a:b) still match our keys.
func normURI(uri string) string {
	p := uriPath(uri)
	if strings.HasPrefix(p, "/") {
		return fileURI(p)
	}
	return uri
}

func baseName(p string) string {
	if i := strings.LastIndexByte(strings.TrimRight(p, "/"), '/'); i >= 0 {
		return strings.TrimRight(p, "/")[i+1:]
	}
	return p
}

// tail keeps the last bytes written to it (a server's stderr, for errors).
type tail struct {
	mu  sync.Mutex // guards buf
	buf []byte
	max int
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// last returns up to n bytes of the most recent output, trimmed.
func (t *tail) last(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// duplex joins the process's stdout (read) and stdin (write) attachments.
type duplex struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (d duplex) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d duplex) Write(p []byte) (int, error) { return d.w.Write(p) }

// SetWriteDeadline bounds writes to the server's stdin.
func (d duplex) SetWriteDeadline(t time.Time) error {
	if dl, ok := d.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return dl.SetWriteDeadline(t)
	}
	return nil
}

func (d duplex) Close() error {
	werr := d.w.Close()
	rerr := d.r.Close()
	if werr != nil {
		return werr
	}
	return rerr
}

// describe is a server's one-line status.
func (s *server) describe(rel func(string) string) string {
	state := "ready"
	s.mu.Lock()
	if s.readyAt.IsZero() {
		state = "starting"
	} else if len(s.progress) > 0 {
		state = "busy"
	}
	s.mu.Unlock()
	if !s.alive() {
		state = "exited"
	}
	name := s.info
	if name == "" {
		name = strings.Join(s.argv, " ")
	}
	return fmt.Sprintf("%s: %s for root %s (%s, pid %d, up %s, %d open files)", s.lang.Name, name, rel(s.root), state, s.pid,
		time.Since(s.started).Round(time.Second), len(s.openFiles()))
}
