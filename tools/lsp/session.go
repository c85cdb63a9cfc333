package lsp

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

// maxFileBytes caps a source file sent to a server.
const maxFileBytes = 8 << 20

// userError is a problem the model can fix; it becomes an is_error result.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func userErrorf(format string, args ...any) error { return &userError{fmt.Sprintf(format, args...)} }

// resultError carries the result tools.Open gave instead of a handle (the
// sandbox is gone, stopped or paused) up to the tool's result.
type resultError struct{ res tools.Result }

func (e *resultError) Error() string { return e.res.Text() }

// session is one call's view: the sandbox, its supervisor, and helpers to
// show paths the way the model gave them.
type session struct {
	m    *Manager
	env  *tools.Env
	conn *tools.SandboxConn
	sup  *supervisor
	wd   string
	rel  func(string) string
	// read holds files read from the sandbox during this call, so that
	// quoting a result line does not read them again. While readDone is
	// set and open, the read is still in flight (see withServerFast).
	read     map[string]string
	readDone chan struct{}
}

func (m *Manager) session(ctx context.Context, env *tools.Env) (*session, error) {
	if env == nil || env.Sandbox == nil || !env.HasSandbox {
		return nil, userErrorf("lsp needs the conversation's sandbox, and this conversation has none; create a sandbox for it first")
	}
	conn, res, err := tools.Open(ctx, env)
	if err != nil {
		return nil, err
	}
	if res != nil {
		return nil, &resultError{*res}
	}
	if conn.Agent == nil {
		return nil, errors.New("the sandbox connection has no agent")
	}
	return &session{m: m, env: env, conn: conn, sup: m.supervisor(conn), wd: conn.Workdir, rel: conn.Rel}, nil
}

// fileTarget is a file argument resolved to its language, root and server.
type fileTarget struct {
	abs  string
	lang *Language
	root string
}

// target resolves a file argument to its language and project root.
func (s *session) target(ctx context.Context, file string) (*fileTarget, error) {
	abs, msg := resolve(s.env, s.conn, file)
	if msg != "" {
		return nil, &userError{msg}
	}
	lang := s.m.cfg.langs.forFile(abs)
	if lang == nil {
		return nil, userErrorf("no language server handles %s files (%q); servers exist for %s", orNone(path.Ext(abs)), file, s.m.cfg.langs.extensions())
	}
	root, err := s.sup.findRoot(ctx, lang, path.Dir(abs))
	if err != nil {
		return nil, err
	}
	if root == "" {
		return nil, userErrorf("no %s root marker (%s) at or above %s inside the workspace, so the %s server does not start; %s, or call lsp with action \"status\"",
			lang.Name, strings.Join(lang.RootMarkers, ", "), s.rel(path.Dir(abs)), lang.Name, rootHint(lang))
	}
	return &fileTarget{abs: abs, lang: lang, root: root}, nil
}

// readDocs reads files in one round trip; a missing file is an error that
// names it.
func (s *session) readDocs(ctx context.Context, files []string) (map[string]string, error) {
	res, err := s.conn.Agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.conn.Workspace, Paths: files, MaxBytesEach: maxFileBytes})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, f := range res.Files {
		if f.Skipped != "" {
			if i == 0 {
				return nil, userErrorf("file %s cannot be read: %s", s.rel(files[0]), f.Skipped)
			}
			continue
		}
		out[files[i]] = string(f.Data)
	}
	return out, nil
}

// withServer runs fn against the target's server with the file (and every
// other open file) synced from disk. When the server turns out to have
// died, it is restarted and fn retried once.
func (s *session) withServer(ctx context.Context, t *fileTarget, fn func(ctx context.Context, srv *server, doc *document) error) error {
	for attempt := 0; ; attempt++ {
		srv, err := s.sup.server(ctx, t.lang, t.root)
		if err != nil {
			return err
		}
		doc, _, err := s.syncFiles(ctx, srv, t.abs)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, s.m.cfg.requestTimeout)
			err = fn(rctx, srv, doc)
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = errdefs.DeadlineExceeded("the %s language server did not answer within %s; try again, or call lsp with action \"reload\" if it is stuck", t.lang.Name, s.m.cfg.requestTimeout)
			}
			cancel()
		}
		if attempt == 0 && errors.Is(err, jsonrpc.ErrClosed) {
			s.sup.crashed(srv)
			continue
		}
		return err
	}
}

// withServerFast is withServer for read-only requests on a file the server
// already has open: the request is sent against the server's copy while
// the disk is read in the same moment, and its response is used only when
// the read shows that nothing changed; otherwise it is discarded and the
// request is made again after the sync. A warm call then costs one round
// trip to the server and one to the disk side by side, not one after the
// other. fn must have no effects beyond its own result.
func (s *session) withServerFast(ctx context.Context, t *fileTarget, fn func(ctx context.Context, srv *server, doc *document) error) error {
	srv, err := s.sup.server(ctx, t.lang, t.root)
	if err != nil {
		return err
	}
	cached, open := srv.docText(t.abs)
	if !open || !srv.alive() {
		return s.withServer(ctx, t, fn)
	}
	s.readDone = make(chan struct{})
	sctx, cancel := context.WithTimeout(ctx, s.m.cfg.requestTimeout)
	defer cancel()
	spec := make(chan error, 1)
	go func() { spec <- fn(sctx, srv, newDocument(cached)) }()
	_, changed, serr := s.syncFiles(ctx, srv, t.abs)
	close(s.readDone)
	if serr == nil && !changed {
		err := <-spec
		s.readDone = nil
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = errdefs.DeadlineExceeded("the %s language server did not answer within %s; try again, or call lsp with action \"reload\" if it is stuck", t.lang.Name, s.m.cfg.requestTimeout)
		}
		if errors.Is(err, jsonrpc.ErrClosed) {
			s.sup.crashed(srv)
			return s.withServer(ctx, t, fn)
		}
		return err
	}
	cancel()
	<-spec
	s.readDone = nil
	if serr != nil && !errors.Is(serr, jsonrpc.ErrClosed) {
		return serr
	}
	return s.withServer(ctx, t, fn)
}

// syncFiles brings the server's open documents (and file) up to date with
// the disk, so that a result never rests on text the model has changed
// since. It returns file's document.
func (s *session) syncFiles(ctx context.Context, srv *server, file string) (*document, bool, error) {
	files := []string{file}
	seen := map[string]bool{file: true}
	for _, f := range srv.openFiles() {
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	open := len(files)
	// Files recent results pointed into ride along in the same round trip:
	// navigation tends to return to them, and their lines are then quoted
	// from this read instead of a second one.
	for _, f := range srv.recentFiles() {
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	texts, err := s.readDocs(ctx, files)
	if err != nil {
		return nil, false, err
	}
	if s.read == nil {
		s.read = map[string]string{}
	}
	for f, t := range texts {
		s.read[f] = t
	}
	changed := false
	for _, f := range files[:open] {
		text, ok := texts[f]
		if !ok {
			srv.closeDoc(f)
			changed = true
			continue
		}
		_, sent, err := srv.syncDoc(f, text, false)
		if err != nil {
			return nil, false, err
		}
		changed = changed || sent
	}
	return newDocument(texts[file]), changed, nil
}
