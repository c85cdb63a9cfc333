package files_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

// BenchmarkShellTrue measures a trivial shell call (`true`), interleaved in
// one run: through an in-process agent on this machine with the exec
// supervisor and without it (what the supervisor costs), through the agent
// of a real Docker sandbox (supervised, as every sandbox is), and, as the
// peer, a fresh `docker exec true` in the same sandbox.
//
//	SANDBOXD_TEST_DOCKER=1 go test ./tools/files -run '^$' -bench BenchmarkShellTrue -benchtime 1x
//
// Without Docker the package builds no agent and the benchmark skips.
func BenchmarkShellTrue(b *testing.B) {
	const rounds = 200
	if agentBin == "" {
		b.Skip("set SANDBOXD_TEST_DOCKER=1 (the package's tests then build the agent) to benchmark the supervisor")
	}
	plain := localShell(b)
	supervised := localShell(b, daemon.WithSelf(agentBin), daemon.WithSupervisedExec())
	var inDocker func() time.Duration
	var dockerExec func() time.Duration
	if os.Getenv("SANDBOXD_TEST_DOCKER") == "1" {
		s := dockerShell(b, 256)
		inDocker = func() time.Duration { return timeShell(b, s.reg, s.env) }
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cli.Close() })
		conn, err := s.env.Sandbox(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		name := docker.NamePrefix + conn.ID
		dockerExec = func() time.Duration {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			_, _, code, err := bench.Exec(ctx, bench.DockerExec{Client: cli}, name, "true")
			if err != nil || code != 0 {
				b.Fatalf("docker exec true: exit %d, %v", code, err)
			}
			return time.Since(start)
		}
	}
	for range b.N {
		var fig [4][]time.Duration
		for i := range rounds + 5 {
			d := [4]time.Duration{timeShell(b, plain.reg, plain.env), timeShell(b, supervised.reg, supervised.env)}
			if inDocker != nil {
				d[2], d[3] = inDocker(), dockerExec()
			}
			if i < 5 {
				continue // warm-up
			}
			for k := range fig {
				fig[k] = append(fig[k], d[k])
			}
		}
		for k, name := range []string{"local-unsupervised", "local-supervised", "docker-agent", "docker-exec"} {
			if fig[k][0] == 0 {
				continue
			}
			b.ReportMetric(ms(pct(fig[k], 50)), name+"-p50-ms")
			b.ReportMetric(ms(pct(fig[k], 90)), name+"-p90-ms")
		}
	}
}

// localShell is the shell tool on an in-process agent over a pipe.
func localShell(b *testing.B, opts ...daemon.Option) *realShell {
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ag, _ := agenttest.New(b, opts...)
	s := &realShell{t: b, reg: tools.NewRegistry()}
	for _, tool := range files.Tools() {
		s.reg.Register(tool)
	}
	conn := &tools.SandboxConn{ID: "local", Backend: "test", Workspace: ws, Agent: ag}
	s.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: "t1", Conversation: "bench", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	return s
}

func timeShell(b *testing.B, reg *tools.Registry, env *tools.Env) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, _ := json.Marshal(map[string]any{"command": "true"})
	start := time.Now()
	res, err := reg.Call(ctx, env, "shell", raw)
	d := time.Since(start)
	if err != nil || res.IsError || !strings.HasPrefix(res.Text(), "exit status 0") {
		b.Fatalf("shell true: %v %q", err, res.Text())
	}
	return d
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
