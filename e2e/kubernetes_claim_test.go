package e2e

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// kubeClient is a clientset for the cluster kubeconfig names.
func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestKubernetesWorkspaceClaim drives the built sandboxd with the
// kubernetes backend and a workspace claim per sandbox: a tree of 2,000
// files keeps its digest through a hibernation (the pod deleted, the claim
// kept, sandboxd restarted meanwhile) and the resume, through `kubectl
// delete pod` and an eviction behind sandboxd's back (the next call makes
// the pod again and answers), a fork into two copies carries the tree,
// and deleting the sandbox deletes its claim.
func TestKubernetesWorkspaceClaim(t *testing.T) {
	claim := fmt.Sprintf("  workspace_claim: {storage_class: %q, size: 1Gi}\n", os.Getenv("SANDBOXD_TEST_K8S_STORAGE_CLASS"))
	cfg, kubeconfig := kubernetesConfig(t, claim)
	cs := kubeClient(t, kubeconfig)
	d := startDaemon(t, "kubernetes", t.TempDir(), "--config", cfg)
	conv := "k8s-claim-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: conv, Resources: &api.Resources{CPUs: 1, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Client.DeleteSandbox(ctx(t), sb.ID) })
	name := "sandboxd-" + sb.Deployment + "-" + sb.ID
	pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox has no workspace claim %s: %v", name, err)
	}
	podUID := func() types.UID {
		p, err := cs.CoreV1().Pods("default").Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.UID
	}
	// podGone waits until the pod is gone: the call after it then finds
	// the sandbox without one, not a pipe cut half way.
	podGone := func(what string) {
		t.Helper()
		waitFor(t, 60*time.Second, what, func() error {
			if uid := podUID(); uid != "" {
				return fmt.Errorf("pod %s (%s) is still there", name, uid)
			}
			return nil
		})
	}

	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": makeTree, "timeout_s": 300})
	want := treeDigest(t, d, run.ID)
	ticker := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "while :; do date; sleep 1; done"}))
	if ticker == nil {
		t.Fatal("the ticker did not start")
	}

	// Hibernate: the pod goes, the claim stays; a restarted sandboxd reads
	// the state from the cluster.
	got, err := d.Client.HibernateSandbox(ctx(t), sb.ID)
	if err != nil || got.State != sandbox.StateHibernated || got.StateSince == nil {
		t.Fatalf("hibernate = %+v, %v", got, err)
	}
	podGone("the hibernated sandbox's pod to be gone")
	if now, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx(t), name, metav1.GetOptions{}); err != nil || now.UID != pvc.UID {
		t.Fatalf("after the hibernation the claim is %+v, %v; want the same one", now, err)
	}
	d.restart()
	if g, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || g.State != sandbox.StateHibernated || g.StateSince == nil || !g.StateSince.Equal(*got.StateSince) {
		t.Fatalf("after a restart GET says %+v, %v; want hibernated since %v", g, err, got.StateSince)
	}

	// Resume: a new pod on the claim, the files and what stopped said.
	if r, err := d.Client.ResumeSandbox(ctx(t), sb.ID); err != nil || r.State != sandbox.StateRunning {
		t.Fatalf("resume = %+v, %v", r, err)
	}
	if got := treeDigest(t, d, run.ID); got != want {
		t.Fatalf("after the resume the tree's digest is %s, was %s", got, want)
	}
	if got := mustCall(t, d, run.ID, "process", map[string]any{"action": "list"}); !regexp.MustCompile(ticker[1] + `\s+stopped by hibernation`).MatchString(got) {
		t.Fatalf("after the resume the ticker is listed as %q; want stopped by hibernation", got)
	}

	// A fork: the snapshot holds the workspace (no image is committed from
	// a pod) and each copy has the whole tree.
	fork, err := d.Client.ForkSandbox(ctx(t), sb.ID, []string{conv + "-a", conv + "-b"})
	if err != nil || len(fork.Sandboxes) != 2 || len(fork.Failed) > 0 {
		t.Fatalf("fork = %+v, %v", fork, err)
	}
	if fork.Snapshot.Holds != sandbox.HoldsWorkspace {
		t.Fatalf("the fork's snapshot holds %q; want %q", fork.Snapshot.Holds, sandbox.HoldsWorkspace)
	}
	for _, cp := range fork.Sandboxes {
		r, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: cp.Conversation})
		if err != nil {
			t.Fatal(err)
		}
		if got := treeDigest(t, d, r.ID); got != want {
			t.Fatalf("copy %s: the tree's digest is %s, the source's %s", cp.Conversation, got, want)
		}
		if err := d.Client.DeleteSandbox(ctx(t), cp.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Client.DeleteSnapshot(ctx(t), fork.Snapshot.ID); err != nil {
		t.Fatal(err)
	}

	// `kubectl delete pod` behind sandboxd's back: the next call makes the
	// pod again on the claim and answers.
	before := podUID()
	if err := cs.CoreV1().Pods("default").Delete(ctx(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podGone("the deleted pod to be gone")
	if got := treeDigest(t, d, run.ID); got != want {
		t.Fatalf("after the pod was deleted the tree's digest is %s, was %s", got, want)
	}
	if uid := podUID(); uid == "" || uid == before {
		t.Fatalf("the call was answered by pod %q; want a new one, not %s", uid, before)
	}

	// An eviction (the Eviction API, as a node drain does): the same.
	before = podUID()
	if err := cs.PolicyV1().Evictions("default").Evict(ctx(t), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}); err != nil {
		t.Fatalf("evict the pod: %v", err)
	}
	podGone("the evicted pod to be gone")
	if got := treeDigest(t, d, run.ID); got != want {
		t.Fatalf("after the eviction the tree's digest is %s, was %s", got, want)
	}
	if uid := podUID(); uid == "" || uid == before {
		t.Fatalf("the call was answered by pod %q; want a new one, not %s", uid, before)
	}

	// Deleting the sandbox deletes its claim.
	if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the sandbox's claim and pod to be gone", func() error {
		if _, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim %s: %v", name, err)
		}
		if uid := podUID(); uid != "" {
			return fmt.Errorf("pod %s is still there", name)
		}
		return nil
	})
}

// TestKubernetesHibernateWithoutClaimRefused: on an emptyDir workspace a
// hibernation would lose the files: it is refused in one sentence that
// says what to configure, and the sandbox keeps running.
func TestKubernetesHibernateWithoutClaimRefused(t *testing.T) {
	cfg, _ := kubernetesConfig(t, "")
	d := startDaemon(t, "kubernetes", t.TempDir(), "--config", cfg)
	conv := "k8s-noclaim-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Client.DeleteSandbox(ctx(t), sb.ID) })
	_, err = d.Client.HibernateSandbox(ctx(t), sb.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "kubernetes.workspace_claim") {
		t.Fatalf("hibernate without a workspace claim = %v; want failed_precondition naming kubernetes.workspace_claim", err)
	}
	if g, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || g.State != sandbox.StateRunning {
		t.Fatalf("after the refused hibernation GET says %+v, %v; want running", g, err)
	}
}
