package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestSnapshotsAndForks: five copies from a sandbox with 100 MB in its
// workspace and a package installed with apt-get each see the files and
// the package, and a change in one is seen by no other nor the source; a
// sandbox made from a snapshot has them too; snapshots are the tenant's;
// the answers say processes are not part of them.
func TestSnapshotsAndForks(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", t.TempDir())
	c := ctx(t)
	src, fr := checkForks(t, d, dockerImage(), "")
	// The snapshot goes; the sandbox made from it keeps its files.
	_, run, _ := checkSnapshotRestore(t, d, src, "")
	if got := mustCall(t, d, run, "shell", map[string]any{"command": "sbxd-probe"}); !strings.Contains(got, "probe-installed") {
		t.Fatalf("after the snapshot's deletion its sandbox: %s", got)
	}

	// Bad input: one sentence each, nothing made.
	for _, bad := range []struct {
		convs []string
		want  string
	}{{nil, "conversations is empty"}, {[]string{"fork-1"}, "already has a sandbox"}, {[]string{"a", "a"}, "named twice"}} {
		_, err := d.Client.ForkSandbox(c, src.Sandbox.ID, bad.convs)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("fork %v: %v, want %q", bad.convs, err, bad.want)
		}
	}
	if _, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "no-snap", Snapshot: "snap-000000000000"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a create from a snapshot that does not exist: %v", err)
	}
	fmt.Fprintln(os.Stderr, "fork snapshot", fr.Snapshot.ID, fr.Snapshot.SizeBytes)
}
