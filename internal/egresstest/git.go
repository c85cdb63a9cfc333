package egresstest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The repository Git serves, and the file of its one seeded commit.
const (
	GitRepo       = "repo.git"
	GitBranch     = "main"
	GitSeedFile   = "README.md"
	GitSeedText   = "Seeded by sandboxd's egress tests.\n"
	gitCmdTimeout = 30 * time.Second
)

// Git is a Git server speaking the smart HTTP protocol through the real
// `git http-backend` (run as CGI), serving one bare repository, GitRepo,
// whose branch GitBranch holds one commit adding GitSeedFile. Every
// request needs HTTP basic auth with the user and password it was made
// with (else 401), and pushes are accepted.
//
// Besides the server's goroutines, each request runs one git http-backend
// process for its duration.
type Git struct {
	*Server
	user, password string
	root           string   // GIT_PROJECT_ROOT, holding GitRepo
	env            []string // for git commands on the repository: no user or system configuration
	seed           string
}

// NewGit starts a Git server under name (for example "git.test") with the
// credentials user and password, closed at t's cleanup. It skips t when
// git is not installed.
func NewGit(t testing.TB, ca *CA, name, user, password string, opts ...Option) *Git {
	t.Helper()
	if user == "" || password == "" || strings.Contains(user, ":") {
		t.Fatalf("egresstest: git credentials %q/%q cannot be used for basic auth; pass a user without ':' and a password, both non-empty", user, "***")
	}
	_, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git is not installed on this machine, so no Git server can run: %v", err)
	}
	dir := t.TempDir()
	g := &Git{user: user, password: password, root: filepath.Join(dir, "srv")}
	g.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=egresstest", "GIT_AUTHOR_EMAIL=egresstest@example.test",
		"GIT_COMMITTER_NAME=egresstest", "GIT_COMMITTER_EMAIL=egresstest@example.test",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
	execPath, err := g.git("", "--exec-path")
	if err != nil {
		t.Fatal(err)
	}
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git is installed without git-http-backend (looked at %s), so no Git server can run: %v", backend, err)
	}
	if g.seed, err = g.seedRepo(dir); err != nil {
		t.Fatal(err)
	}

	s := listen(t, ca, name, opts)
	g.Server = s
	cgiHandler := &cgi.Handler{
		Path: backend,
		Dir:  g.root,
		Env: append(append([]string(nil), g.env...),
			"GIT_PROJECT_ROOT="+g.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER="+user),
		Stderr: errorLog{s},
	}
	s.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(g.user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(g.password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="egresstest git"`)
			http.Error(w, "egresstest: this Git server needs basic auth with its user and password", http.StatusUnauthorized)
			return
		}
		if len(r.TransferEncoding) > 0 || r.ContentLength < 0 {
			// A body without a length (git sends large pushes chunked over
			// HTTP/1.1, and with no length over HTTP/2): net/http/cgi
			// refuses chunked bodies, and a receive-pack that answers while
			// the client still sends can stall an HTTP/2 upload. The body is
			// read whole first (capped), then given with its length.
			body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBytes+1))
			if err != nil || len(body) > maxPushBytes {
				http.Error(w, fmt.Sprintf("egresstest: the push body could not be read whole (at most %d bytes): %v", maxPushBytes, err), http.StatusRequestEntityTooLarge)
				return
			}
			r = r.Clone(r.Context())
			r.TransferEncoding = nil
			r.ContentLength = int64(len(body))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	return g
}

// maxPushBytes caps a push body read whole.
const maxPushBytes = 256 << 20

// User is the user name the server wants.
func (g *Git) User() string { return g.user }

// Password is the password the server wants.
func (g *Git) Password() string { return g.password }

// BasicAuth is the Authorization header value the server accepts.
func (g *Git) BasicAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(g.user+":"+g.password))
}

// CloneURL is "https://name:PORT/repo.git", without credentials.
func (g *Git) CloneURL() string { return g.URL() + "/" + GitRepo }

// RepoDir is the bare repository's folder on the host.
func (g *Git) RepoDir() string { return filepath.Join(g.root, GitRepo) }

// SeedCommit is the hash of the commit the repository started with.
func (g *Git) SeedCommit() string { return g.seed }

// Refs are the repository's refs and the objects they name, read now
// ("refs/heads/main": hash), for checking that a push landed.
func (g *Git) Refs() (map[string]string, error) {
	out, err := g.git(g.RepoDir(), "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, hash, ok := strings.Cut(line, " "); ok {
			refs[name] = hash
		}
	}
	return refs, nil
}

// FileAt is the contents of path in the repository at rev (a branch,
// hash or other revision), for checking what a push carried.
func (g *Git) FileAt(rev, path string) (string, error) {
	return g.gitRaw(g.RepoDir(), "show", rev+":"+path)
}

// Authorizations are the Authorization header values of the requests the
// server recorded, in order, leaving out requests without one.
func (g *Git) Authorizations() []string {
	var out []string
	for _, r := range g.Requests() {
		if v := r.Header.Get("Authorization"); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// seedRepo makes the bare repository with its first commit, and returns
// the commit's hash.
func (g *Git) seedRepo(dir string) (string, error) {
	work := filepath.Join(dir, "seed")
	bare := g.RepoDir()
	for _, d := range []string{work, g.root, filepath.Join(dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("egresstest: make the Git server's folders: %w", err)
		}
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{g.root, []string{"init", "-q", "--bare", "--initial-branch=" + GitBranch, GitRepo}},
		{bare, []string{"config", "http.receivepack", "true"}},
		{work, []string{"init", "-q", "--initial-branch=" + GitBranch}},
	}
	for _, s := range steps {
		if _, err := g.git(s.dir, s.args...); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(work, GitSeedFile), []byte(GitSeedText), 0o644); err != nil {
		return "", fmt.Errorf("egresstest: write the seed file: %w", err)
	}
	for _, args := range [][]string{
		{"add", GitSeedFile},
		{"commit", "-q", "-m", "Seed the repository"},
		{"push", "-q", bare, GitBranch},
	} {
		if _, err := g.git(work, args...); err != nil {
			return "", err
		}
	}
	return g.git(bare, "rev-parse", "refs/heads/"+GitBranch)
}

// git runs git in dir and returns its trimmed output.
func (g *Git) git(dir string, args ...string) (string, error) {
	out, err := g.gitRaw(dir, args...)
	return strings.TrimSpace(out), err
}

func (g *Git) gitRaw(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitCmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = g.env
	var stderr cappedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("egresstest: git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
