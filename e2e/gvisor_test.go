package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// needGVisor skips unless the Docker engine can run gVisor sandboxes.
func needGVisor(t *testing.T) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	info, err := dockerClient(t).Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Runtimes[docker.DefaultGVisorRuntime]; !ok {
		t.Skip("the Docker engine has no runsc runtime; run scripts/setup.sh")
	}
}

// gvisorBox creates a sandbox of runtime rt for conv and a run in it.
func gvisorBox(t *testing.T, d *daemon, conv, rt string, edit ...func(*api.CreateSandboxRequest)) (api.Sandbox, api.Run) {
	t.Helper()
	req := createReq("docker", conv)
	req.Runtime = rt
	for _, e := range edit {
		e(&req)
	}
	sb, err := d.Client.CreateSandbox(ctx(t), req)
	if err != nil {
		t.Fatalf("create a %s sandbox: %v", rt, err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	return sb, run
}

// TestGVisorSandboxRunsEveryToolFamily makes a gVisor sandbox through the
// API and drives each tool family in it, as TestDockerSandboxIsolation and
// the families' own tests do under runc.
func TestGVisorSandboxRunsEveryToolFamily(t *testing.T) {
	needGVisor(t)
	d := startDaemon(t, "docker", t.TempDir())

	// What cannot work is refused with a sentence, before any container.
	req := createReq("docker", "gv-bridge")
	req.Runtime, req.Network = "gvisor", "bridge"
	if _, err := d.Client.CreateSandbox(ctx(t), req); err == nil || !strings.Contains(err.Error(), `runtime gvisor cannot have network "bridge"`) {
		t.Fatalf("a bridge gVisor sandbox: %v, want a refusal naming bridge", err)
	}
	req = createReq("docker", "gv-kata")
	req.Runtime = "kata"
	if _, err := d.Client.CreateSandbox(ctx(t), req); err == nil || !strings.Contains(err.Error(), `runtime "kata" is not known`) {
		t.Fatalf("runtime kata: %v, want a refusal", err)
	}

	sb, run := gvisorBox(t, d, "gv-tools", "gvisor")
	if sb.Runtime != "gvisor" {
		t.Fatalf("created sandbox says runtime %q, want gvisor", sb.Runtime)
	}
	if got, err := d.Client.GetSandbox(ctx(t), sb.ID); err != nil || got.Runtime != "gvisor" {
		t.Fatalf("GET says runtime %q (%v), want gvisor", got.Runtime, err)
	}
	c, err := dockerClient(t).ContainerInspect(ctx(t), docker.NamePrefix+sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.Runtime != docker.DefaultGVisorRuntime {
		t.Fatalf("the container's runtime is %q, want runsc", c.HostConfig.Runtime)
	}
	// The kernel the sandbox sees is gVisor's, not the host's.
	if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "dmesg | head -n 1"}); !strings.Contains(out, "gVisor") {
		t.Fatalf("dmesg inside: %q, want gVisor's", out)
	}

	t.Run("files", func(t *testing.T) {
		mustCall(t, d, run.ID, "write", map[string]any{"path": "notes/a.txt", "content": "alpha\nbeta\n"})
		mustCall(t, d, run.ID, "edit", map[string]any{"path": "notes/a.txt", "old": "beta", "new": "gamma"})
		if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "notes/a.txt"}); !strings.Contains(out, "gamma") || strings.Contains(out, "beta") {
			t.Errorf("read after edit: %q", out)
		}
		if _, err := call(t, d, run.ID, "read", map[string]any{"path": "../../etc/passwd"}); err == nil {
			t.Error("a read outside the workspace was answered")
		}
	})
	t.Run("shell", func(t *testing.T) {
		if out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo $((6*7)) && find /workspace/notes"}); !strings.Contains(out, "42") || !strings.Contains(out, "a.txt") || strings.Contains(out, "--- stderr ---") {
			t.Errorf("shell: %q", out)
		}
		// coreutils 9's ls and stat call statx with AT_NO_AUTOMOUNT, which
		// the runsc Debian 12 ships refuses; a newer runsc accepts it.
		if _, err := call(t, d, run.ID, "shell", map[string]any{"command": "ls /workspace/notes"}); err != nil {
			if !strings.Contains(err.Error(), "Invalid argument") {
				t.Errorf("ls: %v", err)
			}
			t.Logf("ls fails under this runsc: %v", err)
		}
	})
	t.Run("process and preview", func(t *testing.T) {
		out := mustCall(t, d, run.ID, "process", map[string]any{"action": "start", "command": "python3 -u -m http.server 8123"})
		if !strings.Contains(out, "Serving HTTP on") {
			t.Fatalf("process start: %s", out)
		}
		id := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no process id in %q", out)
		}
		defer call(t, d, run.ID, "process", map[string]any{"action": "signal", "id": id[1], "signal": "KILL"})
		waitFor(t, 30*time.Second, "the port is served", func() error {
			code, body := get(t, authed(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/ports/8123/", nil))
			if code != 200 || !strings.Contains(body, "notes/") {
				return fmt.Errorf("GET port 8123: %d %.200s", code, body)
			}
			return nil
		})
		if out := mustCall(t, d, run.ID, "process", map[string]any{"action": "output", "id": id[1]}); !strings.Contains(out, "GET / ") {
			t.Errorf("the server's output lacks the request: %s", out)
		}
	})
	t.Run("lsp", func(t *testing.T) {
		fx := toolstest.Fixture{
			"calc/go.mod": "module example.com/calc\n\ngo 1.22\n",
			"calc/add.go": "package calc\n\n// Add sums two ints.\nfunc Add(a, b int) int { return a + b }\n",
			"calc/use.go": "package calc\n\nfunc Twice(x int) int { return Add(x, x) }\n",
		}
		for _, name := range []string{"calc/go.mod", "calc/add.go", "calc/use.go"} {
			mustCall(t, d, run.ID, "write", map[string]any{"path": name, "content": fx[name]})
		}
		out := mustCall(t, d, run.ID, "lsp", map[string]any{"action": "definition", "file": "calc/use.go", "line": fx.Line(t, "calc/use.go", "return Add(x, x)"), "symbol": "Add"})
		if !strings.Contains(out, fx.At(t, "calc/add.go", "func Add(")) {
			t.Errorf("gopls definition: %q", out)
		}
		mustCall(t, d, run.ID, "write", map[string]any{"path": "py/requirements.txt", "content": ""})
		mustCall(t, d, run.ID, "write", map[string]any{"path": "py/main.py", "content": "bad: int = \"x\"\n"})
		out = mustCall(t, d, run.ID, "lsp", map[string]any{"action": "diagnostics", "file": "py/main.py"})
		if !strings.Contains(out, "not assignable") {
			t.Errorf("pyright diagnostics: %q", out)
		}
	})
	t.Run("ast_grep", func(t *testing.T) {
		out := mustCall(t, d, run.ID, "ast_grep", map[string]any{"pattern": "Add($A, $B)", "language": "go"})
		if !strings.Contains(out, "calc/use.go") {
			t.Errorf("ast_grep: %q", out)
		}
	})
	t.Run("eval", func(t *testing.T) {
		if out := mustCall(t, d, run.ID, "eval", evalArgs("python", "1+1")); !strings.Contains(out, "2") {
			t.Errorf("python eval: %q", out)
		}
		if out := mustCall(t, d, run.ID, "eval", evalArgs("javascript", "1+1")); !strings.Contains(out, "2") {
			t.Errorf("node eval: %q", out)
		}
	})
	t.Run("debug", func(t *testing.T) {
		gvisorDebug(t, d, run.ID)
	})
}

// gvisorDebug drives each debug adapter in a gVisor sandbox to a
// breakpoint: debugpy, and delve and lldb, which need ptrace (gVisor's
// own).
func gvisorDebug(t *testing.T, d *daemon, run string) {
	type prog struct {
		adapter, dir, file, src, stopAt, program, build string
	}
	for _, p := range []prog{
		{adapter: "debugpy", dir: "dpy", file: "calc.py", src: "def double(v):\n    r = v * 2\n    return r\n\nprint(double(21))\n", stopAt: "return r", program: "calc.py"},
		{adapter: "delve", dir: "dgo", file: "main.go", src: "package main\n\nimport \"fmt\"\n\nfunc double(v int) int {\n\tr := v * 2\n\treturn r\n}\n\nfunc main() { fmt.Println(double(21)) }\n", stopAt: "return r", program: "main.go"},
		{adapter: "lldb", dir: "dc", file: "add.c", src: "#include <stdio.h>\nint add(int a, int b) {\n  int s = a + b;\n  return s;\n}\nint main(void) { printf(\"%d\\n\", add(20, 22)); return 0; }\n", stopAt: "return s;", program: "add", build: "gcc -g -O0 -o add add.c"},
	} {
		t.Run(p.adapter, func(t *testing.T) {
			line := toolstest.LineOf(t, p.src, p.stopAt)
			if p.adapter == "delve" {
				mustCall(t, d, run, "write", map[string]any{"path": p.dir + "/go.mod", "content": "module example.com/dgo\n\ngo 1.22\n"})
			}
			if p.adapter == "debugpy" {
				mustCall(t, d, run, "write", map[string]any{"path": p.dir + "/requirements.txt", "content": ""})
			}
			if p.adapter == "lldb" {
				mustCall(t, d, run, "write", map[string]any{"path": p.dir + "/CMakeLists.txt", "content": ""})
			}
			mustCall(t, d, run, "write", map[string]any{"path": p.dir + "/" + p.file, "content": p.src})
			if p.build != "" {
				if code, out := shellOut(t, d, run, "cd "+p.dir+" && "+p.build, 120); code != 0 {
					t.Fatalf("build: %s", out)
				}
			}
			mustCall(t, d, run, "debug", map[string]any{"operation": "breakpoints", "file": p.dir + "/" + p.file, "lines": []int{line}})
			out, err := call(t, d, run, "debug", map[string]any{"operation": "launch", "program": p.dir + "/" + p.program})
			defer call(t, d, run, "debug", map[string]any{"operation": "terminate"})
			if err != nil {
				t.Fatalf("launch under %s: %v", p.adapter, err)
			}
			if !strings.Contains(out, "with "+p.adapter) || !strings.Contains(out, "Stopped: breakpoint") || !strings.Contains(out, p.stopAt) {
				t.Errorf("launch under %s: %s", p.adapter, out)
			}
		})
	}
}

// TestHardeningFromInside checks, from a process in a runc and a gVisor
// sandbox, the points sandboxd hardens by default: no_new_privs, the
// capability set (DefaultCaps, nothing more), the seccomp filter (runc:
// the engine's default profile; gVisor answers system calls itself and
// reports none), and a read-only root on request with the workspace, /tmp
// and home writable.
func TestHardeningFromInside(t *testing.T) {
	needGVisor(t)
	d := startDaemon(t, "docker", t.TempDir())
	wantCaps := uint64(0)
	for _, c := range docker.DefaultCaps {
		bit, ok := capBit[c]
		if !ok {
			t.Fatalf("capability %s of DefaultCaps has no bit in this test's table; add it", c)
		}
		wantCaps |= 1 << bit
	}
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			_, run := gvisorBox(t, d, "harden-"+rt, rt)
			status := mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat /proc/self/status"})
			// Asked of the kernel (prctl PR_GET_NO_NEW_PRIVS): gVisor's
			// /proc/self/status has no NoNewPrivs line.
			nnp := mustCall(t, d, run.ID, "shell", map[string]any{"command": "python3 -c 'import ctypes; print(\"nnp=%d\" % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'"})
			if !strings.Contains(nnp, "nnp=1") {
				t.Errorf("no_new_privs is not set: %s", nnp)
			}
			for _, f := range []string{"CapEff", "CapBnd", "CapPrm"} {
				if got := statusHex(t, status, f); got != wantCaps {
					t.Errorf("%s is %#x, want %#x (DefaultCaps %v)", f, got, wantCaps, docker.DefaultCaps)
				}
			}
			seccomp := statusField(status, "Seccomp")
			switch {
			case rt == "runc" && seccomp != "2":
				t.Errorf("Seccomp is %q under runc, want 2 (a filter)", seccomp)
			case rt == "gvisor":
				t.Logf("Seccomp under gVisor reads %q: the sandbox's system calls reach gVisor's kernel, which the host filters", seccomp)
			}

			_, ro := gvisorBox(t, d, "harden-ro-"+rt, rt, func(r *api.CreateSandboxRequest) { yes := true; r.ReadOnlyRoot = &yes })
			code, out := shellOut(t, d, ro.ID, "touch /usr/local/x 2>&1; echo rc=$?; touch /workspace/w /tmp/t /root/h && echo writable", 30)
			if code != 0 || !strings.Contains(out, "rc=1") || !strings.Contains(out, "writable") {
				t.Errorf("read-only root: %d %q, want /usr/local refused and the workspace, /tmp and home writable", code, out)
			}
			if out := mustCall(t, d, ro.ID, "shell", map[string]any{"command": "test -f /root/.bashrc && echo dotfiles"}); !strings.Contains(out, "dotfiles") {
				t.Errorf("home lost the image's dot files under a read-only root: %q", out)
			}
		})
	}
}

var capBit = map[string]uint{"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7, "SYS_PTRACE": 19}

func statusField(status, field string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func statusHex(t *testing.T, status, field string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscanf(statusField(status, field), "%x", &n); err != nil {
		t.Fatalf("%s in /proc/self/status: %v", field, err)
	}
	return n
}
