// Package daemon is the sandbox-agent's side of the agent protocol (see
// agent/proto): it serves file operations, commands, long-lived processes,
// workspace watches and socket dialing to sandboxd over yamux sessions, one
// per connection.
package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Server is the agent daemon: the sessions it serves (server_stream.go) and
// the services behind its operation table (ops.go): files (files.go, with
// the commit journal, journal.go), processes (procs.go), the workspace
// watch (watch.go), fencing (fence.go), dialing (dial.go) and the egress
// proxy (egress.go). It owns every
// process it starts, in its own process group, and kills those groups on
// Close.
//
// Goroutines: one accept loop per Serve listener, one per ServeConn session
// (accepting streams) and, for a session on handed-over descriptors
// (server_handoff.go), one reading its connection for attach's end; one per
// open stream (its handler, which runs the
// op; a stream handed to a streaming op is served by that op's func on the
// same goroutine); and those of the services: the processes' (procs.go:
// the reaper, the pid guard, per exec and per spawned process their pipe
// copiers) and the workspace watches' (watch.go: per root its event loop
// and flush timer, per stream a control reader). A claim (fence.go) closes
// the sessions it supersedes and waits, bounded, on its handler's
// goroutine until their handlers have returned.
//
// Shutdown order (Close): stop the listeners and close the sessions (which
// ends their streams and handlers); stop the processes service taking
// commands, kill the running execs and stop the pid guard; end the
// workspace watches; kill every spawned process group, wait for every
// exit status, stop the reaper. Hibernate (hibernate.go) records the
// processes that run between refusing commands and the rest of Close.
type Server struct {
	log       *slog.Logger
	opts      options
	startedAt time.Time
	hostname  string

	files  *fileService
	procs  *processService
	watch  *watchService
	fence  *fence // the highest claim
	egress *egressService
	ops    opTable // every op's handler; only read once New has returned

	// mu guards listeners, sessions and closed.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
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
	stateDir       string            // what outlives the agent, outside every workspace (statedir.go)
	limits         readLimits
	systemBundle   string        // the system's CA bundle the egress CA is added to
	egressWait     time.Duration // how long a proxied connection waits for a session
	oomCounter     string        // test-only: the file with the OOM kill count (procs_longkill.go)
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

// WithSystemBundle names the system's CA bundle, to which the egress proxy's
// CA is added where writable (default /etc/ssl/certs/ca-certificates.crt).
// Every other bundle the CA variables name starts from it.
func WithSystemBundle(path string) Option { return func(o *options) { o.systemBundle = path } }

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
	}
	s.files = newFileService(o.stateDir, o.limits, o.commitHook, o.log)
	s.watch = newWatchService(o.log, s.files.settle)
	s.fence = openFence(o.stateDir)
	if s.fence.broken != nil {
		o.log.Error("the agent cannot fence its sandbox; every claim fails", "err", s.fence.broken)
	}
	s.procs = newProcessService(o)
	s.egress = newEgressService(o, s.procs.env)
	s.ops = opTable{}
	for _, svc := range []service{s, s.files, s.procs, s.watch, s.fence, dialService{}, s.egress, portsService{}} {
		svc.register(s.ops)
	}
	s.egress.resume()
	return s
}

var _ service = (*Server)(nil)

// register adds the Server's own op, hello: who the daemon is and what
// it takes.
func (s *Server) register(t opTable) {
	t.add(proto.OpHello, func(context.Context, *request) (*proto.Response, func(), error) {
		return &proto.Response{Hello: &proto.HelloResponse{
			Version: proto.Version, PID: os.Getpid(), StartedAt: s.startedAt, Hostname: s.hostname,
			FDHandoff: true, Fencing: true, Watch: true, RawData: true, SandboxEnv: true, StreamReuse: true, Egress: true,
			Processes: true, Ports: true, Activity: true, Accounts: true, Xattrs: true,
		}}, nil, nil
	})
}

var errServerClosed = errors.New("agent daemon is shutting down")

// RecoverCommits settles every commit an earlier agent left unfinished in
// the state dir (WithStateDir): call it at start, before serving.
func (s *Server) RecoverCommits() error { return s.files.recoverAll() }

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
		s.mu.Unlock()
		s.egress.close()
		s.procs.stop()
		s.watch.close()
		s.closeErr = s.procs.close()
	})
	return s.closeErr
}

// RunForeground runs argv with the given stdio in its own process group as
// a child the Server owns (Close kills it), and returns its exit code
// (128+signal when signalled). Cancelling ctx kills the group. It is how a
// container's init runs its main command without the reaper taking its status.
func (s *Server) RunForeground(ctx context.Context, argv []string, stdin, stdout, stderr *os.File) (int, error) {
	return s.procs.runForeground(ctx, argv, stdin, stdout, stderr)
}

// Processes lists the processes the Server owns (for embedding and tests).
func (s *Server) Processes() []proto.ProcessInfo { return s.procs.table.list(nil) }
