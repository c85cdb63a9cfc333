package egresstest

import (
	"crypto/rand"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitClientEnv is the environment for the git client on the host: it
// trusts ca, never prompts and reads no user configuration.
func gitClientEnv(t *testing.T, ca *CA) []string {
	return hostEnv(t, "GIT_SSL_CAINFO="+ca.PEMFile(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=tester", "GIT_AUTHOR_EMAIL=tester@example.test",
		"GIT_COMMITTER_NAME=tester", "GIT_COMMITTER_EMAIL=tester@example.test")
}

// withCredentials is u with the user and password in it.
func withCredentials(t *testing.T, u, user, password string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(user, password)
	return p.String()
}

// git clones with the credentials, and what it cloned is the seeded
// commit; it pushes a new commit that lands in the server's repository;
// the server saw the credential.
func TestGitCloneAndPush(t *testing.T) {
	gitBin := need(t, "git")
	ca := NewCA(t)
	g := NewGit(t, ca, "git.test", "agent", "s3cret-pass")
	env := gitClientEnv(t, ca)
	remote := withCredentials(t, g.LoopbackURL()+"/"+GitRepo, g.User(), g.Password())

	dir := filepath.Join(t.TempDir(), "clone")
	run(t, "", env, gitBin, "clone", "-q", remote, dir)
	if head := strings.TrimSpace(run(t, dir, env, gitBin, "rev-parse", "HEAD")); head != g.SeedCommit() {
		t.Fatalf("cloned HEAD = %s, want the seed %s", head, g.SeedCommit())
	}
	data, err := os.ReadFile(filepath.Join(dir, GitSeedFile))
	if err != nil || string(data) != GitSeedText {
		t.Fatalf("cloned %s = %q, %v; want %q", GitSeedFile, data, err, GitSeedText)
	}

	if err := os.WriteFile(filepath.Join(dir, "pushed.txt"), []byte("pushed through the test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, env, gitBin, "add", "pushed.txt")
	run(t, dir, env, gitBin, "commit", "-q", "-m", "A pushed commit")
	run(t, dir, env, gitBin, "push", "-q", "origin", GitBranch)
	head := strings.TrimSpace(run(t, dir, env, gitBin, "rev-parse", "HEAD"))

	refs, err := g.Refs()
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/heads/"+GitBranch] != head {
		t.Errorf("the server's %s = %s after the push, want the pushed %s (refs %v)", GitBranch, refs["refs/heads/"+GitBranch], head, refs)
	}
	if got, err := g.FileAt(GitBranch, "pushed.txt"); err != nil || got != "pushed through the test\n" {
		t.Errorf("the server's pushed.txt = %q, %v", got, err)
	}
	auths := g.Authorizations()
	if len(auths) == 0 {
		t.Fatal("the server recorded no Authorization header")
	}
	for _, a := range auths {
		if a != g.BasicAuth() {
			t.Errorf("the server received Authorization %q, want %q", a, g.BasicAuth())
		}
	}
	if !requested(g.Server, "POST", "/"+GitRepo+"/git-receive-pack") {
		t.Errorf("no receive-pack request was recorded: %v", g.Requests())
	}
}

// Without credentials, or with a wrong password, the clone is refused
// with 401 and nothing is served.
func TestGitNeedsCredentials(t *testing.T) {
	gitBin := need(t, "git")
	ca := NewCA(t)
	g := NewGit(t, ca, "git.test", "agent", "s3cret-pass")
	env := gitClientEnv(t, ca)
	for _, remote := range []string{
		g.LoopbackURL() + "/" + GitRepo,
		withCredentials(t, g.LoopbackURL()+"/"+GitRepo, g.User(), "wrong"),
	} {
		_, stderr, err := runErr("", env, gitBin, "clone", "-q", remote, filepath.Join(t.TempDir(), "clone"))
		if err == nil {
			t.Fatalf("git clone %s succeeded", remote)
		}
		if !strings.Contains(stderr, "Authentication failed") && !strings.Contains(stderr, "could not read Username") {
			t.Errorf("git clone %s failed, but not for want of credentials: %s", remote, stderr)
		}
	}
	for _, r := range g.Requests() {
		if r.Status != 401 {
			t.Errorf("%s %s answered %d without valid credentials, want 401", r.Method, r.Path, r.Status)
		}
	}
}

// A push larger than git's post buffer (1 MiB) is sent chunked over
// HTTP/1.1 (a proxy in between may well speak it), which net/http/cgi
// alone refuses; it lands all the same. Over HTTP/2 the same push has no
// length either, and lands too.
func TestGitLargePush(t *testing.T) {
	for _, version := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(strings.ReplaceAll(version, "/", ""), func(t *testing.T) { testGitLargePush(t, version) })
	}
}

func testGitLargePush(t *testing.T, version string) {
	gitBin := need(t, "git")
	ca := NewCA(t)
	g := NewGit(t, ca, "git.test", "agent", "s3cret-pass")
	env := append(gitClientEnv(t, ca), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.version", "GIT_CONFIG_VALUE_0="+version)
	dir := filepath.Join(t.TempDir(), "clone")
	run(t, "", env, gitBin, "clone", "-q", withCredentials(t, g.LoopbackURL()+"/"+GitRepo, g.User(), g.Password()), dir)
	big := make([]byte, 3<<20)
	rand.Read(big) // incompressible, so the pack stays over 1 MiB
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, env, gitBin, "add", "big.bin")
	run(t, dir, env, gitBin, "commit", "-q", "-m", "A large commit")
	run(t, dir, env, gitBin, "push", "-q", "origin", GitBranch)
	head := strings.TrimSpace(run(t, dir, env, gitBin, "rev-parse", "HEAD"))
	refs, err := g.Refs()
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/heads/"+GitBranch] != head {
		t.Errorf("the server's %s = %s after the push, want %s", GitBranch, refs["refs/heads/"+GitBranch], head)
	}
	wantProto := map[string]string{"HTTP/1.1": "HTTP/1.1", "HTTP/2": "HTTP/2.0"}[version]
	unsized := false
	for _, r := range g.Requests() {
		if r.Path == "/"+GitRepo+"/git-receive-pack" && r.Header.Get("Content-Length") == "" {
			unsized = true
			if r.Proto != wantProto {
				t.Errorf("the push came over %s, want %s", r.Proto, wantProto)
			}
		}
	}
	if !unsized {
		t.Error("the push was sent with a length, so this test did not try what it is for")
	}
}
