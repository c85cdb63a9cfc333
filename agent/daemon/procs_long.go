package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	// longIDFile keeps the next process id in the state dir.
	longIDFile = "procs.json"
	// longRetainCount bounds the ended processes kept listed (their rings
	// with them); the oldest go first.
	longRetainCount = 64
	// inputWait bounds one input write to a process that does not read.
	inputWait = 10 * time.Second
	// killWait is how long proc_kill waits for the process to end.
	killWait    = 5 * time.Second
	defaultTerm = "xterm-256color"
)

// longProc is one long-lived process (proto.OpProcStart). info's fields
// but the status ones are fixed at start.
type longProc struct {
	info   proto.ProcInfo // ID, PID, Argv, Dir, Labels, StartedAt, RingBytes
	ring   *outRing
	master *os.File // the terminal's master; nil without a pty
	oomAt  int64    // the sandbox's OOM kill count at start
	oomOK  bool     // oomAt could be read
	done   chan struct{}
	// hibernated: restored from a hibernation's record (hibernate.go);
	// nothing of it runs, and its pid may be another process's now.
	hibernated bool
	// keptSince is when a restored process was restored: its retention
	// counts from then, not from the hibernation, however long the sleep.
	keptSince time.Time

	// inMu serializes input and guards stdin and inClosed: a write holds
	// it, so the end of the process closes the input after the write.
	inMu     sync.Mutex
	stdin    *os.File // the stdin pipe's write end; nil with a pty or after EOF
	inClosed bool     // the process ended: no more input

	// mu guards status and size.
	mu     sync.Mutex
	status proto.ProcInfo // State, ExitedAt, ExitCode, Signal, OOMKilled
	size   proto.PtySize
}

func (p *longProc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// snapshot is the process as it is now; the ring is read before the
// status, so a process that is not running has its final output counted.
func (p *longProc) snapshot() proto.ProcInfo {
	start, end, _ := p.ring.bounds()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.info
	out.Argv = slices.Clone(p.info.Argv)
	out.Labels = maps.Clone(p.info.Labels)
	out.State, out.ExitedAt, out.Signal, out.OOMKilled = p.status.State, p.status.ExitedAt, p.status.Signal, p.status.OOMKilled
	out.Hibernated = p.status.Hibernated
	if p.status.ExitCode != nil {
		code := *p.status.ExitCode
		out.ExitCode = &code
	}
	if p.master != nil || (p.hibernated && p.size != (proto.PtySize{})) {
		size := p.size
		out.Pty = &size
	}
	out.Output, out.RingStart = end, start
	return out
}

// longTable holds the long-lived processes, running and recently ended, in
// start order.
//
// Goroutines: per process one pump per output (two pipes, or the
// terminal's master) and one waiter that takes its exit status, closes its
// output (at the pumps' end or outputGrace after the exit) and then marks
// it ended. killAll kills every running process tree and waits (bounded)
// for the waiters.
type longTable struct {
	log       *slog.Logger
	reaper    reaper
	oom       *oomCounter
	clock     outputClock // the last output of any of them (op activity)
	idPath    string      // the next id's record in the state dir; "" keeps it in memory
	retainFor time.Duration

	// mu guards next, order, byID and closed; a start holds it from the
	// limit's check to the process's record, so the limit is never passed.
	mu     sync.Mutex
	next   int // the number of the next id
	order  []*longProc
	byID   map[string]*longProc
	closed bool
}

// newLongTable makes the table; oomPath names the OOM kill count's file
// ("": the cgroup the agent runs in).
func newLongTable(log *slog.Logger, r reaper, stateDir string, retainFor time.Duration, oomPath string) *longTable {
	t := &longTable{log: log, reaper: r, retainFor: retainFor, next: 1, byID: map[string]*longProc{}}
	if oomPath != "" {
		t.oom = &oomCounter{path: oomPath}
	} else {
		t.oom = findOOMCounter()
	}
	if stateDir != "" {
		t.idPath = filepath.Join(stateDir, longIDFile)
		var rec struct {
			Next int `json:"next"`
		}
		b, err := os.ReadFile(t.idPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			log.Error("the agent cannot read its process id record; ids start again at p1", "err", err)
		case json.Unmarshal(b, &rec) != nil || rec.Next < 1:
			log.Error("the agent's process id record is damaged; ids start again at p1", "path", t.idPath)
		default:
			t.next = rec.Next
		}
	}
	return t
}

// start starts r's process with sandboxEnv under r's own Env.
func (t *longTable) start(r *proto.ProcStartRequest, sandboxEnv map[string]string) (proto.ProcInfo, error) {
	ring, err := ringSize(r.RingBytes)
	if err != nil {
		return proto.ProcInfo{}, err
	}
	limit := r.MaxLive
	if limit < 0 {
		return proto.ProcInfo{}, errdefs.InvalidArgument("max_live is %d; give a positive limit, or 0 for the default of %d", limit, proto.DefaultProcLive)
	}
	if limit == 0 {
		limit = proto.DefaultProcLive
	}
	if r.Pty != nil {
		if err := checkPtySize(r.Pty.Rows, r.Pty.Cols); err != nil {
			return proto.ProcInfo{}, err
		}
		if _, set := r.Env["TERM"]; !set {
			if _, set := sandboxEnv["TERM"]; !set {
				sandboxEnv = maps.Clone(sandboxEnv)
				if sandboxEnv == nil {
					sandboxEnv = map[string]string{}
				}
				sandboxEnv["TERM"] = defaultTerm
			}
		}
	}
	as, err := lookupAccount(r.User)
	if err != nil {
		return proto.ProcInfo{}, err
	}
	cmd, err := buildCmdAs(r.Argv, r.Dir, sandboxEnv, r.Env, as)
	if err != nil {
		return proto.ProcInfo{}, err
	}
	// The credential outlives the SysProcAttr each kind of process gets below.
	cred := cmd.SysProcAttr.Credential
	p := &longProc{
		info: proto.ProcInfo{Argv: slices.Clone(r.Argv), Dir: cmd.Dir, User: as.username(), Labels: maps.Clone(r.Labels), RingBytes: ring},
		ring: newOutRing(ring),
		done: make(chan struct{}),
	}
	var parentEnds, childEnds []*os.File
	fail := func(err error) (proto.ProcInfo, error) {
		closeAll(parentEnds...)
		closeAll(childEnds...)
		return proto.ProcInfo{}, err
	}
	var outs map[string]*os.File // what the pumps read, by stream
	if r.Pty != nil {
		master, slave, err := openPty(*r.Pty)
		if err != nil {
			return fail(err)
		}
		parentEnds, childEnds = append(parentEnds, master), append(childEnds, slave)
		if cred != nil {
			// The account's own terminal, as a login makes it: a program
			// that opens it by name (ttyname) can.
			if err := slave.Chown(int(cred.Uid), -1); err != nil {
				t.log.Warn("cannot give a process's terminal to its user; it still has it as its stdio", "user", as.name, "err", err)
			}
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		// Ctty is the child's descriptor: its stdin, the terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
		p.master, p.size = master, *r.Pty
		outs = map[string]*os.File{proto.StreamPty: master}
	} else {
		outs = map[string]*os.File{}
		for _, s := range []string{proto.StreamStdout, proto.StreamStderr} {
			pr, pw, err := os.Pipe()
			if err != nil {
				return fail(errdefs.Internal("cannot make a pipe: %v", err))
			}
			parentEnds, childEnds = append(parentEnds, pr), append(childEnds, pw)
			outs[s] = pr
		}
		cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
		pr, pw, err := os.Pipe()
		if err != nil {
			return fail(errdefs.Internal("cannot make a pipe: %v", err))
		}
		parentEnds, childEnds = append(parentEnds, pw), append(childEnds, pr)
		cmd.Stdin, p.stdin = pr, pw
		// A session of its own: its group and session ids name what it
		// starts, for proc_kill, and it has no controlling terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fail(errShuttingDown)
	}
	t.pruneLocked(time.Now())
	var live []string
	for _, q := range t.order {
		if !q.ended() {
			live = append(live, q.info.ID)
		}
	}
	if len(live) >= limit {
		return fail(errdefs.ResourceExhausted("the sandbox already runs %d processes (%s), its limit of %d; stop one (signal or kill) before starting another",
			len(live), strings.Join(live, ", "), limit))
	}
	p.ring.clock = &t.clock
	p.info.ID = "p" + strconv.Itoa(t.next)
	t.next++
	if t.idPath != "" {
		// Recorded before the process starts, so no restart gives its id out again.
		b, _ := json.Marshal(map[string]int{"next": t.next})
		if err := writeDurable(t.idPath, b); err != nil {
			t.log.Error("the agent cannot record its next process id; a restarted agent may give ids out again", "err", err)
		}
	}
	p.oomAt, p.oomOK = t.oom.read()
	p.info.StartedAt = time.Now()
	exited, err := t.reaper.start(cmd)
	if err != nil {
		return fail(startErrorAs(r.Argv[0], as, err))
	}
	closeAll(childEnds...)
	p.info.PID = cmd.Process.Pid
	p.status.State = proto.ProcRunning
	t.order = append(t.order, p)
	t.byID[p.info.ID] = p

	var pumps sync.WaitGroup
	for stream, f := range outs {
		pumps.Go(func() { p.pump(stream, f) })
	}
	go p.wait(cmd, exited, &pumps, outs, t.oom)
	return p.snapshot(), nil
}

// ringSize checks a requested ring size.
func ringSize(n int64) (int64, error) {
	switch {
	case n == 0:
		return proto.DefaultProcRing, nil
	case n < 0 || n > proto.MaxProcRing:
		return 0, errdefs.InvalidArgument("ring_bytes is %d; give 0 for the default of %d, or up to %d", n, proto.DefaultProcRing, proto.MaxProcRing)
	}
	return max(n, proto.MinProcRing), nil
}

// pump copies one output into the ring until it ends (EOF, a terminal's
// EIO, or the waiter closing it).
func (p *longProc) pump(stream string, f *os.File) {
	buf := make([]byte, copyChunk)
	for {
		n, err := f.Read(buf)
		p.ring.write(stream, buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) && !isPtyEnd(err) && !errors.Is(err, os.ErrClosed) {
				p.ring.write(stream, []byte("\n[sandbox-agent: reading this output failed: "+err.Error()+"]\n"))
			}
			return
		}
	}
}

// wait takes the exit status, lets the output end (at most outputGrace
// after the exit while processes the leader left hold it), and marks the
// process ended.
func (p *longProc) wait(cmd *exec.Cmd, exited <-chan exitStatus, pumps *sync.WaitGroup, outs map[string]*os.File, oom *oomCounter) {
	es := <-exited
	pumped := make(chan struct{})
	go func() { pumps.Wait(); close(pumped) }()
	select {
	case <-pumped:
	case <-time.After(outputGrace):
		for _, f := range outs {
			f.Close() // ends the pumps' reads
		}
		<-pumped
	}
	p.ring.close()
	st := proto.ProcInfo{ExitedAt: es.at}
	switch {
	case es.ws.Signaled():
		st.State, st.Signal = proto.ProcKilled, signalName(es.ws.Signal())
		if es.ws.Signal() == syscall.SIGKILL && p.oomOK {
			if now, ok := oom.read(); ok && now > p.oomAt {
				st.OOMKilled = true
			}
		}
	case es.ws.Exited():
		code := es.ws.ExitStatus()
		st.State, st.ExitCode = proto.ProcExited, &code
	default:
		st.State = proto.ProcExited // a status that is neither: no code to tell
	}
	p.mu.Lock()
	p.status = st
	p.mu.Unlock()
	p.inMu.Lock()
	p.inClosed = true
	closeAll(p.stdin, p.master)
	for _, f := range outs {
		f.Close()
	}
	p.inMu.Unlock()
	close(p.done)
	cmd.Process.Release()
}

// pruneLocked forgets ended processes past the retention age or count.
func (t *longTable) pruneLocked(now time.Time) {
	ended := 0
	for _, p := range t.order {
		if p.ended() {
			ended++
		}
	}
	kept := t.order[:0]
	for _, p := range t.order {
		if p.ended() {
			p.mu.Lock()
			at := p.status.ExitedAt
			p.mu.Unlock()
			if p.keptSince.After(at) {
				at = p.keptSince
			}
			if ended > longRetainCount || now.Sub(at) > t.retainFor {
				ended--
				delete(t.byID, p.info.ID)
				continue
			}
		}
		kept = append(kept, p)
	}
	clear(t.order[len(kept):])
	t.order = kept
}

func (t *longTable) get(id string) (*longProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.byID[id]; ok {
		return p, nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(id, "p")); err == nil && strings.HasPrefix(id, "p") && n > 0 && n < t.next {
		return nil, errdefs.NotFound("process %s ended and was forgotten (ended processes are kept for %s, the %d newest); list the processes to see those kept", id, t.retainFor, longRetainCount)
	}
	return nil, errdefs.NotFound("no process with id %q; list the processes to find it", id)
}

func (t *longTable) list(labels map[string]string) []proto.ProcInfo {
	t.mu.Lock()
	t.pruneLocked(time.Now())
	procs := slices.Clone(t.order)
	t.mu.Unlock()
	out := []proto.ProcInfo{}
	for _, p := range procs {
		if matchLabels(p.info.Labels, labels) {
			out = append(out, p.snapshot())
		}
	}
	return out
}

// kill kills p's tree and waits up to d for p to end. Once p has ended
// its pid may have been given to another process; then nothing of p's is
// left (the kernel keeps a pid while a group or session of that number
// has members), and nothing is killed.
func (p *longProc) kill(d time.Duration) error {
	if p.hibernated || (p.ended() && pidExists(p.info.PID)) {
		return nil
	}
	killLongTree(p.info.PID)
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return errdefs.DeadlineExceeded("process %s (pid %d) was killed but has not ended within %s; something holds it in the kernel", p.info.ID, p.info.PID, d)
	}
}

func pidExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// killAll refuses new starts, kills every running process tree and waits
// up to d for them to end.
func (t *longTable) killAll(d time.Duration) error {
	t.mu.Lock()
	t.closed = true
	procs := slices.Clone(t.order)
	t.mu.Unlock()
	deadline := time.Now().Add(d)
	var errs []error
	for _, p := range procs {
		if !p.ended() {
			errs = append(errs, p.kill(max(time.Until(deadline), time.Millisecond)))
		}
	}
	return errors.Join(errs...)
}
