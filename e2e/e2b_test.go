package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	yaml := fmt.Sprintf("e2b:\n  domain: %s\n  templates:\n    base: %q\n", domain, dockerImage())
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", filepath.Join(base, "data"), "--config", cfg)

	c, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "node", "--test", "--test-reporter=spec")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+d.URL+"/e2b",
		"E2B_SANDBOX_URL="+d.URL+"/e2b/sandbox",
		"E2B_API_KEY="+d.Token,
		"E2B_DOMAIN="+domain,
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
// the same lockfile; npm's downloads are kept in the user's cache dir
// between runs.
func installSDK(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("the SDK's lockfile: %v", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".sandboxd-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cache, "sandboxd-e2e", "npm"))
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
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
