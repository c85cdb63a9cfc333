package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestContainerdSnapshotsAndForks: on the containerd backend, five copies
// forked from a sandbox with 100 MB in its workspace and a package
// installed with apt-get each see the files and the package, and a change
// in one is seen by no other nor the source; a snapshot is listed, a
// sandbox made from it has the files, and it keeps them once the snapshot
// is deleted, which leaves no image of it in containerd.
func TestContainerdSnapshotsAndForks(t *testing.T) {
	img := containerdImage(t)
	d := startDaemon(t, "containerd", t.TempDir())
	c := ctx(t)
	src, _ := checkForks(t, d, img, "ctd-")
	from, r, snap := checkSnapshotRestore(t, d, src, "ctd-")
	imgs, err := exec.CommandContext(c, "ctr", "-n", "sandboxd", "images", "ls", "-q").Output()
	if err != nil {
		t.Fatalf("ctr images ls: %v", err)
	}
	if strings.Contains(string(imgs), snap.ID) {
		t.Fatalf("containerd still has the image of deleted snapshot %s:\n%s", snap.ID, imgs)
	}
	// Hibernated and resumed, the sandbox mounts its file system afresh.
	if _, err := d.Client.HibernateSandbox(c, from.ID); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, d, r, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe"}); sha(got) != src.Digest || !strings.Contains(got, "probe-installed") {
		t.Fatalf("after its snapshot's deletion and a hibernation, a sandbox made from it sees: %s", got)
	}
}
