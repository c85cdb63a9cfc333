package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/api/client"
)

// TestDeployOnCluster runs deploy and undeploy against the cluster of
// scripts/k8s-up.sh (make images-sandboxd and make cluster-up first): two
// replicas respond at their URLs with the printed token, a replaced pod
// responds at its slot's URL again, and undeploy leaves no namespace.
func TestDeployOnCluster(t *testing.T) {
	kc := os.Getenv("KUBECONFIG")
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || kc == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh; make images-sandboxd first) to deploy into a cluster")
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "sbx-deploy-" + hex.EncodeToString(b)
	// Ports apart from make cluster-deploy's (27800) and the chart test's (27788).
	common := []string{"--namespace", ns, "--kubeconfig", kc}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		var stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"undeploy"}, common...), &bytes.Buffer{}, &stderr); code != 0 {
			t.Errorf("undeploy at cleanup: exit %d: %s", code, stderr.String())
		}
	})

	var stdout, stderr bytes.Buffer
	if code := run(ctx, append([]string{"deploy", "--replicas", "2", "--port", "27900"}, common...), &stdout, &stderr); code != 0 {
		t.Fatalf("deploy: exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("deploy's last line %q is not the result: %v", lines[len(lines)-1], err)
	}
	if len(res.URLs) != 2 || res.URLs[0] != "http://127.0.0.1:27900" || res.URLs[1] != "http://127.0.0.1:27901" || res.Namespace != ns || res.Deployment != "sandboxd" || len(res.Token) < 32 {
		t.Fatalf("deploy printed %+v", res)
	}
	clients := make([]*client.Client, len(res.URLs))
	for i, u := range res.URLs {
		c, err := client.New(u, res.Token)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		if _, err := c.ListSandboxes(ctx, ""); err != nil {
			t.Errorf("replica %d at %s refuses the printed token: %v", i, u, err)
		}
	}

	// The slot keeps its URL when its pod is replaced.
	_, cs, err := connect(ctx, kc)
	if err != nil {
		t.Fatal(err)
	}
	old, err := cs.CoreV1().Pods(ns).Get(ctx, "sandboxd-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "sandboxd-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "sandboxd-1", metav1.GetOptions{})
		if err == nil && p.UID != old.UID && podProblem(p, "") == "" && clients[1].Readyz(ctx) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxd-1 was not replaced and answering at %s within 3m (pod %v, %v)", res.URLs[1], p, err)
		}
		time.Sleep(time.Second)
	}
	if _, err := clients[1].ListSandboxes(ctx, ""); err != nil {
		t.Errorf("the replaced replica refuses the token: %v", err)
	}

	stderr.Reset()
	if code := run(ctx, append([]string{"undeploy"}, common...), &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("undeploy: exit %d: %s", code, stderr.String())
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after undeploy: %v, want it gone", ns, err)
	}
}
