package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/api"
)

// TestEvalKernelStaysWithItsSandbox: a kernel lives where it was started.
// When the conversation's sandbox disappears — deleted through the API,
// removed behind sandboxd's back, or deleted after a restart of sandboxd —
// the next cell is an error that says the sandbox and the kernel's state
// are gone, never a quiet new kernel on the host; the cell after that runs
// on the host, with none of the old state.
func TestEvalKernelStaysWithItsSandbox(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	for _, how := range []string{"deleted", "removed-behind-our-back", "deleted-after-restart"} {
		t.Run(how, func(t *testing.T) {
			dataDir := t.TempDir()
			d := startDaemon(t, "docker", dataDir)
			t.Cleanup(func() { stopHostKernels(t, filepath.Join(dataDir, "host-kernels")) })
			conv := "conv-gone-" + how
			sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", conv))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
			if err != nil {
				t.Fatal(err)
			}
			mustCall(t, d, run.ID, "eval", evalArgs("python", "state = 'in the sandbox'"))

			switch how {
			case "deleted":
				if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
					t.Fatal(err)
				}
			case "removed-behind-our-back":
				cli := dockerClient(t)
				list, err := cli.ContainerList(ctx(t), container.ListOptions{All: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range list {
					if c.Labels["io.sandboxd.conversation"] == conv {
						if err := cli.ContainerRemove(ctx(t), c.ID, container.RemoveOptions{Force: true}); err != nil {
							t.Fatal(err)
						}
					}
				}
			case "deleted-after-restart":
				d.restart()
				if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
					t.Fatal(err)
				}
			}

			run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(toolNames(run2.Tools), "eval") {
				t.Fatalf("tools %v lack eval (host kernels are on without tenants)", toolNames(run2.Tools))
			}
			_, err = call(t, d, run2.ID, "eval", evalArgs("python", "state"))
			if err == nil || !strings.Contains(err.Error(), sb.ID) || !strings.Contains(err.Error(), "is gone") || !strings.Contains(err.Error(), "state") {
				t.Fatalf("the cell after the sandbox went: %v, want an error that the sandbox %s and the kernel's state are gone", err, sb.ID)
			}
			t.Logf("the cell after the sandbox went: %v", err)
			// The next cell starts a new kernel on the host: none of the old state.
			if _, err := call(t, d, run2.ID, "eval", evalArgs("python", "state")); err == nil || !strings.Contains(err.Error(), "NameError") {
				t.Fatalf("the old state on the host: %v, want a NameError", err)
			}
			if out := mustCall(t, d, run2.ID, "eval", evalArgs("python", "import os\nos.getuid() != 0")); !strings.Contains(out, "True") {
				t.Fatalf("the host kernel runs as root: %q", out)
			}
		})
	}
}
