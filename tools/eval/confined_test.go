package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
	"github.com/sandboxd/sandboxd/tools/files"
)

// hostKernels is eval with confined host kernels (a real LocalAgent: the
// agent daemon and `sandbox-agent jail` as sandboxd runs them) beside the
// things a kernel must not see: a data dir with a token, a config file, a
// host-backend workspace.
type hostKernels struct {
	t       testing.TB
	la      *eval.LocalAgent
	reg     *tools.Registry
	tool    *eval.Tool
	data    string // the data dir; host kernels live under data/host-kernels
	secrets []string
	first   int
}

const testMemory = 256 << 20

// newHostKernels confines kernels to memory bytes (0: the default).
func newHostKernels(t testing.TB, memory int64, opts ...eval.Option) *hostKernels {
	if err := jail.Check(); err != nil {
		t.Skipf("confined host kernels cannot run here: %v", err)
	}
	for _, bin := range []string{"/usr/bin/python3", "/usr/bin/node"} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("%s is not installed on this machine (the jail shows only the system's interpreters)", bin)
		}
	}
	if agentBin == "" {
		t.Skip("no sandbox-agent binary was built")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &hostKernels{t: t, data: filepath.Join(base, "data"), first: 910000 + int(time.Now().UnixNano()%50000)}
	for name, body := range map[string]string{
		"data/token":               "admin-token-secret",
		"data/runs.json":           `{"runs":[]}`,
		"sandboxd.yaml":            "tenants: []\n",
		"workspaces/acme/notes.md": "another tenant's file\n",
	} {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		h.secrets = append(h.secrets, p)
	}
	h.la, err = eval.NewLocalAgent(agentBin, filepath.Join(h.data, "host-kernels"), eval.WithConfinement(eval.Confinement{
		FirstUID: h.first, UIDCount: 1000, MemoryBytes: memory, Pids: 64,
	}))
	if err != nil {
		t.Fatal(err)
	}
	h.reg = tools.NewRegistry()
	for _, ft := range files.Tools() {
		h.reg.Register(ft)
	}
	h.tool = eval.New(h.reg, append([]eval.Option{eval.WithHost(h.la), eval.WithBudget(60*time.Second, time.Hour)}, opts...)...)
	h.reg.Register(h.tool)
	t.Cleanup(func() {
		h.tool.Close()
		stopLocalAgent(t, h.la)
		h.la.Close()
	})
	return h
}

// stopLocalAgent kills what the host agent runs and the agent daemon
// itself (it is meant to outlive sandboxd, not a test).
func stopLocalAgent(t testing.TB, la *eval.LocalAgent) {
	if !la.Started() {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ac, err := la.Agent(c)
	if err != nil {
		t.Errorf("cannot reach the host agent to stop it: %v", err)
		return
	}
	procs, _ := ac.List(c, nil)
	for _, p := range procs {
		if p.Running {
			ac.Signal(c, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
		}
	}
	if hello, err := ac.Hello(c); err == nil {
		syscall.Kill(hello.PID, syscall.SIGTERM)
	}
}

func (h *hostKernels) env(conversation string) *tools.Env {
	return &tools.Env{Run: &tools.Run{ID: "run-" + conversation, Tenant: "acme", Conversation: conversation, Surface: tools.SurfaceDefault}}
}

func (h *hostKernels) eval(env *tools.Env, lang, code string, extra map[string]any) tools.Result {
	h.t.Helper()
	args := map[string]any{"code": code, "description": "a confinement check cell", "language": lang}
	for k, v := range extra {
		args[k] = v
	}
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.reg.Call(ctx, env, "eval", raw)
	if err != nil {
		h.t.Fatalf("eval %q: Go error %v", code, err)
	}
	return res
}

func (h *hostKernels) ok(env *tools.Env, lang, code string) string {
	h.t.Helper()
	r := h.eval(env, lang, code, nil)
	if r.IsError {
		h.t.Fatalf("%s cell %q failed: %s", lang, code, text(r))
	}
	return text(r)
}

// uid is the uid the table gave a conversation.
func (h *hostKernels) uid(conversation string) int {
	h.t.Helper()
	out := h.ok(h.env(conversation), "python", "import os\nos.getuid()")
	b, err := os.ReadFile(filepath.Join(h.data, "host-kernels", "uids.json"))
	if err != nil {
		h.t.Fatal(err)
	}
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		h.t.Fatal(err)
	}
	uid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		h.t.Fatalf("os.getuid() printed %q", out)
	}
	for _, v := range m {
		if v == uid {
			return uid
		}
	}
	h.t.Fatalf("the kernel runs as uid %d, which the uid table %v did not give", uid, m)
	return 0
}

// procsOf lists the host's processes whose real uid is uid.
func procsOf(uid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
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

// waitNoProcs waits until no process of uid is left on the host.
func waitNoProcs(t *testing.T, uid int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := procsOf(uid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes of uid %d are still running after 15s: %v", what, uid, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostKernelConfined asks a real Python and a real Node kernel, from
// inside, what they can see and do.
func TestHostKernelConfined(t *testing.T) {
	h := newHostKernels(t, testMemory)
	c1, c2 := h.env("c1"), h.env("c2")

	uid := h.uid("c1")
	if uid < h.first || uid >= h.first+1000 {
		t.Fatalf("uid %d is outside the configured range %d+1000", uid, h.first)
	}
	if uid2 := h.uid("c2"); uid2 == uid {
		t.Fatalf("two conversations share uid %d", uid)
	}
	h.ok(c2, "python", "open('mine.txt', 'w').write('c2 was here')")
	scratch2 := strings.TrimSpace(h.ok(c2, "python", "print(os.getcwd())"))
	scratch1 := strings.TrimSpace(h.ok(c1, "python", "print(os.getcwd())"))
	if fi, err := os.Stat(filepath.Join(scratch2, "mine.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 {
		t.Fatalf("c2's file in its scratch on the host: %v (owned by root?)", err)
	}

	// Nothing of sandboxd's host is there: not the data dir, the config,
	// another tenant's workspace, another conversation's scratch, shadow.
	hidden := append([]string{"/etc/shadow", "/root", "/var/run/secrets/kubernetes.io/serviceaccount/token", "/run", "/home", filepath.Join(scratch2, "mine.txt"), filepath.Join(h.data, "host-kernels", "uids.json")}, h.secrets...)
	list, _ := json.Marshal(hidden)
	out := h.ok(c1, "python", fmt.Sprintf("import json\n[p for p in json.loads(%q) if os.path.exists(p)]", list))
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("the kernel sees %s", out)
	}
	if out := h.ok(c1, "python", "sorted(os.listdir('/'))"); strings.Contains(out, "home") || strings.Contains(out, "var") || strings.Contains(out, "root") {
		t.Fatalf("the kernel's / holds more than the system directories: %s", out)
	}
	// /proc shows the kernel's own processes only: its jail's init and itself.
	out = h.ok(c1, "python", "sorted(open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') if p.isdigit())")
	if strings.Contains(out, "dockerd") || strings.Contains(out, "eval.test") || strings.Contains(out, "containerd") || strings.Count(out, "'") > 8 {
		t.Fatalf("the kernel's /proc shows other processes: %s", out)
	}
	t.Logf("the kernel's /proc: %s", out)
	if out := h.ok(c1, "python", "os.getpid() < 20, os.getppid()"); !strings.Contains(out, "(True, 1)") {
		t.Fatalf("the kernel is not in a PID namespace of its own: %s", out)
	}
	if out := h.ok(c1, "python", "open('/proc/self/status').read().split('CapEff:')[1].split()[0], open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0]"); !strings.Contains(out, "('0000000000000000', '1')") {
		t.Fatalf("capabilities / no_new_privs: %s", out)
	}

	// No network: a listener on the host's loopback cannot be reached.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	out = h.ok(c1, "python", fmt.Sprintf("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=3); r = 'connected'\nexcept OSError as e:\n    r = 'refused: ' + str(e)\nr", port))
	if !strings.Contains(out, "refused") {
		t.Fatalf("a connection to the host's loopback: %s", out)
	}

	// Writes outside the scratch fail; inside they land in the scratch.
	progDir := filepath.Join(h.data, "host-kernels", "programs")
	targets, _ := json.Marshal([]string{"/usr/x", "/etc/x", "/x", "/tmp/x", "/dev/x", progDir + "/x", filepath.Dir(scratch1) + "/x"})
	out = h.ok(c1, "python", fmt.Sprintf(`ok = []
for p in json.loads(%q):
    try:
        open(p, 'w').write('x'); ok.append(p)
    except OSError:
        pass
open('here.txt', 'w').write('in the scratch')
import tempfile
tempfile.mkstemp()
ok`, targets))
	if !strings.Contains(out, "[]") {
		t.Fatalf("writes outside the scratch succeeded: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(scratch1, "here.txt")); err != nil || string(b) != "in the scratch" {
		t.Fatalf("a write in the scratch: %q %v", b, err)
	}

	// State survives between cells, in both languages.
	h.ok(c1, "python", "kept = 41")
	if out := h.ok(c1, "python", "kept + 1"); !strings.Contains(out, "42") {
		t.Fatalf("state between cells: %s", out)
	}
	h.ok(c1, "javascript", "let seen = 7")
	out = h.ok(c1, "javascript", fmt.Sprintf("const fs = require('fs'); [process.getuid(), seen, %s.filter(p => fs.existsSync(p)).length]", list))
	if !strings.Contains(out, fmt.Sprintf("[ %d, 7, 0 ]", uid)) {
		t.Fatalf("node kernel: %s", out)
	}

	// An interrupt still reaches the kernel through the jail.
	r := h.eval(c1, "python", "import time\ntime.sleep(60)", map[string]any{"timeout_s": 1})
	if !r.IsError || !strings.Contains(text(r), "interrupted") {
		t.Fatalf("a cell past its budget: %s", text(r))
	}
	if out := h.ok(c1, "python", "kept"); !strings.Contains(out, "41") {
		t.Fatalf("state after an interrupt: %s", out)
	}

	// A fork loop stops at the pids limit, and the kernel goes on.
	out = h.ok(c1, "python", `import time
kids, err = [], ''
try:
    for i in range(500):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    err = str(e)
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
(len(kids) < 64, err)`)
	if !strings.Contains(out, "True") || !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("a fork loop: %s", out)
	}
	t.Logf("fork loop: %s", out)

	// A big allocation hits the memory limit: the kernel is reported dead,
	// and the machine is fine; the next cell gets a clean kernel.
	r = h.eval(c1, "python", fmt.Sprintf("big = b'x' * %d\nlen(big)", 4*testMemory), nil)
	if !r.IsError || !strings.Contains(text(r), "kernel died") || !strings.Contains(text(r), "memory limit") {
		t.Fatalf("an allocation over the memory limit: is_error=%v %s", r.IsError, text(r))
	}
	t.Logf("over the memory limit: %s", text(r))
	if r := h.eval(c1, "python", "kept", nil); !r.IsError || !strings.Contains(text(r), "NameError") {
		t.Fatalf("after the kernel died: %s", text(r))
	}

	// Killed with its conversation's run: nothing of it remains.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.ok(c1, "python", "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True).pid")
	if err := h.tool.EndRun(ctx, *c1.Run); err != nil {
		t.Fatal(err)
	}
	waitNoProcs(t, uid, "after the run ended")
	if _, err := os.Stat(scratch1); !os.IsNotExist(err) {
		t.Fatalf("the scratch of an ended conversation is still there: %v", err)
	}
	// The conversation comes back: a clean kernel and scratch.
	if r := h.eval(c1, "python", "kept", nil); !r.IsError || !strings.Contains(text(r), "NameError") {
		t.Fatalf("after the run ended: %s", text(r))
	}
	if out := h.ok(c1, "python", "import os\nos.listdir('.')"); strings.Contains(out, "here.txt") {
		t.Fatalf("the old scratch came back: %s", out)
	}
	// reset kills the old kernel's jail as well.
	uid2 := h.uid("c2")
	h.ok(c2, "python", "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True).pid")
	before := len(procsOf(uid2))
	h.eval(c2, "python", "", map[string]any{"reset": true})
	if after := len(procsOf(uid2)); after >= before {
		t.Fatalf("reset left the old kernel's processes: %d before, %d after", before, after)
	}
}

// TestHostKernelsRefuseUnconfined: an interpreter the jail cannot show is
// refused with the jail's error message, never run some other way.
func TestHostKernelsRefuseUnconfined(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "python3")
	h := newHostKernels(t, testMemory, eval.WithInterpreters(outside, ""))
	if err := exec.Command("cp", "/usr/bin/python3", outside).Run(); err != nil {
		t.Fatal(err)
	}
	r := h.eval(h.env("c3"), "python", "1 + 1", nil)
	if !r.IsError || !strings.Contains(r.Text(), "cannot run on the host") || !strings.Contains(r.Text(), "is not inside the jail") {
		t.Fatalf("an interpreter outside the jail: is_error=%v %s", r.IsError, r.Text())
	}
	t.Logf("refused: %s", r.Text())
}
