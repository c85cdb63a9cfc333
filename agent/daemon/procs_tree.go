package daemon

import (
	"bytes"
	"strconv"
	"syscall"
	"time"
)

// procEntry is one process as /proc/<pid>/stat shows it.
type procEntry struct {
	pid, ppid int
	pgid, sid int    // process group and session
	start     uint64 // start time in clock ticks since boot: with pid, one process for good
	zombie    bool
}

// procSnapshot reads every process visible in /proc (one stat file each),
// with raw system calls (see procs_rawsys.go). Processes that exit while it reads
// are left out.
func procSnapshot() []procEntry {
	d, errno := rawOpen("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY)
	if errno != 0 {
		return nil
	}
	var names []string
	dents := make([]byte, 16<<10)
	for {
		n, errno := rawGetdents(d, dents)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(dents[:n], -1, names)
	}
	rawClose(d)
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

// readStat parses "pid (comm) S ppid pgrp session ... starttime ..."; comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func readStat(pid int, buf []byte) (procEntry, bool) {
	fd, errno := rawOpen("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY)
	if errno != 0 {
		return procEntry{}, false
	}
	n, errno := rawRead(fd, buf)
	rawClose(fd)
	if errno != 0 || n <= 0 {
		return procEntry{}, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return procEntry{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procEntry{}, false
	}
	pgid, _ := strconv.Atoi(string(f[2]))
	sid, _ := strconv.Atoi(string(f[3]))
	var start uint64
	if len(f) > 19 {
		start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	}
	return procEntry{pid: pid, ppid: ppid, pgid: pgid, sid: sid, start: start, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// descendants lists the processes below root in snap, zombies apart.
func descendants(snap []procEntry, root int) (live []int, zombies int) {
	live, zombies, _ = walkTree(snap, root)
	return live, zombies
}

// walkTree is descendants, with the set of pids in the tree (root's included).
func walkTree(snap []procEntry, root int) (live []int, zombies int, members map[int]bool) {
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
	return live, zombies, seen
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
// Killing is by pid (through a pidfd, see killMember), never by process
// group: a process of the tree may join any group of its session, the
// agent's included.
func killTree(root int, reap func() (noChildren bool)) (killed, remaining int) {
	signalled := map[int]struct{}{}
	buf := make([]byte, 512)
	deadline := time.Now().Add(killBudget)
	for pass := 0; pass < maxKillPasses; pass++ {
		live, zombies, members := walkTree(procSnapshot(), root)
		for _, p := range live {
			if killMember(p, members, buf) {
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
			rawSleep(2 * time.Millisecond)
		}
	}
	live, _ := descendants(procSnapshot(), root)
	return len(signalled), len(live)
}

// pidfd_open and pidfd_send_signal have the same numbers on every
// architecture.
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// killMember SIGKILLs pid if it still is a process of the tree: its parent
// is one of members. A pidfd pins the process while that is checked, so a
// pid that was reaped since the snapshot and reused by a process outside the
// tree (a fork bomb cycles quickly through a pid_max of 32768) is left alone.
// Where pidfds are not allowed, it falls back to kill(2).
func killMember(pid int, members map[int]bool, buf []byte) bool {
	fd, _, errno := syscall.RawSyscall(sysPidfdOpen, uintptr(pid), 0, 0)
	switch errno {
	case 0:
	case syscall.ENOSYS, syscall.EPERM:
		return rawKill(pid, syscall.SIGKILL) == 0
	default:
		return false // gone
	}
	defer rawClose(int(fd))
	if e, ok := readStat(pid, buf); !ok || !members[e.ppid] {
		return false
	}
	_, _, errno = syscall.RawSyscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	return errno == 0
}
