package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/errdefs"
)

// The replica suites run against the chart installed by `make
// cluster-deploy` (REPLICAS=3): SANDBOXD_TEST_REPLICAS holds the JSON line
// it printed last, KUBECONFIG the cluster. Test traffic goes only to the
// replicas' loopback URLs.

// replicaSet is the deployment under test.
type replicaSet struct {
	URLs       []string `json:"urls"`
	Token      string   `json:"token"`
	Namespace  string   `json:"namespace"`
	Deployment string   `json:"deployment"`

	cs      kubernetes.Interface
	clients []*client.Client
}

func replicas(t *testing.T) *replicaSet {
	t.Helper()
	raw := os.Getenv("SANDBOXD_TEST_REPLICAS")
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || raw == "" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1, KUBECONFIG and SANDBOXD_TEST_REPLICAS (the last line of `make cluster-deploy`) to test replicas")
	}
	var rs replicaSet
	if err := json.Unmarshal([]byte(raw), &rs); err != nil {
		t.Fatalf("SANDBOXD_TEST_REPLICAS is not the JSON of make cluster-deploy: %v", err)
	}
	if len(rs.URLs) < 3 {
		t.Fatalf("these tests need 3 replicas, the deployment has %d", len(rs.URLs))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	if rs.cs, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	for _, u := range rs.URLs {
		c, err := client.New(u, rs.Token, client.WithHTTPClient(&http.Client{Timeout: 2 * time.Minute}))
		if err != nil {
			t.Fatal(err)
		}
		rs.clients = append(rs.clients, c)
	}
	rs.waitAllReady(t, 3*time.Minute)
	return &rs
}

func (rs *replicaSet) waitAllReady(t *testing.T, within time.Duration) {
	t.Helper()
	waitFor(t, within, "every replica ready", func() error {
		for i, c := range rs.clients {
			if err := c.Readyz(ctx(t)); err != nil {
				return fmt.Errorf("replica %d: %w", i, err)
			}
		}
		return nil
	})
}

// owner returns the index of the replica holding conv's lease.
func (rs *replicaSet) owner(t *testing.T, conv string) int {
	t.Helper()
	sum := sha256.Sum256([]byte("e2e\x00" + conv))
	name := "sandboxd-" + rs.Deployment + "-c-" + hex.EncodeToString(sum[:])[:20]
	l, err := rs.cs.CoordinationV1().Leases(rs.Namespace).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lease of %s: %v", conv, err)
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	i := strings.LastIndex(holder, "-")
	var idx int
	if _, err := fmt.Sscanf(holder[i+1:], "%d", &idx); i < 0 || err != nil || idx >= len(rs.URLs) {
		t.Fatalf("the lease of %s is held by %q, not a replica of the set", conv, holder)
	}
	return idx
}

// statefulSet returns the name of the replicas' StatefulSet.
func (rs *replicaSet) statefulSet(t *testing.T) string {
	t.Helper()
	list, err := rs.cs.AppsV1().StatefulSets(rs.Namespace).List(ctx(t), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("want one StatefulSet in %s: %v", rs.Namespace, err)
	}
	return list.Items[0].Name
}

// podOf returns the name of the pod in slot i.
func (rs *replicaSet) podOf(t *testing.T, i int) string {
	t.Helper()
	pods, err := rs.cs.CoreV1().Pods(rs.Namespace).List(ctx(t), metav1.ListOptions{LabelSelector: "apps.kubernetes.io/pod-index=" + fmt.Sprint(i)})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod in slot %d: %v", i, err)
	}
	return pods.Items[0].Name
}

func rcall(t *testing.T, c *client.Client, run, tool string, args any) (string, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := c.CallTool(ctx(t), run, tool, raw)
	if err != nil {
		return "", err
	}
	if res.IsError {
		return res.Text(), fmt.Errorf("tool error: %s", res.Text())
	}
	return res.Text(), nil
}

func mustRcall(t *testing.T, c *client.Client, run, tool string, args any) string {
	t.Helper()
	out, err := rcall(t, c, run, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out
}

// retriable is what a client of a replicated service retries at another
// replica: a hand-over (503) or a replica that is gone.
func retriable(err error) bool {
	return errors.Is(err, errdefs.ErrUnavailable) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset")
}

// conversation makes a sandbox for conv through replica via and a run for
// it through replica runVia.
func (rs *replicaSet) conversation(t *testing.T, conv string, via, runVia int) api.Run {
	t.Helper()
	conv += "-" + randHex(t, 3) // a conversation's sandbox is never reused across runs of the suite
	sb, err := rs.clients[via].CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: conv})
	if err != nil {
		t.Fatalf("create sandbox %s via replica %d: %v", conv, via, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, cl := range rs.clients {
			if cl.DeleteSandbox(c, sb.ID) == nil {
				return
			}
		}
	})
	run, err := rs.clients[runVia].CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Space: "space-" + conv})
	if err != nil {
		t.Fatalf("create run %s via replica %d: %v", conv, runVia, err)
	}
	return run
}

func TestClusterReplicasServeEveryConversation(t *testing.T) {
	rs := replicas(t)
	convs := []string{"rep-a", "rep-b", "rep-c"}
	runs := make([]api.Run, len(convs))
	for i, conv := range convs {
		runs[i] = rs.conversation(t, conv, i, (i+1)%3)
	}
	for i, run := range runs {
		mustRcall(t, rs.clients[i], run.ID, "write", map[string]any{"path": "pyproject.toml", "content": "[project]\nname = \"notes\"\n"})
		mustRcall(t, rs.clients[i], run.ID, "write", map[string]any{"path": "notes/a.py", "content": fmt.Sprintf("def f():\n    return %d\n", i)})
		mustRcall(t, rs.clients[(i+2)%3], run.ID, "eval", evalArgs("python", fmt.Sprintf("x = %d", 40+i)))
		for j, c := range rs.clients {
			if out := mustRcall(t, c, run.ID, "read", map[string]any{"path": "notes/a.py"}); !strings.Contains(out, fmt.Sprintf("return %d", i)) {
				t.Fatalf("replica %d reads %s's file as %q", j, convs[i], out)
			}
			if out := mustRcall(t, c, run.ID, "eval", evalArgs("python", "x")); !strings.Contains(out, fmt.Sprint(40+i)) {
				t.Fatalf("replica %d sees %s's kernel variable as %q, want %d", j, convs[i], out, 40+i)
			}
			got, err := c.GetRun(ctx(t), run.ID)
			if err != nil || got.Conversation != run.Conversation {
				t.Fatalf("replica %d: GET run %s: %+v %v", j, run.ID, got, err)
			}
		}
		out := mustRcall(t, rs.clients[(i+1)%3], run.ID, "lsp", map[string]any{"action": "definition", "file": "notes/a.py", "line": 1, "symbol": "f"})
		if !strings.Contains(out, "a.py") {
			t.Fatalf("lsp through a replica: %q", out)
		}
	}
	// Every replica lists every run of the tenant.
	for j, c := range rs.clients {
		list, err := c.Runs(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range list {
			seen[r.ID] = true
		}
		for _, run := range runs {
			if !seen[run.ID] {
				t.Fatalf("replica %d does not list run %s", j, run.ID)
			}
		}
	}
	// Every replica's GET /v1/audit holds every run's calls, each once,
	// though each was recorded by the replica that owns its conversation.
	for j, u := range rs.URLs {
		for i, run := range runs {
			tools := 0
			for _, r := range auditRecordsAt(t, u, rs.Token, "run="+run.ID) {
				if r.Kind == audit.KindTool {
					tools++
				}
			}
			if tools != 10 { // 2 writes, 1 eval, 3 reads and 3 evals, 1 lsp
				t.Errorf("GET /v1/audit at replica %d lists %d tool records of %s's run; want its 10 calls", j, tools, convs[i])
			}
		}
	}

	// A forged forwarded request is refused.
	req, _ := http.NewRequestWithContext(ctx(t), "GET", rs.URLs[0]+"/v1/runs/"+runs[0].ID, nil)
	req.Header.Set("Authorization", "Bearer "+rs.Token)
	req.Header.Set("X-Sandboxd-Forwarded-By", rs.Deployment+"-sandboxd-1")
	req.Header.Set("X-Sandboxd-Forward-Target", rs.Deployment+"-sandboxd-0")
	req.Header.Set("X-Sandboxd-Forward-Time", fmt.Sprint(time.Now().UnixMilli()))
	req.Header.Set("X-Sandboxd-Forward-Sig", "AAAA")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "forwarded") {
		t.Fatalf("a forged forwarded request got %d %s", resp.StatusCode, body)
	}
}

// loadClient calls through the replicas in turn and, like a client of a
// replicated service, retries a failed call once at the next replica.
type loadClient struct {
	rs   *replicaSet
	run  string
	mu   sync.Mutex
	acks []string // files whose write was acknowledged
	fail []error
	n    int
}

func (lc *loadClient) loop(t *testing.T, stop <-chan struct{}, start int) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		path := fmt.Sprintf("load/%d-%d.txt", start, i)
		args := map[string]any{"path": path, "content": path}
		slot := (start + i) % len(lc.rs.clients)
		_, err := rcall(t, lc.rs.clients[slot], lc.run, "write", args)
		if err != nil && retriable(err) {
			time.Sleep(time.Second)
			_, err = rcall(t, lc.rs.clients[(slot+1)%len(lc.rs.clients)], lc.run, "write", args)
		}
		lc.mu.Lock()
		lc.n++
		if err != nil {
			lc.fail = append(lc.fail, fmt.Errorf("%s: %w", path, err))
		} else {
			lc.acks = append(lc.acks, path)
		}
		lc.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

func (lc *loadClient) checkAcked(t *testing.T) {
	t.Helper()
	for _, p := range lc.acks {
		var err error
		for try := 0; try < 3; try++ {
			var out string
			if out, err = rcall(t, lc.rs.clients[try%3], lc.run, "read", map[string]any{"path": p}); err == nil {
				if !strings.Contains(out, p) {
					t.Fatalf("acknowledged write %s reads %q", p, out)
				}
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			t.Fatalf("acknowledged write %s is not readable: %v", p, err)
		}
	}
}

func TestClusterReplicaKilledConversationsMove(t *testing.T) {
	rs := replicas(t)
	run := rs.conversation(t, "rep-kill", 0, 0)
	mustRcall(t, rs.clients[0], run.ID, "eval", evalArgs("python", "import os; kept = 'before the kill'; kpid = os.getpid()"))
	mustRcall(t, rs.clients[0], run.ID, "write", map[string]any{"path": "alive.txt", "content": "alive"})
	// An edit prepared on the owner, to be resolved after it is gone.
	mustRcall(t, rs.clients[0], run.ID, "write", map[string]any{"path": "m.py", "content": "print('old')\n"})
	out := mustRcall(t, rs.clients[0], run.ID, "ast_edit", map[string]any{"pattern": "print($A)", "rewrite": "log($A)", "path": "m.py", "language": "python"})
	editID := ""
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "edit_id: "); ok {
			editID, _, _ = strings.Cut(v, "\n")
		}
	}
	if editID == "" {
		t.Fatalf("ast_edit gave no edit_id: %q", out)
	}
	// A process the agent owns: it lives through both failovers and its
	// output reads on with no gap, through whichever replica owns it.
	started := mustRcall(t, rs.clients[0], run.ID, "process", map[string]any{"action": "start", "command": "i=0; while :; do i=$((i+1)); echo f$i; sleep 0.5; done"})
	m := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(started)
	if m == nil {
		t.Fatalf("process start gave no id: %q", started)
	}
	ticker := m[1]
	owner := rs.owner(t, run.Conversation)
	other := (owner + 1) % 3

	lc := &loadClient{rs: rs, run: run.ID}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lc.loop(t, stop, 100) }()
	time.Sleep(time.Second)

	pod := rs.podOf(t, owner)
	zero := int64(0)
	killed := time.Now()
	if err := rs.cs.CoreV1().Pods(rs.Namespace).Delete(ctx(t), pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	var back time.Duration
	waitFor(t, 30*time.Second, "the conversation answering again through another replica", func() error {
		_, err := rcall(t, rs.clients[other], run.ID, "read", map[string]any{"path": "alive.txt"})
		if err == nil {
			back = time.Since(killed)
		}
		return err
	})
	t.Logf("answering again %s after the owner's pod was deleted", back)
	if back > 6*time.Second+10*time.Second {
		t.Errorf("the conversation took %s to answer again; the lease is 6s", back)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	lc.checkAcked(t)
	out = mustRcall(t, rs.clients[other], run.ID, "eval", evalArgs("python", "(kept, kpid == os.getpid())"))
	if !strings.Contains(out, "before the kill") || !strings.Contains(out, "True") {
		t.Fatalf("the kernel after the failover: %q (want the variable and the same process)", out)
	}
	// The edit prepared on the replica that died is resolved by the new owner.
	mustRcall(t, rs.clients[other], run.ID, "resolve", map[string]any{"edit_id": editID, "action": "accept"})
	if got := mustRcall(t, rs.clients[other], run.ID, "read", map[string]any{"path": "m.py"}); !strings.Contains(got, "log('old')") {
		t.Fatalf("after resolving on the new owner m.py reads %q", got)
	}
	t.Logf("%d calls, %d acknowledged, %d failed during the failover", lc.n, len(lc.acks), len(lc.fail))
	rs.waitAllReady(t, 3*time.Minute)

	// A crash with no word to anyone: the new owner's process is killed
	// (SIGKILL, no hand-off). Its conversation moves once the lease has
	// gone unrenewed for its whole duration.
	owner = rs.owner(t, run.Conversation)
	other = (owner + 1) % 3
	pid := sandboxdPID(t, rs.podOf(t, owner))
	killed = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the conversation answering again after its owner crashed", func() error {
		_, err := rcall(t, rs.clients[other], run.ID, "read", map[string]any{"path": "alive.txt"})
		if err == nil {
			back = time.Since(killed)
		}
		return err
	})
	t.Logf("answering again %s after the owner's process was killed", back)
	if back > 6*time.Second+10*time.Second {
		t.Errorf("after a crash the conversation took %s to answer again; the lease is 6s", back)
	}
	out = mustRcall(t, rs.clients[other], run.ID, "eval", evalArgs("python", "(kept, kpid == os.getpid())"))
	if !strings.Contains(out, "before the kill") || !strings.Contains(out, "True") {
		t.Fatalf("the kernel after the crash: %q", out)
	}
	if got := mustRcall(t, rs.clients[other], run.ID, "process", map[string]any{"action": "list"}); !regexp.MustCompile(ticker + `\s+running`).MatchString(got) {
		t.Fatalf("after two failovers the process list is %q, want %s running", got, ticker)
	}
	got := mustRcall(t, rs.clients[other], run.ID, "process", map[string]any{"action": "output", "id": ticker, "since": 0})
	lines := regexp.MustCompile(`(?m)^f(\d+)$`).FindAllStringSubmatch(got, -1)
	if len(lines) < 5 {
		t.Fatalf("the process printed %d lines across the failovers (want one each 0.5 s): %q", len(lines), got)
	}
	for i, l := range lines {
		if l[1] != strconv.Itoa(i+1) {
			t.Fatalf("the process's output across the failovers has a gap or a repeat at line %d: %q", i+1, got)
		}
	}
	rs.waitAllReady(t, 3*time.Minute)
}

func TestClusterRolloutRestartLosesNoCall(t *testing.T) {
	rs := replicas(t)
	var lcs []*loadClient
	for i, conv := range []string{"roll-a", "roll-b", "roll-c"} {
		run := rs.conversation(t, conv, i, i)
		lcs = append(lcs, &loadClient{rs: rs, run: run.ID})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, lc := range lcs {
		wg.Add(1)
		go func() { defer wg.Done(); lc.loop(t, stop, i) }()
	}
	time.Sleep(2 * time.Second)

	sts := rs.statefulSet(t)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	s, err := rs.cs.AppsV1().StatefulSets(rs.Namespace).Get(ctx(t), sts, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the replicas' StatefulSet %s: %v", sts, err)
	}
	if _, err := rs.cs.AppsV1().StatefulSets(rs.Namespace).Patch(ctx(t), sts, "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	gen := s.Generation + 1
	waitFor(t, 5*time.Minute, "the rollout restart finishing", func() error {
		s, err := rs.cs.AppsV1().StatefulSets(rs.Namespace).Get(ctx(t), sts, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := s.Status
		if st.ObservedGeneration < gen || st.UpdatedReplicas != *s.Spec.Replicas || st.ReadyReplicas != *s.Spec.Replicas || st.CurrentRevision != st.UpdateRevision {
			return fmt.Errorf("updated %d ready %d of %d (revision %s → %s)", st.UpdatedReplicas, st.ReadyReplicas, *s.Spec.Replicas, st.CurrentRevision, st.UpdateRevision)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	total := 0
	for _, lc := range lcs {
		total += lc.n
		for _, err := range lc.fail {
			t.Errorf("a call failed during the rolling restart (after one retry at another replica): %v", err)
		}
		lc.checkAcked(t)
	}
	t.Logf("%d calls during the rolling restart", total)
}

func TestClusterQuestionsAcrossReplicas(t *testing.T) {
	rs := replicas(t)
	run := rs.conversation(t, "rep-ask", 1, 1)
	owner := rs.owner(t, run.Conversation)
	human := (owner + 1) % 3
	answerer := (owner + 2) % 3

	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events, err := rs.clients[human].WatchQuestions(wctx, run.Space)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		// Give the fan-in a moment to subscribe on every peer.
		time.Sleep(3 * time.Second)
		out, err := rcall(t, rs.clients[owner], run.ID, "ask_user", map[string]any{"question": "Which colour?", "options": []map[string]any{{"label": "red"}, {"label": "blue"}}})
		if err != nil {
			out = "error: " + err.Error()
		}
		answered <- out
	}()
	var qid string
	for qid == "" {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the human's stream ended before the question came")
			}
			if ev.Question != nil && ev.Question.Run == run.ID {
				qid = ev.Question.ID
			}
		case out := <-answered:
			t.Fatalf("ask_user ended before the human on another replica saw it: %s", out)
		case <-wctx.Done():
			t.Fatal("the question never reached the human's stream on another replica")
		}
	}
	if _, err := rs.clients[answerer].AnswerQuestion(ctx(t), qid, api.Answer{Choices: []int{2}}); err != nil {
		t.Fatalf("answer through a third replica: %v", err)
	}
	select {
	case out := <-answered:
		if !strings.Contains(out, "blue") {
			t.Fatalf("ask_user got %q, want the answer blue", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the answer did not reach the waiting call")
	}
}

func TestClusterPausedReplicaStandsDown(t *testing.T) {
	rs := replicas(t)
	run := rs.conversation(t, "rep-pause", 2, 2)
	mustRcall(t, rs.clients[2], run.ID, "eval", evalArgs("python", "import os; kept = 'before the pause'; kpid = os.getpid()"))
	owner := rs.owner(t, run.Conversation)
	pid := sandboxdPID(t, rs.podOf(t, owner))
	other := (owner + 1) % 3

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	waitFor(t, 30*time.Second, "another replica serving the paused replica's conversation", func() error {
		_, err := rcall(t, rs.clients[other], run.ID, "eval", evalArgs("python", "kept"))
		return err
	})
	if got := rs.owner(t, run.Conversation); got == owner {
		t.Fatal("the lease still names the paused replica while another serves")
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	resumed = true
	// The resumed replica must find its lease lost: a call through it is
	// served by the new owner, on the one kernel.
	waitFor(t, 20*time.Second, "the resumed replica serving through the new owner", func() error {
		out, err := rcall(t, rs.clients[owner], run.ID, "eval", evalArgs("python", "(kept, kpid == os.getpid())"))
		if err != nil {
			return err
		}
		if !strings.Contains(out, "before the pause") || !strings.Contains(out, "True") {
			return fmt.Errorf("kernel: %q", out)
		}
		return nil
	})
	// One agent session in the sandbox: the old owner's was closed.
	waitFor(t, 20*time.Second, "a single agent pipe", func() error {
		out, err := rcall(t, rs.clients[other], run.ID, "shell", map[string]any{"command": "echo attach=$(pgrep -fc 'sandbox-agent [a]ttach')"})
		if err != nil {
			return err
		}
		if !strings.Contains(out, "attach=1\n") && !strings.HasSuffix(strings.TrimSpace(out), "attach=1") {
			return fmt.Errorf("attach processes: %q", out)
		}
		return nil
	})
}

// sandboxdPID finds the host pid of the sandboxd process of pod.
func sandboxdPID(t *testing.T, pod string) int {
	t.Helper()
	pid, err := bench.PodProcess(pod, "sandboxd\x00serve")
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestClusterReplicaWithoutAPIAccessStandsDown cuts every replica off
// the Leases (the RoleBinding deleted): each stops owning within its lease
// and says so in /readyz; a call is then refused, never served by a
// replica that cannot prove it owns the conversation; with the binding
// back the replicas serve again. It runs last: it disturbs every replica.
func TestClusterReplicaWithoutAPIAccessStandsDown(t *testing.T) {
	rs := replicas(t)
	run := rs.conversation(t, "rep-rbac", 0, 0)
	mustRcall(t, rs.clients[0], run.ID, "write", map[string]any{"path": "a.txt", "content": "a"})
	rbs, err := rs.cs.RbacV1().RoleBindings(rs.Namespace).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var saved *rbacv1.RoleBinding
	for i := range rbs.Items {
		if strings.HasSuffix(rbs.Items[i].Name, "-replication") {
			saved = rbs.Items[i].DeepCopy()
		}
	}
	if saved == nil {
		t.Fatalf("no replication RoleBinding in %s", rs.Namespace)
	}
	if err := rs.cs.RbacV1().RoleBindings(rs.Namespace).Delete(ctx(t), saved.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		rb := saved.DeepCopy()
		rb.ResourceVersion, rb.UID = "", ""
		if _, err := rs.cs.RbacV1().RoleBindings(rs.Namespace).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
			t.Errorf("the RoleBinding could not be restored: %v", err)
		}
	}
	defer restore()
	cut := time.Now()
	waitFor(t, 20*time.Second, "every replica saying in /readyz that it cannot renew its leases", func() error {
		for i, u := range rs.URLs {
			resp, err := http.Get(u + "/readyz")
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "cannot renew") {
				return fmt.Errorf("replica %d: %d %s", i, resp.StatusCode, body)
			}
		}
		return nil
	})
	t.Logf("every replica not ready %s after its API access was cut", time.Since(cut).Round(time.Millisecond))
	// Past the lease, nobody may act for the conversation.
	time.Sleep(time.Until(cut.Add(7 * time.Second)))
	for i, c := range rs.clients {
		if _, err := rcall(t, c, run.ID, "read", map[string]any{"path": "a.txt"}); err == nil || !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("replica %d served a call without being able to hold its lease (err %v)", i, err)
		}
	}
	restore()
	rs.waitAllReady(t, 2*time.Minute)
	waitFor(t, time.Minute, "the conversation served again with the binding back", func() error {
		_, err := rcall(t, rs.clients[1], run.ID, "read", map[string]any{"path": "a.txt"})
		return err
	})
}
