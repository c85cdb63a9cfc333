package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/api"
)

// TestWarmPools: sandboxd with a pool of the test image and one of an
// image that does not exist. The first fills and a create claims from it
// (the sandbox works like a cold one and its workspace is empty); the
// second says why it cannot refill in /readyz (still 200) and /metrics;
// after a restart the claimed sandbox is found for its conversation.
func TestWarmPools(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	img := dockerImage()
	missing := "sandboxd-missing-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + ":none"
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, fmt.Sprintf("pools:\n  - {image: %q, size: 1}\n  - {image: %q, size: 1, backend: docker}\n", img, missing))
	dep := removeWarmLeft(t)
	d := startDaemon(t, "docker", t.TempDir(), "--config", cfg)

	ready := fmt.Sprintf(`sandboxd_pool_ready{image=%q}`, img)
	waitFor(t, 2*time.Minute, "the pool of "+img+" to fill", func() error {
		if v := metricValue(t, d, ready); v != 1 {
			return fmt.Errorf("%s = %v", ready, v)
		}
		return nil
	})
	waitFor(t, time.Minute, "/readyz to name the broken pool", func() error {
		code, st := readyz(t, d)
		if code != 200 || st.Status != "degraded" || len(st.Problems) != 1 ||
			!strings.Contains(st.Problems[0], "pool "+missing+" cannot refill") || !strings.Contains(st.Problems[0], "not on the Docker engine") {
			return fmt.Errorf("readyz = %d %+v", code, st)
		}
		return nil
	})
	if v := metricValue(t, d, fmt.Sprintf(`sandboxd_pool_refill_blocked{image=%q}`, missing)); v != 1 {
		t.Errorf("refill_blocked of the missing image = %v, want 1", v)
	}
	if v := metricValue(t, d, fmt.Sprintf(`sandboxd_pool_refill_failures_total{image=%q}`, missing)); v < 1 {
		t.Errorf("refill failures of the missing image = %v, want at least 1", v)
	}

	start := time.Now()
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-pool"))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
	*dep = containerLabel(t, sb.ID, "io.sandboxd.deployment")
	if sb.Conversation != "conv-pool" || sb.State != "running" || containerLabel(t, sb.ID, "io.sandboxd.pool") == "" {
		t.Fatalf("created %+v (in %s); want a running sandbox claimed from the pool", sb, took)
	}
	t.Logf("claim through the API took %s", took)
	if v := metricValue(t, d, fmt.Sprintf(`sandboxd_pool_claims_total{image=%q,outcome="claimed"}`, img)); v != 1 {
		t.Errorf("claimed claims = %v, want 1", v)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-pool"})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "ls -A /workspace | wc -l"}); !strings.Contains(out, "0") {
		t.Errorf("the claimed workspace is not empty: %s", out)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "note.txt", "content": "claimed\n"})

	// Specs the pool cannot serve are created cold meanwhile (here: a
	// create asking for a memory limit).
	req := createReq("docker", "conv-cold")
	req.Resources = &api.Resources{MemoryMB: 768}
	cold, err := d.Client.CreateSandbox(ctx(t), req)
	if err != nil {
		t.Fatalf("cold create: %v", err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), cold.ID) })
	if containerLabel(t, cold.ID, "io.sandboxd.pool") != "" {
		t.Errorf("a create asking for a memory limit was served from the pool")
	}

	d.restart()
	list, err := d.Client.ListSandboxes(ctx(t), "conv-pool")
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("after a restart conv-pool lists %+v, %v; want %s", list, err, sb.ID)
	}
	run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-pool"})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, d, run2.ID, "read", map[string]any{"path": "note.txt"}); !strings.Contains(out, "claimed") {
		t.Errorf("after a restart the claimed workspace reads %q", out)
	}
}

// TestWarmPoolClaimWithEnv: a create with env is claimed from the pool,
// and shell commands and eval cells see the env; the next claim's sandbox
// has nothing of it, in either.
func TestWarmPoolClaimWithEnv(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	img := dockerImage()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, fmt.Sprintf("pools:\n  - {image: %q, size: 1}\n", img))
	dep := removeWarmLeft(t)
	d := startDaemon(t, "docker", t.TempDir(), "--config", cfg)
	ready := fmt.Sprintf(`sandboxd_pool_ready{image=%q}`, img)
	claimed := fmt.Sprintf(`sandboxd_pool_claims_total{image=%q,outcome="claimed"}`, img)
	claim := func(conv string, env map[string]string) (string, string) {
		t.Helper()
		waitFor(t, 2*time.Minute, "the pool of "+img+" to fill", func() error {
			if v := metricValue(t, d, ready); v != 1 {
				return fmt.Errorf("%s = %v", ready, v)
			}
			return nil
		})
		before := metricValue(t, d, claimed)
		req := createReq("docker", conv)
		req.Env = env
		sb, err := d.Client.CreateSandbox(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
		*dep = containerLabel(t, sb.ID, "io.sandboxd.deployment")
		if containerLabel(t, sb.ID, "io.sandboxd.pool") == "" || metricValue(t, d, claimed) != max(before, 0)+1 {
			t.Fatalf("the create of %s (env %v) was not claimed from the pool", conv, env)
		}
		run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID, run.ID
	}

	first, run := claim("conv-env", map[string]string{"FOO": "bar"})
	if out := mustCall(t, d, run, "shell", map[string]any{"command": "echo \"FOO=[$FOO]\""}); !strings.Contains(out, "FOO=[bar]") {
		t.Errorf("shell in the claimed sandbox: %s; want FOO=[bar]", out)
	}
	if out := mustCall(t, d, run, "eval", evalArgs("python", "import os\nprint('FOO=[%s]' % os.environ.get('FOO'))")); !strings.Contains(out, "FOO=[bar]") {
		t.Errorf("eval in the claimed sandbox: %s; want FOO=[bar]", out)
	}
	if err := d.Client.DeleteSandbox(ctx(t), first); err != nil {
		t.Fatal(err)
	}

	second, run := claim("conv-after", nil)
	if second == first {
		t.Fatalf("the second claim got the first's sandbox %s", first)
	}
	if out := mustCall(t, d, run, "shell", map[string]any{"command": "echo \"FOO=[${FOO-unset}]\""}); !strings.Contains(out, "FOO=[unset]") {
		t.Errorf("shell in the next claim's sandbox: %s; want FOO unset", out)
	}
	if out := mustCall(t, d, run, "eval", evalArgs("python", "import os\nprint('FOO=[%s]' % os.environ.get('FOO'))")); !strings.Contains(out, "FOO=[None]") {
		t.Errorf("eval in the next claim's sandbox: %s; want FOO unset", out)
	}
}

// removeWarmLeft removes, once the test's sandboxd has stopped (it is
// registered before the daemon starts, so its cleanup runs after the
// daemon's), the unclaimed pool sandboxes its deployment left: a stopping
// sandboxd leaves them for its next start, which a test never makes. The
// test sets the deployment once it knows it.
func removeWarmLeft(t *testing.T) *string {
	dep := new(string)
	t.Cleanup(func() {
		if *dep == "" {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer cli.Close()
		list, err := cli.ContainerList(c, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", "io.sandboxd.deployment="+*dep), filters.Arg("label", "io.sandboxd.pool"))})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, ct := range list {
			if ct.Labels["io.sandboxd.conversation"] != "" {
				continue // claimed: the test deletes it
			}
			if err := cli.ContainerRemove(c, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				t.Errorf("cleanup of pool sandbox %s: %v", ct.ID, err)
			}
		}
	})
	return dep
}

func readyz(t *testing.T, d *daemon) (int, api.ReadyStatus) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, d.URL+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var st api.ReadyStatus
	_ = json.Unmarshal(body, &st)
	return resp.StatusCode, st
}
