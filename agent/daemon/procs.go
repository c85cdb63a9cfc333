package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// processService runs the sandbox's commands: exec (a command to completion,
// procs_exec.go, below a supervisor when supervised, procs_supervised.go),
// the long-lived processes the daemon owns: spawned ones (spawn, attach,
// signal, wait, list; procs_table.go) and started ones with an output ring
// (the proc_ ops; procs_long*.go), and the sandbox's environment every command starts
// with (set_env; procs_env.go). It owns every process it starts, each in a
// process group of its own, and reaps them (procs_reaper.go).
//
// Goroutines: the reaper (one goroutine in subreaper mode, one per child
// otherwise); the pid guard's watch while supervised; per exec a copier
// per output pipe, one writing stdin, one sending streamed output
// (procs_liveexec.go) and, supervised, the status reader and a follower
// that outlives the response until the supervisor exits; per spawned process one pump per output pipe plus one copier per attachment;
// per wait and exec one reader watching the stream for the client leaving.
// Shutdown: stop refuses new commands, kills every running exec and stops
// the guard; close then kills every spawned process group, waits (bounded)
// for every exit status and stops the reaper.
type processService struct {
	log       *slog.Logger
	self      string // the agent's executable, which supervises exec and runs proto.AgentSelf
	supervise bool   // exec runs every command under `self contain`
	reaper    reaper
	table     *procTable
	long      *longTable    // the proc_start processes
	env       *sandboxEnv   // what every command gets under its own env
	guard     *pidGuard     // nil: no pids limit to keep a reserve of, or exec is not supervised
	guardDone chan struct{} // closed by stop, ends the guard's watch

	// mu guards execs and closed: an exec's process is started and
	// recorded under it, so stop kills every command that started.
	mu     sync.Mutex
	execs  map[int]runningExec // exec requests whose processes may run, by pid
	closed bool

	// hibMu guards hibRestored: a hibernation's record was loaded (or
	// there was none), so a new one may be written over it (hibernate.go).
	hibMu       sync.Mutex
	hibRestored bool
}

var _ service = (*processService)(nil)

// newProcessService makes the service; with o.subreaper it makes this
// process a child subreaper and keeps the agent's thread reserve.
func newProcessService(o options) *processService {
	ps := &processService{
		log:       o.log,
		self:      o.self,
		execs:     map[int]runningExec{},
		guardDone: make(chan struct{}),
	}
	ps.env = openSandboxEnv(o.stateDir)
	if ps.env.broken != nil {
		o.log.Error("the agent cannot read the sandbox's environment; every command fails", "err", ps.env.broken)
	}
	supervise := o.supervise
	if o.subreaper {
		ps.reaper = newSubreaper(o.log)
		reserveThreads(agentThreads)
		supervise = true
	} else {
		ps.reaper = childReaper{}
	}
	ps.table = newProcTable(ps.reaper, o.bufferSize, o.retainCount, o.retainFor)
	ps.table.self = o.self
	ps.long = newLongTable(o.log, ps.reaper, o.stateDir, o.retainFor, o.oomCounter)
	ps.supervise = supervise && o.self != ""
	if ps.supervise {
		if ps.guard = newPidGuard(); ps.guard != nil {
			go ps.guard.watch(ps.guardDone, ps.supervisors)
		}
	}
	return ps
}

func (ps *processService) register(t opTable) {
	addBody(t, proto.OpExec, func(r *proto.Request) *proto.ExecRequest { return r.Exec }, ps.serveExec)
	addBody(t, proto.OpSpawn, func(r *proto.Request) *proto.SpawnRequest { return r.Spawn }, ps.spawn)
	addBody(t, proto.OpAttach, func(r *proto.Request) *proto.AttachRequest { return r.Attach }, ps.attach)
	addBody(t, proto.OpSignal, func(r *proto.Request) *proto.SignalRequest { return r.Signal }, ps.signal)
	addBody(t, proto.OpWait, func(r *proto.Request) *proto.WaitRequest { return r.Wait }, ps.wait)
	// A list without a body lists every process.
	t.add(proto.OpList, ps.list)
	// Nor an activity (procs_activity.go).
	t.add(proto.OpActivity, ps.activity)
	addBody(t, proto.OpSetEnv, func(r *proto.Request) *proto.SetEnvRequest { return r.SetEnv }, ps.setEnv)
	ps.registerLong(t)
}

func (ps *processService) serveExec(ctx context.Context, rq *request, r *proto.ExecRequest) (*proto.Response, func(), error) {
	resp, err := ps.exec(ctx, rq.st, r)
	return &proto.Response{Exec: resp}, nil, err
}

func (ps *processService) spawn(_ context.Context, _ *request, r *proto.SpawnRequest) (*proto.Response, func(), error) {
	if ps.isClosed() {
		return nil, nil, errShuttingDown
	}
	base, err := ps.env.forCommand()
	if err != nil {
		return nil, nil, err
	}
	p, err := ps.table.spawn(r, base)
	if err != nil {
		return nil, nil, err
	}
	return &proto.Response{Spawn: &proto.SpawnResponse{Process: p}}, nil, nil
}

func (ps *processService) attach(_ context.Context, rq *request, r *proto.AttachRequest) (*proto.Response, func(), error) {
	run, err := ps.table.attach(r, rq.st)
	return &proto.Response{}, run, err
}

func (ps *processService) signal(_ context.Context, _ *request, r *proto.SignalRequest) (*proto.Response, func(), error) {
	return &proto.Response{}, nil, ps.table.signal(r)
}

func (ps *processService) wait(ctx context.Context, rq *request, r *proto.WaitRequest) (*proto.Response, func(), error) {
	p, err := ps.table.wait(watchClosed(ctx, rq.st), r)
	return &proto.Response{Process: p}, nil, err
}

func (ps *processService) list(_ context.Context, rq *request) (*proto.Response, func(), error) {
	var labels map[string]string
	if rq.List != nil {
		labels = rq.List.Labels
	}
	return &proto.Response{List: &proto.ListResponse{Processes: ps.table.list(labels)}}, nil, nil
}

func (ps *processService) setEnv(_ context.Context, _ *request, r *proto.SetEnvRequest) (*proto.Response, func(), error) {
	return &proto.Response{}, nil, ps.env.apply(r)
}

func (ps *processService) isClosed() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.closed
}

// stop refuses every command from now on, kills the running execs (their
// handlers then respond) and stops the pid guard.
func (ps *processService) stop() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return
	}
	ps.closed = true
	for pid, e := range ps.execs {
		e.kill(pid)
	}
	close(ps.guardDone)
}

// close kills every started process tree and spawned process group and
// waits (bounded) until they and the killed execs are reaped, then stops
// the reaper; after stop.
func (ps *processService) close() error {
	err := errors.Join(ps.long.killAll(5*time.Second), ps.table.killAll(5*time.Second), ps.waitExecs(5*time.Second))
	ps.reaper.stop()
	return err
}

// waitExecs waits until every killed exec has been reaped, so that the
// reaper stops only after delivering their statuses.
func (ps *processService) waitExecs(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ps.mu.Lock()
		n := len(ps.execs)
		ps.mu.Unlock()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.DeadlineExceeded("%d commands were not reaped within %s of being killed", n, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watchClosed returns a context that ends when the client closes the stream
// (it sends nothing after its request, so any read return means it left).
func watchClosed(parent context.Context, st *yamux.Stream) context.Context {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		defer cancel()
		var b [1]byte
		for {
			if _, err := st.Read(b[:]); err != nil {
				return
			}
		}
	}()
	return ctx
}
