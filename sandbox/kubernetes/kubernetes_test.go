package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// fakeCluster is a fake clientset whose kubelet sets every new pod's status
// with setStatus (by default: running).
func fakeCluster(t *testing.T, setStatus func(*corev1.Pod), opts ...Option) (*Backend, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	if setStatus == nil {
		setStatus = running
	}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.UID = types.UID("uid-" + p.Name)
		p.CreationTimestamp = metav1.Now()
		setStatus(p)
		return false, nil, nil // the tracker stores the pod as changed here
	})
	b, err := New(append([]Option{WithClientset(cs, nil), WithNamespace("sbx"), WithDefaultImage("img:1")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	b.pollEvery = 5 * time.Millisecond
	return b, cs
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func getPod(t *testing.T, cs *fake.Clientset, id string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods("sbx").Get(bg(t), NamePrefix+sandbox.DefaultDeploymentName+"-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod of %s: %v", id, err)
	}
	return p
}

func TestPodSpec(t *testing.T) {
	b, cs := fakeCluster(t, nil, WithAgentImage("sandboxd:test"), WithImagePullPolicy(corev1.PullNever),
		WithRuntimeClass("gvisor"), WithRequests(sandbox.Resources{CPUs: 0.25, MemoryMB: 128}))
	tenant := strings.Repeat("t", 70)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: tenant, Conversation: "conv:with:colons", Image: "py:3",
		Env: map[string]string{"B": "2", "A": "1"}, Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Tenant != tenant || info.Conversation != "conv:with:colons" || info.State != sandbox.StateRunning ||
		info.Backend != "kubernetes" || info.Image != "py:3" || info.Workspace != "/workspace" || info.CreatedAt.IsZero() {
		t.Fatalf("Create returned %+v", info)
	}
	p := getPod(t, cs, info.ID)

	// Labels: selectable and valid; the raw values are in annotations.
	for k, v := range p.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q is not a valid label value: %v", k, v, errs)
		}
	}
	if p.Labels[sandbox.LabelManaged] != "true" || p.Labels[LabelNetwork] != "none" {
		t.Errorf("labels = %v", p.Labels)
	}
	if p.Annotations[sandbox.LabelTenant] != tenant || p.Annotations[sandbox.LabelConversation] != "conv:with:colons" {
		t.Errorf("annotations = %v", p.Annotations)
	}

	s := p.Spec
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("the service-account token is mounted")
	}
	if s.SecurityContext == nil || s.SecurityContext.SeccompProfile == nil || s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp = %+v, want RuntimeDefault", s.SecurityContext)
	}
	if s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor" {
		t.Errorf("runtimeClassName = %v, want gvisor", s.RuntimeClassName)
	}
	if s.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %s", s.RestartPolicy)
	}

	if len(s.InitContainers) != 1 {
		t.Fatalf("init containers = %+v, want one", s.InitContainers)
	}
	ic := s.InitContainers[0]
	if ic.Image != "sandboxd:test" || ic.ImagePullPolicy != corev1.PullNever ||
		strings.Join(ic.Command, " ") != "/usr/local/bin/sandbox-agent install --links-down "+docker.AgentPath {
		t.Errorf("init container = %s %s %v", ic.Image, ic.ImagePullPolicy, ic.Command)
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].ReadOnly || ic.VolumeMounts[0].MountPath != "/opt/sandboxd/bin" {
		t.Errorf("init container mounts = %+v, want the agent dir writable", ic.VolumeMounts)
	}

	if len(s.Containers) != 1 {
		t.Fatalf("containers = %+v", s.Containers)
	}
	c := s.Containers[0]
	if c.Image != "py:3" || c.ImagePullPolicy != corev1.PullNever || strings.Join(c.Command, " ") != docker.AgentPath+" init" ||
		c.Stdin || c.TTY || c.WorkingDir != "/workspace" {
		t.Errorf("sandbox container = %s %s %v stdin=%v tty=%v dir=%s", c.Image, c.ImagePullPolicy, c.Command, c.Stdin, c.TTY, c.WorkingDir)
	}
	if len(c.Env) != 2 || c.Env[0].Name != "A" || c.Env[1].Value != "2" {
		t.Errorf("env = %+v", c.Env)
	}
	var agentRO, ws bool
	for _, m := range c.VolumeMounts {
		agentRO = agentRO || m.MountPath == "/opt/sandboxd/bin" && m.ReadOnly && m.Name == ic.VolumeMounts[0].Name
		ws = ws || m.MountPath == "/workspace" && !m.ReadOnly
	}
	if !agentRO || !ws {
		t.Errorf("sandbox mounts = %+v, want the agent dir read-only and /workspace writable", c.VolumeMounts)
	}

	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged {
		t.Fatalf("securityContext = %+v, want no privilege escalation", sc)
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities drop = %+v, want ALL", sc.Capabilities)
	}
	var added []string
	for _, c := range sc.Capabilities.Add {
		added = append(added, string(c))
	}
	if strings.Join(added, ",") != strings.Join(docker.DefaultCaps, ",") {
		t.Errorf("capabilities add = %v, want the Docker backend's %v", added, docker.DefaultCaps)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container seccomp = %+v", sc.SeccompProfile)
	}

	wantQ := func(list corev1.ResourceList, name corev1.ResourceName, want string) {
		t.Helper()
		got := list[name]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s = %s, want %s", name, got.String(), want)
		}
	}
	wantQ(c.Resources.Limits, corev1.ResourceCPU, "1500m")
	wantQ(c.Resources.Limits, corev1.ResourceMemory, "512Mi")
	wantQ(c.Resources.Requests, corev1.ResourceCPU, "250m")
	wantQ(c.Resources.Requests, corev1.ResourceMemory, "128Mi")

	// Setuid lets the sandbox escalate (sudo) and is remembered; the
	// capabilities stay the same.
	info, err = b.Create(bg(t), sandbox.Spec{Tenant: "a", Conversation: "setuid", Image: "py:3", Setuid: true})
	if err != nil {
		t.Fatal(err)
	}
	sc2 := getPod(t, cs, info.ID).Spec.Containers[0].SecurityContext
	if sc2.AllowPrivilegeEscalation == nil || !*sc2.AllowPrivilegeEscalation || len(sc2.Capabilities.Add) != len(sc.Capabilities.Add) {
		t.Errorf("Setuid securityContext = %+v, want escalation allowed and the same capabilities", sc2)
	}
	if !sandbox.SetuidOf(info) {
		t.Errorf("Setuid is not in the sandbox's labels %v", info.Labels)
	}
}

// The init container of a network "none" pod takes its links down: then,
// and only then, it runs as root with NET_ADMIN and nothing else. A bridge
// pod's, or that of a backend told not to, only copies, with no capability.
func TestInitContainerTakesLinksDownOnlyForNetworkNone(t *testing.T) {
	check := func(t *testing.T, ic corev1.Container, linksDown bool) {
		t.Helper()
		want := AgentSource + " install " + AgentPath
		if linksDown {
			want = AgentSource + " install --links-down " + AgentPath
		}
		if strings.Join(ic.Command, " ") != want {
			t.Errorf("init command = %v, want %s", ic.Command, want)
		}
		sc := ic.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Fatalf("init securityContext = %+v, want no escalation, a read-only root, ALL dropped", sc)
		}
		switch {
		case linksDown && (len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "NET_ADMIN" || sc.RunAsUser == nil || *sc.RunAsUser != 0):
			t.Errorf("init capabilities %v as user %v, want only NET_ADMIN as root", sc.Capabilities.Add, sc.RunAsUser)
		case !linksDown && (len(sc.Capabilities.Add) != 0 || sc.RunAsUser != nil):
			t.Errorf("init capabilities %v as user %v, want none as the image's user", sc.Capabilities.Add, sc.RunAsUser)
		}
	}
	b, cs := fakeCluster(t, nil)
	none, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "none"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, getPod(t, cs, none.ID).Spec.InitContainers[0], true)
	bridge, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "bridge", Network: "bridge"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, getPod(t, cs, bridge.ID).Spec.InitContainers[0], false)
	off, cs2 := fakeCluster(t, nil, WithLinksDown(false))
	info, err := off.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "off"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, getPod(t, cs2, info.ID).Spec.InitContainers[0], false)
}

func TestDefaultsAndRequestsCappedAtLimits(t *testing.T) {
	b, cs := fakeCluster(t, nil, WithDefaultResources(sandbox.Resources{CPUs: 0.05, MemoryMB: 64}))
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1", Network: "bridge"})
	if err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, info.ID)
	c := p.Spec.Containers[0]
	if c.Image != "img:1" || p.Spec.RuntimeClassName != nil || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s, runtimeClass %v, pull %s; want the defaults", c.Image, p.Spec.RuntimeClassName, c.ImagePullPolicy)
	}
	if p.Spec.InitContainers[0].Image != DefaultAgentImage {
		t.Errorf("agent image = %s, want %s", p.Spec.InitContainers[0].Image, DefaultAgentImage)
	}
	if p.Labels[LabelNetwork] != "bridge" || p.Labels[sandbox.LabelTenant] != "acme" || p.Labels[sandbox.LabelConversation] != "c1" {
		t.Errorf("labels = %v, want readable values kept as they are", p.Labels)
	}
	lim, req := c.Resources.Limits[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceCPU]
	if lim.MilliValue() != 50 || req.MilliValue() != 50 {
		t.Errorf("cpu limit %s request %s; want both 50m (the request cut to the limit)", lim.String(), req.String())
	}
	if mr := c.Resources.Requests[corev1.ResourceMemory]; mr.Value() != 64<<20 {
		t.Errorf("memory request = %s, want 64Mi", mr.String())
	}
}

func TestHostWorkspaceRefused(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	_, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1", HostWorkspace: "/srv/x"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "host directory") {
		t.Fatalf("Create with a host workspace = %v, want invalid_argument", err)
	}
	if pods, _ := cs.CoreV1().Pods("sbx").List(bg(t), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("a pod was created: %v", pods.Items)
	}
}

func TestCreateFailsFastAndCleansUp(t *testing.T) {
	b, cs := fakeCluster(t, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: `Container image "nope:1" is not present with pull policy of Never`}}}}
	})
	_, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1", Image: "nope:1"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "ErrImageNeverPull") || !strings.Contains(err.Error(), "import the image") {
		t.Fatalf("Create with a missing image = %v, want failed_precondition naming the reason and the fix", err)
	}
	if pods, _ := cs.CoreV1().Pods("sbx").List(bg(t), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("the pod that could not start was left behind: %s", pods.Items[0].Name)
	}
}

func TestCreateTimesOutWithTheSchedulersReason(t *testing.T) {
	b, _ := fakeCluster(t, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	}, WithStartTimeout(50*time.Millisecond))
	_, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Fatalf("Create on a full cluster = %v, want deadline_exceeded with the scheduler's reason", err)
	}
}

func TestStateMapping(t *testing.T) {
	term := &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}
	now := metav1.Now()
	for _, tc := range []struct {
		name  string
		pod   corev1.Pod
		state string
		why   string
	}{
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}, sandbox.StateRunning, ""},
		{"running pod, container exited", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: ContainerName, State: corev1.ContainerState{Terminated: term}}}}}, sandbox.StateStopped, "terminated: Completed"},
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, sandbox.StateStopped, "Pending"},
		{"evicted", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message: "The node was low on resource: memory."}}, sandbox.StateStopped, "reason Evicted"},
		{"agent exited", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, sandbox.StateStopped, "Succeeded"},
		{"unknown", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodUnknown}}, sandbox.StateStopped, "Unknown"},
		{"being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, sandbox.StateGone, ""},
	} {
		if got := mapState(&tc.pod); got != tc.state {
			t.Errorf("%s: state %s, want %s", tc.name, got, tc.state)
		}
		if why := whyNotRunning(&tc.pod); tc.why != "" && !strings.Contains(why, tc.why) {
			t.Errorf("%s: why %q, want it to mention %q", tc.name, why, tc.why)
		}
	}
}

// A sandbox evicted (or otherwise stopped) behind our back: listed as
// stopped, and the attach error says why.
func TestEvictedSandboxReportedClearly(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, info.ID)
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}
	if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(bg(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inspect(bg(t), info.ID)
	if err != nil || got.State != sandbox.StateStopped {
		t.Fatalf("Inspect = %+v, %v; want stopped", got, err)
	}
	_, err = b.AttachAgent(bg(t), info.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "Evicted") || !strings.Contains(err.Error(), "low on resource") {
		t.Fatalf("AttachAgent on an evicted sandbox = %v, want failed_precondition with the eviction reason", err)
	}
}

// The map is re-found from the API server by a new Backend; pods without
// our label and pods being deleted are not sandboxes.
func TestListFindsSandboxesAfterRestart(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	a, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "conv:1"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "conv:2"})
	if err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, gone.ID)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	if _, err := cs.CoreV1().Pods("sbx").Update(bg(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: NamePrefix + "0123456789ab", Namespace: "sbx"}}
	if _, err := cs.CoreV1().Pods("sbx").Create(bg(t), stranger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	b2, err := New(WithClientset(cs, nil), WithNamespace("sbx"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := b2.List(bg(t))
	if err != nil || len(list) != 1 || list[0].ID != a.ID || list[0].Tenant != "acme" || list[0].Conversation != "conv:1" {
		t.Fatalf("List after a restart = %+v, %v; want only %s of acme/conv:1", list, err, a.ID)
	}
	for _, id := range []string{gone.ID, "0123456789ab", "../etc", "SANDBOXD"} {
		if _, err := b2.Inspect(bg(t), id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Inspect(%q) = %v, want not_found", id, err)
		}
	}
}

func TestRemoveDeletesThePod(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(bg(t), info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("sbx").Get(bg(t), b.PodName(info.ID), metav1.GetOptions{}); err == nil {
		t.Error("the pod still exists after Remove")
	}
	if err := b.Remove(bg(t), info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Remove = %v, want not_found", err)
	}
}

func TestNetworkPolicyCreatedOnceWhenConfigured(t *testing.T) {
	b, cs := fakeCluster(t, nil, WithNetworkPolicy(true))
	for _, conv := range []string{"c1", "c2"} {
		if _, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: conv}); err != nil {
			t.Fatal(err)
		}
	}
	// A second sandboxd finds the policy already there.
	b2, _ := New(WithClientset(cs, nil), WithNamespace("sbx"), WithDefaultImage("img:1"), WithNetworkPolicy(true))
	b2.pollEvery = time.Millisecond
	if _, err := b2.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c3"}); err != nil {
		t.Fatal(err)
	}
	pols, err := cs.NetworkingV1().NetworkPolicies("sbx").List(bg(t), metav1.ListOptions{})
	if err != nil || len(pols.Items) != 1 {
		t.Fatalf("policies = %+v, %v; want exactly one", pols, err)
	}
	pol := pols.Items[0].Spec
	if !isolatesNoneAndProxy(pol) {
		t.Errorf("policy = %+v, want all ingress and egress of managed network-none and network-proxy pods denied", pol)
	}

	// A policy an older sandboxd made for "none" pods only is widened to
	// "proxy" pods at the next create.
	old := pols.Items[0].DeepCopy()
	old.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{sandbox.LabelManaged: "true", LabelNetwork: "none"}}
	if _, err := cs.NetworkingV1().NetworkPolicies("sbx").Update(bg(t), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b3, _ := New(WithClientset(cs, nil), WithNamespace("sbx"), WithDefaultImage("img:1"), WithNetworkPolicy(true))
	b3.pollEvery = time.Millisecond
	if _, err := b3.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c4", Network: sandbox.NetworkProxy}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.NetworkingV1().NetworkPolicies("sbx").Get(bg(t), NetworkPolicyName, metav1.GetOptions{}); err != nil || !isolatesNoneAndProxy(got.Spec) {
		t.Errorf("the older policy was not widened to proxy pods: %+v, %v", got, err)
	}

	off, cs2 := fakeCluster(t, nil)
	if _, err := off.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	if pols, _ := cs2.NetworkingV1().NetworkPolicies("sbx").List(bg(t), metav1.ListOptions{}); len(pols.Items) != 0 {
		t.Errorf("a policy was created without being configured")
	}
}

func TestLabelValue(t *testing.T) {
	for _, v := range []string{"acme", "conv:1", strings.Repeat("x", 64), "h-" + strings.Repeat("a", 40), "-x", "a b"} {
		got := labelValue(v)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q, not a valid label value: %v", v, got, errs)
		}
		if labelValue(v+"y") == got {
			t.Errorf("labelValue(%q) collides with labelValue(%q)", v, v+"y")
		}
	}
	if labelValue("acme") != "acme" {
		t.Error("a valid value is not kept readable")
	}
}

func TestExecNeedsRestConfig(t *testing.T) {
	b, _ := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AttachAgent(bg(t), info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("AttachAgent without a rest.Config = %v, want failed_precondition", err)
	}
}

// A pod that starts after Create began is seen through the watch, not the
// poll: with both polls an hour apart, Create still returns once the
// kubelet (here an UpdateStatus) reports the container running.
func TestCreateWakesOnTheWatch(t *testing.T) {
	b, cs := fakeCluster(t, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })
	b.pollEvery, b.watchedPollEvery = time.Hour, time.Hour
	go func() {
		for {
			time.Sleep(20 * time.Millisecond)
			pods, err := cs.CoreV1().Pods("sbx").List(context.Background(), metav1.ListOptions{})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			p := pods.Items[0]
			running(&p)
			if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
	}()
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if info.State != sandbox.StateRunning {
		t.Errorf("state = %s, want running", info.State)
	}
}

// isolatesNoneAndProxy says whether pol denies all traffic of the managed
// pods of network "none" and "proxy".
func isolatesNoneAndProxy(pol networkingv1.NetworkPolicySpec) bool {
	sel := pol.PodSelector
	return sel.MatchLabels[sandbox.LabelManaged] == "true" && len(sel.MatchLabels) == 1 &&
		len(sel.MatchExpressions) == 1 && sel.MatchExpressions[0].Key == LabelNetwork &&
		sel.MatchExpressions[0].Operator == metav1.LabelSelectorOpIn &&
		slices.Equal(sel.MatchExpressions[0].Values, []string{"none", sandbox.NetworkProxy}) &&
		len(pol.PolicyTypes) == 2 && len(pol.Egress) == 0 && len(pol.Ingress) == 0
}

// A gvisor sandbox's pod runs under the configured gVisor RuntimeClass
// (the chart creates it), says so in its annotation, and reads back as
// gvisor; a runc one keeps the deployment's class.
func TestPodSpecGVisorRuntimeClass(t *testing.T) {
	b, cs := fakeCluster(t, nil, WithAgentImage("sandboxd:test"), WithGVisorRuntimeClass("sandboxd-gvisor"))
	if got := sandbox.ServedRuntimes(b); !slices.Equal(got, []string{"runc", "gvisor"}) {
		t.Errorf("served runtimes %v, want runc and gvisor", got)
	}
	gv, err := b.Create(bg(t), sandbox.Spec{Tenant: "t", Conversation: "gv", Image: "py:3", Runtime: sandbox.RuntimeGVisor})
	if err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, gv.ID)
	if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != "sandboxd-gvisor" || p.Annotations[sandbox.LabelRuntime] != "gvisor" {
		t.Errorf("gvisor pod: runtimeClassName %v, annotations %v", p.Spec.RuntimeClassName, p.Annotations)
	}
	if got := sandbox.RuntimeOf(gv); got != "gvisor" {
		t.Errorf("the created sandbox reads as runtime %q, want gvisor", got)
	}
	rc, err := b.Create(bg(t), sandbox.Spec{Tenant: "t", Conversation: "rc", Image: "py:3"})
	if err != nil {
		t.Fatal(err)
	}
	if p := getPod(t, cs, rc.ID); p.Spec.RuntimeClassName != nil || p.Annotations[sandbox.LabelRuntime] != "runc" {
		t.Errorf("runc pod: runtimeClassName %v, annotations %v", p.Spec.RuntimeClassName, p.Annotations)
	}
	plain, _ := fakeCluster(t, nil, WithAgentImage("sandboxd:test"))
	if got := sandbox.ServedRuntimes(plain); !slices.Equal(got, []string{"runc"}) {
		t.Errorf("without a gVisor RuntimeClass the backend serves %v, want runc alone", got)
	}
}

// With user namespaces a sandbox pod does not share the node's users; by
// default it does (few runtimes support the other).
func TestPodSpecUserNamespaces(t *testing.T) {
	for _, on := range []bool{false, true} {
		b, cs := fakeCluster(t, nil, WithUserNamespaces(on))
		info, err := b.Create(bg(t), sandbox.Spec{Tenant: "t", Conversation: "userns-" + strconv.FormatBool(on)})
		if err != nil {
			t.Fatal(err)
		}
		p := getPod(t, cs, info.ID)
		if got := p.Spec.HostUsers != nil && !*p.Spec.HostUsers; got != on {
			t.Errorf("user_namespaces %v: hostUsers %v", on, p.Spec.HostUsers)
		}
	}
}

// A read-only root pod: the sandbox container's root read-only, /tmp a
// memory volume, home a volume seeded from the image by an init
// container; the sandbox reads back as read-only root.
func TestPodSpecReadOnlyRoot(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "t", Conversation: "ro", Image: "py:3", ReadOnlyRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, info.ID)
	c := p.Spec.Containers[0]
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Errorf("the sandbox container's root is writable")
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts["/tmp"] != tmpVolume || mounts["/root"] != homeVolume || mounts[Workspace] != workspaceVolume {
		t.Errorf("mounts %v; want the workspace, /tmp and /root writable", mounts)
	}
	seed := p.Spec.InitContainers[len(p.Spec.InitContainers)-1]
	if seed.Name != HomeSeedContainerName || seed.Image != "py:3" {
		t.Errorf("init containers %+v; want the last to copy py:3's home", p.Spec.InitContainers)
	}
	if !sandbox.ReadOnlyRootOf(info) {
		t.Errorf("the sandbox reads back with labels %v", info.Labels)
	}
	plain, err := b.Create(bg(t), sandbox.Spec{Tenant: "t", Conversation: "rw"})
	if err != nil {
		t.Fatal(err)
	}
	if p := getPod(t, cs, plain.ID); p.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem != nil || len(p.Spec.InitContainers) != 1 {
		t.Errorf("a default pod has a read-only root or a home seed: %+v", p.Spec)
	}
}
