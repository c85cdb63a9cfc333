package kubernetes

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// claimCluster is fakeCluster with workspace claims of 2Gi in class
// "fast"; creates counts the pods made per name.
func claimCluster(t *testing.T, setStatus func(*corev1.Pod), opts ...Option) (*Backend, *fake.Clientset, func(name string) int) {
	t.Helper()
	b, cs := fakeCluster(t, setStatus, append([]Option{WithWorkspaceClaim("fast", "2Gi")}, opts...)...)
	var mu sync.Mutex
	creates := map[string]int{}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		mu.Lock()
		creates[p.Name]++
		mu.Unlock()
		return false, nil, nil
	})
	cs.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim)
		c.UID = types.UID("uid-claim-" + c.Name)
		return false, nil, nil
	})
	return b, cs, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return creates[name]
	}
}

func getClaim(t *testing.T, b *Backend, cs *fake.Clientset, id string) (*corev1.PersistentVolumeClaim, bool) {
	t.Helper()
	c, err := cs.CoreV1().PersistentVolumeClaims("sbx").Get(bg(t), b.PodName(id), metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	return c, true
}

func TestWorkspaceClaimMadeAndMounted(t *testing.T) {
	b, cs, _ := claimCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme corp", Conversation: "conv:1", Image: "py:3", Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Labels[LabelWorkspaceClaim] != b.PodName(info.ID) || !b.Hibernatable(info) {
		t.Errorf("Create's info labels = %v, want the workspace claim named", info.Labels)
	}
	c, ok := getClaim(t, b, cs, info.ID)
	if !ok {
		t.Fatal("no workspace claim was made")
	}
	p := getPod(t, cs, info.ID)
	if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "fast" || len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("claim spec = %+v, want class fast, ReadWriteOnce", c.Spec)
	}
	if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("claim size = %s, want 2Gi", got.String())
	}
	for k, v := range p.Labels {
		if c.Labels[k] != v {
			t.Errorf("claim label %s = %q, want the pod's %q", k, c.Labels[k], v)
		}
	}
	if c.Annotations[sandbox.LabelTenant] != "acme corp" || c.Annotations[sandbox.LabelConversation] != "conv:1" || c.Annotations[AnnotationPodSpec] == "" {
		t.Errorf("claim annotations = %v, want the owner and the pod spec", c.Annotations)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "PersistentVolumeClaim" || p.OwnerReferences[0].UID != c.UID {
		t.Errorf("pod owners = %+v, want its claim", p.OwnerReferences)
	}
	if claimOf(p) != c.Name {
		t.Fatalf("the pod's workspace volume is %+v, want the claim", p.Spec.Volumes)
	}
	sc := p.Spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range sc.VolumeMounts {
		if m.Name == workspaceVolume {
			mounts[m.MountPath] = m.SubPath
		}
	}
	if mounts[Workspace] != claimWorkspaceDir || mounts[AgentStateDir] != claimAgentDir || len(mounts) != 2 {
		t.Errorf("claim mounts = %v, want the workspace and the agent's state in two directories of it", mounts)
	}
	if got := strings.Join(sc.Command, " "); got != AgentPath+" init --state-dir "+AgentStateDir {
		t.Errorf("command = %q, want the agent's state dir on the claim", got)
	}
}

func TestCreateThatFailsLeavesNoClaim(t *testing.T) {
	b, cs, _ := claimCluster(t, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}
	})
	if _, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1", Image: "nope:1"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Create = %v, want failed_precondition", err)
	}
	if claims, _ := cs.CoreV1().PersistentVolumeClaims("sbx").List(bg(t), metav1.ListOptions{}); len(claims.Items) != 0 {
		t.Errorf("the claim of a sandbox that could not start was left behind: %s", claims.Items[0].Name)
	}
}

func TestWorkspaceClaimSizeChecked(t *testing.T) {
	for _, size := range []string{"lots", "0", "-1Gi"} {
		if _, err := New(WithClientset(fake.NewClientset(), nil), WithWorkspaceClaim("", size)); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), size) {
			t.Errorf("size %q: New = %v, want invalid_argument naming it", size, err)
		}
	}
}

func TestHibernateWithoutClaimRefused(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Hibernatable(info) {
		t.Error("a sandbox on an emptyDir says it can hibernate")
	}
	err = b.Hibernate(bg(t), info.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "kubernetes.workspace_claim") {
		t.Fatalf("Hibernate without a claim = %v, want failed_precondition saying to configure kubernetes.workspace_claim", err)
	}
	if p := getPod(t, cs, info.ID); p.DeletionTimestamp != nil {
		t.Error("the refused hibernation deleted the pod")
	}
	// Its pod gone, a sandbox without a claim is gone (nothing to wake).
	if err := cs.CoreV1().Pods("sbx").Delete(bg(t), b.PodName(info.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Wake(bg(t), info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Wake of a sandbox without a claim whose pod is gone = %v, want not_found", err)
	}
}

func TestHibernateKeepsClaimAndWakeMakesThePodAgain(t *testing.T) {
	b, cs, creates := claimCluster(t, nil)
	ctx := bg(t)
	info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c1", Env: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	name := b.PodName(info.ID)
	if err := b.Annotate(ctx, info.ID, sandbox.LabelEgressChange, `{"allow":["example.com"]}`); err != nil {
		t.Fatal(err)
	}

	called := time.Now()
	if err := b.Hibernate(ctx, info.ID); err != nil {
		t.Fatalf("Hibernate: %v", err)
	}
	if _, err := cs.CoreV1().Pods("sbx").Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Error("the pod still exists after Hibernate")
	}
	if _, ok := getClaim(t, b, cs, info.ID); !ok {
		t.Fatal("Hibernate deleted the claim")
	}
	got, err := b.Inspect(ctx, info.ID)
	if err != nil || got.State != sandbox.StateHibernated || got.Conversation != "c1" || got.Tenant != "acme" || got.Image != "img:1" ||
		got.StateSince.Before(called.Add(-time.Millisecond)) || got.StateSince.After(time.Now()) {
		t.Fatalf("Inspect after Hibernate = %+v, %v; want acme/c1 of img:1 hibernated since the call", got, err)
	}
	// A restarted sandboxd (or another replica) lists it the same.
	b2, err := New(WithClientset(cs, nil), WithNamespace("sbx"), WithWorkspaceClaim("fast", "2Gi"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := b2.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID || list[0].State != sandbox.StateHibernated || !list[0].StateSince.Equal(got.StateSince) {
		t.Fatalf("List of a new backend = %+v, %v; want %s hibernated since %v", list, err, info.ID, got.StateSince)
	}
	if _, err := b.AttachAgent(ctx, info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hibernated") {
		t.Fatalf("AttachAgent on a hibernated sandbox = %v, want failed_precondition saying so", err)
	}
	if err := b.Hibernate(ctx, info.ID); err != nil {
		t.Fatalf("a second Hibernate: %v", err)
	}
	if again, _ := b.Inspect(ctx, info.ID); !again.StateSince.Equal(got.StateSince) {
		t.Fatalf("a second Hibernate moved the time from %v to %v", got.StateSince, again.StateSince)
	}

	if err := b.Wake(ctx, info.ID); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	p := getPod(t, cs, info.ID)
	if n := creates(name); n != 2 {
		t.Errorf("%d pods were made, want the first and one at the wake", n)
	}
	if claimOf(p) != name || p.Spec.Containers[0].Env[0].Value != "v" || p.Annotations[sandbox.LabelEgressChange] == "" || p.Annotations[AnnotationPodSpec] != "" {
		t.Errorf("the woken pod = %+v, want the same spec on the same claim, with the annotations made since and not the stored spec", p)
	}
	woken, err := b.Inspect(ctx, info.ID)
	if err != nil || woken.State != sandbox.StateRunning || woken.Conversation != "c1" || woken.Labels[sandbox.LabelEgressChange] == "" {
		t.Fatalf("Inspect after Wake = %+v, %v; want c1 running, its egress change kept", woken, err)
	}
	if c, _ := getClaim(t, b, cs, info.ID); c.Annotations[AnnotationHibernatedAt] != "" {
		t.Errorf("the claim still says it hibernated at %s", c.Annotations[AnnotationHibernatedAt])
	}
	if err := b.Wake(ctx, info.ID); err != nil || creates(name) != 2 {
		t.Fatalf("a second Wake = %v and made %d pods; want a no-op", err, creates(name))
	}
}

// A pod deleted, or evicted, behind sandboxd's back leaves a hibernated
// sandbox that wakes on its claim.
func TestPodGoneBehindOurBackIsHibernated(t *testing.T) {
	b, cs, creates := claimCluster(t, nil)
	ctx := bg(t)
	deleted, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "deleted"})
	if err != nil {
		t.Fatal(err)
	}
	evicted, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "evicted"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("sbx").Delete(ctx, b.PodName(deleted.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, evicted.ID)
	finished := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
		ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: finished}}}}}
	if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	list, err := b.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v; want both sandboxes", list, err)
	}
	for _, info := range list {
		if info.State != sandbox.StateHibernated {
			t.Errorf("%s is %s, want hibernated", info.Conversation, info.State)
		}
	}
	if got, _ := b.Inspect(ctx, evicted.ID); !got.StateSince.Equal(finished.Time.UTC()) {
		t.Errorf("the evicted sandbox is hibernated since %v, want when its container ended (%v)", got.StateSince, finished)
	}
	if got, _ := b.Inspect(ctx, deleted.ID); !got.StateSince.IsZero() {
		t.Errorf("the deleted sandbox is hibernated since %v, which nothing recorded", got.StateSince)
	}
	for _, info := range []sandbox.Info{deleted, evicted} {
		if err := b.Wake(ctx, info.ID); err != nil {
			t.Fatalf("Wake %s: %v", info.Conversation, err)
		}
		if got, err := b.Inspect(ctx, info.ID); err != nil || got.State != sandbox.StateRunning {
			t.Fatalf("after Wake %s is %+v, %v", info.Conversation, got, err)
		}
		if n := creates(b.PodName(info.ID)); n != 2 {
			t.Errorf("%s: %d pods made, want 2", info.Conversation, n)
		}
	}
}

func TestRemoveDeletesPodAndClaim(t *testing.T) {
	b, cs, _ := claimCluster(t, nil)
	ctx := bg(t)
	running, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "running"})
	if err != nil {
		t.Fatal(err)
	}
	asleep, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "asleep"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	for _, info := range []sandbox.Info{running, asleep} {
		if err := b.Remove(ctx, info.ID); err != nil {
			t.Fatalf("Remove %s: %v", info.Conversation, err)
		}
		if _, ok := getClaim(t, b, cs, info.ID); ok {
			t.Errorf("the claim of %s is left after Remove", info.Conversation)
		}
		if _, err := cs.CoreV1().Pods("sbx").Get(ctx, b.PodName(info.ID), metav1.GetOptions{}); err == nil {
			t.Errorf("the pod of %s is left after Remove", info.Conversation)
		}
		if err := b.Remove(ctx, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("second Remove of %s = %v, want not_found", info.Conversation, err)
		}
	}
	if list, err := b.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after Remove = %+v, %v", list, err)
	}
}

// A claimed pool sandbox stays its owner's through a hibernation: the
// claim's labels change with the pod's.
func TestPoolClaimRecordedOnTheWorkspaceClaim(t *testing.T) {
	b, cs, _ := claimCluster(t, nil)
	ctx := bg(t)
	warm, err := b.Create(ctx, sandbox.Spec{Image: "img:1", Pool: sandbox.PoolKey("img:1")})
	if err != nil {
		t.Fatal(err)
	}
	owner := sandbox.Owner{Tenant: "acme corp", Conversation: "conv:1"}
	if _, err := b.Claim(ctx, warm, owner); err != nil {
		t.Fatal(err)
	}
	c, _ := getClaim(t, b, cs, warm.ID)
	if c.Annotations[sandbox.LabelConversation] != owner.Conversation || c.Labels[sandbox.LabelTenant] != labelValue(owner.Tenant) {
		t.Fatalf("workspace claim metadata = %v %v, want the owner", c.Labels, c.Annotations)
	}
	if err := b.Hibernate(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Wake(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Inspect(ctx, warm.ID); got.Tenant != owner.Tenant || got.Conversation != owner.Conversation {
		t.Fatalf("after a hibernation the pool sandbox belongs to %s/%s, want %s/%s", got.Tenant, got.Conversation, owner.Tenant, owner.Conversation)
	}
}

// A woken pod that cannot start is deleted again: the sandbox stays
// hibernated with its claim, and the error says why.
func TestWakeThatCannotStartStaysHibernated(t *testing.T) {
	fail := false
	var mu sync.Mutex
	b, cs, _ := claimCluster(t, func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}
			return
		}
		running(p)
	})
	ctx := bg(t)
	info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Hibernate(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if err := b.Wake(ctx, info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Wake of a pod that cannot start = %v, want failed_precondition with the reason", err)
	}
	if got, err := b.Inspect(ctx, info.ID); err != nil || got.State != sandbox.StateHibernated {
		t.Fatalf("after a failed wake the sandbox is %+v, %v; want hibernated", got, err)
	}
	if _, err := cs.CoreV1().Pods("sbx").Get(ctx, b.PodName(info.ID), metav1.GetOptions{}); err == nil {
		t.Error("the pod that could not start was left")
	}
}

// A sandbox whose claim was deleted behind sandboxd's back keeps running
// on its pod but cannot hibernate: its files would go with the pod.
func TestHibernateRefusedWhenTheClaimIsGone(t *testing.T) {
	b, cs, _ := claimCluster(t, nil)
	ctx := bg(t)
	info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims("sbx").Delete(ctx, b.PodName(info.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Hibernate(ctx, info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Hibernate without its claim = %v; want failed_precondition saying the claim is gone", err)
	}
	if got, err := b.Inspect(ctx, info.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("after the refusal the sandbox is %+v, %v; want running", got, err)
	}
}
