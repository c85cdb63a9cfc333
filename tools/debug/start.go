package debug

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools/debug/dap"
)

// plan is how to start one session: the adapter command, how to reach it,
// and the launch or attach request.
type plan struct {
	adapter string
	argv    []string // the adapter command inside the sandbox
	socket  bool     // the adapter listens on a unix socket (delve) instead of stdio
	root    string   // the adapter's working directory
	program string
	request string // "launch" or "attach"
	port    int    // attach: a DAP server already listening on this loopback port
	args    map[string]any
}

// setupError is a start failure the model should read (not a sandboxd bug).
type setupError struct{ msg string }

func (e *setupError) Error() string { return e.msg }

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startSession spawns the adapter inside the sandbox, runs the DAP
// handshake and the configuration sequence, and returns once the adapter
// has responded to launch/attach. bps maps absolute file paths to lines; what
// the adapter said of each file's breakpoints is returned, in file order.
func startSession(ctx context.Context, ag *agent.Client, convLabel string, p *plan, bps map[string][]int, timeouts timeouts) (s *session, placed []filePlacement, err error) {
	s = newSession(newID(), p.adapter, ag)
	s.root, s.program, s.attached = p.root, p.program, p.request == "attach"
	defer func() {
		if err != nil {
			msg := withStartOutput(err.Error(), s.startOut.String())
			if log := s.adapterLog(context.Background()); log != "" {
				msg += "\nAdapter log (tail):\n" + log
			}
			if msg != err.Error() {
				err = &setupError{msg: msg}
			}
			s.terminate()
			return
		}
		s.startOut.close()
	}()

	var rwc io.ReadWriteCloser
	if p.port > 0 {
		// A DAP server already listens (debugpy --listen, dlv dap --listen):
		// speak to it directly; there is no adapter process of ours.
		c, err := ag.Dial(ctx, &proto.DialRequest{Network: "tcp", Address: "127.0.0.1:" + strconv.Itoa(p.port), Timeout: timeouts.request})
		if err != nil {
			return s, nil, &setupError{msg: fmt.Sprintf("Nothing accepts connections on 127.0.0.1:%d in the sandbox (%v); start the program with debugpy --listen 127.0.0.1:%d first.", p.port, err, p.port)}
		}
		rwc = c
	} else {
		if err := spawnAdapter(ctx, ag, s, p, convLabel, timeouts.connect); err != nil {
			return s, nil, err
		}
		if rwc, err = connectAdapter(ctx, ag, s); err != nil {
			return s, nil, err
		}
	}
	s.conn = dap.NewConn(rwc, s)
	go s.watch()

	ictx, cancel := context.WithTimeout(ctx, timeouts.request)
	err = s.conn.Do(ictx, "initialize", godap.InitializeRequestArguments{
		ClientID: "sandboxd", ClientName: "sandboxd", AdapterID: p.adapter,
		LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path",
		SupportsVariableType: true, SupportsRunInTerminalRequest: false,
	}, &s.caps)
	cancel()
	if err != nil {
		return s, nil, fmt.Errorf("the %s adapter did not complete initialize: %w", p.adapter, err)
	}

	lctx, lcancel := context.WithTimeout(ctx, timeouts.launch)
	defer lcancel()
	pending, err := s.conn.Start(lctx, p.request, p.args)
	if err != nil {
		return s, nil, err
	}
	// debugpy responds to launch only after configurationDone, others before
	// initialized; wait for whichever tells us to go on.
	launched := make(chan error, 1)
	go func() {
		_, err := pending.Wait(lctx)
		launched <- err
	}()
	var launchErr error
	launchDone := false
	select {
	case <-s.initialized:
	case launchErr = <-launched:
		launchDone = true
		if launchErr == nil {
			select {
			case <-s.initialized:
			case <-lctx.Done():
				return s, nil, fmt.Errorf("the %s adapter never sent initialized after %s", p.adapter, p.request)
			}
		}
	case <-lctx.Done():
		return s, nil, fmt.Errorf("the %s adapter did not get ready within %s", p.adapter, timeouts.launch)
	}
	if launchErr != nil {
		return s, nil, fmt.Errorf("%s failed: %w", p.request, launchErr)
	}

	placed, err = s.configure(lctx, bps)
	if err != nil {
		return s, nil, err
	}
	if !launchDone {
		if err := <-launched; err != nil {
			return s, nil, fmt.Errorf("%s failed: %w", p.request, err)
		}
	}
	return s, placed, nil
}

// configure sends the breakpoints, the default exception filters and
// configurationDone.
func (s *session) configure(ctx context.Context, bps map[string][]int) ([]filePlacement, error) {
	var placed []filePlacement
	for _, file := range slices.Sorted(maps.Keys(bps)) {
		got, err := s.setBreakpoints(ctx, file, bps[file])
		if err != nil {
			return nil, err
		}
		placed = append(placed, filePlacement{file: file, lines: bps[file], bps: got})
	}
	var filters []string
	for _, f := range s.caps.ExceptionBreakpointFilters {
		if f.Default {
			filters = append(filters, f.Filter)
		}
	}
	if len(s.caps.ExceptionBreakpointFilters) > 0 {
		if err := s.conn.Do(ctx, "setExceptionBreakpoints", godap.SetExceptionBreakpointsArguments{Filters: nonNil(filters)}, nil); err != nil {
			return nil, err
		}
	}
	if s.caps.SupportsConfigurationDoneRequest {
		if err := s.conn.Do(ctx, "configurationDone", nil, nil); err != nil {
			return nil, err
		}
	}
	return placed, nil
}

// setBreakpoints replaces the breakpoints of one file and returns the
// adapter's response for each line; only those it verified count as placed.
func (s *session) setBreakpoints(ctx context.Context, file string, lines []int) ([]godap.Breakpoint, error) {
	var body godap.SetBreakpointsResponseBody
	err := s.conn.Do(ctx, "setBreakpoints", dap.NewSetBreakpoints(godap.Source{Path: file, Name: pathBase(file)}, lines), &body)
	if err != nil {
		return nil, err
	}
	verified := 0
	for _, b := range body.Breakpoints {
		if b.Verified {
			verified++
		}
	}
	s.mu.Lock()
	if verified == 0 {
		delete(s.armed, file)
	} else {
		s.armed[file] = verified
	}
	s.mu.Unlock()
	return body.Breakpoints, nil
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// spawnAdapter starts the adapter as a process of the sandbox agent, with
// its own log beside its socket. An adapter that only listens on a unix
// socket (delve) runs under the agent's dap-bridge, which holds the
// connection inside the sandbox and speaks it on stdio: the session then
// outlives a dropped pipe or a sandboxd restart like a stdio adapter's;
// listenWait bounds how long such an adapter may take to listen.
func spawnAdapter(ctx context.Context, ag *agent.Client, s *session, p *plan, convLabel string, listenWait time.Duration) error {
	argv := append([]string{"/bin/sh", "-c", `mkdir -p "$RUNDIR" && exec "$@" 2>>"$LOG"`, "sh"}, p.argv...)
	if p.socket {
		argv = append([]string{proto.AgentSelf, "dap-bridge", "--socket", s.sockPath(), "--log", s.logPath(),
			"--wait", listenWait.String(), "--"}, p.argv...)
		argv = append(argv, "--listen", "unix:"+s.sockPath())
		p.args["output"] = s.binPath() // the built debuggee, outside the workspace
	}
	info, err := ag.Spawn(ctx, &proto.SpawnRequest{
		Name:  "sandboxd-debug-" + convLabel,
		Argv:  argv,
		Dir:   p.root,
		Env:   map[string]string{"LOG": s.logPath(), "RUNDIR": runDir},
		Stdin: true,
		Labels: map[string]string{
			labelRole: "adapter", labelConv: convLabel, labelAdapter: p.adapter, labelSession: s.id,
			labelProgram: p.program, labelRoot: p.root,
		},
	})
	if err != nil {
		return fmt.Errorf("the %s adapter could not be started: %w", p.adapter, err)
	}
	s.procID, s.adapterPID = info.ID, info.PID
	return nil
}

// connectAdapter reaches the adapter through its stdio, kept by the agent
// (a socket adapter's through its dap-bridge).
func connectAdapter(ctx context.Context, ag *agent.Client, s *session) (io.ReadWriteCloser, error) {
	out, err := ag.Attach(ctx, s.procID, "stdout")
	if err != nil {
		return nil, fmt.Errorf("attaching to the %s adapter: %w", s.adapter, err)
	}
	in, err := ag.Attach(ctx, s.procID, "stdin")
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("attaching to the %s adapter: %w", s.adapter, err)
	}
	return &stdio{in: in, out: out}, nil
}
