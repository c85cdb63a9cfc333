package kubernetes

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox made with a read-only root cannot change the image's files,
// and writes in the workspace, /tmp and its home, which holds the image's
// dot files.
func TestClusterReadOnlyRoot(t *testing.T) {
	b, _ := newClusterBackend(t)
	m := sandbox.NewManager(b)
	ctx := clusterCtx(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c-ro", ReadOnlyRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sandbox.ReadOnlyRootOf(info) {
		t.Errorf("the sandbox does not read back as read-only root: %v", info.Labels)
	}
	c, _, err := m.Agent(ctx, "acme", "c-ro")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c",
		"touch /usr/local/x 2>&1; echo rc=$?; touch /workspace/w /tmp/t /root/h && echo writable; test -f /root/.bashrc && echo dotfiles; df /tmp | tail -n 1"},
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := string(r.Stdout)
	if !strings.Contains(out, "rc=1") || !strings.Contains(out, "writable") || !strings.Contains(out, "dotfiles") {
		t.Errorf("read-only root: %q; want /usr/local refused, the workspace, /tmp and home writable, and the image's dot files at home", out)
	}
	if !strings.Contains(out, "tmpfs") {
		t.Errorf("/tmp is %q, want a tmpfs (memory, counted in the limit)", out)
	}
}
