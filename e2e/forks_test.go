package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// Checks shared by the snapshot and fork tests of each backend.

// A Debian package built in the sandbox and installed with apt-get (no
// network needed): the file system change a snapshot must carry.
const installPackage = `set -e; d=$(mktemp -d); mkdir -p $d/DEBIAN $d/usr/local/bin
printf 'Package: sbxd-probe\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: probe\n' > $d/DEBIAN/control
printf '#!/bin/sh\necho probe-installed\n' > $d/usr/local/bin/sbxd-probe; chmod 755 $d/usr/local/bin/sbxd-probe
dpkg-deb --build $d /tmp/sbxd-probe.deb >/dev/null; apt-get install -y -q /tmp/sbxd-probe.deb >/dev/null 2>&1 || dpkg -i /tmp/sbxd-probe.deb >/dev/null; rm -rf $d /tmp/sbxd-probe.deb
head -c 100000000 /dev/urandom > big.bin; echo source > who.txt; sha256sum big.bin | cut -c1-64`

func sha(out string) string {
	m := regexp.MustCompile(`[0-9a-f]{64}`).FindString(out)
	return m
}

// forkSource is a sandbox with installPackage run in it, and the digest of
// its big.bin.
type forkSource struct {
	Sandbox api.Sandbox
	Run     string // a run of its conversation
	Digest  string
}

// checkForks makes sandbox prefix+"fork-src" of image with 100 MB in its
// workspace and a package installed, forks it into five copies
// (prefix+"fork-1" to 5), and checks each copy sees the files and the
// package and that a change in one is seen by no other nor the source.
// The copies and the fork's snapshot are deleted at the test's end.
func checkForks(t *testing.T, d *daemon, image, prefix string) (forkSource, api.ForkResponse) {
	t.Helper()
	c := ctx(t)
	srcConv := prefix + "fork-src"
	src, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: srcConv, Image: image})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: srcConv})
	if err != nil {
		t.Fatal(err)
	}
	want := sha(mustCall(t, d, run.ID, "shell", map[string]any{"command": installPackage, "timeout_s": 120}))
	if want == "" {
		t.Fatal("no digest of big.bin")
	}
	var convs []string
	for i := 1; i <= 5; i++ {
		convs = append(convs, fmt.Sprintf("%sfork-%d", prefix, i))
	}
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
	runs := map[string]string{srcConv: run.ID}
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
		if conv == srcConv {
			want = "source"
		}
		if got := mustCall(t, d, r, "read", map[string]any{"path": "who.txt"}); !strings.Contains(got, want) {
			t.Errorf("%s's who.txt reads %q, want %q: a change in one copy reached another", conv, got, want)
		}
	}
	return forkSource{Sandbox: src, Run: run.ID, Digest: want}, fr
}

// checkSnapshotRestore takes a snapshot of src on request, checks it is
// listed first (after the fork's) and read back, makes sandbox
// prefix+"from-snap" from it and checks that sandbox has the files and the
// package, then deletes the snapshot and checks it is gone. It returns the
// sandbox made and a run of it; the sandbox is deleted at the test's end.
func checkSnapshotRestore(t *testing.T, d *daemon, src forkSource, prefix string) (from api.Sandbox, run string, snap api.Snapshot) {
	t.Helper()
	c := ctx(t)
	snap, err := d.Client.CreateSnapshot(c, src.Sandbox.ID, "after install")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "after install" || snap.Sandbox != src.Sandbox.ID || snap.CreatedAt.IsZero() {
		t.Fatalf("the snapshot: %+v", snap)
	}
	list, err := d.Client.ListSnapshots(c)
	if err != nil || len(list) != 2 || list[0].ID != snap.ID {
		t.Fatalf("the snapshots listed: %+v %v", list, err)
	}
	if got, err := d.Client.GetSnapshot(c, snap.ID); err != nil || got.ID != snap.ID {
		t.Fatalf("GET the snapshot: %+v %v", got, err)
	}
	conv := prefix + "from-snap"
	from, err = d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: conv, Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), from.ID) })
	r, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe"}); sha(got) != src.Digest || !strings.Contains(got, "probe-installed") {
		t.Fatalf("a sandbox made from the snapshot sees: %s", got)
	}
	if err := d.Client.DeleteSnapshot(c, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.GetSnapshot(c, snap.ID); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("GET of a deleted snapshot: %v", err)
	}
	return from, r.ID, snap
}
