package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pythonTests are the Python client's tests against the daemon that must
// have run and passed (not skipped): a green run that skipped them would
// prove nothing.
var pythonTests = []string{
	"test_sandbox_is_listed_and_read_back",
	"test_run_lists_its_tools",
	"test_write_then_read",
	"test_shell_output_streams_before_the_result",
	"test_closing_a_tool_stream_ends_the_call",
	"test_eval_keeps_its_state",
	"test_eval_image_is_an_image_block",
	"test_unknown_run_is_not_found",
	"test_bad_token_is_unauthorized",
	"test_bad_requests_are_invalid_argument",
	"test_ask_user_answered_through_the_space_stream",
	"test_example_agent_loop_runs",
	"test_pip_install_without_an_index",
	"test_network_of_a_sandbox_not_in_proxy",
	"test_proxy_sandbox_policy_and_egress",
}

// TestPythonClient runs clients/python's unittest suite (and through it the
// example agent loop) against a real sandboxd on Docker with the sandbox
// image. SANDBOXD_TEST_PYTHON picks the interpreter (default python3 on
// PATH); its pip-install test skips, saying why, where that interpreter has
// no pip.
func TestPythonClient(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	python := pythonInterpreter(t)
	dir, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", t.TempDir())

	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"SANDBOXD_URL="+d.URL,
		"SANDBOXD_TOKEN="+d.Token,
		"SANDBOXD_TEST_IMAGE="+dockerImage(),
		"PYTHONDONTWRITEBYTECODE=1", // leave no __pycache__ in the checkout
		"PYTHONUNBUFFERED=1",
	)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m unittest discover (in %s): %v\n%s", python, dir, err, out)
	}
	t.Logf("python tests:\n%s", out)
	for _, name := range pythonTests {
		if !regexp.MustCompile(`(?m)^` + name + ` \(.*\) \.\.\. ok$`).Match(out) {
			t.Errorf("python test %s did not run and pass; output above", name)
		}
	}

	// The tests and the example clean up after themselves.
	left, err := d.Client.ListSandboxes(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range left {
		ids = append(ids, sb.ID+" ("+sb.Conversation+")")
		d.Client.DeleteSandbox(context.Background(), sb.ID)
	}
	if len(ids) > 0 {
		t.Errorf("the python tests left sandboxes behind: %s", strings.Join(ids, ", "))
	}
}
