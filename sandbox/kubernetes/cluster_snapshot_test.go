package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// counters is how many files the writer of TestClusterSnapshotAndCopies
// keeps a counter in.
const counters = 10

// readCounters reads the writer's counter files, in order.
func readCounters(t *testing.T, c *agent.Client) []int {
	t.Helper()
	var paths []string
	for i := range counters {
		paths = append(paths, "c"+strconv.Itoa(i)+"/n")
	}
	r, err := c.ReadFiles(clusterCtx(t), &proto.ReadFilesRequest{Root: Workspace, Paths: paths})
	if err != nil || len(r.Files) != counters {
		t.Fatalf("read the counters: %+v, %v", r, err)
	}
	out := make([]int, counters)
	for i, f := range r.Files {
		n, err := strconv.Atoi(strings.TrimSpace(string(f.Data)))
		if err != nil {
			t.Fatalf("counter %s holds %q", f.Path, f.Data)
		}
		out[i] = n
	}
	return out
}

// oneInstant fails unless counters were read at one instant of a writer
// that writes n into counter 0, 1, ... 9 (each by a rename, so that no file
// is ever seen empty) and then n+1: never rising along the
// files, and at most one apart.
func oneInstant(t *testing.T, v []int, where string) {
	t.Helper()
	for i := 1; i < len(v); i++ {
		if v[i] > v[i-1] || v[0]-v[i] > 1 {
			t.Fatalf("%s: the counters %v were not copied at one instant", where, v)
		}
	}
}

// TestClusterSnapshotAndCopies: a snapshot of a sandbox whose process keeps
// writing holds its workspace at one instant, leaves the sandbox running,
// and makes sandboxes with the same files, independent of each other and
// of the source; deleting it leaves them their files.
func TestClusterSnapshotAndCopies(t *testing.T) {
	b, _ := claimBackend(t)
	ctx := clusterCtx(t)
	src, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:snap"})
	if err != nil {
		t.Fatal(err)
	}
	c := dialAgent(t, b, src.ID)
	tree := writeTree(t, c, "tree", 150)
	// Each counter's directory has a large file read after it, so that a
	// copy not taken at one instant would see the writer move on.
	var pads []proto.WriteFile
	for i := range counters {
		pads = append(pads, proto.WriteFile{Path: "c" + strconv.Itoa(i) + "/pad", Data: make([]byte, 4<<20), MkdirAll: true})
	}
	if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: Workspace, Files: pads}); err != nil {
		t.Fatal(err)
	}
	writer := fmt.Sprintf(`i=0; while :; do i=$((i+1)); for f in $(seq 0 %d); do echo $i > c$f/.t; mv c$f/.t c$f/n; done; done`, counters-1)
	if _, err := c.ProcStart(ctx, &proto.ProcStartRequest{Argv: []string{"sh", "-c", writer}, Dir: Workspace}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)

	snap, err := b.Snapshot(ctx, src.ID, sandbox.SnapshotRequest{Tenant: "acme", Name: "first"})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.Holds != sandbox.HoldsWorkspace || snap.Tenant != "acme" || snap.Sandbox != src.ID || snap.Conversation != "conv:snap" || snap.Name != "first" || snap.SizeBytes < 100_000 {
		t.Fatalf("Snapshot = %+v", snap)
	}
	list, err := b.Snapshots(ctx)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("Snapshots = %+v, %v", list, err)
	}

	// The source was thawed: its writer goes on.
	before := readCounters(t, c)[0]
	time.Sleep(500 * time.Millisecond)
	if after := readCounters(t, c)[0]; after <= before {
		t.Fatalf("the writer stopped at %d after the snapshot (was %d): the source was not thawed", after, before)
	}

	var copies []*agent.Client
	for i := range 2 {
		info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: fmt.Sprintf("conv:copy%d", i), Snapshot: snap.ID})
		if err != nil {
			t.Fatalf("create copy %d from the snapshot: %v", i, err)
		}
		cc := dialAgent(t, b, info.ID)
		tree.check(t, cc, fmt.Sprintf("copy %d", i))
		v := readCounters(t, cc)
		oneInstant(t, v, fmt.Sprintf("copy %d", i))
		copies = append(copies, cc)
	}
	// Independent: a file written in one is in no other.
	if err := copies[0].WriteFiles(ctx, &proto.WriteFilesRequest{Root: Workspace, Files: []proto.WriteFile{{Path: "only-in-copy0", Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	for name, cc := range map[string]*agent.Client{"copy 1": copies[1], "the source": c} {
		if _, err := cc.ReadFile(ctx, &proto.ReadFileRequest{Root: Workspace, Path: "only-in-copy0"}); err == nil {
			t.Fatalf("%s sees a file written in copy 0", name)
		}
	}

	if err := b.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SnapshotOf(ctx, snap.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("SnapshotOf a deleted snapshot: %v", err)
	}
	tree.check(t, copies[1], "copy 1 after the snapshot's deletion")
}

// TestClusterSnapshotNeedsAClass: without workspace claims there is no
// class to keep a snapshot on, and the answer says what to configure.
func TestClusterSnapshotNeedsAClass(t *testing.T) {
	b, _ := newClusterBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:noclass"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Snapshot(ctx, info.ID, sandbox.SnapshotRequest{Tenant: "acme"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "workspace_claim") {
		t.Fatalf("Snapshot without claims: %v", err)
	}
}
