package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestEvalHostKernelsWithTenants: with tenants configured, a conversation
// without a sandbox sees no eval unless the config turns host kernels on;
// turned on, each tenant's kernel runs as a uid of its own and sees neither
// the data dir nor another tenant's host-backend workspace.
func TestEvalHostKernelsWithTenants(t *testing.T) {
	off, _ := qDaemon(t, "")
	run, err := off.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-t"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(toolNames(run.Tools), "eval") {
		t.Fatalf("with tenants and no eval.host, a run without a sandbox lists eval: %v", toolNames(run.Tools))
	}

	d, b := qDaemon(t, "eval:\n  host: true\n")
	t.Cleanup(func() { stopHostKernels(t, filepath.Join(d.dataDir, "host-kernels")) })
	// Tenant b has a host-backend sandbox with a file in its workspace.
	sb, err := b.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "conv-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.DeleteSandbox(ctx(t), sb.ID) })
	bRun, err := b.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CallTool(ctx(t), bRun.ID, "write", []byte(`{"path": "secret.txt", "content": "tenant b's"}`)); err != nil {
		t.Fatal(err)
	}
	wsPath := filepath.Join(sb.Workspace, "secret.txt")

	run, err = d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "eval") {
		t.Fatalf("with eval.host: true, a run without a sandbox lacks eval: %v", toolNames(run.Tools))
	}
	hidden, _ := json.Marshal([]string{wsPath, sb.Workspace, filepath.Join(d.dataDir, "token"), filepath.Join(d.dataDir, "runs.json"), d.dataDir + "/host-kernels/uids.json", "/etc/shadow"})
	out := mustCall(t, d, run.ID, "eval", evalArgs("python", fmt.Sprintf("import os, json\n(os.getuid(), [p for p in json.loads(%q) if os.path.exists(p)])", hidden)))
	if !strings.Contains(out, ", [])") || strings.HasPrefix(strings.TrimSpace(out), "(0,") {
		t.Fatalf("tenant a's host kernel: %s, want a non-root uid that sees none of %s", out, hidden)
	}
	t.Logf("tenant a's host kernel: %s", out)

	// The kernel (and what it started) ends with the conversation's run.
	uidText := strings.TrimPrefix(strings.TrimSpace(out[strings.LastIndex(out, "\n")+1:]), "(")
	uid, err := strconv.Atoi(uidText[:strings.Index(uidText, ",")])
	if err != nil {
		t.Fatalf("no uid in %q", out)
	}
	mustCall(t, d, run.ID, "eval", evalArgs("python", "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True).pid"))
	if n := len(uidProcs(uid)); n < 2 {
		t.Fatalf("%d processes of uid %d on the host, want the kernel and its sleep", n, uid)
	}
	if err := d.Client.DeleteRun(ctx(t), run.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "no process of the ended run's kernel", func() error {
		if left := uidProcs(uid); len(left) > 0 {
			return fmt.Errorf("processes of uid %d still run: %v", uid, left)
		}
		return nil
	})
}

// uidProcs lists the host's processes whose real uid is uid.
func uidProcs(uid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
