package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmkube "helm.sh/helm/v3/pkg/kube"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

const (
	releaseName = "sd"
	// The port replica 0 listens on, on the node's loopback (hostNetwork;
	// replica i on chartPort + i): an unusual one, so it meets no other
	// listener on this machine.
	chartPort = 27788
)

// cluster is a test's handle on the cluster named by KUBECONFIG.
type cluster struct {
	kubeconfig string
	rest       *rest.Config
	cs         *kubernetes.Clientset
	ns         string // a namespace made for the test, deleted after it
}

// newCluster skips unless SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG name a
// cluster (scripts/k8s-up.sh), and makes a fresh namespace for the test.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || kc == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh; make images-sandboxd first) to install the chart into a cluster")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{kubeconfig: kc, rest: rc, cs: cs, ns: "sbx-e2e-" + randHex(t, 3)}
	if _, err := cs.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(cctx, c.ns, metav1.DeleteOptions{})
	})
	return c
}

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// chartValues install sandboxd from the images imported into the node:
// no pull, small requests for a 2-core node, and sandboxd on the node's
// loopback with the API server's loopback address, because this cluster
// has no kube-proxy (no route from a pod to the kubernetes Service).
func (c *cluster) chartValues(t *testing.T, token string) map[string]any {
	agentImage := os.Getenv("SANDBOXD_TEST_K8S_AGENT_IMAGE")
	if agentImage == "" {
		agentImage = "sandboxd:latest"
	}
	repo, tag, _ := strings.Cut(agentImage, ":")
	u, err := url.Parse(c.rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"image":        map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		"tenants":      []any{map[string]any{"name": "e2e", "token": token}},
		"defaultImage": dockerImage(),
		"service":      map[string]any{"port": chartPort},
		"hostNetwork":  true,
		"extraEnv": []any{
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": u.Hostname()},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": u.Port()},
		},
		"sandboxes": map[string]any{
			"imagePullPolicy": "Never",
			"requests":        map[string]any{"cpus": 0.05, "memoryMB": 64},
		},
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"cpu": "1", "memory": "1Gi"}},
	}
}

// install installs the chart with Helm's Go SDK (waiting for the
// StatefulSet when wait is set) and uninstalls it when the test ends.
func (c *cluster) install(t *testing.T, vals map[string]any, wait bool) {
	t.Helper()
	chrt, err := loader.Load("../helm/sandboxd")
	if err != nil {
		t.Fatal(err)
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(helmkube.GetConfig(c.kubeconfig, "", c.ns), c.ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = releaseName, c.ns
	in.Wait, in.Timeout = wait, 3*time.Minute
	if _, err := in.RunWithContext(ctx(t), chrt, vals); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Cleanup(func() { c.uninstall(t, cfg) })
}

func (c *cluster) uninstall(t *testing.T, cfg *action.Configuration) {
	un := action.NewUninstall(cfg)
	un.Wait, un.Timeout = true, 2*time.Minute
	if _, err := un.Run(releaseName); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("helm uninstall: %v", err)
	}
}

// sandboxdPod waits for a Ready sandboxd pod other than the one with UID
// not (a StatefulSet makes a deleted pod again under the same name).
func (c *cluster) sandboxdPod(t *testing.T, not types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 3*time.Minute, "a Ready sandboxd pod", func() error {
		pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName + ",app.kubernetes.io/name=sandboxd"})
		if err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.UID == not || p.DeletionTimestamp != nil {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					pod = &pods.Items[i]
					return nil
				}
			}
		}
		return fmt.Errorf("%d pods, none Ready (but UID %q)", len(pods.Items), not)
	})
	return pod
}

// portForward forwards a port on 127.0.0.1 to the pod's port over SPDY
// through the API server, as `kubectl port-forward` does, until the test
// ends; it returns the local address.
func (c *cluster) portForward(t *testing.T, pod string, port int) string {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(c.rest)
	if err != nil {
		t.Fatal(err)
	}
	u := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the port-forward to %s did not stop within 10s", pod)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward to %s: %v", pod, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("port-forward to %s not ready within 30s", pod)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports %v: %v", ports, err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)
}

// connect port-forwards to the pod's sandboxd (on the node's network,
// replica i listens on chartPort + i) and returns a client for tenant e2e,
// once sandboxd responds to /readyz through the tunnel.
func (c *cluster) connect(t *testing.T, pod *corev1.Pod, token string) *daemon {
	t.Helper()
	index, err := strconv.Atoi(pod.Labels["apps.kubernetes.io/pod-index"])
	if err != nil {
		t.Fatalf("pod %s has no pod-index label (%v): not a StatefulSet's pod", pod.Name, pod.Labels)
	}
	addr := c.portForward(t, pod.Name, chartPort+index)
	cl, err := client.New(addr, token)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "sandboxd ready through the port-forward", func() error { return cl.Readyz(ctx(t)) })
	return &daemon{t: t, backend: "kubernetes", URL: addr, Token: token, Client: cl}
}

// TestChartOnCluster installs the chart into the cluster with Helm's Go SDK
// and drives the sandboxd running there through a port-forward: a sandbox
// pod for a conversation, file tools, eval state, ast_grep, lsp, debug,
// ask_user; then the sandboxd pod is deleted, the StatefulSet makes it
// again, and the conversation's sandbox, its run (a record in the cluster,
// not on the pod's emptyDir), its kernel's variable and its debug session
// are found again. One replica: what is tested is a pod's replacement.
func TestChartOnCluster(t *testing.T) {
	c := newCluster(t)
	token := randHex(t, 16)
	vals := c.chartValues(t, token)
	vals["replicaCount"] = 1
	c.install(t, vals, true)
	pod := c.sandboxdPod(t, "")
	d := c.connect(t, pod, token)

	conv := "helm-e2e-" + randHex(t, 3)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: conv, Resources: &api.Resources{CPUs: 1, MemoryMB: 768}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Backend != "kubernetes" || sb.State != "running" {
		t.Fatalf("created %+v", sb)
	}
	sbPod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx(t), "sandboxd-"+sb.Deployment+"-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox pod is not in the release namespace: %v", err)
	}
	if sbPod.Status.Phase != corev1.PodRunning {
		t.Fatalf("sandbox pod phase %s", sbPod.Status.Phase)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	names := toolNames(run.Tools)

	mustCall(t, d, run.ID, "write", map[string]any{"path": "notes/a.txt", "content": "written through the chart\n"})
	if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "written through the chart") {
		t.Fatalf("read = %q", out)
	}
	if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "wc -c < notes/a.txt; hostname"}); !strings.Contains(out, "26") || !strings.Contains(out, "sandbox") {
		t.Fatalf("shell = %q", out)
	}

	mustCall(t, d, run.ID, "eval", evalArgs("python", "answer = 41"))
	if out := mustCall(t, d, run.ID, "eval", evalArgs("python", "answer + 1")); !strings.Contains(out, "42") {
		t.Fatalf("eval across cells = %q", out)
	}

	mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/go.mod", "content": "module example.com/calc\n\ngo 1.26\n"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/add.go", "content": "package calc\n\n// Add sums two ints.\nfunc Add(a, b int) int { return a + b }\n"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "calc/use.go", "content": "package calc\n\nimport \"fmt\"\n\nfunc Twice(x int) int { fmt.Println(\"twice\", x); return Add(x, x) }\n"})
	if slices.Contains(names, "ast_grep") {
		out := mustCall(t, d, run.ID, "ast_grep", map[string]any{"pattern": "fmt.Println($MSG, $$$REST)", "path": "calc", "language": "go"})
		if !strings.Contains(out, "1 match in 1 file") || !strings.Contains(out, "calc/use.go:5:") {
			t.Fatalf("ast_grep = %q", out)
		}
	} else {
		t.Errorf("the chart's sandboxd lists no ast_grep (tools: %v): its image was built without the tree-sitter engine", names)
	}
	out := mustCall(t, d, run.ID, "lsp", map[string]any{"action": "definition", "file": "calc/use.go", "line": 5, "symbol": "Add"})
	if !strings.Contains(out, "calc/add.go:4: func Add(a, b int) int { return a + b }") {
		t.Fatalf("lsp definition = %q", out)
	}

	// debug: stopped at a breakpoint; the session outlives the sandboxd pod.
	mustCall(t, d, run.ID, "write", map[string]any{"path": "requirements.txt", "content": ""})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "calc.py", "content": "def double(v):\n    r = v * 2\n    return r\n\nprint('double', double(21))\n"})
	mustCall(t, d, run.ID, "debug", map[string]any{"operation": "breakpoints", "file": "calc.py", "lines": []int{3}})
	if out := mustCall(t, d, run.ID, "debug", map[string]any{"operation": "launch", "program": "calc.py"}); !strings.Contains(out, "Stopped: breakpoint") || !strings.Contains(out, "calc.py:3") {
		t.Fatalf("debug launch = %q", out)
	}

	// ask_user: the question reaches a human watching the space (a stream
	// through the port-forward) and the answer comes back as the result.
	qrun, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Space: "desk"})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := human(t, d.Client, "desk")
	tc := callAsync(d, d.Client, qrun.ID, "ask_user", map[string]any{"question": "Tabs or spaces?", "options": []map[string]string{{"label": "tabs"}, {"label": "spaces"}}})
	q := nextCard(t, events)
	if _, err := d.Client.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{2}}); err != nil {
		t.Fatal(err)
	}
	if out, isErr := tc.wait(t); isErr || !strings.Contains(out, "2. spaces") {
		t.Fatalf("ask_user = %q (is_error %v)", out, isErr)
	}

	// The StatefulSet makes a deleted sandboxd pod again; the new one finds
	// the conversation by its pod's labels, and the run by its record.
	if err := c.cs.CoreV1().Pods(c.ns).Delete(ctx(t), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod2 := c.sandboxdPod(t, pod.UID)
	d2 := c.connect(t, pod2, token)
	list, err := d2.Client.ListSandboxes(ctx(t), conv)
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("after the sandboxd pod was replaced the conversation's sandboxes are %+v, %v; want %s", list, err, sb.ID)
	}
	if out := mustCall(t, d2, run.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "written through the chart") {
		t.Fatalf("the run of before the pod was replaced, read = %q", out)
	}
	run2, err := d2.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, d2, run2.ID, "eval", evalArgs("python", "answer * 2")); !strings.Contains(out, "82") {
		t.Fatalf("the kernel lost its variable when the sandboxd pod was replaced: %q", out)
	}
	if out := mustCall(t, d2, run2.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "written through the chart") {
		t.Fatalf("read after the sandboxd pod was replaced = %q", out)
	}
	if out := mustCall(t, d2, run2.ID, "debug", map[string]any{"operation": "evaluate", "expression": "r + 1"}); !strings.Contains(out, "= 43") {
		t.Fatalf("the debug session after the sandboxd pod was replaced: evaluate = %q", out)
	}
	if out := mustCall(t, d2, run2.ID, "debug", map[string]any{"operation": "continue"}); !strings.Contains(out, "exited with code 0") {
		t.Fatalf("debug continue = %q", out)
	}

	if err := d2.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "no sandbox pod left", func() error {
		pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "sandboxd-") && !strings.HasPrefix(p.Name, releaseName+"-") {
				return fmt.Errorf("pod %s is still there", p.Name)
			}
		}
		return nil
	})
}

// TestChartRBAC installs the chart and asks the API server what its
// ServiceAccount may do: what the backend needs in the namespace, what the
// replicas need there (Leases, run records), and nothing beyond it.
func TestChartRBAC(t *testing.T) {
	c := newCluster(t)
	c.install(t, c.chartValues(t, randHex(t, 16)), false)
	var sa string
	waitFor(t, 30*time.Second, "the StatefulSet", func() error {
		sets, err := c.cs.AppsV1().StatefulSets(c.ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
		if err != nil || len(sets.Items) != 1 {
			return fmt.Errorf("statefulsets %v: %v", sets, err)
		}
		sa = sets.Items[0].Spec.Template.Spec.ServiceAccountName
		return nil
	})
	user := "system:serviceaccount:" + c.ns + ":" + sa
	for _, tc := range []struct {
		ns, verb, resource, sub string
		want                    bool
	}{
		{c.ns, "create", "leases", "", true},
		{c.ns, "update", "leases", "", true},
		{c.ns, "watch", "leases", "", true},
		{c.ns, "delete", "leases", "", true},
		{c.ns, "create", "configmaps", "", true},
		{c.ns, "list", "configmaps", "", true},
		{c.ns, "delete", "configmaps", "", true},
		{"default", "create", "leases", "", false},
		{"default", "list", "configmaps", "", false},
		{c.ns, "create", "pods", "", true},
		{c.ns, "delete", "pods", "", true},
		{c.ns, "get", "pods", "", true},
		{c.ns, "watch", "pods", "", true},
		{c.ns, "create", "pods", "exec", true},
		{c.ns, "get", "pods", "log", true},
		{c.ns, "list", "secrets", "", false},
		{c.ns, "get", "secrets", "", false},
		{c.ns, "update", "pods", "", false},
		{c.ns, "create", "pods", "portforward", false},
		{c.ns, "create", "networkpolicies", "", false},
		{"default", "create", "pods", "", false},
		{"default", "create", "pods", "exec", false},
		{"kube-system", "list", "pods", "", false},
	} {
		ra := &authv1.ResourceAttributes{Namespace: tc.ns, Verb: tc.verb, Resource: tc.resource, Subresource: tc.sub}
		switch tc.resource {
		case "networkpolicies":
			ra.Group = "networking.k8s.io"
		case "leases":
			ra.Group = "coordination.k8s.io"
		}
		sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + c.ns, "system:authenticated"},
			ResourceAttributes: ra,
		}}
		res, err := c.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != tc.want {
			t.Errorf("%s may %s %s/%s in %s: %v, want %v (%s)", sa, tc.verb, tc.resource, tc.sub, tc.ns, res.Status.Allowed, tc.want, res.Status.Reason)
		}
	}
}
