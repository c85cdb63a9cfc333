package archive

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Frozen is the set of processes a Freeze stopped. Thaw continues them;
// it is safe to call more than once and from a signal handler's goroutine.
type Frozen struct {
	pids []int
	done chan struct{}
}

// freezePasses bounds how often Freeze looks again for processes started
// while it stopped the ones it had found.
const freezePasses = 5

// Freeze stops (SIGSTOP) every process of the PID namespace but keep's and
// its own, so that nothing writes while a tree is read: the nearest thing
// to a cgroup freeze an unprivileged process has. A process stopped
// already is left as it is, and not continued by Thaw. A process that
// cannot be stopped fails the freeze (those stopped are continued): a copy
// taken meanwhile could be torn.
//
// It refuses to run unless PID 1 is sandbox-agent, that is, unless it is
// in a sandbox's own PID namespace: anywhere else it would stop the host.
func Freeze(keep ...int) (*Frozen, error) {
	if c := comm(1); c != "sandbox-agent" {
		return nil, fmt.Errorf("refusing to freeze: PID 1 is %q, not sandbox-agent, so this is not a sandbox's own PID namespace", c)
	}
	skip := map[int]bool{os.Getpid(): true}
	for _, p := range keep {
		skip[p] = true
	}
	f := &Frozen{done: make(chan struct{})}
	for pass := 0; pass < freezePasses; pass++ {
		pids, err := processes()
		if err != nil {
			f.Thaw()
			return nil, err
		}
		fresh := 0
		for _, pid := range pids {
			if skip[pid] {
				continue
			}
			skip[pid] = true
			if stopped(pid) {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				if errors.Is(err, syscall.ESRCH) {
					continue
				}
				f.Thaw()
				return nil, fmt.Errorf("cannot stop process %d (%s) for a consistent copy: %w", pid, comm(pid), err)
			}
			f.pids = append(f.pids, pid)
			fresh++
		}
		if fresh == 0 {
			return f, nil
		}
	}
	return f, nil
}

// Count is how many processes the freeze stopped.
func (f *Frozen) Count() int { return len(f.pids) }

// Thaw continues the processes Freeze stopped.
func (f *Frozen) Thaw() {
	select {
	case <-f.done:
		return
	default:
		close(f.done)
	}
	for _, pid := range f.pids {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// processes lists the PIDs in /proc.
func processes() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// stopped reports whether pid is stopped already (state T or t).
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'T' || b[i+2] == 't'
}

// comm is pid's command name, for an error message.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(b))
}
