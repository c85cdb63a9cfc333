package daemon_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// printEnv runs `sh -c 'echo ...'` with the request env reqEnv and returns
// its output.
func printEnv(t *testing.T, c *agent.Client, script string, reqEnv map[string]string) string {
	t.Helper()
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", script}, Env: reqEnv})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("exec %q exited %d: %s", script, r.ExitCode, r.Stderr)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// The sandbox's environment lies between the daemon's own (the image's)
// and each request's: the request overrides it, and it overrides the
// image's. It reaches execs and spawned processes alike, and a daemon
// restarted on the same state dir applies it still.
func TestSetEnvLayersUnderRequestEnv(t *testing.T) {
	t.Setenv("SANDBOXD_TEST_IMAGE_VAR", "image")
	t.Setenv("SANDBOXD_TEST_LAYER", "image")
	state := filepath.Join(t.TempDir(), "state")
	srv, c := startPair(t, daemon.WithStateDir(state))
	ctx := testCtx(t)

	if !mustHello(t, c).SandboxEnv {
		t.Fatal("the daemon does not advertise sandbox_env")
	}
	env := map[string]string{"FOO": "bar", "SANDBOXD_TEST_LAYER": "sandbox", "SPACED": "a b"}
	if err := c.SetEnv(ctx, env); err != nil {
		t.Fatalf("SetEnv: %v", err)
	}
	script := `echo "$FOO|$SANDBOXD_TEST_LAYER|$SANDBOXD_TEST_IMAGE_VAR|$SPACED"`
	if got := printEnv(t, c, script, nil); got != "bar|sandbox|image|a b" {
		t.Errorf("exec sees %q, want bar|sandbox|image|a b", got)
	}
	if got := printEnv(t, c, script, map[string]string{"FOO": "request"}); got != "request|sandbox|image|a b" {
		t.Errorf("exec with its own FOO sees %q, want request|sandbox|image|a b", got)
	}

	p, err := c.Spawn(ctx, &proto.SpawnRequest{Argv: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	out, err := c.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	b, _ := io.ReadAll(io.LimitReader(out, 1<<10))
	out.Close()
	if got := strings.TrimSpace(string(b)); got != "bar|sandbox|image|a b" {
		t.Errorf("a spawned process sees %q, want bar|sandbox|image|a b", got)
	}

	srv.Close()
	_, c2 := startPair(t, daemon.WithStateDir(state))
	if got := printEnv(t, c2, script, nil); got != "bar|sandbox|image|a b" {
		t.Errorf("after a restart exec sees %q, want bar|sandbox|image|a b", got)
	}
	// The claim that set it may retry; nobody may change it.
	if err := c2.SetEnv(ctx, env); err != nil {
		t.Errorf("the same SetEnv again after a restart: %v", err)
	}
	err = c2.SetEnv(ctx, map[string]string{"FOO": "other"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "set already") {
		t.Errorf("changing the env = %v, want failed_precondition saying it was set already", err)
	}
	if got := printEnv(t, c2, `echo "$FOO"`, nil); got != "bar" {
		t.Errorf("after a refused change FOO = %q, want bar", got)
	}
}

// A sandbox that has run a command takes no environment any more: its
// processes would not all have seen it.
func TestSetEnvRefusedAfterACommand(t *testing.T) {
	_, c := startPair(t, daemon.WithStateDir(filepath.Join(t.TempDir(), "state")))
	printEnv(t, c, "true", nil)
	err := c.SetEnv(testCtx(t), map[string]string{"FOO": "bar"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "run commands already") {
		t.Fatalf("SetEnv after an exec = %v, want failed_precondition saying commands ran", err)
	}
	if got := printEnv(t, c, `echo "${FOO-unset}"`, nil); got != "unset" {
		t.Errorf("FOO = %q after a refused SetEnv, want unset", got)
	}
}

// Bad names are refused with an error message, and nothing is recorded.
func TestSetEnvRefusesBadNames(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	_, c := startPair(t, daemon.WithStateDir(state))
	for _, env := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00y"}} {
		err := c.SetEnv(testCtx(t), env)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "not valid") {
			t.Errorf("SetEnv(%q) = %v, want invalid_argument", env, err)
		}
	}
	if err := c.SetEnv(testCtx(t), map[string]string{"FOO": "bar"}); err != nil {
		t.Fatalf("a good SetEnv after bad ones: %v", err)
	}
}

// A record the daemon cannot read stops every command rather than run it
// without the environment it was claimed with.
func TestSandboxEnvBrokenRecordStopsCommands(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "env.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := startPair(t, daemon.WithStateDir(state))
	_, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"true"}, Timeout: 10 * time.Second})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "env.json") {
		t.Fatalf("exec with a broken env record = %v, want unavailable naming the file", err)
	}
	if _, err := c.Spawn(testCtx(t), &proto.SpawnRequest{Argv: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("spawn with a broken env record = %v, want unavailable", err)
	}
}

func mustHello(t *testing.T, c *agent.Client) *proto.HelloResponse {
	t.Helper()
	h, err := c.Hello(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return h
}
