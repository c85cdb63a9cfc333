package daemon

import (
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// exitStatus is how a child ended.
type exitStatus struct {
	ws syscall.WaitStatus
	at time.Time
}

// reaper starts children and delivers each one's exit status exactly once.
type reaper interface {
	// start starts cmd; the channel gets its status when it has been reaped.
	start(cmd *exec.Cmd) (<-chan exitStatus, error)
	stop()
}

var (
	_ reaper = childReaper{}
	_ reaper = (*subreaper)(nil)
)

// childReaper waits for each child on its own goroutine; it never touches
// children it did not start, so it is safe inside a process that runs other
// children (tests, sandboxd's host backend).
type childReaper struct{}

func (childReaper) start(cmd *exec.Cmd) (<-chan exitStatus, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan exitStatus, 1)
	go func() {
		st, err := cmd.Process.Wait()
		es := exitStatus{at: time.Now()}
		if err == nil {
			es.ws, _ = st.Sys().(syscall.WaitStatus)
		} else {
			es.ws = syscall.WaitStatus(0xff << 8) // unknown: report exit 255
		}
		ch <- es
	}()
	return ch, nil
}

func (childReaper) stop() {}

const prSetChildSubreaper = 36

// subreaper is the reaper for a process that is the sandbox's agent (or its
// PID 1): it marks itself a child subreaper so orphaned grandchildren are
// re-parented to it, and one goroutine reaps every child with wait4(-1),
// dispatching the statuses of children it started and dropping the rest.
// Starting a child and registering its pid happen under the same lock as
// the reap loop, so a child that exits at once is never reaped unclaimed.
type subreaper struct {
	log *slog.Logger
	// mu guards waiting and is held across start+register and each reap pass.
	mu      sync.Mutex
	waiting map[int]chan exitStatus
	sigs    chan os.Signal
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func newSubreaper(log *slog.Logger) *subreaper {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		log.Warn("could not become a child subreaper; orphans will go to PID 1", "err", errno)
	}
	r := &subreaper{
		log:     log,
		waiting: map[int]chan exitStatus{},
		sigs:    make(chan os.Signal, 1),
		done:    make(chan struct{}),
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	r.wg.Add(1)
	go r.loop()
	return r
}

func (r *subreaper) start(cmd *exec.Cmd) (<-chan exitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan exitStatus, 1)
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}

func (r *subreaper) loop() {
	defer r.wg.Done()
	// The tick covers a SIGCHLD that arrived while a pass was running.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			r.reap()
			return
		case <-r.sigs:
		case <-tick.C:
		}
		r.reap()
	}
}

func (r *subreaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			delete(r.waiting, pid)
			ch <- exitStatus{ws: ws, at: time.Now()}
			continue
		}
		r.log.Debug("reaped an orphaned process", "pid", pid)
	}
}

func (r *subreaper) stop() {
	r.once.Do(func() {
		signal.Stop(r.sigs)
		close(r.done)
		r.wg.Wait()
	})
}

// killGroup sends SIGKILL to a whole process group.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
