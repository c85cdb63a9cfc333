package egresstest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// commandTimeout bounds each client program a test runs.
const commandTimeout = 60 * time.Second

// need skips t when program is not installed on this machine, and returns
// its path.
func need(t *testing.T, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		t.Skipf("%s is not installed on this machine, so the server cannot be tried with the real client: %v", program, err)
	}
	return p
}

// hostEnv is an environment for a client program on the host: PATH, a
// fresh HOME (so that no user configuration is read or written), no proxy
// variables (the servers are reached directly), and extra.
func hostEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "NO_PROXY=*"}
	return append(env, extra...)
}

// run runs a program with env in dir and returns its standard output; it
// fails t with the program's output when the program fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := runErr(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// runErr runs a program and returns its output and error.
func runErr(dir string, env []string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout = &limited{b: &o}
	cmd.Stderr = &limited{b: &e}
	err = cmd.Run()
	return o.String(), e.String(), err
}

// limited keeps the first MiB written to it and drops the rest.
type limited struct{ b *bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if room := 1<<20 - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

// requested reports whether s received a request for path.
func requested(s *Server, method, path string) bool {
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			return true
		}
	}
	return false
}
