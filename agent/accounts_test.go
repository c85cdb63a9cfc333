package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// An agent from before accounts and extended attributes would ignore
// them, running as root or dropping the metadata: the client does not send
// them to it, and says why. Without them the calls go out as before.
func TestAccountsNeedAnAgentThatTakesThem(t *testing.T) {
	a, b := net.Pipe()
	go fakeAgent(b, proto.HelloResponse{Version: proto.Version, PID: 42, Processes: true})
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	accounts := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `predates running commands as another user, so "user" cannot be honoured`) {
			t.Errorf("%s with a user on an agent without accounts: %v; want failed_precondition", what, err)
		}
	}
	_, err = c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}, User: "user"})
	accounts("exec", err)
	_, err = c.ExecStream(ctx, &proto.ExecRequest{Argv: []string{"true"}, User: "user"}, func(*proto.ExecOutput) {})
	accounts("streamed exec", err)
	_, err = c.ProcStart(ctx, &proto.ProcStartRequest{Argv: []string{"true"}, User: "user"})
	accounts("proc_start", err)
	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: "/w", Owner: "user", Files: []proto.WriteFile{{Path: "f"}}})
	accounts("write_files", err)

	xattrs := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "predates extended attributes") {
			t.Errorf("%s on an agent without extended attributes: %v; want failed_precondition", what, err)
		}
	}
	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: "/w", Files: []proto.WriteFile{{Path: "f"}, {Path: "g", Xattrs: map[string]string{"user.a": "1"}}}})
	xattrs("write_files with xattrs", err)
	_, err = c.Xattrs(ctx, &proto.XattrsRequest{Paths: []string{"/w/f"}, Prefix: "user."})
	xattrs("xattrs", err)

	// The fake answers everything with a hello: a call it was sent fails
	// for the missing body, not for the agent's age.
	if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: "/w", Files: []proto.WriteFile{{Path: "f"}}}); err != nil {
		t.Errorf("write_files without an owner or xattrs on the older agent: %v; want it sent", err)
	}
	if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}}); err == nil || strings.Contains(err.Error(), "predates") {
		t.Errorf("exec without a user on the older agent: %v; want it sent (and the fake's answer refused)", err)
	}
}

// Through the client, as sandboxd's E2B API uses it: files written for an
// account with metadata, read back, and a command as the account that
// sees them as its own.
func TestClientOwnerAndXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another account needs the agent to run as root")
	}
	nb, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no account nobody: %v", err)
	}
	c, _ := agenttest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	probe := filepath.Join(root, "probe")
	os.WriteFile(probe, nil, 0o644)
	if err := syscall.Setxattr(probe, "user.probe", []byte("1"), 0); errors.Is(err, syscall.ENOTSUP) {
		t.Skipf("the file system of %s keeps no user extended attributes", root)
	}
	os.Remove(probe)

	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Owner: "nobody", Files: []proto.WriteFile{
		{Path: "home/notes.txt", Data: []byte("hello"), MkdirAll: true, Xattrs: map[string]string{"user.e2b.kind": "note"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "home/notes.txt")
	got, err := c.Xattrs(ctx, &proto.XattrsRequest{Paths: []string{path, filepath.Join(root, "home")}, Prefix: "user.e2b."})
	if err != nil || len(got.Attrs) != 1 || got.Attrs[path]["user.e2b.kind"] != "note" {
		t.Fatalf("xattrs: %q, %v", got.Attrs, err)
	}
	resp, err := c.Exec(ctx, &proto.ExecRequest{User: "nobody", Dir: filepath.Join(root, "home"), Argv: []string{"sh", "-c", "stat -c %u notes.txt && echo more >> notes.txt && id -u"}})
	if err != nil || resp.ExitCode != 0 || string(resp.Stdout) != nb.Uid+"\n"+nb.Uid+"\n" {
		t.Fatalf("nobody on its own file: %+v, %v", resp, err)
	}
}
