package containerd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/leases"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// installProbe builds a Debian package in the sandbox and installs it with
// dpkg (no network), writes a file outside the workspace, removes one of
// the image's files, and fills the workspace: the sandbox's own changes
// and its workspace, which a snapshot must carry.
const installProbe = `set -e; d=$(mktemp -d); mkdir -p $d/DEBIAN $d/usr/local/bin
printf 'Package: sbxd-probe\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: probe\n' > $d/DEBIAN/control
printf '#!/bin/sh\necho probe-installed\n' > $d/usr/local/bin/sbxd-probe; chmod 755 $d/usr/local/bin/sbxd-probe
dpkg-deb --build $d /tmp/sbxd-probe.deb >/dev/null; dpkg -i /tmp/sbxd-probe.deb >/dev/null; rm -rf $d /tmp/sbxd-probe.deb
mkdir -p /opt/x; echo outside > /opt/x/file; ln /opt/x/file /opt/x/hard; rm /etc/issue; echo appended >> /etc/debian_version
rm -rf /etc/apt/apt.conf.d; mkdir /etc/apt/apt.conf.d; echo new > /etc/apt/apt.conf.d/only; mv /usr/share/doc/bash /usr/share/doc/bash-moved
mkdir -p /workspace/src/deep; echo inside > /workspace/src/deep/ws.txt; ln -s src/deep/ws.txt /workspace/link
echo owned > /workspace/owned; chown 1234:2345 /workspace/owned; chmod 640 /workspace/owned
head -c 3000000 /dev/urandom > /workspace/big.bin; sha256sum /workspace/big.bin | cut -c1-64 > /opt/x/sum`

// probe reads back, in one line each, what installProbe left.
const probe = `sbxd-probe; dpkg -s sbxd-probe | grep Status; cat /opt/x/file; test -e /etc/issue && echo issue-back || echo issue-gone
echo links=$(stat -c %h /opt/x/hard) last=$(tail -n1 /etc/debian_version) confd=$(ls /etc/apt/apt.conf.d | tr '\n' ,)
test -e /usr/share/doc/bash && echo bash-back || echo bash-gone; ls /usr/share/doc/bash-moved | grep -c . | sed 's/^/moved-files=/'
cat /workspace/src/deep/ws.txt; readlink /workspace/link; stat -c '%u:%g:%a' /workspace/owned
test "$(sha256sum /workspace/big.bin | cut -c1-64)" = "$(cat /opt/x/sum)" && echo big-intact`

func sh(t *testing.T, m *sandbox.Manager, tenant, conv, script string) string {
	t.Helper()
	res := execOut(t, m, tenant, conv, "sh", "-c", script)
	if res.ExitCode != 0 {
		t.Fatalf("%s in %s: exit %d, stdout %q, stderr %q", script, conv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func wantAll(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: %q lacks %q", what, got, w)
		}
	}
}

// collect runs containerd's garbage collector now (a lease deleted
// synchronously does), so that whatever nothing refers to is gone.
func collect(t *testing.T, b *Backend) {
	t.Helper()
	ls := b.cli.LeasesService()
	l, err := ls.Create(b.nsCtx(ctx(t)), leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Delete(b.nsCtx(ctx(t)), l, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotAndCopy: a snapshot of a running sandbox holds a package
// installed with dpkg, a file outside the workspace, a file of the image
// removed, and the workspace (owners, modes, links); a sandbox made from
// it has them all, and is independent of its source both ways; the source
// runs again afterwards; deleting the snapshot frees its parts and leaves
// the copy its files, even across a hibernation.
func TestSnapshotAndCopy(t *testing.T) {
	needContainerd(t)
	t.Run("overlay upper directory", func(t *testing.T) {
		b := snapBackend(t)
		src := snapshotAndCopy(t, b)
		// The way it took was the upper directory's, not the fallback.
		c := b.nsCtx(ctx(t))
		lctx, done, err := b.cli.WithLease(c)
		if err != nil {
			t.Fatal(err)
		}
		defer done(c)
		sn := b.cli.SnapshotService(DefaultSnapshotter)
		st, err := sn.Stat(c, NamePrefix+src)
		if err != nil {
			t.Fatal(err)
		}
		upper, err := sn.Mounts(c, NamePrefix+src)
		if err != nil {
			t.Fatal(err)
		}
		lower, err := sn.View(lctx, "sandboxd-test-view-"+newID(), st.Parent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.overlayDiff(lctx, lower, upper, "sandboxd-test-"+newID()); err != nil {
			t.Fatalf("the overlay upper directory cannot be read on this machine: %v", err)
		}
	})
	t.Run("diff service", func(t *testing.T) {
		b := snapBackend(t)
		b.noOverlayDiff = true
		snapshotAndCopy(t, b)
	})
}

// snapshotAndCopy runs TestSnapshotAndCopy on b and returns the source's id.
func snapshotAndCopy(t *testing.T, b *Backend) string {
	m, tenant := startManager(t, b)
	src, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "src", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, m, tenant, "src", installProbe)
	wants := []string{"probe-installed", "install ok installed", "outside", "issue-gone", "inside", "src/deep/ws.txt", "1234:2345:640", "big-intact",
		"links=2 last=appended confd=only,\n", "bash-gone"}
	srcProbe := sh(t, m, tenant, "src", probe)
	wantAll(t, "the source", srcProbe, wants...)

	start := time.Now()
	snap, err := m.Snapshot(ctx(t), tenant, src.ID, "after install")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of a running sandbox: %s, %d bytes", time.Since(start), snap.SizeBytes)
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	if snap.Holds != sandbox.HoldsFilesystem || snap.Sandbox != src.ID || snap.Conversation != "src" || snap.Name != "after install" || snap.SizeBytes < 3_000_000 {
		t.Fatalf("the snapshot: %+v", snap)
	}
	if got, err := b.Inspect(ctx(t), src.ID); err != nil || got.State != sandbox.StateRunning || got.Labels[LabelPausedAt] != "" {
		t.Fatalf("the source after its snapshot: %+v, %v; want running without a pause mark", got, err)
	}
	// What only the snapshot refers to must survive the collector.
	collect(t, b)
	list, err := m.Snapshots(ctx(t), tenant)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID || list[0].SizeBytes != snap.SizeBytes || !list[0].CreatedAt.Equal(snap.CreatedAt) {
		t.Fatalf("the snapshots listed: %+v, %v; want %+v", list, err, snap)
	}

	start = time.Now()
	cp, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "copy", Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox made from the snapshot: %s", time.Since(start))
	if cp.ID == src.ID || cp.State != sandbox.StateRunning {
		t.Fatalf("the copy: %+v", cp)
	}
	if got := sh(t, m, tenant, "copy", probe); got != srcProbe {
		t.Fatalf("the copy reads\n%s\nwhere the source read\n%s", got, srcProbe)
	}

	// Independent both ways.
	sh(t, m, tenant, "copy", "echo copy > /opt/x/file; echo copy > /workspace/src/deep/ws.txt; touch /workspace/only-copy")
	sh(t, m, tenant, "src", "echo src-later > /workspace/only-src")
	wantAll(t, "the source after the copy changed", sh(t, m, tenant, "src", "cat /opt/x/file /workspace/src/deep/ws.txt; ls /workspace"), "outside", "inside", "only-src")
	if got := sh(t, m, tenant, "src", "ls /workspace"); strings.Contains(got, "only-copy") {
		t.Fatalf("a file made in the copy is in the source: %q", got)
	}
	if got := sh(t, m, tenant, "copy", "ls /workspace"); strings.Contains(got, "only-src") {
		t.Fatalf("a file made in the source after the snapshot is in the copy: %q", got)
	}

	// The snapshot goes with its parts; the copy keeps its files.
	im, err := b.snapshotRecord(b.nsCtx(ctx(t)), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	wsTar := digest.Digest(im.Labels[labelWorkspaceTar])
	if err := m.DeleteSnapshot(ctx(t), tenant, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetSnapshot(ctx(t), tenant, snap.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetSnapshot after its deletion: %v", err)
	}
	if _, err := b.cli.ContentStore().Info(b.nsCtx(ctx(t)), wsTar); !cerrdefs.IsNotFound(err) {
		t.Errorf("the workspace of a deleted snapshot is still in the content store: %v", err)
	}
	if _, err := m.Hibernate(ctx(t), tenant, cp.ID); err != nil {
		t.Fatal(err)
	}
	collect(t, b)
	if _, err := m.Resume(ctx(t), tenant, cp.ID); err != nil {
		t.Fatal(err)
	}
	wantAll(t, "the copy after its snapshot was deleted", sh(t, m, tenant, "copy", "sbxd-probe; cat /opt/x/file /workspace/src/deep/ws.txt; ls /workspace"),
		"probe-installed", "copy\ncopy", "only-copy")
	if got := sh(t, m, tenant, "copy", "test -e /etc/issue && echo issue-back || echo issue-gone"); !strings.Contains(got, "issue-gone") {
		t.Fatalf("a file removed before the snapshot is back in the copy: %q", got)
	}
	return src.ID
}

// TestSnapshotKeepsState: a paused sandbox stays paused through its
// snapshot (with its own pause mark), a hibernated one stays hibernated,
// and both snapshots hold the files; a bad id is NotFound.
func TestSnapshotKeepsState(t *testing.T) {
	needContainerd(t)
	b := snapBackend(t)
	m, tenant := startManager(t, b)
	src, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "src", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, m, tenant, "src", "echo kept > /workspace/a; echo sys > /opt/b")
	for _, st := range []struct {
		verb func() error
		want string
	}{
		{func() error { _, err := m.Pause(ctx(t), tenant, src.ID); return err }, sandbox.StatePaused},
		{func() error { _, err := m.Hibernate(ctx(t), tenant, src.ID); return err }, sandbox.StateHibernated},
	} {
		if err := st.verb(); err != nil {
			t.Fatal(err)
		}
		before, err := b.Inspect(ctx(t), src.ID)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := b.Snapshot(ctx(t), src.ID, sandbox.SnapshotRequest{Tenant: tenant})
		if err != nil {
			t.Fatalf("snapshot of a %s sandbox: %v", st.want, err)
		}
		t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
		after, err := b.Inspect(ctx(t), src.ID)
		if err != nil || after.State != st.want || !after.StateSince.Equal(before.StateSince) {
			t.Fatalf("a %s sandbox after its snapshot: %+v, %v; want %s since %s", st.want, after, err, st.want, before.StateSince)
		}
		conv := "from-" + st.want
		if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: conv, Snapshot: snap.ID}); err != nil {
			t.Fatal(err)
		}
		wantAll(t, "a copy of a "+st.want+" sandbox", sh(t, m, tenant, conv, "cat /workspace/a /opt/b"), "kept\nsys")
	}
	for _, bad := range []string{"snap-000000000000", "snap-../x", "x"} {
		if _, err := b.SnapshotOf(ctx(t), bad); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("SnapshotOf(%q) = %v, want NotFound", bad, err)
		}
		_, err := b.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "none", Snapshot: bad})
		if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("Create from snapshot %q = %v, want NotFound saying so", bad, err)
		}
	}
}

// TestSnapshotIsOnePoint: a process in the sandbox appends the same
// count to a file in its workspace and to one outside it, as fast as it
// can, while a snapshot is taken; in a sandbox made from the snapshot the
// two files end one count apart at most: both were read at one point,
// with the sandbox frozen, though they are read one after the other.
func TestSnapshotIsOnePoint(t *testing.T) {
	needContainerd(t)
	b := snapBackend(t)
	m, tenant := startManager(t, b)
	src, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "src", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	// A little ballast in both, so that reading each takes a while.
	sh(t, m, tenant, "src", `head -c 20000000 /dev/urandom > /workspace/ballast; head -c 20000000 /dev/urandom > /opt/ballast
nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i >> /workspace/count; echo $i >> /opt/count; done' >/dev/null 2>&1 &
while [ ! -s /opt/count ]; do sleep 0.01; done`)
	snap, err := m.Snapshot(ctx(t), tenant, src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "copy", Snapshot: snap.ID}); err != nil {
		t.Fatal(err)
	}
	var ws, opt int
	got := sh(t, m, tenant, "copy", "tail -n1 /workspace/count; tail -n1 /opt/count")
	if _, err := fmt.Sscan(got, &ws, &opt); err != nil {
		t.Fatalf("the copy's counts: %q: %v", got, err)
	}
	if ws < opt || ws-opt > 1 {
		t.Fatalf("the copy's counts are %d in the workspace and %d outside it: not one point of the source", ws, opt)
	}
	// The counter runs on in the source, and never ran in the copy.
	if got := sh(t, m, tenant, "src", "tail -n1 /workspace/count"); strings.TrimSpace(got) == strconv.Itoa(ws) {
		t.Errorf("the source's counter stopped at the snapshot (%s)", got)
	}
	t.Logf("counts in the copy: %d and %d", ws, opt)
}
