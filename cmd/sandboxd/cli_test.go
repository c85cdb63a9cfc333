package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/tools"
)

type echoTool struct{}

func (echoTool) Spec() tools.Spec {
	return tools.Spec{Name: "echo", Description: "Echo the text back. More detail.\nEven more.", Level: tools.LevelRead, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}`)}
}
func (echoTool) Available(*tools.Env) bool { return true }
func (echoTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	var a struct{ Text string }
	json.Unmarshal(args, &a)
	if a.Text == "fail" {
		return tools.Error("asked to fail"), nil
	}
	if a.Text == "talk" { // live output, for call --stream
		tools.EmitOutput(ctx, tools.StreamStdout, "partial")
		tools.EmitOutput(ctx, tools.StreamStderr, "warn\n")
	}
	return tools.Text("echo: " + a.Text), nil
}

// cliServer is an API server over an in-memory manager, with the admin
// token written where the CLI looks for it.
func cliServer(t *testing.T) (addr, dataDir string, sb *apitest.Sandboxes) {
	t.Helper()
	dataDir = t.TempDir()
	tok, _, _, err := api.LoadOrCreateAdminToken(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tt, _ := api.ParseTenantToken("admin", api.HashToken(tok))
	reg := tools.NewRegistry()
	reg.Register(echoTool{})
	sb = apitest.New()
	srv := httptest.NewServer(api.New(sb, reg, api.NewTokenAuth(tt)))
	t.Cleanup(srv.Close)
	return srv.URL, dataDir, sb
}

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLI(t *testing.T) {
	addr, dataDir, sb := cliServer(t)
	common := []string{"--addr", addr, "--data-dir", dataDir}

	code, out, errs := runCLI(t, "", append([]string{"sandbox", "create", "--conversation", "c1", "--env", "A=1", "--cpus", "2", "--json"}, common...)...)
	if code != 0 {
		t.Fatalf("sandbox create: %d %s", code, errs)
	}
	var created api.Sandbox
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Conversation != "c1" || sb.Len() != 1 {
		t.Fatalf("sandbox create --json printed %s (%v)", out, err)
	}
	// Flags after the positional argument work too; plain text by default.
	if code, out, errs = runCLI(t, "", "sandbox", "get", created.ID, "--addr", addr, "--data-dir", dataDir); code != 0 || !strings.Contains(out, "id:") || !strings.Contains(out, created.ID) || strings.Contains(out, "{") {
		t.Errorf("sandbox get: %d %s %s", code, out, errs)
	}
	if code, out, _ = runCLI(t, "", append([]string{"sandbox", "list", "--conversation", "c1"}, common...)...); code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, created.ID) {
		t.Errorf("sandbox list: %d %s", code, out)
	}
	var listed []api.Sandbox
	if code, out, _ = runCLI(t, "", append([]string{"sandbox", "list", "--json"}, common...)...); code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 {
		t.Errorf("sandbox list --json: %d %s", code, out)
	}

	// run create says the run, its sandbox and its tools in plain text.
	code, out, errs = runCLI(t, "", append([]string{"run", "create", "--conversation", "c1", "--surface", "plan"}, common...)...)
	lines := strings.Split(out, "\n")
	if code != 0 || !strings.HasPrefix(lines[0], "run r") || !strings.Contains(lines[0], "(conversation c1, sandbox "+created.ID+")") ||
		!strings.Contains(out, "\nsurface: plan\n") || !strings.Contains(out, "\ntools: echo\n") {
		t.Fatalf("run create: %d %q %s", code, out, errs)
	}
	runID := strings.Fields(lines[0])[1]
	code, out, errs = runCLI(t, "", append([]string{"run", "get", runID, "--json"}, common...)...)
	var run api.Run
	if code != 0 || json.Unmarshal([]byte(out), &run) != nil || run.ID != runID || run.Surface != "plan" || len(run.Tools) != 1 {
		t.Fatalf("run get --json: %d %s %s", code, out, errs)
	}
	if code, out, _ = runCLI(t, "", append([]string{"run", "list"}, common...)...); code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, runID+"  c1") || !strings.Contains(out, "plan") {
		t.Errorf("run list: %d %q", code, out)
	}
	var runs []api.RunSummary
	if code, out, _ = runCLI(t, "", append([]string{"run", "list", "--json"}, common...)...); code != 0 || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 || runs[0].ID != runID {
		t.Errorf("run list --json: %d %s", code, out)
	}
	// A conversation without a sandbox is told how to make one.
	if code, out, _ = runCLI(t, "", append([]string{"run", "create", "--conversation", "c2"}, common...)...); code != 0 || !strings.Contains(out, "no sandbox yet: sandboxd sandbox create --conversation c2") {
		t.Errorf("run create without a sandbox: %d %q", code, out)
	}
	if code, out, _ = runCLI(t, "", append([]string{"tools", "--run", run.ID}, common...)...); code != 0 || !strings.Contains(out, "echo") || !strings.Contains(out, "Echo the text back.") || strings.Contains(out, "More detail") {
		t.Errorf("tools: %d %q", code, out)
	}
	if code, out, _ = runCLI(t, "", append([]string{"call", "--run", run.ID, "echo", `{"text":"hi"}`}, common...)...); code != 0 || out != "echo: hi\n" {
		t.Errorf("call: %d %q", code, out)
	}
	if code, out, _ = runCLI(t, `{"text":"from stdin"}`, append([]string{"call", "--run", run.ID, "echo", "-"}, common...)...); code != 0 || out != "echo: from stdin\n" {
		t.Errorf("call with stdin: %d %q", code, out)
	}
	// A tool error prints its text and exits 1.
	if code, out, _ = runCLI(t, "", append([]string{"call", "--run", run.ID, "echo", `{"text":"fail"}`}, common...)...); code != 1 || out != "asked to fail\n" {
		t.Errorf("failing call: %d %q", code, out)
	}
	if code, _, errs = runCLI(t, "", append([]string{"call", "--run", run.ID, "echo", `{"text":`}, common...)...); code != 2 || !strings.Contains(errs, "not valid JSON") {
		t.Errorf("bad JSON: %d %q", code, errs)
	}
	if code, _, errs = runCLI(t, "", append([]string{"call", "--run", run.ID, "nope"}, common...)...); code != 1 || !strings.Contains(errs, `"nope"`) {
		t.Errorf("unknown tool: %d %q", code, errs)
	}
	if code, out, _ = runCLI(t, "", append([]string{"run", "delete", run.ID}, common...)...); code != 0 {
		t.Errorf("run delete: %d %s", code, out)
	}
	if code, _, errs = runCLI(t, "", append([]string{"tools", "--run", run.ID}, common...)...); code != 1 || !strings.Contains(errs, "does not exist") {
		t.Errorf("tools of ended run: %d %q", code, errs)
	}
	if code, out, _ = runCLI(t, "", append([]string{"sandbox", "delete", created.ID}, common...)...); code != 0 || out != "deleted "+created.ID+"\n" || sb.Len() != 0 {
		t.Errorf("sandbox delete: %d %s", code, out)
	}
}

func TestCLITokenSources(t *testing.T) {
	addr, dataDir, _ := cliServer(t)
	tok, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	empty := t.TempDir()

	if code, _, errs := runCLI(t, "", "sandbox", "list", "--addr", addr, "--data-dir", empty); code != 1 || !strings.Contains(errs, "no token") {
		t.Errorf("no token anywhere: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "sandbox", "list", "--addr", addr, "--data-dir", empty, "--token", strings.TrimSpace(string(tok))); code != 0 {
		t.Errorf("--token: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "sandbox", "list", "--addr", addr, "--token", "wrong"); code != 1 || !strings.Contains(errs, "not known") {
		t.Errorf("wrong token: %d %q", code, errs)
	}
	t.Setenv("SANDBOXD_TOKEN", strings.TrimSpace(string(tok)))
	t.Setenv("SANDBOXD_ADDR", addr)
	if code, _, errs := runCLI(t, "", "sandbox", "list", "--data-dir", empty); code != 0 {
		t.Errorf("$SANDBOXD_TOKEN and $SANDBOXD_ADDR: %d %q", code, errs)
	}
}

func TestCLIUsage(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"sandbox"}, {"sandbox", "explode"}, {"sandbox", "create"}, {"sandbox", "get"},
		{"run", "create"}, {"tools"}, {"call", "--run", "r"}, {"sandbox", "list", "--bogus"},
		{"run"}, {"run", "explode"}, {"run", "get"}, {"token"}, {"token", "new"}, {"token", "new", "--tenant", "Bad Name"},
		{"serve", "extra"}, {"serve", "--bogus"},
	} {
		if code, _, errs := runCLI(t, "", args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	if code, out, _ := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "sandboxd ") {
		t.Errorf("version: %d %q", code, out)
	}
}
