package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/errdefs"
)

// probeFunc checks that a replica responds at url.
type probeFunc func(ctx context.Context, url string) error

// waitReady polls until the release's StatefulSet has rolled out exactly
// len(urls) replicas, each Ready on the current revision and responding to
// GET /readyz at its URL, or until ctx ends; then the error names every
// replica that is not ready and why. Each change of what is not ready is
// written to progress.
func waitReady(ctx context.Context, cs kubernetes.Interface, namespace, release string, urls []string, probe probeFunc, progress io.Writer, poll time.Duration) error {
	var last []string
	for {
		problems, err := replicaProblems(ctx, cs, namespace, release, urls, probe)
		if err == nil && len(problems) == 0 {
			fmt.Fprintf(progress, "sandboxd-cluster: %d replicas ready\n", len(urls))
			return nil
		}
		if err != nil {
			problems = []string{err.Error()}
		}
		if strings.Join(problems, "\n") != strings.Join(last, "\n") {
			fmt.Fprintf(progress, "sandboxd-cluster: waiting: %s\n", strings.Join(problems, "; "))
			last = problems
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return errdefs.DeadlineExceeded("the replicas were not all ready in time (%v): %s", context.Cause(ctx), strings.Join(last, "; "))
		case <-t.C:
		}
	}
}

// replicaProblems lists one message per thing that is not ready yet.
func replicaProblems(ctx context.Context, cs kubernetes.Interface, namespace, release string, urls []string, probe probeFunc) ([]string, error) {
	sel := "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/name=sandboxd"
	sets, err := cs.AppsV1().StatefulSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the StatefulSets: %w", err)
	}
	if len(sets.Items) != 1 {
		return []string{fmt.Sprintf("%d StatefulSets of release %s, want 1", len(sets.Items), release)}, nil
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the pods: %w", err)
	}
	problems := rolloutProblems(&sets.Items[0], pods.Items, len(urls))
	if len(problems) > 0 {
		return problems, nil
	}
	// Ready as the kubelet sees it; now as a client sees it.
	for i, u := range urls {
		if err := probe(ctx, u); err != nil {
			problems = append(problems, fmt.Sprintf("%s-%d is Ready but %s does not answer: %v", sets.Items[0].Name, i, u, err))
		}
	}
	return problems, nil
}

// rolloutProblems compares the StatefulSet and its pods with n replicas,
// each Ready on the update revision; one message per shortfall.
func rolloutProblems(sts *appsv1.StatefulSet, pods []corev1.Pod, n int) []string {
	var out []string
	if sts.Status.ObservedGeneration < sts.Generation {
		out = append(out, fmt.Sprintf("StatefulSet %s has not seen its latest spec yet", sts.Name))
	}
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != n {
		out = append(out, fmt.Sprintf("StatefulSet %s asks for %v replicas, want %d", sts.Name, deref(sts.Spec.Replicas), n))
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		p := byName[name]
		delete(byName, name)
		if p == nil {
			out = append(out, name+": no pod yet")
			continue
		}
		if why := podProblem(p, sts.Status.UpdateRevision); why != "" {
			out = append(out, name+": "+why)
		}
	}
	var extra []string
	for name := range byName {
		extra = append(extra, name+": beyond the "+strconv.Itoa(n)+" replicas, still there")
	}
	sort.Strings(extra)
	return append(out, extra...)
}

func deref(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// podProblem says why p is not a Ready replica on revision rev, or "".
func podProblem(p *corev1.Pod, rev string) string {
	if p.DeletionTimestamp != nil {
		return "being deleted"
	}
	if rev != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
		return fmt.Sprintf("on revision %s, not %s yet (rolling update)", p.Labels[appsv1.ControllerRevisionHashLabelKey], rev)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("not scheduled: %s %s", c.Reason, c.Message)
		}
	}
	for _, group := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range group {
			if why := containerProblem(cs); why != "" {
				return why
			}
		}
	}
	if p.Status.Phase != corev1.PodRunning {
		return "phase " + string(p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			if c.Message != "" {
				return "running, not Ready: " + c.Message
			}
		}
	}
	return "running, not Ready yet (readiness probe)"
}

// containerProblem says why a container keeps its pod from being ready,
// with the end of its last log when it crashed (the chart keeps it as the
// termination message).
func containerProblem(cs corev1.ContainerStatus) string {
	w := cs.State.Waiting
	if w == nil || w.Reason == "PodInitializing" || w.Reason == "ContainerCreating" {
		return ""
	}
	s := fmt.Sprintf("container %s %s", cs.Name, w.Reason)
	if w.Message != "" {
		s += ": " + w.Message
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		s += fmt.Sprintf(" (restarted %d times; last exit %d", cs.RestartCount, t.ExitCode)
		if msg := lastLine(t.Message, 300); msg != "" {
			s += ": " + msg
		}
		s += ")"
	}
	return s
}

// lastLine is the last non-empty line of s, cut to max bytes.
func lastLine(s string, max int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > max {
		l = l[:max] + "..."
	}
	return l
}

// httpProbe reports whether GET url/readyz is 200 within 3 seconds.
func httpProbe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz = %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
