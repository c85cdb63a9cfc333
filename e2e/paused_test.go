package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestPausedSandbox: a sandbox paused in its engine (docker pause, ctr task
// pause) responds to tool calls at once that it is paused and how to unpause
// it — never that it should be deleted — the API shows it paused, and after
// the unpause the next call works on the same workspace.
func TestPausedSandbox(t *testing.T) {
	engines := map[string]struct {
		gate           string
		pause, unpause func(id string) []string
		hint           string
	}{
		"docker": {"SANDBOXD_TEST_DOCKER",
			func(id string) []string { return []string{"docker", "pause", "sandboxd-" + id} },
			func(id string) []string { return []string{"docker", "unpause", "sandboxd-" + id} },
			"docker unpause sandboxd-"},
		"containerd": {"SANDBOXD_TEST_CONTAINERD",
			func(id string) []string { return []string{"ctr", "-n", "sandboxd", "task", "pause", "sandboxd-" + id} },
			func(id string) []string { return []string{"ctr", "-n", "sandboxd", "task", "resume", "sandboxd-" + id} },
			"task resume sandboxd-"},
	}
	for _, backend := range []string{"docker", "containerd"} {
		e := engines[backend]
		t.Run(backend, func(t *testing.T) {
			if os.Getenv(e.gate) != "1" {
				t.Skipf("set %s=1 to run against %s", e.gate, backend)
			}
			d := startDaemon(t, backend, t.TempDir())
			sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "conv-paused", Image: dockerImage()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-paused"})
			if err != nil {
				t.Fatal(err)
			}
			mustCall(t, d, run.ID, "write", map[string]any{"path": "kept.txt", "content": "kept\n"})

			engine(t, e.pause(sb.ID)...)
			paused := true
			t.Cleanup(func() {
				if paused {
					exec.Command(e.unpause(sb.ID)[0], e.unpause(sb.ID)[1:]...).Run()
				}
			})
			// A call already on its way when the pause lands waits; every
			// call after the state check returns at once.
			var text string
			waitFor(t, 30*time.Second, "a read says the sandbox is paused", func() error {
				cctx, cancel := context.WithTimeout(ctx(t), 3*time.Second)
				defer cancel()
				res, err := d.Client.CallTool(cctx, run.ID, "read", []byte(`{"path":"kept.txt"}`))
				switch {
				case err != nil:
					text = err.Error()
				case res.IsError:
					text = res.Text()
				default:
					return fmt.Errorf("read of a paused sandbox answered %q", res.Text())
				}
				if !strings.Contains(text, "paused") {
					return errors.New(text)
				}
				return nil
			})
			t.Logf("a call on the paused sandbox: %s", text)
			if !strings.Contains(text, e.hint) || strings.Contains(text, "delete it") || strings.Contains(text, "session has ended") {
				t.Errorf("read of a paused sandbox said %q; want that it is paused, with %q, and no advice to delete it", text, e.hint)
			}
			if got, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || got.State != "paused" {
				t.Errorf("GET of the paused sandbox = %+v, %v; want state paused", got, err)
			}

			engine(t, e.unpause(sb.ID)...)
			paused = false
			if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "kept.txt"}); !strings.Contains(out, "kept") {
				t.Errorf("read after the unpause = %q, want the file written before the pause", out)
			}
			if got, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || got.State != "running" {
				t.Errorf("GET after the unpause = %+v, %v; want state running", got, err)
			}
		})
	}
}

// engine runs an engine's command line, as an operator would.
func engine(t *testing.T, argv ...string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(c, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}
