package kubernetes

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// One tool-call-sized exec over the sandbox's one agent pipe, beside one
// fresh exec through the API server per call (what `kubectl exec` costs).
// Run with SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG:
//
//	go test ./sandbox/kubernetes -run '^$' -bench Cluster -benchtime 50x
func BenchmarkClusterExec(b *testing.B) {
	bk, _ := newClusterBackend(b)
	m := sandbox.NewManager(bk)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.Run("create-to-ready", func(b *testing.B) {
		for b.Loop() {
			info, err := m.Create(ctx, sandbox.Spec{Tenant: "bench", Conversation: "c-create"})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := m.Delete(ctx, "bench", info.ID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "bench", Conversation: "c-bench"})
	if err != nil {
		b.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "bench", "c-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pipe", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}, Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("docker-pipe", func(b *testing.B) { benchDockerPipe(b, ctx) })
	b.Run("fresh-api-exec", func(b *testing.B) {
		for b.Loop() {
			if err := bk.Exec(ctx, info.ID, []string{"true"}, nil, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchDockerPipe is the same call over the Docker backend's pipe, in the
// same run, when SANDBOXD_TEST_DOCKER=1: the peer the pipe should match.
func benchDockerPipe(b *testing.B, ctx context.Context) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		b.Skip("set SANDBOXD_TEST_DOCKER=1 to measure the Docker backend beside it")
	}
	agentBin, err := sandboxtest.BuildAgent(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	img, _ := clusterImages()
	d, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(img))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	m := sandbox.NewManager(d)
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tenant := "bench-k8s-peer-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: "c-bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Delete(context.WithoutCancel(ctx), tenant, info.ID) }()
	c, _, err := m.Agent(ctx, tenant, "c-bench")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}, Timeout: 10 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
}
