// Package clustertest gives the cluster tests of package cluster and its
// stores a fresh namespace on a real API server.
package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Namespace skips unless SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG name a
// cluster that responds (scripts/k8s-up.sh makes one), and returns a client
// and a fresh namespace named prefix-<random>, deleted when the test ends.
func Namespace(t testing.TB, prefix string) (kubernetes.Interface, string) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh) to run against a cluster")
	}
	// A cluster that is not up (yet) skips: the flag says to use one, not
	// that one is there.
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Skipf("KUBECONFIG is not usable, is the cluster up? %v", err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Skipf("the API server in KUBECONFIG does not answer, is the cluster up? %v", err)
	}
	cfg.Timeout = 30 * time.Second
	cfg.QPS, cfg.Burst = 100, 200
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	ns := prefix + "-" + hex.EncodeToString(rb[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return cs, ns
}
