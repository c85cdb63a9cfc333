package interp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/e2b/envd"
	"github.com/sandboxd/sandboxd/errdefs"
)

// ctxRecord is one context: E2B's {id, language, cwd}.
type ctxRecord struct {
	id, lang, cwd string
}

// isDefault: a default context's id is its language, and its kernel is
// the conversation's own.
func (c ctxRecord) isDefault() bool { return c.id == c.lang }

func (c ctxRecord) wire() contextJSON { return contextJSON{ID: c.id, Language: c.lang, Cwd: c.cwd} }

type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// languages are the kernels served, by E2B's language name.
var languages = []string{"python", "javascript"}

// language normalizes a language name as E2B does ("" is python, "js" is
// javascript), and refuses the ones sandboxd has no kernel for.
func language(name string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(name))
	switch l {
	case "", "python", "python3", "py":
		return "python", nil
	case "javascript", "js", "node":
		return "javascript", nil
	}
	return "", errdefs.InvalidArgument("language %q has no kernel here: this code interpreter runs python and javascript (E2B's r, java, bash and typescript kernels are not served)", name)
}

// defaultContext is the default context of lang in sb.
func defaultContext(sb *box, lang string) ctxRecord {
	return ctxRecord{id: lang, lang: lang, cwd: sb.dir}
}

// defaultDir is where sb's default contexts start, and a made context
// without a cwd: the home of the E2B account where the sandbox has it
// (E2B's /home/user, where the files API takes relative paths from), else
// the workspace. Found once per sandbox.
func (s *Server) defaultDir(ctx context.Context, sb *box) string {
	b := s.contexts(sb)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" {
		return b.dir
	}
	f, err := sb.agent.ReadFile(ctx, &proto.ReadFileRequest{Root: "/", Path: "/etc/passwd", MaxBytes: 1 << 20})
	if err != nil {
		return workspace(sb) // not kept: the next call looks again
	}
	b.dir = workspace(sb)
	if home, ok := envd.LookupHome(f.Data, s.cfg.user); ok && home != "/" {
		if st, err := sb.agent.Stat(ctx, &proto.StatRequest{Root: "/", Path: home}); err == nil && st.IsDir {
			b.dir = home
		}
	}
	return b.dir
}

func workspace(sb *box) string {
	if sb.info.Workspace != "" {
		return sb.info.Workspace
	}
	return "/workspace"
}

// contexts returns sb's record of contexts; load fills it.
func (s *Server) contexts(sb *box) *boxContexts {
	b := s.reg.of(sb.tenant + "\x00" + sb.info.ID)
	return b
}

// load fills b from the running context kernels' labels once (a record
// this server did not hold: after a restart, or once evicted); the caller
// holds b.mu.
func (s *Server) load(ctx context.Context, sb *box, b *boxContexts) error {
	if b.loaded {
		return nil
	}
	ks, err := s.kernels.ContextKernels(ctx, sb.agent)
	if err != nil {
		return errdefs.Unavailable("the sandbox's kernels could not be listed: %v", err)
	}
	for _, k := range ks {
		if k.Running {
			b.ctxs[k.ID] = ctxRecord{id: k.ID, lang: k.Language, cwd: k.Dir}
		}
	}
	b.loaded = true
	return nil
}

// find returns the context id of sb.
func (s *Server) find(ctx context.Context, sb *box, id string) (ctxRecord, error) {
	for _, l := range languages {
		if id == l {
			return defaultContext(sb, l), nil
		}
	}
	b := s.contexts(sb)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := s.load(ctx, sb, b); err != nil {
		return ctxRecord{}, err
	}
	c, ok := b.ctxs[id]
	if !ok {
		return ctxRecord{}, errdefs.NotFound("Context %s not found", id)
	}
	return c, nil
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request, sb *box) {
	b := s.contexts(sb)
	b.mu.Lock()
	err := s.load(r.Context(), sb, b)
	var made []ctxRecord
	for _, c := range b.ctxs {
		made = append(made, c)
	}
	b.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	sort.Slice(made, func(i, j int) bool { return made[i].id < made[j].id })
	out := []contextJSON{}
	for _, l := range languages {
		out = append(out, defaultContext(sb, l).wire())
	}
	for _, c := range made {
		out = append(out, c.wire())
	}
	writeJSON(w, http.StatusOK, out)
}

type createRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request, sb *box) {
	var req createRequest
	if err := s.decode(r, &req, "create context"); err != nil {
		s.fail(w, err)
		return
	}
	lang, err := language(req.Language)
	if err != nil {
		s.fail(w, err)
		return
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = sb.dir
	}
	if !path.IsAbs(cwd) {
		s.fail(w, errdefs.InvalidArgument("cwd %q is not an absolute path; give the context's folder as an absolute path in the sandbox, such as %s", cwd, workspace(sb)))
		return
	}
	cwd = path.Clean(cwd)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.opTimeout)
	defer cancel()
	if st, err := sb.agent.Stat(ctx, &proto.StatRequest{Root: "/", Path: cwd}); err != nil || !st.IsDir {
		s.fail(w, errdefs.InvalidArgument("cwd %s is not a folder in the sandbox; make it first (files.makeDir) or give another", cwd))
		return
	}
	b := s.contexts(sb)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := s.load(ctx, sb, b); err != nil {
		s.fail(w, err)
		return
	}
	if len(b.ctxs) >= s.cfg.maxContexts {
		s.fail(w, errdefs.ResourceExhausted("this sandbox has %d code contexts, the most allowed; remove one (removeCodeContext) before creating another, or run code in an existing one", len(b.ctxs)))
		return
	}
	c := ctxRecord{id: newID(), lang: lang, cwd: cwd}
	if err := s.kernels.StartKernel(ctx, sb.target(c), lang); err != nil {
		s.fail(w, fmt.Errorf("the %s context could not be created: %w", lang, err))
		return
	}
	b.ctxs[c.id] = c
	writeJSON(w, http.StatusOK, c.wire())
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request, sb *box, id string) {
	c, err := s.find(r.Context(), sb, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.opTimeout)
	defer cancel()
	b := s.contexts(sb)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := s.kernels.StopKernel(ctx, sb.target(c), c.lang); err != nil {
		s.fail(w, fmt.Errorf("context %s could not be removed: %w", id, err))
		return
	}
	// A default context stays listed: its next cell starts a clean kernel.
	delete(b.ctxs, id)
	writeJSON(w, http.StatusOK, nil)
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request, sb *box, id string) {
	c, err := s.find(r.Context(), sb, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.opTimeout)
	defer cancel()
	if err := s.kernels.RestartKernel(ctx, sb.target(c), c.lang); err != nil {
		s.fail(w, fmt.Errorf("context %s could not be restarted: %w", id, err))
		return
	}
	writeJSON(w, http.StatusOK, nil)
}

// newID is a context id: 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
