package kubernetes

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A hibernation (the agent records its processes, the pod is deleted, the
// claim kept) and a resume (a new pod on the claim, its agent answering)
// of a sandbox with a workspace claim, through the Manager. Run with
// SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG:
//
//	go test ./sandbox/kubernetes -run '^$' -bench ClusterHibernate -benchtime 10x
func BenchmarkClusterHibernateResume(b *testing.B) {
	bk, _ := newClusterBackend(b, WithWorkspaceClaim(os.Getenv("SANDBOXD_TEST_K8S_STORAGE_CLASS"), "1Gi"))
	m := sandbox.NewManager(bk)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "bench", Conversation: "c-sleep"})
	if err != nil {
		b.Fatal(err)
	}
	var hibernate, resume time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := m.Hibernate(ctx, "bench", info.ID); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := m.Resume(ctx, "bench", info.ID); err != nil {
			b.Fatal(err)
		}
		c, _, err := m.Agent(ctx, "bench", "c-sleep")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}, Timeout: 10 * time.Second}); err != nil {
			b.Fatal(err)
		}
		hibernate += t1.Sub(t0)
		resume += time.Since(t1)
	}
	b.ReportMetric(float64(hibernate.Milliseconds())/float64(b.N), "hibernate-ms/op")
	b.ReportMetric(float64(resume.Milliseconds())/float64(b.N), "resume-ms/op")
}
