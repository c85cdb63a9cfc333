package containerd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/snapshots"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandboxd/sandboxd/sandbox"
)

// The child process of TestSnapshotCrash reads what to do from these.
const (
	childVerbEnv = "SANDBOXD_TEST_SNAP_CHILD" // "snapshot" or "create"
	childArgEnv  = "SANDBOXD_TEST_SNAP_ARG"   // the sandbox or the snapshot
	childDepEnv  = "SANDBOXD_TEST_SNAP_DEPLOYMENT"
	childDirEnv  = "SANDBOXD_TEST_SNAP_DATA"
	childTenant  = "crash-tenant"
)

// snapBackend is a test backend of a deployment of its own, so that what
// it sweeps is only its own.
func snapBackend(t *testing.T, opts ...Option) *Backend {
	t.Helper()
	return newTestBackend(t, append([]Option{WithDeployment(sandbox.Deployment{Name: "snap-" + newID()})}, opts...)...)
}

// TestSnapshotCrashChild is the sandboxd that TestSnapshotCrash kills: it
// says when it starts a snapshot (or a create from one) and is killed at
// some moment into it.
func TestSnapshotCrashChild(t *testing.T) {
	verb := os.Getenv(childVerbEnv)
	if verb == "" {
		t.Skip("run by TestSnapshotCrash")
	}
	b := newTestBackend(t, WithDeployment(sandbox.Deployment{Name: os.Getenv(childDepEnv)}), WithDataDir(os.Getenv(childDirEnv)))
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fmt.Println("starting")
	var err error
	switch verb {
	case "snapshot":
		_, err = b.Snapshot(c, os.Getenv(childArgEnv), sandbox.SnapshotRequest{Tenant: childTenant, Name: "crash"})
	case "create":
		_, err = b.Create(c, sandbox.Spec{Tenant: childTenant, Conversation: "copy-" + newID(), Snapshot: os.Getenv(childArgEnv)})
	}
	fmt.Println("finished", err)
}

// runKilled runs TestSnapshotCrashChild for verb and kills it with
// SIGKILL delay after it starts; it reports whether it finished first.
func runKilled(t *testing.T, b *Backend, dataDir, verb, arg string, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotCrashChild$", "-test.v")
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), childVerbEnv+"="+verb, childArgEnv+"="+arg, childDepEnv+"="+b.dep.Name,
		childDirEnv+"="+dataDir, "SANDBOXD_AGENT_BIN="+agentBin,
		// A killed child cleans nothing up: its temporary files go with the test's.
		"TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	finished := false
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatal("the child ended before it started its work")
			}
			started = l == "starting"
		case <-deadline.C:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the child did not start its work within 2 minutes")
		}
	}
	kill := time.NewTimer(delay)
	defer kill.Stop()
	for waiting := true; waiting; {
		select {
		case l, ok := <-lines:
			if !ok {
				waiting = false
			} else if strings.HasPrefix(l, "finished") {
				finished, waiting = true, false
				if l != "finished <nil>" {
					t.Errorf("the child's %s failed: %s", verb, l)
				}
			}
		case <-kill.C:
			waiting = false
		case <-deadline.C:
			waiting = false
		}
	}
	_ = cmd.Process.Kill()
	for range lines {
	}
	_ = cmd.Wait()
	return finished
}

// TestSnapshotCrash kills the sandboxd taking a snapshot, and one making a
// sandbox from it, with SIGKILL at several moments. Afterwards a new
// sandboxd (a new backend) finds the source usable with one call, lists
// only whole snapshots and sandboxes, and its listings remove the parts of
// the rest: leases, views, containers and workspaces.
func TestSnapshotCrash(t *testing.T) {
	needContainerd(t)
	dataDir := t.TempDir()
	b := snapBackend(t, WithDataDir(dataDir))
	m, tenant := startManager(t, b)
	src, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "src", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, m, tenant, "src", "head -c 60000000 /dev/urandom > /workspace/big.bin; echo sys > /opt/sys")
	// Every 100 ms through a snapshot of it that takes about a second here,
	// and one left to finish.
	delays := []time.Duration{10 * time.Millisecond}
	for d := 100 * time.Millisecond; d <= time.Second; d += 100 * time.Millisecond {
		delays = append(delays, d)
	}
	for _, delay := range append(delays, time.Minute) {
		finished := runKilled(t, b, dataDir, "snapshot", src.ID, delay)
		// A new sandboxd: it started after the one that died.
		nb := newTestBackend(t, WithDeployment(b.dep), WithDataDir(dataDir))
		// The child's temporary mount of the image's layers, if it was
		// killed with one, is gone with the new backend.
		if left := mountsUnder(nb.mountsDir()); len(left) > 0 {
			t.Fatalf("%s into a snapshot: a new backend left the dead one's mounts %v", delay, left)
		}
		if ents, _ := os.ReadDir(nb.mountsDir()); len(ents) > 0 {
			t.Fatalf("%s into a snapshot: %d directories of dead mounts are left in %s", delay, len(ents), nb.mountsDir())
		}
		nm := sandbox.NewManager(nb)
		if err := nm.Start(ctx(t)); err != nil {
			t.Fatal(err)
		}
		info, err := nb.Inspect(ctx(t), src.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == sandbox.StatePaused && info.Labels[LabelPausedAt] == "" {
			t.Fatalf("%s into a snapshot: the source is paused without sandboxd's mark, so no call would resume it", delay)
		}
		if info.State != sandbox.StateRunning && info.State != sandbox.StatePaused {
			t.Fatalf("%s into a snapshot: the source is %s", delay, info.State)
		}
		if got := sh(t, nm, tenant, "src", "cat /opt/sys"); got != "sys\n" {
			t.Fatalf("%s into a snapshot: the source answers %q", delay, got)
		}
		list, err := nb.Snapshots(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killed %s into a snapshot: finished %v, %d listed, the source was %s", delay, finished, len(list), info.State)
		if finished && len(list) == 0 {
			t.Fatalf("%s into a snapshot: the child finished it but none is listed", delay)
		}
		for _, s := range list {
			isWhole(t, nb, s.ID)
			if err := nb.DeleteSnapshot(ctx(t), s.ID); err != nil {
				t.Fatal(err)
			}
		}
		nm.Close()
		collect(t, b)
		noParts(t, b, fmt.Sprintf("%s into a snapshot", delay))
	}
	// One whole snapshot to make sandboxes from.
	snap, err := b.Snapshot(ctx(t), src.ID, sandbox.SnapshotRequest{Tenant: childTenant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	for _, delay := range append(delays, time.Minute) {
		finished := runKilled(t, b, dataDir, "create", snap.ID, delay)
		nb := newTestBackend(t, WithDeployment(b.dep), WithDataDir(dataDir))
		half, err := b.cli.Containers(b.nsCtx(ctx(t)), `labels."`+labelMaking+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
		if err != nil {
			t.Fatal(err)
		}
		list, err := nb.List(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, i := range list {
			if i.Tenant != childTenant {
				continue
			}
			n++
			if i.State != sandbox.StateRunning {
				t.Errorf("%s into a create: sandbox %s is listed %s", delay, i.ID, i.State)
			}
			if data, err := os.ReadFile(filepath.Join(nb.workspaceDir(i.ID), "big.bin")); err != nil || len(data) != 60000000 {
				t.Errorf("%s into a create: sandbox %s is listed with %d bytes of its workspace file (%v)", delay, i.ID, len(data), err)
			}
			if err := nb.Remove(ctx(t), i.ID); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("killed %s into a create: finished %v, %d half-made, %d listed", delay, finished, len(half), n)
		if finished && n == 0 {
			t.Fatalf("%s into a create: the child finished it but no sandbox is listed", delay)
		}
		if cs, err := b.cli.Containers(b.nsCtx(ctx(t)), `labels."`+sandbox.LabelTenant+`"==`+childTenant+`,labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`); err != nil || len(cs) != 0 {
			t.Fatalf("%s into a create: %d containers left after the listing (%v)", delay, len(cs), err)
		}
		ws, _ := filepath.Glob(filepath.Join(dataDir, "containerd", "workspaces", "*"))
		if len(ws) != 1 || filepath.Base(ws[0]) != src.ID {
			t.Fatalf("%s into a create: workspaces left: %v, want only the source's", delay, ws)
		}
	}
}

// noParts fails unless b's deployment has no lease of a snapshot, no view
// of one and no image of one left.
func noParts(t *testing.T, b *Backend, when string) {
	t.Helper()
	c := b.nsCtx(ctx(t))
	ls, err := b.cli.LeasesService().List(c, `labels."`+LabelSnapshot+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
	if err != nil || len(ls) != 0 {
		t.Fatalf("%s: %d leases of unfinished snapshots left (%v)", when, len(ls), err)
	}
	imgs, err := b.cli.ImageService().List(c, `labels."`+LabelSnapshot+`",labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
	if err != nil || len(imgs) != 0 {
		t.Fatalf("%s: %d snapshot images left (%v)", when, len(imgs), err)
	}
	var views []string
	err = b.cli.SnapshotService(DefaultSnapshotter).Walk(c, func(_ context.Context, i snapshots.Info) error {
		if strings.HasPrefix(i.Name, "sandboxd-snapview-") && i.Labels[sandbox.LabelDeployment] == b.dep.Name {
			views = append(views, i.Name)
		}
		return nil
	})
	if err != nil || len(views) != 0 {
		t.Fatalf("%s: views of snapshots left: %v (%v)", when, views, err)
	}
	ingests, err := b.cli.ContentStore().ListStatuses(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ingests {
		if strings.HasPrefix(i.Ref, leasePrefix) {
			t.Fatalf("%s: a write of a snapshot left: %s", when, i.Ref)
		}
	}
}

// isWhole fails unless every part of snapshot snapID is in containerd.
func isWhole(t *testing.T, b *Backend, snapID string) {
	t.Helper()
	im, err := b.snapshotRecord(b.nsCtx(ctx(t)), snapID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := images.Manifest(b.nsCtx(ctx(t)), b.cli.ContentStore(), im.Target, containerd.NewImage(b.cli, im).Platform())
	if err != nil {
		t.Fatalf("snapshot %s is listed without its manifest: %v", snapID, err)
	}
	parts := append([]ocispec.Descriptor{m.Config, {Digest: digest.Digest(im.Labels[labelWorkspaceTar])}}, m.Layers...)
	if err := b.checkParts(b.nsCtx(ctx(t)), im.Name, im.Target, parts...); err != nil {
		t.Fatalf("snapshot %s is listed but not whole: %v", snapID, err)
	}
}

// mountsUnder lists the mount points below dir.
func mountsUnder(dir string) []string {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	return points
}
