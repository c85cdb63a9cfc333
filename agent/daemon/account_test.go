package daemon_test

import (
	"bufio"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// whoami prints who a command is and where, one item a line: uid, gid,
// groups, HOME, USER, LOGNAME, the directory.
const whoami = `id -u; id -g; id -G; echo "$HOME"; echo "$USER"; echo "$LOGNAME"; pwd`

// identity is whoami's output.
type identity struct {
	uid, gid, groups, home, user, logname, dir string
}

func parseIdentity(t *testing.T, out []byte) identity {
	t.Helper()
	l := strings.Split(strings.TrimRight(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n"), "\n")
	if len(l) != 7 {
		t.Fatalf("the command printed %q, not the seven lines of who it is", out)
	}
	return identity{l[0], l[1], l[2], l[3], l[4], l[5], l[6]}
}

// needRoot skips a test that changes users unless it runs as root, as the
// agent does in a sandbox.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as another account needs the agent to run as root")
	}
}

// nobody is the account the tests act as: Debian's nobody, uid 65534,
// whose home /nonexistent does not exist.
func nobody(t *testing.T) *user.User {
	t.Helper()
	needRoot(t)
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("this machine has no account nobody: %v", err)
	}
	if _, err := os.Stat(u.HomeDir); err == nil {
		t.Skipf("nobody's home %s exists here; the tests expect it not to", u.HomeDir)
	}
	return u
}

// openDir is a temporary directory every account may enter (the parent
// of a test's temporary directories is root's alone).
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func execAs(t *testing.T, c *agent.Client, r *proto.ExecRequest) identity {
	t.Helper()
	r.Argv = []string{"sh", "-c", whoami}
	resp, err := c.Exec(testCtx(t), r)
	if err != nil {
		t.Fatalf("exec as %q: %v", r.User, err)
	}
	if resp.ExitCode != 0 {
		t.Fatalf("exec as %q exited %d: %s", r.User, resp.ExitCode, resp.Stderr)
	}
	return parseIdentity(t, resp.Stdout)
}

// An exec as an account runs with its uid, gid and groups only, with
// HOME, USER and LOGNAME of the account unless the request gives them, in
// its home (or "/" for an account whose home does not exist) unless the
// request names a directory; without a user it runs as the agent's own
// user where the agent is. The same whether or not a supervisor runs the
// command (the sandbox's agent supervises every exec).
func TestExecAsAccount(t *testing.T) {
	nb := nobody(t)
	wd, _ := os.Getwd()
	for _, tc := range []struct {
		name string
		c    func(t *testing.T) *agent.Client
	}{
		{"unsupervised", func(t *testing.T) *agent.Client { _, c := startPair(t); return c }},
		{"supervised", supervisedPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c(t)
			got := execAs(t, c, &proto.ExecRequest{User: "nobody"})
			want := identity{nb.Uid, nb.Gid, nb.Gid, nb.HomeDir, "nobody", "nobody", "/"}
			if got != want {
				t.Fatalf("as nobody: %+v, want %+v", got, want)
			}
			if got := execAs(t, c, &proto.ExecRequest{User: nb.Uid}); got != want {
				t.Fatalf("as uid %s: %+v, want %+v", nb.Uid, got, want)
			}
			got = execAs(t, c, &proto.ExecRequest{User: "nobody", Dir: "/usr", Env: map[string]string{"HOME": "/tmp", "USER": "someone"}})
			if got.uid != nb.Uid || got.home != "/tmp" || got.user != "someone" || got.logname != "nobody" || got.dir != "/usr" {
				t.Fatalf("as nobody with its own HOME, USER and dir: %+v", got)
			}
			// root explicitly: root's home, which exists.
			if got := execAs(t, c, &proto.ExecRequest{User: "root"}); got.uid != "0" || got.home != "/root" || got.dir != "/root" || got.user != "root" {
				t.Fatalf("as root: %+v", got)
			}
			// No user: the agent's own, where the agent is, as before.
			if got := execAs(t, c, &proto.ExecRequest{}); got.uid != "0" || got.dir != wd {
				t.Fatalf("without a user: %+v, want uid 0 in %s", got, wd)
			}
		})
	}
}

// The account's rights are what the command has: a file only root may
// read is refused to it, and a directory it may not enter fails the start
// with a sentence naming the account.
func TestExecAsAccountHasOnlyItsRights(t *testing.T) {
	nobody(t)
	for _, tc := range []struct {
		name string
		c    func(t *testing.T) *agent.Client
	}{
		{"unsupervised", func(t *testing.T) *agent.Client { _, c := startPair(t); return c }},
		{"supervised", supervisedPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c(t)
			secret := filepath.Join(openDir(t), "secret")
			if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
				t.Fatal(err)
			}
			resp, err := c.Exec(testCtx(t), &proto.ExecRequest{User: "nobody", Argv: []string{"cat", secret}})
			if err != nil || resp.ExitCode == 0 || !strings.Contains(string(resp.Stderr), "Permission denied") {
				t.Fatalf("cat of a root-only file as nobody: %+v, %v; want permission denied", resp, err)
			}
			closed := filepath.Join(filepath.Dir(secret), "closed")
			if err := os.Mkdir(closed, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err = c.Exec(testCtx(t), &proto.ExecRequest{User: "nobody", Dir: closed, Argv: []string{"pwd"}})
			want := `cannot start "pwd" as user "nobody": permission denied; check that the account may execute it and enter the working directory`
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != want {
				t.Fatalf("exec as nobody in a directory it may not enter: %v; want %q", err, want)
			}
		})
	}
}

// memberAccount finds an account of this machine that /etc/group lists as
// a member of a group other than its primary one, and that group's gid.
func memberAccount(t *testing.T) (name, gid string) {
	t.Helper()
	f, err := os.Open("/etc/group")
	if err != nil {
		t.Skipf("no /etc/group: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 4 || fields[3] == "" {
			continue
		}
		for _, m := range strings.Split(fields[3], ",") {
			if u, err := user.Lookup(m); err == nil && u.Gid != fields[2] && u.Uid != "0" {
				return m, fields[2]
			}
		}
	}
	t.Skip("no account of this machine is a member of a group besides its own; nothing to check the supplementary groups with")
	return "", ""
}

// An account's supplementary groups are the command's.
func TestExecAsAccountHasItsGroups(t *testing.T) {
	needRoot(t)
	name, gid := memberAccount(t)
	for _, tc := range []struct {
		name string
		c    func(t *testing.T) *agent.Client
	}{
		{"unsupervised", func(t *testing.T) *agent.Client { _, c := startPair(t); return c }},
		{"supervised", supervisedPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := execAs(t, tc.c(t), &proto.ExecRequest{User: name})
			if !slices.Contains(strings.Fields(got.groups), gid) {
				t.Fatalf("as %s the groups are %q; want them to include %s, of which /etc/group makes it a member", name, got.groups, gid)
			}
		})
	}
}

// An account the sandbox does not have is refused in one sentence, by
// the ops that run commands, and nothing runs (write_files:
// TestWriteFilesUnknownOwner).
func TestUnknownAccountIsRefused(t *testing.T) {
	_, c := startPair(t)
	const name = "no-such-user-e2b"
	want := `user "no-such-user-e2b" does not exist in the sandbox; give an account of its /etc/passwd (or none for root)`
	marker := filepath.Join(t.TempDir(), "ran")
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != want {
			t.Errorf("%s as an unknown user: %v; want the not_found %q", what, err, want)
		}
	}
	_, err := c.Exec(testCtx(t), &proto.ExecRequest{User: name, Argv: []string{"touch", marker}})
	check("exec", err)
	_, err = c.ProcStart(testCtx(t), &proto.ProcStartRequest{User: name, Argv: []string{"touch", marker}})
	check("proc_start", err)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although its user does not exist")
	}
	// A uid no account has is unknown too.
	_, err = c.Exec(testCtx(t), &proto.ExecRequest{User: "4000000", Argv: []string{"true"}})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("exec as a uid without an account: %v; want not_found", err)
	}
}

// A long-lived process runs as its account, listed with it; with a
// terminal, the terminal is the account's too.
func TestProcAsAccount(t *testing.T) {
	nb := nobody(t)
	_, c := startPair(t)
	p := startProc(t, c, &proto.ProcStartRequest{User: "nobody", Argv: []string{"sh", "-c", whoami}})
	if p.User != "nobody" || p.Dir != "/" {
		t.Fatalf("started as nobody: %+v; want user nobody, dir /", p)
	}
	out, _, _ := readOutput(t, c, p.ID, 0, 0)
	want := identity{nb.Uid, nb.Gid, nb.Gid, nb.HomeDir, "nobody", "nobody", "/"}
	if got := parseIdentity(t, out); got != want {
		t.Fatalf("as nobody: %+v, want %+v", got, want)
	}
	ps, err := c.ProcList(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := findProc(t, ps, p.ID); got.User != "nobody" {
		t.Fatalf("listed as %q, want nobody", got.User)
	}
	plain := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"id", "-u"}})
	if out, _, _ := readOutput(t, c, plain.ID, 0, 0); string(out) != "0\n" || plain.User != "" {
		t.Fatalf("without a user: printed %q, listed as %q; want root, no user", out, plain.User)
	}

	tty := startProc(t, c, &proto.ProcStartRequest{User: "nobody", Pty: &proto.PtySize{Rows: 24, Cols: 80},
		Argv: []string{"sh", "-c", `id -u; t=$(tty); echo "$t"; stat -c %u "$t"; echo "$HOME"`}})
	out, _, _ = readOutput(t, c, tty.ID, 0, 0)
	re := regexp.MustCompile(`^` + nb.Uid + `\r\n/dev/pts/\d+\r\n` + nb.Uid + `\r\n` + regexp.QuoteMeta(nb.HomeDir) + `\r\n$`)
	if !re.Match(out) {
		t.Fatalf("a terminal as nobody printed %q; want its uid, its terminal, owned by it, and its home", out)
	}
	if fin := waitEnded(t, c, tty.ID); fin.ExitCode == nil || *fin.ExitCode != 0 || fin.User != "nobody" {
		t.Fatalf("the terminal's process: %+v", fin)
	}
}

// The agent as it runs in a sandbox (the static binary, whose account
// lookups read /etc/passwd and /etc/group itself) runs an exec and a
// process as an account.
func TestAccountUnderTheRealAgent(t *testing.T) {
	nb := nobody(t)
	c := realAgent(t)
	want := identity{nb.Uid, nb.Gid, nb.Gid, nb.HomeDir, "nobody", "nobody", "/"}
	if got := execAs(t, c, &proto.ExecRequest{User: "nobody"}); got != want {
		t.Fatalf("exec as nobody: %+v, want %+v", got, want)
	}
	p := startProc(t, c, &proto.ProcStartRequest{User: "nobody", Argv: []string{"sh", "-c", whoami}})
	out, _, _ := readOutput(t, c, p.ID, 0, 0)
	if got := parseIdentity(t, out); got != want {
		t.Fatalf("process as nobody: %+v, want %+v", got, want)
	}
}

// A hibernation's record keeps a process's account: the wake lists it
// with the user it ran as.
func TestHibernationKeepsTheAccount(t *testing.T) {
	nobody(t)
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	p := startProc(t, c, &proto.ProcStartRequest{User: "nobody", Argv: []string{"sh", "-c", "echo up; exec sleep 600"}})
	waitOutput(t, c, p.ID, "up")
	if err := srv.Hibernate(); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	waitDead(t, p.PID, 5*time.Second)
	_, c2 := wake(t, dir)
	ps, err := c2.ProcList(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := findProc(t, ps, p.ID); got.User != "nobody" || !got.Hibernated || got.Dir != "/" {
		t.Fatalf("after the wake: %+v; want it stopped, run by nobody in /", got)
	}
}
