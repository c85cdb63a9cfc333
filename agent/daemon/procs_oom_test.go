package daemon_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// memoryCgroup makes a memory cgroup limited to limit bytes below the
// test's own, cgroup v1 or v2, and returns it with the file that counts
// its OOM kills; it skips the test where cgroups cannot be made (no
// privilege, a read-only /sys/fs/cgroup).
func memoryCgroup(t *testing.T, limit int64) (dir, counter string) {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	defer f.Close()
	name := fmt.Sprintf("sandboxd-oom-test-%d", os.Getpid())
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var limitFile string
		switch {
		case parts[1] == "" && fileExists("/sys/fs/cgroup/cgroup.controllers"):
			dir, limitFile, counter = filepath.Join("/sys/fs/cgroup", parts[2], name), "memory.max", "memory.events"
		case hasWord(parts[1], "memory"):
			dir, limitFile, counter = filepath.Join("/sys/fs/cgroup/memory", parts[2], name), "memory.limit_in_bytes", "memory.oom_control"
		default:
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		t.Cleanup(func() {
			// Empty once its processes are gone, which takes a moment after the kill.
			deadline := time.Now().Add(5 * time.Second)
			for os.Remove(dir) != nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		})
		if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(fmt.Sprint(limit)), 0o644); err != nil {
			t.Skipf("cannot limit the memory of cgroup %s: %v", dir, err)
		}
		return dir, filepath.Join(dir, counter)
	}
	t.Skip("no memory cgroup can be made here")
	return "", ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func hasWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// A process the kernel's OOM killer ends (in a memory-limited cgroup, as
// a memory-limited sandbox is) is reported as such; one killed by a
// SIGKILL of ours in the same cgroup is not.
func TestProcOOMKillIsReported(t *testing.T) {
	cg, counter := memoryCgroup(t, 64<<20)
	_, c := startPair(t, daemon.WithOOMCounterForTest(counter))
	join := `echo $$ > ` + filepath.Join(cg, "cgroup.procs") + ` && exec `
	hog := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", join + `python3 -c 'x = b"a" * (512 << 20); print(len(x))'`}})
	fin := waitEnded(t, c, hog.ID)
	if fin.State != proto.ProcKilled || fin.Signal != "KILL" || !fin.OOMKilled || fin.ExitCode != nil {
		t.Fatalf("a process over its cgroup's memory: %+v", fin)
	}
	sleeper := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", join + `sleep 60`}})
	time.Sleep(200 * time.Millisecond)
	fin, err := c.ProcKill(testCtx(t), sleeper.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fin.Signal != "KILL" || fin.OOMKilled {
		t.Fatalf("a process we killed: %+v", fin)
	}
}
