package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
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
	src, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "ctd-fork-src", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: "ctd-fork-src"})
	if err != nil {
		t.Fatal(err)
	}
	want := sha(mustCall(t, d, run.ID, "shell", map[string]any{"command": installPackage, "timeout_s": 120}))
	if want == "" {
		t.Fatal("no digest of big.bin")
	}
	convs := []string{"ctd-fork-1", "ctd-fork-2", "ctd-fork-3", "ctd-fork-4", "ctd-fork-5"}
	start := time.Now()
	fr, err := d.Client.ForkSandbox(c, src.ID, convs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork into %d copies: %s", len(convs), time.Since(start))
	t.Cleanup(func() {
		for _, s := range fr.Sandboxes {
			d.Client.DeleteSandbox(context.Background(), s.ID)
		}
		d.Client.DeleteSnapshot(context.Background(), fr.Snapshot.ID)
	})
	if len(fr.Sandboxes) != 5 || len(fr.Failed) != 0 || fr.Snapshot.Holds != "filesystem and workspace" || !strings.Contains(fr.Snapshot.Note, "not part of a snapshot") {
		t.Fatalf("the fork: %+v", fr)
	}
	if fr.Snapshot.SizeBytes < 100_000_000 {
		t.Fatalf("the fork's snapshot holds %d bytes; the workspace alone has 100 MB", fr.Snapshot.SizeBytes)
	}
	runs := map[string]string{"ctd-fork-src": run.ID}
	for _, conv := range convs {
		r, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		runs[conv] = r.ID
		got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe; dpkg -s sbxd-probe | grep Status; cat who.txt", "timeout_s": 60})
		if sha(got) != want || !strings.Contains(got, "probe-installed") || !strings.Contains(got, "install ok installed") || !strings.Contains(got, "source") {
			t.Fatalf("copy %s sees: %s", conv, got)
		}
		mustCall(t, d, r.ID, "write", map[string]any{"path": "who.txt", "content": conv})
	}
	for conv, r := range runs {
		want := conv
		if conv == "ctd-fork-src" {
			want = "source"
		}
		if got := mustCall(t, d, r, "read", map[string]any{"path": "who.txt"}); !strings.Contains(got, want) {
			t.Errorf("%s's who.txt reads %q, want %q: a change in one copy reached another", conv, got, want)
		}
	}

	snap, err := d.Client.CreateSnapshot(c, src.ID, "after install")
	if err != nil {
		t.Fatal(err)
	}
	list, err := d.Client.ListSnapshots(c)
	if err != nil || len(list) != 2 || list[0].ID != snap.ID {
		t.Fatalf("the snapshots listed: %+v %v", list, err)
	}
	from, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "ctd-from-snap", Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), from.ID) })
	r, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: "ctd-from-snap"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe"}); sha(got) != want || !strings.Contains(got, "probe-installed") {
		t.Fatalf("a sandbox made from the snapshot sees: %s", got)
	}
	if err := d.Client.DeleteSnapshot(c, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.GetSnapshot(c, snap.ID); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("GET of a deleted snapshot: %v", err)
	}
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
	if got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe"}); sha(got) != want || !strings.Contains(got, "probe-installed") {
		t.Fatalf("after its snapshot's deletion and a hibernation, a sandbox made from it sees: %s", got)
	}
}
