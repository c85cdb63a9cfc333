package daemon

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procEntry is one process as /proc/<pid>/stat shows it.
type procEntry struct {
	pid, ppid int
	zombie    bool
}

// procSnapshot reads every process visible in /proc (one stat file each).
// Processes that exit while it reads are left out.
func procSnapshot() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procEntry, 0, len(names))
	buf := make([]byte, 512)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if e, ok := readStat(pid, buf); ok {
			out = append(out, e)
		}
	}
	return out
}

// readStat parses "pid (comm) S ppid ..."; comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func readStat(pid int, buf []byte) (procEntry, bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procEntry{}, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return procEntry{}, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return procEntry{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// descendants lists the processes below root in snap, zombies apart.
func descendants(snap []procEntry, root int) (live []int, zombies int) {
	children := make(map[int][]procEntry, len(snap))
	for _, e := range snap {
		if e.pid != root {
			children[e.ppid] = append(children[e.ppid], e)
		}
	}
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if seen[c.pid] {
				continue
			}
			seen[c.pid] = true
			if c.zombie {
				zombies++
			} else {
				live = append(live, c.pid)
			}
			queue = append(queue, c.pid)
		}
	}
	return live, zombies
}

const (
	// maxKillPasses bounds the kill loop: each pass kills every process of
	// the tree it sees, so a fork bomb shrinks by its whole generation per
	// pass, and the sandbox's pids limit bounds how many there can be.
	maxKillPasses = 10000
	// killBudget bounds the loop in time, for processes that cannot die
	// (stuck in the kernel) or a tree that outgrows the kills.
	killBudget = 5 * time.Second
)

// killTree SIGKILLs every process below root until none is left, calling
// reap after each pass (root must reap what it is parent of; as a child
// subreaper, root is the parent of every orphan of its tree, so nothing
// leaves the tree while it runs). It returns how many distinct processes it
// signalled and how many were still alive when its bounds ran out.
//
// Killing is by pid, never by process group: a process of the tree may join
// any group of its session, the agent's included.
func killTree(root int, reap func() (noChildren bool)) (killed, remaining int) {
	signalled := map[int]struct{}{}
	deadline := time.Now().Add(killBudget)
	for pass := 0; pass < maxKillPasses; pass++ {
		live, zombies := descendants(procSnapshot(), root)
		for _, p := range live {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				signalled[p] = struct{}{}
			}
		}
		noChildren := reap()
		if len(live) == 0 && (zombies == 0 || noChildren) {
			return len(signalled), 0
		}
		if time.Now().After(deadline) {
			return len(signalled), len(live)
		}
		if len(live) == 0 {
			// Only zombies whose parents are being torn down: their
			// reparenting to root takes a moment.
			time.Sleep(2 * time.Millisecond)
		}
	}
	live, _ := descendants(procSnapshot(), root)
	return len(signalled), len(live)
}
