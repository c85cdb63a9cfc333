// Package daemon is the sandbox-agent's side of the agent protocol (see
// agent/proto): it serves file operations, commands, long-lived processes and
// socket dialing to sandboxd over yamux sessions, one per connection.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Server is the agent daemon. It owns every process it starts, in its own
// process group, and kills those groups on Close.
//
// Goroutines: one accept loop per Serve listener, one per ServeConn session
// (accepting streams), one per open stream (its handler), per spawned process
// one pump per output pipe plus one copier per attachment, and the reaper
// (one goroutine in subreaper mode, one per child otherwise). A claim
// (fence.go) closes the sessions it supersedes and waits, bounded, on its
// handler's goroutine until their handlers have returned. Each workspace
// watch has its event loop and flush timer, and each watch stream a
// control reader beside its handler (watch.go, watchstream.go).
// Shutdown order (Close): stop listeners, close sessions (which ends their
// streams and handlers), end the workspace watches, kill every owned process group, wait for their exit
// statuses, stop the reaper.
type Server struct {
	log       *slog.Logger
	opts      options
	reaper    reaper
	procs     *procTable
	startedAt time.Time
	hostname  string
	// journal keeps write_files batches crash-atomic; nil without a state dir.
	journal   *journal
	guard     *pidGuard     // nil: no pids limit to keep a reserve of, or exec is not supervised
	guardDone chan struct{} // closed by Close, stops the guard
	fence     *fence        // the highest claim (fence.go)
	env       *sandboxEnv   // what every command gets under its own env (sandboxenv.go)
	watches   *watchHub     // workspace watches, one per root (watch.go)

	// mu guards listeners, sessions, execs and closed.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	execs     map[int]runningExec // exec requests whose processes may run, by pid
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

type options struct {
	log            *slog.Logger
	subreaper      bool
	supervise      bool // exec runs every command under `self contain`
	bufferSize     int
	retainCount    int
	retainFor      time.Duration
	requestTimeout time.Duration
	commitHook     func(i int) error // test-only fault injection in write_files
	opHook         func(proto.Op)    // test-only, runs before each op
	self           string            // what proto.AgentSelf runs
	stateDir       string            // where commit journals live (outside every workspace)
	limits         readLimits
}

// Option configures a Server.
type Option func(*options)

// WithSelf is the executable a spawn of proto.AgentSelf runs (default: this
// process's own executable, which is the agent's in the sandbox-agent
// binary; an in-process daemon in tests names a built agent instead).
func WithSelf(path string) Option { return func(o *options) { o.self = path } }

// WithStateDir keeps the agent's commit journals in dir, which must lie
// outside every workspace and survive the agent (and, in a container, a
// restart): with it, a write_files batch interrupted by a kill is settled
// to the old tree or the new one when the agent starts again
// (RecoverCommits) or before the next file operation on that workspace.
// Without it batches are all or nothing only while the agent lives.
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// WithSingleLinkFiles refuses to read regular files with more than one hard
// link: for an agent whose workspace shares its file system with files it
// must not reveal (the host backend), where a link made through a command
// would read back a file outside the workspace.
func WithSingleLinkFiles() Option { return func(o *options) { o.limits.singleLink = true } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithSubreaper makes the calling process a child subreaper and reaps every
// child with one wait4(-1) loop: orphans re-parented to the daemon are reaped
// too. Only for a process that runs nothing but this Server (the
// sandbox-agent binary): the loop would steal exit statuses from any other
// child the process starts. Being the sandbox-agent binary, it also
// supervises exec (WithSupervisedExec) and keeps a thread reserve.
func WithSubreaper() Option { return func(o *options) { o.subreaper = true } }

// WithOutputBuffer sets the per-stream buffer for spawned processes' output
// (default 1 MiB); a full buffer stops reading from the process.
func WithOutputBuffer(n int) Option { return func(o *options) { o.bufferSize = n } }

// WithRetention bounds how many exited processes stay listed and for how
// long (default 256 and 1 hour).
func WithRetention(count int, d time.Duration) Option {
	return func(o *options) { o.retainCount, o.retainFor = count, d }
}

// WithRequestTimeout bounds reading a request frame and writing a response
// frame (default 2 minutes).
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// New returns a Server; it starts serving with Serve or ServeConn.
func New(opts ...Option) *Server {
	o := options{
		bufferSize:     1 << 20,
		retainCount:    256,
		retainFor:      time.Hour,
		requestTimeout: 2 * time.Minute,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.self == "" {
		o.self, _ = os.Executable()
	}
	host, _ := os.Hostname()
	s := &Server{
		log:       o.log,
		opts:      o,
		startedAt: time.Now(),
		hostname:  host,
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*session]struct{}{},
		execs:     map[int]runningExec{},
		guardDone: make(chan struct{}),
	}
	if o.stateDir != "" {
		j, err := openJournal(o.stateDir, o.log)
		if err != nil {
			// Every write_files then fails with this sentence rather than
			// commit without the journal it was configured with.
			o.log.Error("the agent cannot keep commit journals", "err", err)
			j = &journal{dir: o.stateDir, log: o.log, broken: err}
		}
		s.journal = j
	}
	s.watches = newWatchHub(o.log)
	s.fence = openFence(o.stateDir)
	s.env = openSandboxEnv(o.stateDir)
	if s.env.broken != nil {
		o.log.Error("the agent cannot read the sandbox's environment; every command fails", "err", s.env.broken)
	}
	if s.fence.broken != nil {
		o.log.Error("the agent cannot fence its sandbox; every claim fails", "err", s.fence.broken)
	}
	if o.subreaper {
		s.reaper = newSubreaper(o.log)
		reserveThreads(agentThreads)
		o.supervise = true
	} else {
		s.reaper = childReaper{}
	}
	s.procs = newProcTable(s.reaper, o.bufferSize, o.retainCount, o.retainFor)
	s.procs.self = o.self
	s.opts.supervise = o.supervise && o.self != ""
	if s.opts.supervise {
		if s.guard = newPidGuard(); s.guard != nil {
			go s.guard.watch(s.guardDone, s.supervisors)
		}
	}
	return s
}

var errServerClosed = errors.New("agent daemon is shutting down")

// RecoverCommits settles every commit an earlier agent left unfinished in
// the state dir (WithStateDir): call it at start, before serving.
func (s *Server) RecoverCommits() error {
	if s.journal == nil || s.journal.broken != nil {
		return nil
	}
	return s.journal.recover("")
}

// settle settles the unfinished commits on root before a file operation
// on it; a workspace whose commit cannot be settled is not served, so no
// one reads or writes a tree that is neither the old nor the new.
func (s *Server) settle(root string) error {
	if s.journal == nil || s.journal.broken != nil {
		return nil
	}
	real, err := resolveRoot(root)
	if err != nil {
		return nil // the operation itself says what is wrong with root
	}
	if err := s.journal.recover(real); err != nil {
		return errdefs.Unavailable("an interrupted write in %s could not be settled (%v); check the workspace's file system and retry", root, err)
	}
	return nil
}

func (s *Server) commitEnv() commitEnv {
	return commitEnv{journal: s.journal, hook: s.opts.commitHook, limits: s.opts.limits}
}

// Serve accepts connections on l and serves each with ServeConn until ctx
// ends, l fails, or the Server is closed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || s.isClosed() {
				return nil
			}
			return err
		}
		go func() {
			if err := s.serveAccepted(ctx, c); err != nil {
				s.log.Warn("agent session ended with an error", "err", err)
			}
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// yamuxConfig is the session configuration; agent.Client uses the same.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.MaxStreamWindowSize = 1 << 20
	cfg.StreamCloseTimeout = time.Minute
	return cfg
}

// ServeConn runs one yamux server session over c and returns when it ends.
// sandboxd opens one stream per request. Processes survive the session.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) error {
	return s.serveSession(ctx, c)
}

// serveSession runs one yamux session over rwc until it ends.
func (s *Server) serveSession(ctx context.Context, c io.ReadWriteCloser) error {
	ys, err := yamux.Server(proto.CoalesceWrites(c, proto.DefaultHold), yamuxConfig())
	if err != nil {
		c.Close()
		return fmt.Errorf("start agent session: %w", err)
	}
	sess := &session{Session: ys}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sess.Close()
		return errServerClosed
	}
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, sess)
		s.mu.Unlock()
		sess.Close()
		s.fence.forget(sess)
	}()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		go s.handle(ctx, sess, st)
	}
}

// handle serves one stream: one request frame, one response frame, and for
// attach and dial the raw bytes after it; a request that asks to keep the
// stream (proto.Request.Again, for a reusable op) is followed by the
// client's next one, served the same way, until either side closes it.
func (s *Server) handle(ctx context.Context, sess *session, st *yamux.Stream) {
	keepOpen := false
	defer func() {
		if !keepOpen {
			st.Close()
		}
	}()
	wait := s.opts.requestTimeout
	for {
		again, handedOff := s.serveOne(ctx, sess, st, wait)
		if handedOff {
			keepOpen = true
			return
		}
		if !again {
			return
		}
		// The client sends its next request when it has one; it gives the
		// stream up after proto.ReuseIdle, so waiting twice that ends only
		// streams it has forgotten.
		wait = 2 * proto.ReuseIdle
	}
}

// serveOne serves one request on st, read within wait. It reports whether
// the stream stays for another request, and whether it was handed to a
// streaming op (which then owns it).
func (s *Server) serveOne(ctx context.Context, sess *session, st *yamux.Stream, wait time.Duration) (again, handedOff bool) {
	st.SetReadDeadline(time.Now().Add(wait))
	var req proto.Request
	if err := proto.ReadFrame(st, &req); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrTimeout) && wait != s.opts.requestTimeout {
			return false, false // the client closed the stream, or left it idle
		}
		s.reply(st, nil, errdefs.InvalidArgument("the request frame could not be read (%v); send one length-prefixed JSON request per stream", err))
		return false, false
	}
	if req.Raw && req.Op == proto.OpWriteFiles {
		if err := readRawWrite(st, &req); err != nil {
			s.reply(st, nil, err)
			return false, false
		}
	}
	st.SetReadDeadline(time.Time{})
	reuse := req.Again && proto.Reusable(req.Op)
	if err := s.fence.begin(sess); err != nil {
		s.reply(st, nil, err)
		return false, false
	}
	defer s.fence.end(sess)
	replied := false
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("agent handler panicked", "op", req.Op, "panic", p, "stack", string(debug.Stack()))
			again, handedOff = false, false
			if !replied { // after the response the stream carries raw bytes
				s.reply(st, nil, errdefs.Internal("the agent failed while handling %q: %v", req.Op, p))
			}
		}
	}()
	resp, stream, err := s.dispatch(ctx, sess, st, &req)
	if err != nil {
		return s.reply(st, &proto.Response{Kept: reuse}, err) && reuse, false
	}
	replied = true
	resp.Kept = reuse && stream == nil
	ok := false
	if req.Raw {
		ok = s.replyRaw(st, resp)
	} else {
		ok = s.reply(st, resp, nil)
	}
	if !ok {
		return false, false
	}
	if stream == nil {
		return reuse, false
	}
	stream()
	return false, true
}

// reply writes the response frame; it reports whether that worked.
func (s *Server) reply(st *yamux.Stream, resp *proto.Response, err error) bool {
	if resp == nil {
		resp = &proto.Response{}
	}
	if err != nil {
		resp = &proto.Response{Kept: resp.Kept, Error: &proto.Error{Code: errdefs.Code(err), Message: err.Error()}}
	}
	st.SetWriteDeadline(time.Now().Add(s.opts.requestTimeout))
	werr := proto.WriteFrame(st, resp)
	st.SetWriteDeadline(time.Time{})
	if werr != nil && errors.Is(werr, proto.ErrFrameTooLarge) {
		werr = proto.WriteFrame(st, &proto.Response{Error: &proto.Error{
			Code:    errdefs.ErrResourceExhausted.Error(),
			Message: "the answer is larger than the protocol's frame cap; ask for less (lower max_bytes or fewer paths)",
		}})
	}
	return werr == nil
}

// replyRaw writes a successful answer with its file data as raw frames
// (proto.Request.Raw); an answer over the caps becomes the same error
// reply answers over the cap get.
func (s *Server) replyRaw(st *yamux.Stream, resp *proto.Response) bool {
	if resp.ReadFile == nil && resp.ReadFiles == nil {
		return s.reply(st, resp, nil)
	}
	st.SetWriteDeadline(time.Now().Add(s.opts.requestTimeout))
	werr := proto.WriteMessage(st, resp, resp.TakeData())
	st.SetWriteDeadline(time.Time{})
	if werr != nil && errors.Is(werr, proto.ErrFrameTooLarge) {
		return s.reply(st, nil, errdefs.ResourceExhausted("the answer is larger than the protocol's frame cap; ask for less (lower max_bytes or fewer paths)"))
	}
	return werr == nil
}

// readRawWrite reads the raw frames that follow a write_files request
// frame into its files.
func readRawWrite(st *yamux.Stream, req *proto.Request) error {
	blobs, err := proto.ReadRaw(st, proto.MaxRawTotal)
	if err != nil {
		return errdefs.InvalidArgument("the raw data frames after the write_files request could not be read (%v); send one raw frame per file, then the end frame", err)
	}
	if req.WriteFiles == nil {
		return nil // dispatch says what is missing
	}
	if err := req.WriteFiles.PutData(blobs); err != nil {
		return errdefs.InvalidArgument("%v", err)
	}
	return nil
}

// dispatch runs one op. A non-nil stream func runs after the response was
// written and owns the stream from then on (it must close it).
func (s *Server) dispatch(ctx context.Context, sess *session, st *yamux.Stream, req *proto.Request) (*proto.Response, func(), error) {
	missing := func() error {
		return errdefs.InvalidArgument("request %q has no %q body; set the field named like the op", req.Op, req.Op)
	}
	if s.opts.opHook != nil {
		s.opts.opHook(req.Op)
	}
	switch req.Op {
	case proto.OpHello:
		return &proto.Response{Hello: &proto.HelloResponse{
			Version: proto.Version, PID: os.Getpid(), StartedAt: s.startedAt, Hostname: s.hostname,
			FDHandoff: true, Fencing: true, Watch: true, RawData: true, SandboxEnv: true, StreamReuse: true,
		}}, nil, nil
	case proto.OpReadFile:
		if req.ReadFile == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.ReadFile.Root); err != nil {
			return nil, nil, err
		}
		r, err := readFile(req.ReadFile, s.opts.limits)
		return &proto.Response{ReadFile: r}, nil, err
	case proto.OpReadFiles:
		if req.ReadFiles == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.ReadFiles.Root); err != nil {
			return nil, nil, err
		}
		r, err := readFiles(req.ReadFiles, s.opts.limits)
		return &proto.Response{ReadFiles: r}, nil, err
	case proto.OpWriteFiles:
		if req.WriteFiles == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.WriteFiles.Root); err != nil {
			return nil, nil, err
		}
		return &proto.Response{}, nil, writeFiles(req.WriteFiles, s.commitEnv())
	case proto.OpStat:
		if req.Stat == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.Stat.Root); err != nil {
			return nil, nil, err
		}
		r, err := stat(req.Stat)
		return &proto.Response{Stat: r}, nil, err
	case proto.OpWalk:
		if req.Walk == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.Walk.Root); err != nil {
			return nil, nil, err
		}
		r, err := walk(req.Walk)
		return &proto.Response{Walk: r}, nil, err
	case proto.OpExec:
		if req.Exec == nil {
			return nil, nil, missing()
		}
		r, err := s.exec(ctx, st, req.Exec)
		return &proto.Response{Exec: r}, nil, err
	case proto.OpSpawn:
		if req.Spawn == nil {
			return nil, nil, missing()
		}
		if s.isClosed() {
			return nil, nil, errdefs.Unavailable("the agent daemon is shutting down; reconnect and retry")
		}
		base, err := s.env.forCommand()
		if err != nil {
			return nil, nil, err
		}
		p, err := s.procs.spawn(req.Spawn, base)
		if err != nil {
			return nil, nil, err
		}
		return &proto.Response{Spawn: &proto.SpawnResponse{Process: p}}, nil, nil
	case proto.OpAttach:
		if req.Attach == nil {
			return nil, nil, missing()
		}
		run, err := s.procs.attach(req.Attach, st)
		return &proto.Response{}, run, err
	case proto.OpSignal:
		if req.Signal == nil {
			return nil, nil, missing()
		}
		return &proto.Response{}, nil, s.procs.signal(req.Signal)
	case proto.OpWait:
		if req.Wait == nil {
			return nil, nil, missing()
		}
		p, err := s.procs.wait(watchClosed(ctx, st), req.Wait)
		return &proto.Response{Process: p}, nil, err
	case proto.OpList:
		var labels map[string]string
		if req.List != nil {
			labels = req.List.Labels
		}
		return &proto.Response{List: &proto.ListResponse{Processes: s.procs.list(labels)}}, nil, nil
	case proto.OpDial:
		if req.Dial == nil {
			return nil, nil, missing()
		}
		run, err := dial(ctx, req.Dial, st)
		return &proto.Response{}, run, err
	case proto.OpWatch:
		if req.Watch == nil {
			return nil, nil, missing()
		}
		if err := s.settle(req.Watch.Root); err != nil {
			return nil, nil, err
		}
		r, run, err := s.serveWatch(st, req.Watch)
		return &proto.Response{Watch: r}, run, err
	case proto.OpClaim:
		if req.Claim == nil {
			return nil, nil, missing()
		}
		return &proto.Response{}, nil, s.fence.claim(sess, req.Claim)
	case proto.OpSetEnv:
		if req.SetEnv == nil {
			return nil, nil, missing()
		}
		return &proto.Response{}, nil, s.env.apply(req.SetEnv)
	case "":
		return nil, nil, errdefs.InvalidArgument("the request has no op; set \"op\" to one of the protocol's operations")
	default:
		return nil, nil, errdefs.InvalidArgument("unknown op %q; this agent speaks protocol version %d", req.Op, proto.Version)
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

// Close ends every session and listener, kills every process group the
// Server owns and waits (bounded) until they are reaped.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for l := range s.listeners {
			l.Close()
		}
		for sess := range s.sessions {
			sess.Close()
		}
		for pid, e := range s.execs {
			e.kill(pid)
		}
		close(s.guardDone)
		s.mu.Unlock()
		s.watches.closeAll()
		s.closeErr = errors.Join(s.procs.killAll(5*time.Second), s.waitExecs(5*time.Second))
		s.reaper.stop()
	})
	return s.closeErr
}

// waitExecs waits until every killed exec has been reaped, so that the
// reaper stops only after delivering their statuses.
func (s *Server) waitExecs(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		n := len(s.execs)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.DeadlineExceeded("%d commands were not reaped within %s of being killed", n, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Processes lists the processes the Server owns (for embedding and tests).
func (s *Server) Processes() []proto.ProcessInfo { return s.procs.list(nil) }
