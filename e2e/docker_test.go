package e2e

import (
	"errors"
	"fmt"
	"time"

	"context"
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/api"
)

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// countContainers counts every container on the engine, ours or not: a
// tool call must not create any.
func countContainers(t *testing.T) int {
	t.Helper()
	list, err := dockerClient(t).ContainerList(context.Background(), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestDockerSandboxIsolation checks what the container really got: no
// network by default, the requested limits, no-new-privileges.
func TestDockerSandboxIsolation(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	d := startDaemon(t, "docker", t.TempDir())
	req := createReq("docker", "conv-iso")
	req.Resources = &api.Resources{CPUs: 1.5, MemoryMB: 768, Pids: 200}
	sb, err := d.Client.CreateSandbox(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })

	cli := dockerClient(t)
	list, err := cli.ContainerList(ctx(t), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, c := range list {
		if c.Labels["io.sandboxd.conversation"] == "conv-iso" {
			id = c.ID
		}
	}
	if id == "" {
		t.Fatal("no container carries the conversation label conv-iso")
	}
	insp, err := cli.ContainerInspect(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.HostConfig
	if hc.NanoCPUs != 1_500_000_000 || hc.Memory != 768<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 200 {
		t.Fatalf("limits: NanoCPUs=%d Memory=%d Pids=%v", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
	if string(hc.NetworkMode) != "none" {
		t.Fatalf("network mode %q, want none", hc.NetworkMode)
	}
	if !strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges") {
		t.Fatalf("security options %v lack no-new-privileges", hc.SecurityOpt)
	}

	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-iso"})
	if err != nil {
		t.Fatal(err)
	}
	// Only the loopback interface exists, and nothing outside responds.
	out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,)"})
	if !strings.Contains(out, "ifaces=lo,\n") {
		t.Fatalf("interfaces in a network-none sandbox: %q, want only lo", out)
	}
	out = mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo routes=$(tail -n +2 /proc/net/route | wc -l)"})
	if !strings.Contains(out, "routes=0\n") {
		t.Fatalf("routing table in a network-none sandbox: %q, want no routes", out)
	}
}

// TestSandboxRemovedBehindOurBack: a container removed outside sandboxd
// gives the model a clear error message, the API reports it gone, and the
// conversation can get a new sandbox.
func TestSandboxRemovedBehindOurBack(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-vanish"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-vanish"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "a.txt", "content": "x"})

	cli := dockerClient(t)
	list, err := cli.ContainerList(ctx(t), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Labels["io.sandboxd.conversation"] == "conv-vanish" {
			if err := cli.ContainerRemove(ctx(t), c.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		}
	}

	res, err := d.Client.CallTool(ctx(t), run.ID, "read", []byte(`{"path":"a.txt"}`))
	if err == nil {
		if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "sandbox") {
			t.Fatalf("read in a vanished sandbox = %+v, want an error that names the sandbox", res)
		}
		t.Logf("read in a vanished sandbox: %s", res.Content[0].Text)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("read in a vanished sandbox: %v", err)
	}
	waitFor(t, 10*time.Second, "the API reports the sandbox gone", func() error {
		if _, err := d.Client.GetSandbox(ctx(t), sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("GET sandbox = %v, want not_found", err)
		}
		return nil
	})
	sb2, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-vanish"))
	if err != nil {
		t.Fatalf("a new sandbox for the conversation after the old one vanished: %v", err)
	}
	d.Client.DeleteSandbox(ctx(t), sb2.ID)
}
