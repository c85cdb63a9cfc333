package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/errdefs"
)

type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var urlRE = regexp.MustCompile(`serving on (http://[0-9.:]+)`)

// startServe runs `sandboxd serve` in-process and returns its URL and a
// stop function that cancels it and waits for a clean return.
func startServe(t *testing.T, args ...string) (string, *lockedBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), nil, &stdout, &stderr)
	}()
	deadline := time.After(20 * time.Second)
	for {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			stop := func() {
				cancel()
				select {
				case code := <-done:
					if code != 0 {
						t.Errorf("serve exited %d: %s", code, stderr.String())
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("serve did not stop within 30s of its context ending")
				}
			}
			return m[1], &stderr, stop
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited %d before serving: %s %s", code, stdout.String(), stderr.String())
		case <-deadline:
			cancel()
			t.Fatalf("serve did not print its URL within 20s: %s %s", stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fakeAgent is an executable the host backend accepts; these tests never
// attach to it.
func fakeAgent(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandbox-agent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeHostBackend(t *testing.T) {
	dataDir := t.TempDir()
	agentBin := fakeAgent(t)
	url, logs, stop := startServe(t, "--backend", "host", "--data-dir", dataDir, "--agent-binary", agentBin)

	tokPath := filepath.Join(dataDir, "token")
	fi, err := os.Stat(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token mode %o", fi.Mode().Perm())
	}
	tok, _ := os.ReadFile(tokPath)
	if !strings.Contains(logs.String(), tokPath) {
		t.Errorf("the log does not say where the token is: %s", logs.String())
	}
	if strings.Contains(logs.String(), strings.TrimSpace(string(tok))) {
		t.Error("the token itself was logged")
	}
	ctx := context.Background()
	c, err := client.New(url, strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Fatal(err)
	}
	// With no config file the admin token may use any host directory.
	ws := t.TempDir()
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "c1", Workspace: &api.Workspace{HostPath: ws}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Backend != "host" || sb.Workspace != ws || sb.State != "running" && sb.State != "stopped" {
		t.Errorf("sandbox = %+v", sb)
	}
	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	// The file tools are wired: a conversation with a sandbox lists them.
	specs, err := c.Tools(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	sandboxTools := []string{"read", "write", "edit", "apply_patch", "shell", "process"}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	for _, want := range sandboxTools {
		if !slices.Contains(names, want) {
			t.Errorf("tools of a run with a sandbox = %v, lack %s", names, want)
		}
	}
	// A conversation without a sandbox has none of the sandbox tools (tools
	// that stand on something else, like eval's host kernels, may remain).
	bare, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "no-sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range bare.Tools {
		if slices.Contains(sandboxTools, s.Name) {
			t.Errorf("run without a sandbox lists %s", s.Name)
		}
	}
	checkMetrics(t, url, []string{
		`sandboxd_build_info{goversion="go`,
		`sandboxd_sandboxes{backend="host",state="`,
		`sandboxd_runs_created_total 2`,
		`sandboxd_runs_active 2`,
		`sandboxd_http_requests_total{code="201",method="POST",route="POST /v1/runs"} 2`,
		`sandboxd_http_requests_total{code="200",method="GET",route="GET /v1/runs/{id}/tools"} 1`,
		// The families' gauges exist at zero before anything runs (workers
		// are not configured here, and still read as zero).
		`sandboxd_kernels{language="python"} 0`,
		`sandboxd_lsp_servers{language="go"} 0`,
		`sandboxd_lsp_restarts_total{language="go"} 0`,
		`sandboxd_debug_sessions 0`,
		`sandboxd_questions_pending{kind="permission"} 0`,
		`sandboxd_workers{state="running"} 0`,
	})
	bad, _ := client.New(url, "not-the-token")
	if _, err := bad.ListSandboxes(ctx, ""); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("bad token: %v", err)
	}
	stop()

	// A restart reuses the token and finds the sandbox again.
	url, _, stop = startServe(t, "--backend", "host", "--data-dir", dataDir, "--agent-binary", agentBin)
	defer stop()
	tok2, _ := os.ReadFile(tokPath)
	if string(tok2) != string(tok) {
		t.Error("the token changed across a restart")
	}
	c, _ = client.New(url, strings.TrimSpace(string(tok)))
	list, err := c.ListSandboxes(ctx, "c1")
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("after restart: %+v, %v", list, err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(ws); err != nil {
		t.Errorf("deleting the sandbox removed the caller's host directory: %v", err)
	}
}

func TestServeWithConfigTenants(t *testing.T) {
	dataDir := t.TempDir()
	allowed := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "sandboxd.yaml")
	os.WriteFile(cfgPath, []byte("tenants:\n  - {name: acme, token_sha256: "+api.HashToken("acme-token")+"}\nallowed_host_paths: ["+allowed+"]\n"), 0o600)
	url, _, stop := startServe(t, "--backend", "host", "--data-dir", dataDir, "--agent-binary", fakeAgent(t), "--config", cfgPath)
	defer stop()
	if _, err := os.Stat(filepath.Join(dataDir, "token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an admin token was written although tenants are configured: %v", err)
	}
	ctx := context.Background()
	c, _ := client.New(url, "acme-token")
	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "c1", Workspace: &api.Workspace{HostPath: t.TempDir()}}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("host path outside allowed_host_paths: %v", err)
	}
	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: "c1", Workspace: &api.Workspace{HostPath: allowed}}); err != nil {
		t.Errorf("host path inside allowed_host_paths: %v", err)
	}
}

func TestServeRefusals(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("default_imag: x\n"), 0o600)
	noKube := filepath.Join(dir, "nokube.yaml")
	os.WriteFile(noKube, []byte("kubernetes:\n  kubeconfig: "+filepath.Join(dir, "missing-kubeconfig")+"\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--backend", "kubernetes", "--config", noKube}, 1, "no Kubernetes configuration was found"},
		{[]string{"--backend", "podman"}, 2, `"podman" is not known`},
		{[]string{"--config", typo}, 1, `unknown key "default_imag"`},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, 1, "cannot be opened"},
		{[]string{"--backend", "host", "--agent-binary", filepath.Join(dir, "nope")}, 1, "sandbox-agent binary"},
		{[]string{"--log-format", "xml"}, 2, "log-format"},
		{[]string{"extra"}, 2, "no arguments"},
	} {
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)
		code, _, errs := runCLI(t, "", args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// With no engine responding, "auto" falls back to the host backend.
func TestServeAutoFallsBackToHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	_, logs, stop := startServe(t, "--backend", "auto", "--data-dir", t.TempDir(), "--agent-binary", fakeAgent(t))
	defer stop()
	if !strings.Contains(logs.String(), "using the host backend") {
		t.Errorf("auto did not fall back to host: %s", logs.String())
	}
}

// checkMetrics scrapes /metrics (no token needed), checks that it lints
// clean and holds every wanted line prefix, and that no id leaked into it.
func checkMetrics(t *testing.T, url string, want []string) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "sandboxd_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	text := string(body)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	if strings.Contains(text, "run_") || strings.Contains(text, "c1") {
		t.Error("/metrics carries a run or conversation id")
	}
}
