package daemon

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killLongTree SIGKILLs a long-lived process and what it started: every
// process in its group or session (both are the leader's pid, as it was
// started with setsid), and every process below one of those, which finds
// the ones that made sessions of their own. It first stops them all
// (SIGSTOP, until a look finds no member it has not stopped), so that none
// forks a child or loses its parent while the tree is read; then kills
// them, repeating until none is left or killBudget has passed, and
// returns how many were still alive then. A process that had left the
// group and the session and whose parents had all exited before the kill
// is re-parented to the agent (or the sandbox's init) and can no longer be
// told apart: that one is missed.
func killLongTree(leader int) (remaining int) {
	if leader <= 0 {
		return 0
	}
	self := os.Getpid()
	buf := make([]byte, 512)
	deadline := time.Now().Add(killBudget)
	stopped := map[int]bool{}
	for pass := 0; pass < stopPasses && time.Now().Before(deadline); pass++ {
		fresh := 0
		for _, e := range longTreeMembers(procSnapshot(), leader, self) {
			if !stopped[e.pid] {
				stopped[e.pid] = true
				fresh++
				signalSame(e, syscall.SIGSTOP, buf)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for {
		live := longTreeMembers(procSnapshot(), leader, self)
		if len(live) == 0 {
			return 0
		}
		for _, e := range live {
			signalSame(e, syscall.SIGKILL, buf)
		}
		if time.Now().After(deadline) {
			return len(live)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopPasses bounds the looks for members not yet stopped (a tree that
// forks faster than it is stopped is killed as it is then).
const stopPasses = 50

// longTreeMembers lists the live processes of leader's group, session and
// their descendants (self never), as snap shows them.
func longTreeMembers(snap []procEntry, leader, self int) (live []procEntry) {
	members := map[int]bool{}
	children := map[int][]int{}
	queue := []int{}
	for _, e := range snap {
		children[e.ppid] = append(children[e.ppid], e.pid)
		if e.pid == leader || e.pgid == leader || e.sid == leader {
			members[e.pid] = true
			queue = append(queue, e.pid)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !members[c] {
				members[c] = true
				queue = append(queue, c)
			}
		}
	}
	for _, e := range snap {
		if members[e.pid] && e.pid != self && !e.zombie {
			live = append(live, e)
		}
	}
	return live
}

// signalSame sends sig to the process e describes if it is still that process:
// a pidfd pins it while its start time is compared, so a pid reaped and
// reused since the snapshot is left alone. Membership is not checked
// again: a member whose parent this pass killed first has been re-parented
// already, and is still to be killed. Where pidfds are not allowed it
// falls back to kill(2).
func signalSame(e procEntry, sig syscall.Signal, buf []byte) bool {
	fd, _, errno := syscall.RawSyscall(sysPidfdOpen, uintptr(e.pid), 0, 0)
	switch errno {
	case 0:
	case syscall.ENOSYS, syscall.EPERM:
		return rawKill(e.pid, sig) == 0
	default:
		return false // gone
	}
	defer rawClose(int(fd))
	if now, found := readStat(e.pid, buf); !found || now.start != e.start {
		return false
	}
	_, _, errno = syscall.RawSyscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
	return errno == 0
}

// oomCounter reads how many processes the OOM killer has killed in the
// sandbox's memory cgroup: "oom_kill N" in memory.events (cgroup v2,
// counting the cgroups below too) or memory.oom_control (cgroup v1,
// Linux 4.13 and later). A process killed by SIGKILL while this count
// rose is reported as killed by the OOM killer. That is a best guess: an
// OOM kill of another process of the sandbox at the same time as someone
// sent this one SIGKILL reads the same.
type oomCounter struct {
	path string
}

// findOOMCounter finds the counter of the cgroup the agent runs in, seen
// from inside a container (mounted at the root of /sys/fs/cgroup) or
// outside one (the path /proc/self/cgroup names); nil when there is none.
func findOOMCounter() *oomCounter {
	var paths []string
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[1] == "":
				paths = append(paths, filepath.Join("/sys/fs/cgroup", parts[2], "memory.events"))
			case hasController(parts[1], "memory"):
				paths = append(paths, filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "memory.oom_control"))
			}
		}
		f.Close()
	}
	paths = append(paths, "/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
	for _, p := range paths {
		c := &oomCounter{path: p}
		if _, ok := c.read(); ok {
			return c
		}
	}
	return nil
}

// read returns the count; false when it cannot be read.
func (c *oomCounter) read() (int64, bool) {
	if c == nil {
		return 0, false
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
