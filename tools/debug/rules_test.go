package debug_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools/debug"
)

const loopProgram = `import time
n = 0
while True:
    n += 1
    time.sleep(0.05)
`

// A second launch or attach is refused while a session runs; terminate
// is the way out, after which launch works again.
func TestSecondLaunchRefused(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("loop.py", loopProgram)
	h.ok(op("breakpoints", "file", "loop.py", "lines", []int{h.line("loop.py", "n += 1")}))
	h.ok(op("launch", "program", "loop.py"), h.at("loop.py", "n += 1"))
	h.bad(op("launch", "program", "loop.py"), "call terminate first")
	h.bad(op("attach", "port", 5678), "call terminate first")
	h.ok(op("terminate"), "Terminated")
	h.ok(op("launch", "program", "loop.py"), h.at("loop.py", "n += 1"))
}

// continue that meets no stop says running; pause stops it.
func TestRunningThenPause(t *testing.T) {
	h := newHarness(t, debug.WithStopWait(1500*time.Millisecond))
	h.put("requirements.txt", "")
	h.put("loop.py", loopProgram)
	h.ok(op("launch", "program", "loop.py"), "Running")
	h.bad(op("step_over"), "call pause first")
	h.ok(op("pause"), "Stopped: pause", "loop.py:")
	h.ok(op("evaluate", "expression", "n > 0"), "= True")
	h.ok(op("continue"), "Running")
	h.ok(op("status"), "Running", "debugpy")
}

// A session past its TTL is terminated, and later calls say it expired.
func TestSessionTTL(t *testing.T) {
	h := newHarness(t, debug.WithSessionTTL(3*time.Second))
	h.put("requirements.txt", "")
	h.put("loop.py", "import os\nopen('pid', 'w').write(str(os.getpid()))\n"+loopProgram)
	h.ok(op("breakpoints", "file", "loop.py", "lines", []int{h.line("loop.py", "n += 1")}))
	h.ok(op("launch", "program", "loop.py"), h.at("loop.py", "n += 1"))
	pid := strings.TrimSpace(h.sh("cat " + h.dir + "/pid"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		text, _ := h.call(op("status"))
		if strings.Contains(text, "expired") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status 20 s after a 3 s TTL still says:\n%s", text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.bad(op("stack"), "expired")
	h.bad(op("continue"), "expired")
	h.waitGone(pid)
	h.ok(op("launch", "program", "loop.py"), h.at("loop.py", "n += 1"))
}

// attach reaches a program started under debugpy listening on a port.
func TestAttachDebugpy(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("served.py", "import time\nvalue = 41\nvalue += 1\nprint('value', value)\ntime.sleep(30)\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := sb.ag.Spawn(ctx, &proto.SpawnRequest{
		Argv: []string{"python3", "-m", "debugpy", "--listen", "127.0.0.1:5678", "--wait-for-client", "served.py"},
		Dir:  h.dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sb.ag.Signal(c, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
	})
	h.ok(op("breakpoints", "file", "served.py", "lines", []int{h.line("served.py", "value += 1")}))
	// The listener needs a moment to open its port.
	var text string
	for i := 0; i < 50; i++ {
		var isErr bool
		text, isErr = h.call(op("attach", "port", 5678))
		if !isErr {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(text, "Attached to 127.0.0.1:5678") || !strings.Contains(text, h.at("served.py", "value += 1")) {
		t.Fatalf("attach:\n%s", text)
	}
	h.ok(op("evaluate", "expression", "value"), "= 41")
	h.ok(op("terminate"), "Terminated")
}

// adapters says what is present and missing: dart has no executable in
// the image, and a directory without markers has no usable adapter.
func TestAdaptersReportMissing(t *testing.T) {
	h := newHarness(t)
	text := h.ok(op("adapters"), "dart (Dart): NOT usable", "missing: executable (dart not on $PATH: the Dart SDK (for `dart debug_adapter`) is not installed in the sandbox)", "root marker (pubspec.yaml)")
	if !strings.Contains(text, "debugpy (Python): NOT usable") || !strings.Contains(text, "missing: root marker (pyproject.toml, setup.py, requirements.txt)") ||
		!strings.Contains(text, "present: executable /usr/bin/python3, debugpy importable") {
		t.Errorf("debugpy line is wrong:\n%s", text)
	}
	h.put("go.mod", "module x\n")
	h.ok(op("adapters"), "delve (Go): usable; present: executable /usr/local/bin/dlv, root marker "+h.dir+"/go.mod")

	h.put("prog.py", "print(1)\n")
	h.bad(op("launch", "program", "prog.py"), "needs a root marker (pyproject.toml, setup.py, requirements.txt)")
	h.put("pubspec.yaml", "name: x\n")
	h.put("main.dart", "void main() {}\n")
	h.bad(op("launch", "program", "main.dart"), "The dart adapter is not installed in the sandbox (dart not on $PATH: the Dart SDK (for `dart debug_adapter`) is not installed in the sandbox)")
	h.bad(op("launch", "program", "nope.py"), "does not exist")
	h.bad(op("stack"), "No debug session")
}

// terminate kills the debuggee and the processes it started (its group).
func TestTerminateKillsProcessGroup(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("spawner.py", `import os, subprocess
child = subprocess.Popen(["sleep", "1000"])
open("pids", "w").write("%d %d" % (os.getpid(), child.pid))
x = 1
`)
	h.ok(op("breakpoints", "file", "spawner.py", "lines", []int{h.line("spawner.py", "x = 1")}))
	h.ok(op("launch", "program", "spawner.py"), h.at("spawner.py", "x = 1"))
	pids := strings.Fields(h.sh("cat " + h.dir + "/pids"))
	if len(pids) != 2 {
		t.Fatalf("pids file: %v", pids)
	}
	h.ok(op("terminate"), "Terminated")
	for _, pid := range pids {
		h.waitGone(pid)
	}
}

// waitGone waits until a process no longer runs (a zombie counts as gone).
func (h *harness) waitGone(pid string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := strings.TrimSpace(h.sh("ps -o stat= -p " + pid + " || true"))
		if st == "" || strings.HasPrefix(st, "Z") {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("process %s (state %q) still runs 10 s after the session ended", pid, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The session belongs to the sandbox agent: a new sandboxd (a new
// supervisor) finds the stopped debugpy session and drives it on.
func TestResumeAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("app.py", "import os\nopen('pid', 'w').write(str(os.getpid()))\nx = 5\nprint('x is', x)\n")
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "x = 5")}))
	h.ok(op("launch", "program", "app.py"), h.at("app.py", "x = 5"))
	pid := strings.TrimSpace(h.sh("cat " + h.dir + "/pid"))

	h2 := h.restarted()
	h2.ok(op("status"), "Session: debugpy on app.py", "Stopped: breakpoint (before sandboxd restarted)", h2.at("app.py", "x = 5"))
	h2.ok(op("stack"), "<module> at "+h2.at("app.py", "x = 5"))
	h2.ok(op("step_over"), h2.at("app.py", "print('x is', x)"))
	h2.bad(op("launch", "program", "app.py"), "call terminate first")
	h2.ok(op("continue"), "exited with code 0")
	h2.ok(op("output"), "x is 5")
	h2.ok(op("terminate"), "Terminated")
	h2.waitGone(pid)
}
