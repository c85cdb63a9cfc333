package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/errdefs"
)

var selector = map[string]string{"app.kubernetes.io/instance": "sandboxd", "app.kubernetes.io/name": "sandboxd"}

func statefulSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxd", Namespace: "ns", Labels: selector, Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "sandboxd-new"},
	}
}

func labels(rev string) map[string]string {
	l := map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}
	for k, v := range selector {
		l[k] = v
	}
	return l
}

func readyPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sandboxd-%d", i), Namespace: "ns", Labels: labels("sandboxd-new")},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

// Each kind of trouble a replica can be in is said with what a person
// needs to act on it.
func TestRolloutProblems(t *testing.T) {
	crashing := readyPod(1)
	crashing.Status.Conditions[1].Status = corev1.ConditionFalse
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "sandboxd", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2,
			Message: `{"level":"info","msg":"starting"}` + "\nsandboxd: serve: flag provided but not defined: -listen-add-pod-index\n"}},
	}}
	pending := readyPod(2)
	pending.Status.Phase = corev1.PodPending
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."}}
	old := readyPod(3)
	old.Labels = labels("sandboxd-old")
	starting := readyPod(4)
	starting.Status.Conditions[1].Status = corev1.ConditionFalse
	imageless := readyPod(5)
	imageless.Status.Phase = corev1.PodPending
	imageless.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "config", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ErrImageNeverPull", Message: `Container image "sandboxd:latest" is not present with pull policy of Never`}}}}
	scaledDown := readyPod(7)
	now := metav1.Now()
	deleting := readyPod(0)
	deleting.DeletionTimestamp = &now

	got := rolloutProblems(statefulSet(7), []corev1.Pod{*deleting, *crashing, *pending, *old, *starting, *imageless, *readyPod(9), *scaledDown}, 7)
	want := []string{
		"sandboxd-0: being deleted",
		"sandboxd-1: container sandboxd CrashLoopBackOff: back-off 40s restarting failed container (restarted 4 times; last exit 2: sandboxd: serve: flag provided but not defined: -listen-add-pod-index)",
		"sandboxd-2: not scheduled: Unschedulable 0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
		"sandboxd-3: on revision sandboxd-old, not sandboxd-new yet (rolling update)",
		"sandboxd-4: running, not Ready yet (readiness probe)",
		`sandboxd-5: container config ErrImageNeverPull: Container image "sandboxd:latest" is not present with pull policy of Never`,
		"sandboxd-6: no pod yet",
		"sandboxd-7: beyond the 7 replicas, still there",
		"sandboxd-9: beyond the 7 replicas, still there",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	stale := statefulSet(2)
	stale.Status.ObservedGeneration = 1
	if got := rolloutProblems(stale, []corev1.Pod{*readyPod(0), *readyPod(1)}, 3); len(got) != 3 ||
		!strings.Contains(got[0], "has not seen its latest spec") || !strings.Contains(got[1], "asks for 2 replicas, want 3") || got[2] != "sandboxd-2: no pod yet" {
		t.Errorf("a StatefulSet not yet scaled: %q", got)
	}
	if got := rolloutProblems(statefulSet(2), []corev1.Pod{*readyPod(0), *readyPod(1)}, 2); len(got) != 0 {
		t.Errorf("two Ready replicas on the current revision: %q, want none", got)
	}
}

func fakeCluster(objs ...runtime.Object) *fake.Clientset { return fake.NewClientset(objs...) }

// waitReady returns once every replica is Ready and responds at its URL,
// and says which one does not when time runs out.
func TestWaitReady(t *testing.T) {
	cs := fakeCluster(statefulSet(2), readyPod(0), readyPod(1))
	urls := []string{"http://127.0.0.1:27800", "http://127.0.0.1:27801"}
	var calls atomic.Int32
	probe := func(ctx context.Context, url string) error {
		if url == urls[1] && calls.Add(1) <= 2 {
			return errors.New("connection refused")
		}
		return nil
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := waitReady(ctx, cs, "ns", "sandboxd", urls, probe, &progress, time.Millisecond); err != nil {
		t.Fatalf("waitReady = %v\n%s", err, progress.String())
	}
	if out := progress.String(); !strings.Contains(out, "sandboxd-1 is Ready but http://127.0.0.1:27801 does not answer: connection refused") ||
		!strings.HasSuffix(out, "2 replicas ready\n") || strings.Count(out, "waiting:") != 1 {
		t.Errorf("progress = %q, want the one unanswered URL said once, then ready", out)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := waitReady(ctx, fakeCluster(statefulSet(2), readyPod(0)), "ns", "sandboxd", urls, probe, &bytes.Buffer{}, time.Millisecond)
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "sandboxd-1: no pod yet") {
		t.Errorf("waitReady with a replica missing = %v, want a deadline naming sandboxd-1", err)
	}
}

func TestHTTPProbe(t *testing.T) {
	code := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		fmt.Fprint(w, `{"status":"starting"}`)
	}))
	defer srv.Close()
	if err := httpProbe(context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("probe of a 503 = %v", err)
	}
	code = http.StatusOK
	if err := httpProbe(context.Background(), srv.URL); err != nil {
		t.Errorf("probe of a 200 = %v", err)
	}
}
