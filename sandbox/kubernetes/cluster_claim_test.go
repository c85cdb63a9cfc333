package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Workspace claims on a real cluster: the test cluster of scripts/k8s-up.sh
// provisions them (SANDBOXD_TEST_K8S_STORAGE_CLASS; "" is the cluster's
// default class).

// claimBackend is a cluster Backend whose sandboxes get a 1Gi claim; it
// fails when the cluster has no class to provision one.
func claimBackend(t *testing.T, opts ...Option) (*Backend, kubernetes.Interface) {
	t.Helper()
	class := os.Getenv("SANDBOXD_TEST_K8S_STORAGE_CLASS")
	b, cs := newClusterBackend(t, append([]Option{WithWorkspaceClaim(class, "1Gi")}, opts...)...)
	classes, err := cs.StorageV1().StorageClasses().List(clusterCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range classes.Items {
		found = found || c.Name == class || class == "" && c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
	}
	if !found {
		t.Fatalf("the cluster has no StorageClass %q to provision workspace claims; bring it up with scripts/k8s-up.sh (which makes one) or set SANDBOXD_TEST_K8S_STORAGE_CLASS", class)
	}
	return b, cs
}

// files is a tree written into a workspace, by path, with its checksums.
type files map[string][sha256.Size]byte

// writeTree writes n files of assorted sizes (some empty) under dir.
func writeTree(t *testing.T, c *agent.Client, dir string, n int) files {
	t.Helper()
	tree := files{}
	var req []proto.WriteFile
	for i := range n {
		data := make([]byte, (i*997)%20000)
		_, _ = rand.Read(data)
		p := fmt.Sprintf("%s/d%d/f%03d.bin", dir, i%7, i)
		tree[p] = sha256.Sum256(data)
		req = append(req, proto.WriteFile{Path: p, Data: data, MkdirAll: true})
	}
	if err := c.WriteFiles(clusterCtx(t), &proto.WriteFilesRequest{Root: Workspace, Files: req}); err != nil {
		t.Fatalf("write the tree: %v", err)
	}
	return tree
}

// check reads every file back and fails on one missing or changed.
func (tree files) check(t *testing.T, c *agent.Client, when string) {
	t.Helper()
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	r, err := c.ReadFiles(clusterCtx(t), &proto.ReadFilesRequest{Root: Workspace, Paths: paths})
	if err != nil {
		t.Fatalf("%s: read the tree: %v", when, err)
	}
	bad := 0
	for _, f := range r.Files {
		if f.Skipped != "" || sha256.Sum256(f.Data) != tree[f.Path] {
			bad++
			if bad == 1 {
				t.Errorf("%s: %s differs from what was written (skipped %q, %d bytes)", when, f.Path, f.Skipped, len(f.Data))
			}
		}
	}
	if bad > 0 || len(r.Files) != len(tree) {
		t.Fatalf("%s: %d of %d files differ, %d read", when, bad, len(tree), len(r.Files))
	}
}

// dialAgent opens a pipe to the sandbox's agent, closed when t ends.
func dialAgent(t *testing.T, b *Backend, id string) *agent.Client {
	t.Helper()
	rwc, err := b.AttachAgent(clusterCtx(t), id)
	if err != nil {
		t.Fatalf("AttachAgent: %v", err)
	}
	c, err := agent.NewClient(clusterCtx(t), rwc)
	if err != nil {
		rwc.Close()
		t.Fatalf("the agent does not answer: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		rwc.Close()
	})
	return c
}

// inspectState fails unless b and a new backend both say id is want, and
// List agrees; it returns Inspect's answer.
func inspectState(t *testing.T, b *Backend, id, want string) sandbox.Info {
	t.Helper()
	info, err := b.Inspect(clusterCtx(t), id)
	if err != nil || info.State != want {
		t.Fatalf("Inspect = %+v, %v; want %s", info, err, want)
	}
	list, err := b.List(clusterCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range list {
		if l.ID == id {
			n++
			if l.State != want || !l.StateSince.Equal(info.StateSince) {
				t.Fatalf("List says %s since %v, Inspect %s since %v", l.State, l.StateSince, want, info.StateSince)
			}
		}
	}
	if n != 1 {
		t.Fatalf("List has the sandbox %d times, want once: %+v", n, list)
	}
	return info
}

// podUID is the UID of the sandbox's pod, "" when it has none.
func podUID(t *testing.T, cs kubernetes.Interface, b *Backend, id string) types.UID {
	t.Helper()
	p, err := cs.CoreV1().Pods(b.Namespace()).Get(clusterCtx(t), b.PodName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return p.UID
}

// waitState reads the sandbox until it is want (bounded).
func waitState(t *testing.T, b *Backend, id, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := b.Inspect(clusterCtx(t), id)
		if err == nil && info.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is %+v, %v after 60s; want %s", info, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterWorkspaceClaim: a sandbox on a claim hibernates (its pod
// deleted, its claim kept, its processes recorded as stopped by the
// hibernation), wakes on a new pod with its files, and comes back the same
// way after its pod is deleted behind sandboxd's back and after its agent
// exits; deleting it deletes its claim.
func TestClusterWorkspaceClaim(t *testing.T) {
	b, cs := claimBackend(t)
	ctx := clusterCtx(t)
	info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:claim"})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := cs.CoreV1().PersistentVolumeClaims(b.Namespace()).Get(ctx, b.PodName(info.ID), metav1.GetOptions{})
	if err != nil || claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the workspace claim = %+v, %v; want it bound", claim, err)
	}
	c := dialAgent(t, b, info.ID)
	tree := writeTree(t, c, "tree", 120)
	sleeper, err := c.ProcStart(ctx, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo up; sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}

	// Hibernate: the pod goes, the claim stays, and the state says so to
	// every backend, with the time it began.
	called := time.Now()
	if err := b.Hibernate(ctx, info.ID); err != nil {
		t.Fatalf("Hibernate: %v", err)
	}
	asleep := inspectState(t, b, info.ID, sandbox.StateHibernated)
	if asleep.StateSince.Before(called.Add(-time.Second)) || asleep.StateSince.After(time.Now()) {
		t.Fatalf("hibernated since %v; want a time after the call at %v", asleep.StateSince, called)
	}
	other := newClusterOther(t, b)
	if got, err := other.Inspect(ctx, info.ID); err != nil || got.State != sandbox.StateHibernated || !got.StateSince.Equal(asleep.StateSince) {
		t.Fatalf("another backend sees %+v, %v; want hibernated since %v", got, err, asleep.StateSince)
	}
	if _, err := b.AttachAgent(ctx, info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hibernated") {
		t.Fatalf("AttachAgent while hibernated = %v; want failed_precondition saying so", err)
	}
	if err := b.Hibernate(ctx, info.ID); err != nil {
		t.Fatalf("a second Hibernate: %v", err)
	}
	if again := inspectState(t, b, info.ID, sandbox.StateHibernated); !again.StateSince.Equal(asleep.StateSince) {
		t.Fatalf("a second Hibernate moved the time from %v to %v", asleep.StateSince, again.StateSince)
	}
	if uid := waitPodGone(t, cs, b, info.ID); uid != "" {
		t.Fatalf("the pod %s is still there after the hibernation", uid)
	}

	// Wake: a new pod on the same claim, the files as written, the process
	// reported as stopped by the hibernation.
	if err := b.Wake(ctx, info.ID); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	inspectState(t, b, info.ID, sandbox.StateRunning)
	c = dialAgent(t, b, info.ID)
	tree.check(t, c, "after the wake")
	p, err := c.ProcGet(ctx, sleeper.ID, 0)
	if err != nil || p.State != proto.ProcStopped || !p.Hibernated {
		t.Fatalf("the process that ran at the hibernation = %+v, %v; want it stopped by the hibernation", p, err)
	}
	if err := b.Wake(ctx, info.ID); err != nil {
		t.Fatalf("a second Wake: %v", err)
	}
	if _, err := c.ProcList(ctx, nil); err != nil {
		t.Fatalf("the pipe fails after a second Wake: %v", err)
	}

	// The pod deleted behind sandboxd's back: hibernated, woken on the
	// claim with the files.
	first := podUID(t, cs, b, info.ID)
	if err := cs.CoreV1().Pods(b.Namespace()).Delete(ctx, b.PodName(info.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, b, info.ID, sandbox.StateHibernated)
	if err := b.Wake(ctx, info.ID); err != nil {
		t.Fatalf("Wake after the pod was deleted: %v", err)
	}
	if uid := podUID(t, cs, b, info.ID); uid == "" || uid == first {
		t.Fatalf("the pod after the wake is %q, the deleted one was %q; want a new one", uid, first)
	}
	tree.check(t, dialAgent(t, b, info.ID), "after the pod was deleted")

	// Its agent exits (as on an eviction, the pod stays, ended): the
	// same.
	second := podUID(t, cs, b, info.ID)
	if err := stopAgentTo(ctx, b, info.ID, sandbox.StateHibernated); err != nil {
		t.Fatal(err)
	}
	if err := b.Wake(ctx, info.ID); err != nil {
		t.Fatalf("Wake after the agent exited: %v", err)
	}
	if uid := podUID(t, cs, b, info.ID); uid == "" || uid == second {
		t.Fatalf("the pod after the wake is %q, the ended one was %q; want a new one", uid, second)
	}
	tree.check(t, dialAgent(t, b, info.ID), "after the agent exited")

	// Remove: the pod and the claim go.
	if err := b.Remove(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect(ctx, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Inspect after Remove = %v; want not_found", err)
	}
	got, err := cs.CoreV1().PersistentVolumeClaims(b.Namespace()).Get(ctx, b.PodName(info.ID), metav1.GetOptions{})
	if err == nil && got.DeletionTimestamp == nil {
		t.Fatal("the workspace claim is kept after Remove")
	}
}

// newClusterOther is another backend on b's namespace and deployment, as
// a restarted sandboxd or another replica would be.
func newClusterOther(t *testing.T, b *Backend) *Backend {
	t.Helper()
	o, err := New(WithClientset(b.cs, b.rest), WithNamespace(b.namespace), WithDeployment(b.dep), WithWorkspaceClaim(b.claimClass, b.claimSpec))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// waitPodGone waits until the sandbox's pod is gone; "" then, else the UID
// of the pod still there after 60s.
func waitPodGone(t *testing.T, cs kubernetes.Interface, b *Backend, id string) types.UID {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		uid := podUID(t, cs, b, id)
		if uid == "" || time.Now().After(deadline) {
			return uid
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopAgentTo makes the sandbox's agent exit and waits until the sandbox
// reads as want.
func stopAgentTo(ctx context.Context, b *Backend, id, want string) error {
	// The exec may be cut when the container it runs in stops.
	_ = b.Exec(ctx, id, []string{"sh", "-c", "kill -TERM 1"}, nil, nil, nil)
	for {
		info, err := b.Inspect(ctx, id)
		if err != nil {
			return err
		}
		if info.State == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s still %s after its agent was told to stop", id, info.State)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A call through the Manager after the pod was deleted behind its back
// makes the pod again on the claim and answers, the files intact; a sandbox
// without a claim is refused a hibernation in one sentence.
func TestClusterWorkspaceClaimCallAfterPodDeleted(t *testing.T) {
	b, cs := claimBackend(t)
	m := sandbox.NewManager(b)
	ctx := clusterCtx(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:kept"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "conv:kept")
	if err != nil {
		t.Fatal(err)
	}
	tree := writeTree(t, c, "kept", 40)
	if err := cs.CoreV1().Pods(b.Namespace()).Delete(ctx, b.PodName(info.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the agent pipe did not end within 30s of the pod's deletion")
	}
	c, got, err := m.Agent(ctx, "acme", "conv:kept")
	if err != nil {
		t.Fatalf("a call after the pod was deleted = %v; want the sandbox woken on its claim", err)
	}
	if got.ID != info.ID || got.State != sandbox.StateRunning {
		t.Fatalf("the call reached %+v; want sandbox %s running", got, info.ID)
	}
	tree.check(t, c, "after the pod was deleted behind sandboxd's back")

	// The Manager's verbs: hibernate and resume, the files intact.
	if h, err := m.Hibernate(ctx, "acme", info.ID); err != nil || h.State != sandbox.StateHibernated {
		t.Fatalf("Hibernate = %+v, %v", h, err)
	}
	if r, err := m.Resume(ctx, "acme", info.ID); err != nil || r.State != sandbox.StateRunning {
		t.Fatalf("Resume = %+v, %v", r, err)
	}
	c, _, err = m.Agent(ctx, "acme", "conv:kept")
	if err != nil {
		t.Fatal(err)
	}
	tree.check(t, c, "after hibernate and resume")

	plain, _ := newClusterBackend(t)
	pm := sandbox.NewManager(plain)
	if err := pm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	pinfo, err := pm.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:plain"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pm.Hibernate(ctx, "acme", pinfo.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "kubernetes.workspace_claim") {
		t.Fatalf("Hibernate without a claim = %v; want failed_precondition saying to configure kubernetes.workspace_claim", err)
	}
	if got, err := pm.Get(ctx, "acme", pinfo.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("after the refused hibernation the sandbox is %+v, %v; want it running", got, err)
	}
}
