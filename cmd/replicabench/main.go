// Command replicabench measures sandboxd's replicas on the cluster `make
// cluster-deploy` made, and rewrites the replicas section of BENCHMARKS.md:
//
//   - a forwarded call (a 4 KiB read sent to a replica that does not own
//     the conversation) beside the same call sent to its owner, p50/p90/p99;
//   - failover: from the owner's failure (its pod deleted with grace 0, its
//     process killed, its process frozen) to the first call of its
//     conversation that succeeds through another replica;
//   - tool-call throughput with 1 and with 3 replicas (the StatefulSet is
//     scaled to 1 and back), many clients over several conversations.
//
// Run from the repository root:
//
//	. /var/lib/sandboxd-k8s/env && make cluster-deploy REPLICAS=3 | tail -1 > /tmp/rs.json
//	go run ./cmd/replicabench -deployment "$(cat /tmp/rs.json)" [-out BENCHMARKS.md] [--smoke]
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
)

type deployment struct {
	URLs       []string `json:"urls"`
	Token      string   `json:"token"`
	Namespace  string   `json:"namespace"`
	Deployment string   `json:"deployment"`
}

type env struct {
	d       deployment
	cs      k8s.Interface
	clients []*client.Client
	tenant  string
}

func main() {
	raw := flag.String("deployment", os.Getenv("SANDBOXD_TEST_REPLICAS"), "the JSON line make cluster-deploy printed last")
	out := flag.String("out", "BENCHMARKS.md", "file whose replicas section is rewritten (\"\" prints only)")
	calls := flag.Int("calls", 300, "calls per latency measurement")
	failovers := flag.Int("failovers", 2, "runs of each failure kind to time")
	window := flag.Duration("window", 15*time.Second, "length of each throughput measurement")
	tenant := flag.String("tenant", "e2e", "the token's tenant (the lease names hash it)")
	smoke := flag.Bool("smoke", false, "a few calls, one failover of each kind, 2 s windows; check the section renders without rewriting -out")
	flag.Parse()
	if *smoke {
		*calls, *failovers, *window = 3, 1, 2*time.Second
	}
	if *calls < 1 || *failovers < 1 || *window <= 0 {
		fmt.Fprintf(os.Stderr, "replicabench: -calls %d and -failovers %d must be at least 1 and -window %s positive\n", *calls, *failovers, *window)
		os.Exit(2)
	}
	if err := run(*raw, *out, *tenant, *calls, *failovers, *window, *smoke); err != nil {
		fmt.Fprintln(os.Stderr, "replicabench:", err)
		os.Exit(1)
	}
}

func run(raw, out, tenant string, calls, failovers int, window time.Duration, smoke bool) error {
	e := &env{tenant: tenant}
	if err := json.Unmarshal([]byte(raw), &e.d); err != nil || len(e.d.URLs) < 3 {
		return fmt.Errorf("-deployment must be make cluster-deploy's JSON with 3 or more urls (%v)", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return fmt.Errorf("KUBECONFIG: %w", err)
	}
	if e.cs, err = k8s.NewForConfig(rc); err != nil {
		return err
	}
	for _, u := range e.d.URLs {
		c, err := client.New(u, e.d.Token, client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
		if err != nil {
			return err
		}
		e.clients = append(e.clients, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := e.waitReady(ctx, len(e.d.URLs)); err != nil {
		return err
	}
	machine, _ := bench.DescribeLocalMachine(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "## Replicas: forwarding, failover and throughput\n\nMeasured by `go run ./cmd/replicabench` on %s against `make cluster-deploy REPLICAS=3` (lease 6 s, renew 2 s; load average at start %s).\n\n",
		time.Now().UTC().Format("2006-01-02"), bench.LoadAverage())
	if machine != "" {
		fmt.Fprintf(&b, "Machine: %s.\n\n", machine)
	}
	if err := e.forwarded(ctx, &b, calls); err != nil {
		return err
	}
	if err := e.failover(ctx, &b, failovers); err != nil {
		return err
	}
	if err := e.throughput(ctx, &b, window); err != nil {
		return err
	}
	fmt.Print(b.String())
	if out == "" {
		return nil
	}
	return bench.Publish(out, "replicas", b.String(), smoke, os.Stderr)
}

func (e *env) waitReady(ctx context.Context, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready := 0
		for _, c := range e.clients[:n] {
			if c.Readyz(ctx) == nil {
				ready++
			}
		}
		if ready == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d replicas ready after 5 minutes", ready, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// conversation makes a sandbox and a run through replica via, which then
// owns it, with a 4 KiB file to read.
func (e *env) conversation(ctx context.Context, conv string, via int) (api.Run, error) {
	sb, err := e.clients[via].CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv})
	if err != nil {
		return api.Run{}, fmt.Errorf("create sandbox %s via replica %d: %w", conv, via, err)
	}
	_ = sb
	run, err := e.clients[via].CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
	if err != nil {
		return api.Run{}, err
	}
	content := string(bench.Content(4096))
	if err := e.call(ctx, via, run.ID, "write", map[string]any{"path": "bench.txt", "content": content}); err != nil {
		return api.Run{}, err
	}
	return run, nil
}

func (e *env) cleanup(conv string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range e.clients {
		if list, err := c.ListSandboxes(ctx, conv); err == nil {
			for _, s := range list {
				_ = c.DeleteSandbox(ctx, s.ID)
			}
			return
		}
	}
}

func (e *env) call(ctx context.Context, via int, run, tool string, args any) error {
	raw, _ := json.Marshal(args)
	res, err := e.clients[via].CallTool(ctx, run, tool, raw)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", tool, res.Text())
	}
	return nil
}

func (e *env) owner(ctx context.Context, conv string) (int, error) {
	sum := sha256.Sum256([]byte(e.tenant + "\x00" + conv))
	name := "sandboxd-" + e.d.Deployment + "-c-" + hex.EncodeToString(sum[:])[:20]
	l, err := e.cs.CoordinationV1().Leases(e.d.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return 0, fmt.Errorf("the lease of %s: %v", conv, err)
	}
	h := *l.Spec.HolderIdentity
	var idx int
	if _, err := fmt.Sscanf(h[strings.LastIndex(h, "-")+1:], "%d", &idx); err != nil {
		return 0, fmt.Errorf("lease holder %q is not a StatefulSet pod", h)
	}
	return idx, nil
}

func (e *env) timeReads(ctx context.Context, via int, run string, n int) ([]time.Duration, error) {
	var s []time.Duration
	for i := 0; i < n+20; i++ {
		t0 := time.Now()
		if err := e.call(ctx, via, run, "read", map[string]any{"path": "bench.txt"}); err != nil {
			return nil, err
		}
		if i >= 20 { // warm-up
			s = append(s, time.Since(t0))
		}
	}
	return s, nil
}

func (e *env) forwarded(ctx context.Context, b *strings.Builder, n int) error {
	conv := "bench-fwd"
	defer e.cleanup(conv)
	run, err := e.conversation(ctx, conv, 0)
	if err != nil {
		return err
	}
	owner, err := e.owner(ctx, conv)
	if err != nil {
		return err
	}
	other := (owner + 1) % len(e.clients)
	// Interleaved rounds, so that load on the machine falls on both alike.
	var direct, fwd []time.Duration
	for round := 0; round < 5; round++ {
		d, err := e.timeReads(ctx, owner, run.ID, n/5)
		if err != nil {
			return err
		}
		f, err := e.timeReads(ctx, other, run.ID, n/5)
		if err != nil {
			return err
		}
		direct, fwd = append(direct, d...), append(fwd, f...)
	}
	sd, sf := bench.Summarize(direct), bench.Summarize(fwd)
	fmt.Fprintf(b, "### A call that lands on a replica that does not own the conversation\n\n`read` of 4 KiB over HTTP, %d calls each, interleaved in 5 rounds.\n\n", len(direct))
	fmt.Fprintf(b, "| sent to | p50 | p90 | p99 |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| the owner (direct) | %s | %s | %s |\n", bench.Ms(sd.P50), bench.Ms(sd.P90), bench.Ms(sd.P99))
	fmt.Fprintf(b, "| another replica (forwarded) | %s | %s | %s |\n\n", bench.Ms(sf.P50), bench.Ms(sf.P90), bench.Ms(sf.P99))
	fmt.Fprintf(b, "Forwarding adds %s at p50 (target: under 1 ms).\n\n", bench.Ms(sf.P50-sd.P50))
	return nil
}

// failureKinds are the ways an owner goes, as the failover table lists them.
var failureKinds = []struct {
	name, how string
}{
	{"pod deleted", "`kubectl delete pod --grace-period=0 --force`: the kubelet still sends SIGTERM, so the owner hands its conversations over"},
	{"process killed", "SIGKILL of the owner's sandboxd: no hand-off; the container restarts under the same identity and takes its leases back"},
	{"owner frozen", "SIGSTOP of the owner's sandboxd (a hung process or node): nothing answers and nothing restarts; another replica takes over once the lease has gone unrenewed for its whole duration"},
}

func (e *env) failover(ctx context.Context, b *strings.Builder, rounds int) error {
	fmt.Fprintf(b, "### Failover\n\nFrom the owner's failure to the first successful `read` of its conversation through another replica (polled every 100 ms), default lease 6 s, renew 2 s.\n\n")
	for _, k := range failureKinds {
		fmt.Fprintf(b, "- **%s**: %s.\n", k.name, k.how)
	}
	b.WriteString("\n| failure | runs | answered again after (each run) |\n|---|---|---|\n")
	for _, k := range failureKinds {
		var took []string
		for r := 0; r < rounds; r++ {
			d, err := e.failOnce(ctx, k.name, r)
			if err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
			took = append(took, bench.Ms(d))
		}
		fmt.Fprintf(b, "| %s | %d | %s |\n", k.name, rounds, strings.Join(took, ", "))
	}
	b.WriteString("\nTarget: under 10 s from a pod kill. Only a frozen owner waits for the lease: one that stops (deleted or killed) is either handed over or restarted within a second or two.\n\n")
	return nil
}

func (e *env) failOnce(ctx context.Context, kind string, round int) (time.Duration, error) {
	conv := fmt.Sprintf("bench-failover-%s-%d-%d", strings.ReplaceAll(kind, " ", "-"), round, time.Now().UnixNano()%1e6)
	defer e.cleanup(conv)
	run, err := e.conversation(ctx, conv, round%len(e.clients))
	if err != nil {
		return 0, err
	}
	owner, err := e.owner(ctx, conv)
	if err != nil {
		return 0, err
	}
	other := (owner + 1) % len(e.clients)
	pods, err := e.cs.CoreV1().Pods(e.d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("apps.kubernetes.io/pod-index=%d", owner)})
	if err != nil || len(pods.Items) == 0 {
		return 0, fmt.Errorf("the pod of replica %d: %v", owner, err)
	}
	pod, oldUID, oldRestarts := pods.Items[0].Name, pods.Items[0].UID, restarts(&pods.Items[0])
	pid, err := bench.PodProcess(pod, "sandboxd\x00serve")
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	switch kind {
	case "pod deleted":
		zero := int64(0)
		err = e.cs.CoreV1().Pods(e.d.Namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	case "process killed":
		err = syscall.Kill(pid, syscall.SIGKILL)
	case "owner frozen":
		err = syscall.Kill(pid, syscall.SIGSTOP)
		defer syscall.Kill(pid, syscall.SIGCONT)
	}
	if err != nil {
		return 0, err
	}
	for {
		if e.call(ctx, other, run.ID, "read", map[string]any{"path": "bench.txt"}) == nil {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return 0, fmt.Errorf("conversation %s did not answer again within 2 minutes", conv)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(t0)
	if kind == "owner frozen" {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	} else if err := e.waitReplaced(ctx, owner, oldUID, oldRestarts); err != nil {
		return 0, err
	}
	return took, e.waitReady(ctx, len(e.clients))
}

// waitReplaced waits until replica index runs again after its failure: a
// new pod (another UID) or the same pod with its container restarted, and
// Ready. Until then the old process may still respond for a moment (a pod
// deleted with grace 0 is killed after its object is gone), which would
// pass for a replica that is back.
func (e *env) waitReplaced(ctx context.Context, index int, oldUID types.UID, oldRestarts int32) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, err := e.cs.CoreV1().Pods(e.d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("apps.kubernetes.io/pod-index=%d", index)})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp == nil && podReady(p) && (p.UID != oldUID || restarts(p) > oldRestarts) {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d was not replaced and ready within 5 minutes of its failure", index)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (e *env) scale(ctx context.Context, n int32) error {
	list, err := e.cs.AppsV1().StatefulSets(e.d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		return fmt.Errorf("want one StatefulSet in %s: %v", e.d.Namespace, err)
	}
	sts := list.Items[0].Name
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := e.cs.AppsV1().StatefulSets(e.d.Namespace).Patch(ctx, sts, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale %s to %d: %w", sts, n, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s, err := e.cs.AppsV1().StatefulSets(e.d.Namespace).Get(ctx, sts, metav1.GetOptions{})
		if err == nil && s.Status.ReadyReplicas == n && s.Status.Replicas == n {
			return e.waitReady(ctx, int(n))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not settle at %d replicas", sts, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// load runs clients callers over runs (each caller sends to the replica
// given for its run) for window and returns calls/s and the latencies.
func (e *env) load(ctx context.Context, runs []string, via []int, callers int, window time.Duration) (float64, bench.Summary, int64) {
	var n, fails atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	stop := time.Now().Add(window)
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; time.Now().Before(stop); i++ {
				r := i % len(runs)
				t0 := time.Now()
				err := e.call(ctx, via[r], runs[r], "read", map[string]any{"path": "bench.txt"})
				d := time.Since(t0)
				if err != nil {
					fails.Add(1)
					continue
				}
				n.Add(1)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / window.Seconds(), bench.Summarize(lat), fails.Load()
}

func (e *env) throughput(ctx context.Context, b *strings.Builder, window time.Duration) error {
	const convs, callers = 6, 12
	fmt.Fprintf(b, "### Throughput: 1 replica vs 3\n\n%d clients reading 4 KiB over %d conversations for %s, each call sent to the conversation's owner.\n\n| replicas | calls/s | p50 | p99 | failed |\n|---|---|---|---|---|\n", callers, convs, window)
	if err := e.scale(ctx, 1); err != nil {
		return err
	}
	var runs []string
	var via []int
	for i := 0; i < convs; i++ {
		conv := fmt.Sprintf("bench-tp1-%d", i)
		defer e.cleanup(conv)
		run, err := e.conversation(ctx, conv, 0)
		if err != nil {
			return err
		}
		runs, via = append(runs, run.ID), append(via, 0)
	}
	rate, s, fails := e.load(ctx, runs, via, callers, window)
	fmt.Fprintf(b, "| 1 | %.0f | %s | %s | %d |\n", rate, bench.Ms(s.P50), bench.Ms(s.P99), fails)
	if err := e.scale(ctx, int32(len(e.clients))); err != nil {
		return err
	}
	runs, via = nil, nil
	for i := 0; i < convs; i++ {
		conv := fmt.Sprintf("bench-tp3-%d", i)
		defer e.cleanup(conv)
		run, err := e.conversation(ctx, conv, i%len(e.clients))
		if err != nil {
			return err
		}
		owner, err := e.owner(ctx, conv)
		if err != nil {
			return err
		}
		runs, via = append(runs, run.ID), append(via, owner)
	}
	rate3, s3, fails3 := e.load(ctx, runs, via, callers, window)
	fmt.Fprintf(b, "| %d | %.0f | %s | %s | %d |\n\n", len(e.clients), rate3, bench.Ms(s3.P50), bench.Ms(s3.P99), fails3)
	b.WriteString("This machine has 2 cores, shared by the API server, etcd, the kubelet, containerd, every replica and every sandbox: more replicas cannot add cores here, so the figure shows that nothing serializes across replicas, not how a real cluster scales. Each call's agent pipe is an exec through the API server, whose CPU is the same in both rows.\n")
	return nil
}
