package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	maxExtraPipes = 8
	maxWait       = 24 * time.Hour
)

// process is one spawned process. Its fields but the status are fixed at spawn.
type process struct {
	info proto.ProcessInfo // ID, Name, PID, Argv, Labels, StartedAt
	cmd  *exec.Cmd
	outs map[string]*outPort
	ins  map[string]*inPort
	done chan struct{} // closed once the status is set
	// hibernated: restored from a hibernation's record (hibernate.go);
	// nothing of it runs, and its pid may be another process's now.
	hibernated bool
	// keptSince is when a restored process was restored: its retention
	// counts from then, not from the hibernation.
	keptSince time.Time

	// mu guards status.
	mu     sync.Mutex
	status proto.ProcessInfo // Running, ExitCode, Signal, ExitedAt, Hibernated
}

func (p *process) snapshot() proto.ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.info
	out.Argv = slices.Clone(p.info.Argv)
	out.Labels = maps.Clone(p.info.Labels)
	out.Running = p.status.Running
	out.ExitCode, out.Signal, out.ExitedAt = p.status.ExitCode, p.status.Signal, p.status.ExitedAt
	out.Hibernated = p.status.Hibernated
	return out
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// procTable holds the daemon's spawned processes, running and recently
// exited, in spawn order.
type procTable struct {
	reaper      reaper
	bufSize     int
	retainCount int
	retainFor   time.Duration
	self        string // the executable proto.AgentSelf names

	// mu guards order and byID.
	mu    sync.Mutex
	order []*process
	byID  map[string]*process
}

func newProcTable(r reaper, bufSize, retainCount int, retainFor time.Duration) *procTable {
	return &procTable{reaper: r, bufSize: bufSize, retainCount: retainCount, retainFor: retainFor, byID: map[string]*process{}}
}

// spawn starts r's process with sandboxEnv under r's own Env.
func (t *procTable) spawn(r *proto.SpawnRequest, sandboxEnv map[string]string) (proto.ProcessInfo, error) {
	if r.ExtraPipes < 0 || r.ExtraPipes > maxExtraPipes {
		return proto.ProcessInfo{}, errdefs.InvalidArgument("extra_pipes is %d; ask for 0 to %d", r.ExtraPipes, maxExtraPipes)
	}
	argv := r.Argv
	if len(argv) > 0 && argv[0] == proto.AgentSelf {
		if t.self == "" {
			return proto.ProcessInfo{}, errdefs.FailedPrecondition("the agent cannot tell its own executable, so %s cannot be run here", proto.AgentSelf)
		}
		argv = append([]string{t.self}, argv[1:]...)
	}
	cmd, err := buildCmd(argv, r.Dir, sandboxEnv, r.Env)
	if err != nil {
		return proto.ProcessInfo{}, err
	}
	p := &process{
		info: proto.ProcessInfo{ID: randomID(), Name: r.Name, Argv: slices.Clone(r.Argv), Labels: maps.Clone(r.Labels)},
		cmd:  cmd,
		outs: map[string]*outPort{},
		ins:  map[string]*inPort{},
		done: make(chan struct{}),
	}
	// parentEnds are kept by the daemon; childEnds are closed after start.
	var parentEnds, childEnds []*os.File
	fail := func(err error) (proto.ProcessInfo, error) {
		closeAll(parentEnds...)
		closeAll(childEnds...)
		return proto.ProcessInfo{}, err
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, errdefs.Internal("cannot make a pipe: %v", err)
		}
		return r, w, nil
	}
	var stdoutR, stderrR *os.File
	var stdinW *os.File
	extraR := map[string]*os.File{}
	extraW := map[string]*os.File{}
	{
		r, w, err := pipe()
		if err != nil {
			return fail(err)
		}
		stdoutR, cmd.Stdout = r, w
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
		r, w, err = pipe()
		if err != nil {
			return fail(err)
		}
		stderrR, cmd.Stderr = r, w
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
	}
	if r.Stdin {
		pr, pw, err := pipe()
		if err != nil {
			return fail(err)
		}
		cmd.Stdin, stdinW = pr, pw
		parentEnds, childEnds = append(parentEnds, pw), append(childEnds, pr)
	}
	for i := range r.ExtraPipes {
		// The child reads fd 3+2i and writes fd 4+2i.
		cr, pw, err := pipe()
		if err != nil {
			return fail(err)
		}
		parentEnds, childEnds = append(parentEnds, pw), append(childEnds, cr)
		pr, cw, err := pipe()
		if err != nil {
			return fail(err)
		}
		parentEnds, childEnds = append(parentEnds, pr), append(childEnds, cw)
		cmd.ExtraFiles = append(cmd.ExtraFiles, cr, cw)
		extraW[fmt.Sprintf("fd%d", 3+2*i)] = pw
		extraR[fmt.Sprintf("fd%d", 4+2*i)] = pr
	}

	t.mu.Lock()
	t.pruneLocked(time.Now())
	if r.Name != "" {
		for _, q := range t.order {
			if q.info.Name == r.Name && q.running() {
				t.mu.Unlock()
				return fail(errdefs.Conflict("a process named %q is already running (id %s); attach to it or stop it first", r.Name, q.info.ID))
			}
		}
	}
	exited, err := t.reaper.start(cmd)
	if err != nil {
		t.mu.Unlock()
		return fail(startError(r.Argv[0], err))
	}
	closeAll(childEnds...)
	p.info.PID = cmd.Process.Pid
	p.info.StartedAt = time.Now()
	p.status.Running = true
	p.outs["stdout"] = newOutPort(stdoutR, t.bufSize)
	p.outs["stderr"] = newOutPort(stderrR, t.bufSize)
	for name, f := range extraR {
		p.outs[name] = newOutPort(f, t.bufSize)
	}
	if stdinW != nil {
		p.ins["stdin"] = &inPort{w: stdinW}
	}
	for name, f := range extraW {
		p.ins[name] = &inPort{w: f}
	}
	t.order = append(t.order, p)
	t.byID[p.info.ID] = p
	t.mu.Unlock()

	go func() {
		es := <-exited
		code, sig := exitFields(es.ws)
		p.mu.Lock()
		p.status = proto.ProcessInfo{Running: false, ExitCode: code, Signal: sig, ExitedAt: es.at}
		p.mu.Unlock()
		close(p.done)
		cmd.Process.Release()
		for _, in := range p.ins {
			in.close()
		}
	}()
	return p.snapshot(), nil
}

// pruneLocked drops exited processes past the retention age or count.
func (t *procTable) pruneLocked(now time.Time) {
	exited := 0
	for _, p := range t.order {
		if !p.running() {
			exited++
		}
	}
	kept := t.order[:0]
	for _, p := range t.order {
		if !p.running() {
			at := p.snapshot().ExitedAt
			if p.keptSince.After(at) {
				at = p.keptSince
			}
			if exited > t.retainCount || now.Sub(at) > t.retainFor {
				exited--
				delete(t.byID, p.info.ID)
				for _, o := range p.outs {
					o.detach()
				}
				continue
			}
		}
		kept = append(kept, p)
	}
	clear(t.order[len(kept):])
	t.order = kept
}

func (t *procTable) get(id string) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.byID[id]; ok {
		return p, nil
	}
	return nil, errdefs.NotFound("no process with id %q; list the processes to find it", id)
}

// attach connects st to one stream of a process; the returned func runs the
// copy after the response was sent.
func (t *procTable) attach(r *proto.AttachRequest, st *yamux.Stream) (func(), error) {
	p, err := t.get(r.ID)
	if err != nil {
		return nil, err
	}
	if p.hibernated {
		return nil, errStoppedByHibernation(p.info.ID)
	}
	if o, ok := p.outs[r.Stream]; ok {
		return o.attach(st), nil
	}
	if in, ok := p.ins[r.Stream]; ok {
		return in.attach(st, st.Session().IsClosed), nil
	}
	names := slices.Sorted(maps.Keys(p.outs))
	names = append(names, slices.Sorted(maps.Keys(p.ins))...)
	if r.Stream == "stdin" {
		return nil, errdefs.FailedPrecondition("process %s was spawned without a stdin pipe; spawn it with stdin set", r.ID)
	}
	return nil, errdefs.InvalidArgument("process %s has no stream %q; use one of %s", r.ID, r.Stream, strings.Join(names, ", "))
}

func (t *procTable) signal(r *proto.SignalRequest) error {
	p, err := t.get(r.ID)
	if err != nil {
		return err
	}
	sig, err := parseSignal(r.Signal)
	if err != nil {
		return err
	}
	if p.hibernated {
		return errStoppedByHibernation(p.info.ID)
	}
	if r.Group {
		if err := syscall.Kill(-p.info.PID, sig); err != nil {
			if err == syscall.ESRCH {
				return errdefs.FailedPrecondition("process %s and its group have already exited", r.ID)
			}
			return errdefs.Internal("signal %s to group %d: %v", r.Signal, p.info.PID, err)
		}
		return nil
	}
	if !p.running() {
		return errdefs.FailedPrecondition("process %s has already exited; signal its group (group: true) to reach children it left", r.ID)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return errdefs.FailedPrecondition("process %s cannot be signalled: %v", r.ID, err)
	}
	return nil
}

func (t *procTable) wait(ctx context.Context, r *proto.WaitRequest) (*proto.ProcessInfo, error) {
	p, err := t.get(r.ID)
	if err != nil {
		return nil, err
	}
	if r.Timeout > 0 {
		timer := time.NewTimer(min(r.Timeout, maxWait))
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	info := p.snapshot()
	return &info, nil
}

func (t *procTable) list(labels map[string]string) []proto.ProcessInfo {
	t.mu.Lock()
	t.pruneLocked(time.Now())
	procs := slices.Clone(t.order)
	t.mu.Unlock()
	out := []proto.ProcessInfo{}
	for _, p := range procs {
		if matchLabels(p.info.Labels, labels) {
			out = append(out, p.snapshot())
		}
	}
	return out
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// killAll kills every process group and waits up to d for the leaders.
func (t *procTable) killAll(d time.Duration) error {
	t.mu.Lock()
	procs := slices.Clone(t.order)
	t.mu.Unlock()
	for _, p := range procs {
		// Exited leaders may have left children in their group; a
		// restored process's pid is not its own any more.
		if !p.hibernated {
			killGroup(p.info.PID)
		}
	}
	deadline := time.After(d)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			return errdefs.DeadlineExceeded("process %s (pid %d) was not reaped within %s of being killed", p.info.ID, p.info.PID, d)
		}
	}
	for _, p := range procs {
		for _, o := range p.outs {
			o.detach()
		}
	}
	return nil
}
