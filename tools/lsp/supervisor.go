package lsp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

// Labels on every server process, so that a later sandboxd can find them.
const (
	labelRole = "sandboxd.role"
	roleLSP   = "lsp"
	labelLang = "sandboxd.lsp.language"
	labelRoot = "sandboxd.lsp.root"
)

// supervisor owns the language servers of one sandbox.
//
// Goroutines: its servers', and the delivery goroutine of its workspace
// watch subscription (watched.go), which applies outside changes to the
// servers. drop ends the subscription, then closes the streams of every
// server (servers keep running inside the sandbox).
type supervisor struct {
	m         *Manager
	id        string
	agent     *agent.Client
	workspace string
	watch     *agent.Subscription // nil without an agent

	mu       sync.Mutex // guards servers, starting, restarts, bins, swept, roots
	servers  map[string]*server
	starting map[string]*startOp
	restarts map[string][]time.Time
	bins     map[string][]string // language -> argv with the binary resolved
	swept    bool
	roots    map[string]rootHit // language + dir -> root found, briefly
}

// rootHit is a root found for a directory; it is trusted for rootTTL, so
// that a burst of calls does not stat the same markers again while a marker
// created or removed since is noticed soon.
type rootHit struct {
	root string
	at   time.Time
}

const rootTTL = 10 * time.Second

type startOp struct {
	done chan struct{}
	srv  *server
	err  error
	// missed holds the outside changes delivered while the server
	// started (guarded by supervisor.mu): it may have read those files
	// before they changed, and is told of them once it runs.
	missed []proto.WatchEvent
}

// maxMissed caps the batches kept for a starting server; past it they
// collapse into one overflow (a full resync).
const maxMissed = 64

func newSupervisor(m *Manager, conn *tools.SandboxConn) *supervisor {
	s := &supervisor{
		m: m, id: conn.ID, agent: conn.Agent, workspace: path.Clean(conn.Workspace),
		servers: map[string]*server{}, starting: map[string]*startOp{}, restarts: map[string][]time.Time{},
		bins: map[string][]string{}, roots: map[string]rootHit{},
	}
	s.subscribe()
	return s
}

func key(lang *Language, root string) string { return lang.Name + "\x00" + root }

// drop closes this sandboxd's streams to every server.
func (s *supervisor) drop() {
	if s.watch != nil {
		s.watch.Close()
	}
	s.mu.Lock()
	srvs := s.servers
	s.servers = map[string]*server{}
	s.mu.Unlock()
	for _, srv := range srvs {
		if srv.conn != nil {
			go srv.conn.Close()
		}
	}
}

// running lists the live servers.
func (s *supervisor) running() []*server {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*server
	for _, srv := range s.servers {
		if srv.alive() {
			out = append(out, srv)
		}
	}
	return out
}

// existing returns the live server for (lang, root) without starting one.
func (s *supervisor) existing(lang *Language, root string) *server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv := s.servers[key(lang, root)]; srv != nil && srv.alive() {
		return srv
	}
	return nil
}

// server returns the running server for (lang, root), starting it if
// needed. A server found dead is restarted within the root's budget.
func (s *supervisor) server(ctx context.Context, lang *Language, root string) (*server, error) {
	k := key(lang, root)
	s.mu.Lock()
	if srv := s.servers[k]; srv != nil && srv.alive() {
		s.mu.Unlock()
		return srv, nil
	}
	if op := s.starting[k]; op != nil {
		s.mu.Unlock()
		select {
		case <-op.done:
			return op.srv, op.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if old := s.servers[k]; old != nil {
		// It crashed: count a restart against the root's budget.
		now := time.Now()
		var recent []time.Time
		for _, t := range s.restarts[k] {
			if now.Sub(t) < s.m.cfg.restartWindow {
				recent = append(recent, t)
			}
		}
		if len(recent) >= s.m.cfg.restartBudget {
			s.restarts[k] = recent
			s.mu.Unlock()
			return nil, errdefs.Unavailable("the %s language server for %s crashed %d times in %s and is not restarted again; last output: %s. Fix the cause, then call lsp with action \"reload\"",
				lang.Name, root, len(recent), s.m.cfg.restartWindow, orNone(old.stderr.last(400)))
		}
		s.restarts[k] = append(recent, now)
		delete(s.servers, k)
		s.m.countRestart(lang.Name)
	}
	op := &startOp{done: make(chan struct{})}
	s.starting[k] = op
	s.mu.Unlock()

	// The start outlives the caller's context: a second caller may be
	// waiting for it, and a half-started server would be a leak.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.m.cfg.startTimeout)
	op.srv, op.err = s.start(sctx, lang, root)
	cancel()
	s.mu.Lock()
	delete(s.starting, k)
	missed := op.missed
	op.missed = nil
	if op.err == nil {
		s.servers[k] = op.srv
	}
	s.mu.Unlock()
	if op.err == nil && len(missed) > 0 {
		// Registered first, so later batches reach it directly; the
		// missed ones may interleave with those, which is harmless.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), watchApplyTimeout)
		for _, ev := range missed {
			s.apply(actx, op.srv, ev)
		}
		acancel()
	}
	close(op.done)
	return op.srv, op.err
}

// restart stops the server for (lang, root), if any, and starts a new one;
// reload uses it, and it resets the restart budget.
func (s *supervisor) restart(ctx context.Context, lang *Language, root string) (*server, error) {
	k := key(lang, root)
	s.mu.Lock()
	old := s.servers[k]
	delete(s.servers, k)
	delete(s.restarts, k)
	s.mu.Unlock()
	if old != nil {
		s.stop(ctx, old)
	}
	return s.server(ctx, lang, root)
}

// crashed is called when a request found the server's connection closed;
// the next server() call restarts it.
func (s *supervisor) crashed(srv *server) {
	srv.conn.Close()
}

// stop shuts a server down: the protocol's shutdown and exit, then a kill
// of its process group, then its streams closed.
func (s *supervisor) stop(ctx context.Context, srv *server) {
	srv.shutdown(ctx)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if info, err := s.agent.Wait(wctx, &proto.WaitRequest{ID: srv.procID, Timeout: time.Second}); err != nil || info.Running {
		_ = s.agent.Signal(wctx, &proto.SignalRequest{ID: srv.procID, Signal: "KILL", Group: true})
		_, _ = s.agent.Wait(wctx, &proto.WaitRequest{ID: srv.procID, Timeout: 2 * time.Second})
	}
	srv.conn.Close()
}

// sweep kills servers left by an earlier sandboxd (or an earlier session
// of this one): their protocol state is unknown, so they are restarted
// cleanly rather than resumed.
func (s *supervisor) sweep(ctx context.Context) {
	s.mu.Lock()
	if s.swept {
		s.mu.Unlock()
		return
	}
	s.swept = true
	s.mu.Unlock()
	procs, err := s.agent.List(ctx, &proto.ListRequest{Labels: map[string]string{labelRole: roleLSP}})
	if err != nil {
		return
	}
	for _, p := range procs {
		if p.Running {
			s.kill(ctx, p.ID)
		}
	}
}

func (s *supervisor) kill(ctx context.Context, id string) {
	_ = s.agent.Signal(ctx, &proto.SignalRequest{ID: id, Signal: "KILL", Group: true})
	_, _ = s.agent.Wait(ctx, &proto.WaitRequest{ID: id, Timeout: 3 * time.Second})
}

// start spawns, attaches and initializes one server.
func (s *supervisor) start(ctx context.Context, lang *Language, root string) (*server, error) {
	s.sweep(ctx)
	argv, missing, err := s.binary(ctx, lang)
	if err != nil {
		return nil, err
	}
	if argv == nil {
		return nil, errdefs.FailedPrecondition("the %s language server cannot start: %s", lang.Name, missing)
	}
	name := "lsp/" + lang.Name + root
	req := &proto.SpawnRequest{
		Name: name, Argv: argv, Dir: root, Env: lang.Env, Stdin: true,
		Labels: map[string]string{labelRole: roleLSP, labelLang: lang.Name, labelRoot: root},
	}
	info, err := s.agent.Spawn(ctx, req)
	if errors.Is(err, errdefs.ErrConflict) {
		// A server by that name still runs (from before a restart): its
		// protocol state is unknown, so replace it.
		if procs, lerr := s.agent.List(ctx, &proto.ListRequest{Labels: req.Labels}); lerr == nil {
			for _, p := range procs {
				if p.Running && p.Name == name {
					s.kill(ctx, p.ID)
				}
			}
		}
		info, err = s.agent.Spawn(ctx, req)
	}
	if err != nil {
		return nil, fmt.Errorf("the %s language server cannot be started: %w", lang.Name, err)
	}
	srv := newServer(lang, root)
	srv.procID, srv.pid, srv.argv, srv.started = info.ID, info.PID, argv, time.Now()
	// Changes made before the watch is established are never reported:
	// such a server is resynced once it is (syncWatch).
	srv.unwatched = s.watch != nil && !s.watch.Status().Active
	fail := func(err error) (*server, error) {
		s.kill(context.WithoutCancel(ctx), info.ID)
		if srv.conn != nil {
			srv.conn.Close()
		}
		msg := srv.stderr.last(600)
		return nil, errdefs.Unavailable("the %s language server (%s) did not start in %s: %v; its last output: %s",
			lang.Name, strings.Join(argv, " "), root, err, orNone(msg))
	}
	stdin, err := s.agent.Attach(ctx, info.ID, "stdin")
	if err != nil {
		return fail(err)
	}
	stdout, err := s.agent.Attach(ctx, info.ID, "stdout")
	if err != nil {
		stdin.Close()
		return fail(err)
	}
	stderr, err := s.agent.Attach(ctx, info.ID, "stderr")
	if err != nil {
		stdin.Close()
		stdout.Close()
		return fail(err)
	}
	go func() {
		// Drained so the server never blocks on a full stderr buffer.
		_, _ = io.Copy(srv.stderr, stderr)
		stderr.Close()
	}()
	srv.conn = jsonrpc.New(duplex{r: stdout, w: stdin}, srv)
	go func() {
		<-srv.conn.Done()
		stderr.Close()
	}()
	srv.mu.Lock()
	srv.lastEvent = time.Now()
	srv.mu.Unlock()
	if err := srv.initialize(ctx, info.PID); err != nil {
		return fail(err)
	}
	srv.waitReady(ctx, s.m.cfg.startTimeout)
	return srv, nil
}

// binary resolves the first of the language's commands whose binary exists
// in the sandbox. With none, missing says what was looked for.
func (s *supervisor) binary(ctx context.Context, lang *Language) (argv []string, missing string, err error) {
	s.mu.Lock()
	if b, ok := s.bins[lang.Name]; ok {
		s.mu.Unlock()
		return b, "", nil
	}
	s.mu.Unlock()
	var names []string
	for _, c := range lang.Commands {
		names = append(names, c[0])
	}
	script := `for b in "$@"; do p=$(command -v "$b" 2>/dev/null) && echo "$p" || echo; done`
	res, err := s.agent.Exec(ctx, &proto.ExecRequest{
		Argv: append([]string{"/bin/sh", "-c", script, "sh"}, names...), Timeout: 10 * time.Second, MaxBytes: 8 << 10,
	})
	if err != nil {
		return nil, "", fmt.Errorf("cannot look for the %s language server's binary: %w", lang.Name, err)
	}
	found := strings.Split(strings.TrimRight(string(res.Stdout), "\n"), "\n")
	for i, c := range lang.Commands {
		if i < len(found) && strings.TrimSpace(found[i]) != "" {
			argv := append([]string{strings.TrimSpace(found[i])}, c[1:]...)
			s.mu.Lock()
			s.bins[lang.Name] = argv
			s.mu.Unlock()
			return argv, "", nil
		}
	}
	return nil, missingBinary(lang, names), nil
}

// findRoot is the nearest directory at or above dir, inside the workspace,
// holding one of the language's root markers; "" when there is none.
func (s *supervisor) findRoot(ctx context.Context, lang *Language, dir string) (string, error) {
	dir = path.Clean(dir)
	k := lang.Name + "\x00" + dir
	s.mu.Lock()
	hit, ok := s.roots[k]
	s.mu.Unlock()
	if ok && time.Since(hit.at) < rootTTL {
		return hit.root, nil
	}
	root, err := s.searchRoot(ctx, lang, dir)
	if err == nil && root != "" {
		s.mu.Lock()
		if len(s.roots) > 4096 {
			clear(s.roots)
		}
		s.roots[k] = rootHit{root: root, at: time.Now()}
		s.mu.Unlock()
	}
	return root, err
}

func (s *supervisor) searchRoot(ctx context.Context, lang *Language, dir string) (string, error) {
	for {
		for _, mk := range lang.RootMarkers {
			_, err := s.agent.Stat(ctx, &proto.StatRequest{Root: s.workspace, Path: path.Join(dir, mk)})
			if err == nil {
				return dir, nil
			}
			if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrInvalidArgument) {
				return "", err
			}
		}
		if dir == s.workspace || dir == "/" || !within(s.workspace, dir) {
			return "", nil
		}
		dir = path.Dir(dir)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
