package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// TestE2BSDK drives E2B's own JavaScript SDK (e2b, pinned with its
// lockfile in e2e/e2b) against a daemon on Docker: the node:test files
// there create sandboxes, run commands and terminals, read and write
// files, pause, connect, list and kill, through nothing but the SDK with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at sandboxd.
func TestE2BSDK(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1: the SDK's sandboxes run on Docker")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH; install Node.js 20 or later to run E2B's SDK", tool)
		}
	}
	dir, err := filepath.Abs("e2b")
	if err != nil {
		t.Fatal(err)
	}
	installSDK(t, dir)

	const domain = "e2b.localhost"
	base := t.TempDir()
	cfg := filepath.Join(base, "sandboxd.yaml")
	// The egress policy lets the network test give sandboxes allow lists.
	yaml := fmt.Sprintf("e2b:\n  domain: %s\n  templates:\n    base: %q\n    code-interpreter-v1: %q\negress:\n  allow: [allowed.e2b.test, other.e2b.test]\n", domain, dockerImage(), dockerImage())
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", filepath.Join(base, "data"), "--config", cfg)

	c, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "node", "--test", "--test-force-exit", "--test-reporter=spec")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+d.URL+"/e2b",
		"E2B_SANDBOX_URL="+d.URL+"/e2b/sandbox",
		"E2B_API_KEY="+d.Token,
		"E2B_DOMAIN="+domain,
		"E2B_TEST_EGRESS=1",
		"NO_COLOR=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("node --test in %s: %v\n%s\nsandboxd's log:\n%s", dir, err, out.String(), d.logs.String())
	}
	t.Logf("node --test:\n%s", tail(out.String(), 40))
}

// installSDK runs npm ci in dir unless its node_modules was installed from
// the same lockfile.
func installSDK(t *testing.T, dir string) {
	t.Helper()
	if err := bench.InstallNodeModules(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestE2BAfterRestart: an E2B sandbox keeps its id, metadata, timeout and
// access token across a sandboxd restart.
func TestE2BAfterRestart(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1: the sandbox runs on Docker")
	}
	base := t.TempDir()
	cfg := filepath.Join(base, "sandboxd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("e2b:\n  templates:\n    base: %q\n", dockerImage())), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", filepath.Join(base, "data"), "--config", cfg)
	call := func(method, path string, hdr map[string]string, body string, out any) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx(t), method, d.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-KEY", d.Token)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil && json.Unmarshal(b, out) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode
	}
	var made struct{ SandboxID, EnvdAccessToken string }
	if code := call("POST", "/e2b/sandboxes", nil, `{"templateID":"base","timeout":600,"metadata":{"owner":"restart-test"}}`, &made); code != 201 {
		t.Fatalf("create: %d", code)
	}
	type detail struct {
		SandboxID string
		State     string
		EndAt     time.Time
		Metadata  map[string]string
	}
	// A timeout set after the create is the one a restarted sandboxd
	// reads back: kept on the sandbox in the engine, not in the data dir.
	if code := call("POST", "/e2b/sandboxes/"+made.SandboxID+"/timeout", nil, `{"timeout":900}`, nil); code != 204 {
		t.Fatalf("setTimeout: %d", code)
	}
	var before detail
	call("GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", &before)
	if left := time.Until(before.EndAt); left < 800*time.Second || left > 900*time.Second {
		t.Errorf("after setTimeout(900) the sandbox ends in %s", left)
	}

	d.stop()
	if got, _ := filepath.Glob(filepath.Join(d.dataDir, "e2b", "sandboxes*.json")); len(got) != 0 {
		t.Errorf("the data dir keeps E2B records: %v", got)
	}
	d.start()

	var after detail
	if code := call("GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", &after); code != 200 {
		t.Fatalf("after the restart: %d", code)
	}
	if after.State != "running" || after.Metadata["owner"] != "restart-test" || !after.EndAt.Equal(before.EndAt) {
		t.Errorf("after the restart %+v, before %+v", after, before)
	}
	envd := map[string]string{"X-Access-Token": made.EnvdAccessToken, "E2b-Sandbox-Id": made.SandboxID, "E2b-Sandbox-Port": "49983"}
	var list struct{ Processes []any }
	if code := call("POST", "/e2b/sandbox/process.Process/List", envd, `{}`, &list); code != 200 {
		t.Errorf("envd with the token from before the restart: %d", code)
	}
	if code := call("DELETE", "/e2b/sandboxes/"+made.SandboxID, nil, "", nil); code != 204 {
		t.Errorf("kill: %d", code)
	}

	// The timeout is taken by the restarted sandboxd: a kill, or with
	// autoPause a pause, after which the sandbox has no end until resumed.
	var gone, nap struct{ SandboxID string }
	if code := call("POST", "/e2b/sandboxes", nil, `{"templateID":"base","timeout":600}`, &gone); code != 201 {
		t.Fatalf("create: %d", code)
	}
	if code := call("POST", "/e2b/sandboxes", nil, `{"templateID":"base","timeout":1,"autoPause":true}`, &nap); code != 201 {
		t.Fatalf("create with autoPause: %d", code)
	}
	if code := call("POST", "/e2b/sandboxes/"+gone.SandboxID+"/timeout", nil, `{"timeout":1}`, nil); code != 204 {
		t.Fatalf("setTimeout(1): %d", code)
	}
	waitFor(t, 30*time.Second, "the sandbox killed at its timeout", func() error {
		if code := call("GET", "/e2b/sandboxes/"+gone.SandboxID, nil, "", &detail{}); code != http.StatusNotFound {
			return fmt.Errorf("GET answers %d", code)
		}
		return nil
	})
	var napped detail
	waitFor(t, 30*time.Second, "the autoPause sandbox paused at its timeout", func() error {
		if code := call("GET", "/e2b/sandboxes/"+nap.SandboxID, nil, "", &napped); code != 200 || napped.State != "paused" {
			return fmt.Errorf("GET answers %d, state %q", code, napped.State)
		}
		return nil
	})
	var resumed struct{ SandboxID string }
	if code := call("POST", "/e2b/sandboxes/"+nap.SandboxID+"/connect", nil, `{"timeout":600}`, &resumed); code != 201 {
		t.Fatalf("connect to the paused sandbox: %d", code)
	}
	call("GET", "/e2b/sandboxes/"+nap.SandboxID, nil, "", &napped)
	if left := time.Until(napped.EndAt); napped.State != "running" || left < 500*time.Second {
		t.Errorf("after connect(600) the sandbox is %s and ends in %s", napped.State, left)
	}
	call("DELETE", "/e2b/sandboxes/"+nap.SandboxID, nil, "", nil)
}
