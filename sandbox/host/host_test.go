package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

var agentBin string

func TestMain(m *testing.M) { sandboxtest.Main(m, "", &agentBin, nil) }

func newBackend(t *testing.T, dataDir string, opts ...Option) *Backend {
	t.Helper()
	b, err := New(dataDir, append([]Option{WithAgentBinary(agentBin)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSuite(t *testing.T) {
	// One data dir: deployments sharing it must still be kept apart.
	dir := t.TempDir()
	sandboxtest.Run(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		return newBackend(t, dir, WithDeployment(d))
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestHostWorkspaceUsedInPlaceAndKept(t *testing.T) {
	b := newBackend(t, t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("keep me"), 0o644)
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1", HostWorkspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if info.Workspace != ws {
		t.Fatalf("Workspace = %s, want the host path %s", info.Workspace, ws)
	}
	c, _, err := m.Agent(ctx(t), "t", "c1")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"cat", "mine.txt"}, Dir: info.Workspace, Timeout: 10 * time.Second})
	if err != nil || string(ex.Stdout) != "keep me" {
		t.Errorf("cat mine.txt in the workspace = %q, %v; want the host file", ex.Stdout, err)
	}
	if err := c.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: ws, Files: []proto.WriteFile{{Path: "new.txt", Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err != nil {
		t.Errorf("a file written through the agent is not in the host workspace: %v", err)
	}
	if err := m.Delete(ctx(t), "t", info.ID); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mine.txt", "new.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("Delete touched the host workspace: %v", err)
		}
	}
}

func TestHostWorkspaceMustBeADirectory(t *testing.T) {
	b := newBackend(t, t.TempDir())
	_, err := b.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1", HostWorkspace: "/nonexistent/dir"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Create with a missing host workspace = %v, want invalid_argument", err)
	}
}

func TestRemoveKillsAgentAndProcesses(t *testing.T) {
	b := newBackend(t, t.TempDir())
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx(t), "t", "c1")
	if err != nil {
		t.Fatal(err)
	}
	hello, err := c.Hello(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Spawn(ctx(t), &proto.SpawnRequest{Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx(t), "t", info.ID); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{hello.PID, p.PID} {
		if !gone(ctx(t), pid, 5*time.Second) {
			t.Errorf("pid %d still runs after Remove", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(b.root, info.ID)); !os.IsNotExist(err) {
		t.Errorf("the sandbox folder is still there: %v", err)
	}
}

func TestLongDataDirUsesShortSocket(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	b := newBackend(t, long)
	info, err := b.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove(context.Background(), info.ID) })
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, _, err := m.Agent(ctx(t), "t", "c1")
	if err != nil {
		t.Fatalf("Agent with a long data dir: %v", err)
	}
	if _, err := c.Hello(ctx(t)); err != nil {
		t.Fatal(err)
	}
	mt, _ := b.load(info.ID)
	if len(mt.Socket) > maxSocketPath {
		t.Errorf("socket path %s is %d bytes", mt.Socket, len(mt.Socket))
	}
}

func TestDamagedFolderIsSkipped(t *testing.T) {
	b := newBackend(t, t.TempDir())
	info, err := b.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(b.root, "0123456789ab")
	os.Mkdir(bad, 0o700)
	os.WriteFile(filepath.Join(bad, "meta.json"), []byte("{not json"), 0o600)
	list, err := b.List(ctx(t))
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("List = %+v, %v; want only %s", list, err, info.ID)
	}
	if _, err := b.Inspect(ctx(t), "../../etc"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect of a path-like id = %v, want not_found", err)
	}
}

// The host backend shares this machine's network, so it refuses network
// "proxy" rather than make a sandbox whose policy nothing enforces.
func TestCreateRefusesNetworkProxy(t *testing.T) {
	b := newBackend(t, t.TempDir())
	_, err := b.Create(context.Background(), sandbox.Spec{Tenant: "t", Conversation: "c", Network: sandbox.NetworkProxy})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot take a sandbox off the network") {
		t.Fatalf("a proxy sandbox on the host backend: %v", err)
	}
	if infos, _ := b.List(context.Background()); len(infos) != 0 {
		t.Fatalf("the refused create left sandboxes: %+v", infos)
	}
}
