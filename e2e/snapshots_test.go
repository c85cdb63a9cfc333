package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

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
	src, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "fork-src", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: "fork-src"})
	if err != nil {
		t.Fatal(err)
	}
	want := sha(mustCall(t, d, run.ID, "shell", map[string]any{"command": installPackage, "timeout_s": 120}))
	if want == "" {
		t.Fatal("no digest of big.bin")
	}
	convs := []string{"fork-1", "fork-2", "fork-3", "fork-4", "fork-5"}
	fr, err := d.Client.ForkSandbox(c, src.ID, convs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range fr.Sandboxes {
			d.Client.DeleteSandbox(context.Background(), s.ID)
		}
	})
	if len(fr.Sandboxes) != 5 || len(fr.Failed) != 0 || fr.Snapshot.Holds != "filesystem and workspace" || !strings.Contains(fr.Snapshot.Note, "not part of a snapshot") {
		t.Fatalf("the fork: %+v", fr)
	}
	if fr.Snapshot.SizeBytes < 100_000_000 {
		t.Fatalf("the fork's snapshot holds %d bytes; the workspace alone has 100 MB", fr.Snapshot.SizeBytes)
	}
	runs := map[string]string{"fork-src": run.ID}
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
		if conv == "fork-src" {
			want = "source"
		}
		if got := mustCall(t, d, r, "read", map[string]any{"path": "who.txt"}); !strings.Contains(got, want) {
			t.Errorf("%s's who.txt reads %q, want %q: a change in one copy reached another", conv, got, want)
		}
	}

	// A snapshot taken on request, listed, read, and a sandbox made from it.
	snap, err := d.Client.CreateSnapshot(c, src.ID, "after install")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "after install" || snap.Sandbox != src.ID || snap.CreatedAt.IsZero() {
		t.Fatalf("the snapshot: %+v", snap)
	}
	list, err := d.Client.ListSnapshots(c)
	if err != nil || len(list) != 2 || list[0].ID != snap.ID {
		t.Fatalf("the snapshots listed: %+v %v", list, err)
	}
	if got, err := d.Client.GetSnapshot(c, snap.ID); err != nil || got.ID != snap.ID {
		t.Fatalf("GET the snapshot: %+v %v", got, err)
	}
	from, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "from-snap", Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), from.ID) })
	r, err := d.Client.CreateRun(c, api.CreateRunRequest{Conversation: "from-snap"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sha256sum big.bin | cut -c1-64; sbxd-probe"}); sha(got) != want || !strings.Contains(got, "probe-installed") {
		t.Fatalf("a sandbox made from the snapshot sees: %s", got)
	}
	// The snapshot goes; the sandbox made from it keeps its files.
	if err := d.Client.DeleteSnapshot(c, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.GetSnapshot(c, snap.ID); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("GET of a deleted snapshot: %v", err)
	}
	if got := mustCall(t, d, r.ID, "shell", map[string]any{"command": "sbxd-probe"}); !strings.Contains(got, "probe-installed") {
		t.Fatalf("after the snapshot's deletion its sandbox: %s", got)
	}

	// Bad input: one sentence each, nothing made.
	for _, bad := range []struct {
		convs []string
		want  string
	}{{nil, "conversations is empty"}, {[]string{"fork-1"}, "already has a sandbox"}, {[]string{"a", "a"}, "named twice"}} {
		_, err := d.Client.ForkSandbox(c, src.ID, bad.convs)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("fork %v: %v, want %q", bad.convs, err, bad.want)
		}
	}
	if _, err := d.Client.CreateSandbox(c, api.CreateSandboxRequest{Conversation: "no-snap", Snapshot: "snap-000000000000"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a create from a snapshot that does not exist: %v", err)
	}
	fmt.Fprintln(os.Stderr, "fork snapshot", fr.Snapshot.ID, fr.Snapshot.SizeBytes)
}
