package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/debug/dap"
)

// Where adapters keep their sockets, logs and built binaries inside the
// sandbox (outside the workspace, so nothing lands in the user's tree).
const runDir = "/tmp/.sandboxd-dap"

// Labels on adapter processes, so a restarted sandboxd finds them.
const (
	labelRole    = "sandboxd.debug"
	labelConv    = "sandboxd.debug.conversation"
	labelAdapter = "sandboxd.debug.adapter"
	labelSession = "sandboxd.debug.session"
	labelProgram = "sandboxd.debug.program"
	labelRoot    = "sandboxd.debug.root"
	labelSocket  = "sandboxd.debug.socket" // "true": an older sandboxd dialed this adapter directly (delve before dap-bridge)
)

// outputCap bounds the debuggee output kept between two output calls; the
// oldest bytes go first.
const outputCap = 16 << 10

// session is one debug session: an adapter process owned by the sandbox
// agent, and our DAP connection to it.
//
// Goroutines: the DAP connection's reader (events land in Event), one
// watcher that marks the session ended when the connection closes, and
// during start only, one waiter for the launch/attach response.
// Shutdown: terminate sends disconnect, kills the debuggee's process group
// and the adapter's, then closes the connection (which ends both).
type session struct {
	id         string
	adapter    string
	procID     string // the adapter's agent process id
	adapterPID int    // its pid inside the sandbox
	ag         *agent.Client
	conn       *dap.Conn
	root       string
	program    string
	started    time.Time
	caps       godap.Capabilities
	attached   bool // attach rather than launch
	resumed    bool // picked up after a sandboxd restart

	startOut    startLog      // every output event until the session started
	initialized chan struct{} // closed on the initialized event
	initOnce    sync.Once
	termOnce    sync.Once

	// mu guards every field below.
	mu          sync.Mutex
	epoch       int           // bumped on every stop, exit and end
	changed     chan struct{} // closed and replaced when epoch moves
	stop        *godap.StoppedEventBody
	recorded    *godap.StoppedEventBody // the stop last written to the stop record
	exitCode    *int
	ended       bool
	expired     bool // ended by the TTL; endReason is the message to show
	endReason   string
	debuggeePID int
	out         []byte
	outDropped  int
	ids         handedIDs
	pausing     bool              // a pause was sent and its stop has not come
	modules     map[string]string // module id -> name, from module events
	armed       map[string]int    // file -> breakpoints the adapter verified there
	live        tools.OutputSink  // the waiting call's, while a continue waits (liveoutput.go)
}

func newSession(id, adapter string, ag *agent.Client) *session {
	return &session{id: id, adapter: adapter, ag: ag, started: time.Now(), initialized: make(chan struct{}), changed: make(chan struct{}), armed: map[string]int{}}
}

var _ dap.Handler = (*session)(nil)

// bumpLocked records a change of run state and wakes waiters.
func (s *session) bumpLocked() {
	s.epoch++
	close(s.changed)
	s.changed = make(chan struct{})
}

// Event records what the adapter reports; unknown events are ignored.
func (s *session) Event(m *dap.Message) {
	switch m.Event {
	case "initialized":
		s.initOnce.Do(func() { close(s.initialized) })
	case "stopped":
		var b godap.StoppedEventBody
		if json.Unmarshal(m.Body, &b) != nil {
			return
		}
		s.mu.Lock()
		// lldb reports the stop a pause asked for as the signal it used.
		if s.pausing && b.Reason == "exception" && strings.Contains(b.Description+" "+b.Text, "SIGSTOP") {
			b.Reason, b.Description, b.Text = "pause", "", ""
		}
		s.pausing = false
		s.stop = &b
		s.bumpLocked()
		s.mu.Unlock()
	case "continued":
		s.mu.Lock()
		s.stop = nil
		s.mu.Unlock()
	case "exited":
		var b godap.ExitedEventBody
		if json.Unmarshal(m.Body, &b) != nil {
			return
		}
		s.mu.Lock()
		code := b.ExitCode
		s.exitCode = &code
		s.stop = nil
		s.bumpLocked()
		s.mu.Unlock()
	case "terminated":
		s.markEnded("the debuggee terminated")
	case "process":
		var b godap.ProcessEventBody
		if json.Unmarshal(m.Body, &b) == nil && b.SystemProcessId > 0 {
			s.mu.Lock()
			s.debuggeePID = b.SystemProcessId
			s.mu.Unlock()
		}
	case "module":
		var b godap.ModuleEventBody
		if json.Unmarshal(m.Body, &b) == nil {
			s.noteModule(b)
		}
	case "output":
		var b godap.OutputEventBody
		if json.Unmarshal(m.Body, &b) != nil {
			return
		}
		if b.Category != "telemetry" {
			s.startOut.add(b.Output)
		}
		switch b.Category {
		case "stdout", "stderr", "important":
			s.mu.Lock()
			s.out = append(s.out, b.Output...)
			if over := len(s.out) - outputCap; over > 0 {
				s.out = append(s.out[:0], s.out[over:]...)
				s.outDropped += over
			}
			s.showLiveLocked(b.Category, b.Output)
			s.mu.Unlock()
		}
	}
}

// ReverseRequest refuses runInTerminal (so the debuggee's output comes back
// as output events) and anything else an adapter may ask of an editor.
func (s *session) ReverseRequest(m *dap.Message) (any, error) {
	switch m.Command {
	case "runInTerminal":
		return nil, errors.New("sandboxd has no terminal; launch the debuggee with the internal console")
	default:
		return nil, fmt.Errorf("sandboxd does not support the %s request", m.Command)
	}
}

// markExpired ends the session for its TTL; msg is what later calls read.
func (s *session) markExpired(msg string) {
	s.mu.Lock()
	s.expired = true
	s.mu.Unlock()
	s.markEnded(msg)
}

func (s *session) markEnded(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.endReason = true, reason
	s.stop = nil
	s.bumpLocked()
}

// watch marks the session ended when the adapter connection closes.
func (s *session) watch() {
	<-s.conn.Done()
	s.markEnded("the debug adapter closed its connection")
}

// snapshot is the run state at one moment.
type snapshot struct {
	epoch     int
	changed   <-chan struct{}
	stop      *godap.StoppedEventBody
	exitCode  *int
	ended     bool
	expired   bool
	endReason string
}

func (s *session) state() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot{s.epoch, s.changed, s.stop, s.exitCode, s.ended, s.expired, s.endReason}
}

// waitChange waits until the epoch passes since, or d passes, or ctx ends;
// it reports whether the state moved.
func (s *session) waitChange(ctx context.Context, since int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		st := s.state()
		if st.epoch > since {
			return true
		}
		select {
		case <-st.changed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// restoreStop puts back the stop a refused continue or step cleared, so
// the session is not left "running" when the program never moved; it
// does nothing when anything happened meanwhile (a new stop, the end).
// It reports whether the stop was restored.
func (s *session) restoreStop(before snapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if before.stop == nil || s.ended || s.stop != nil || s.epoch != before.epoch {
		return false
	}
	s.stop = before.stop
	return true
}

// takeOutput returns the output since the previous call and clears it.
func (s *session) takeOutput() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, dropped := string(s.out), s.outDropped
	s.out, s.outDropped = nil, 0
	return out, dropped
}

func (s *session) pendingOutput() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out)
}

// terminate ends the session: note the process groups under the adapter,
// disconnect (terminating a launched debuggee), then kill those groups,
// the debuggee's and the adapter's, and close the connection. It is
// idempotent and bounded by its own deadlines.
func (s *session) terminate() {
	s.termOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s.mu.Lock()
		pid := s.debuggeePID
		s.mu.Unlock()
		var groups []string
		if !s.attached && s.adapterPID > 0 {
			// Found before disconnect: once the debuggee dies its children
			// are re-parented and no longer under the adapter.
			groups = groupsUnder(ctx, s.ag, s.adapterPID, pid)
		}
		if s.conn != nil {
			dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
			_ = s.conn.Do(dctx, "disconnect", godap.DisconnectArguments{TerminateDebuggee: !s.attached}, nil)
			dcancel()
		}
		if len(groups) > 0 {
			argv := []string{"kill", "-KILL", "--"}
			for _, g := range groups {
				argv = append(argv, "-"+g)
			}
			_, _ = s.ag.Exec(ctx, &proto.ExecRequest{Argv: argv, Timeout: 5 * time.Second})
		}
		if s.procID != "" {
			_ = s.ag.Signal(ctx, &proto.SignalRequest{ID: s.procID, Signal: "KILL", Group: true})
			_, _ = s.ag.Wait(ctx, &proto.WaitRequest{ID: s.procID, Timeout: 3 * time.Second})
		}
		if s.conn != nil {
			_ = s.conn.Close()
		}
		_, _ = s.ag.Exec(ctx, &proto.ExecRequest{Argv: []string{"rm", "-f", s.sockPath(), s.logPath(), s.binPath(), runDir + "/" + s.stopRecordPath()}, Timeout: 5 * time.Second})
		s.markEnded("terminated")
	})
}

// groupsScript prints the process groups of every descendant of $1 and of
// the process $2, leaving out groups 0 and 1 (the sandbox itself).
const groupsScript = `ps -e -o pid=,ppid=,pgid= | awk -v root="$1" -v extra="$2" '
{ parent[$1] = $2; group[$1] = $3; pids[NR] = $1 }
END {
  for (i = 1; i <= NR; i++) {
    p = pids[i]; q = p
    for (n = 0; n < 64 && q != "" && q > 1; n++) {
      if (q == root) { print group[p]; break }
      q = parent[q]
    }
  }
  if (extra > 1 && (extra in group)) print group[extra]
}' | sort -un | awk '$1 > 1'`

// groupsUnder lists the process groups under the adapter (and the
// debuggee's), so terminate can kill everything the program started.
func groupsUnder(ctx context.Context, ag *agent.Client, adapterPID, debuggeePID int) []string {
	res, err := ag.Exec(ctx, &proto.ExecRequest{Argv: []string{"/bin/sh", "-c", groupsScript, "sh", strconv.Itoa(adapterPID), strconv.Itoa(debuggeePID)}, Timeout: 5 * time.Second})
	if err != nil || res.ExitCode != 0 {
		return nil
	}
	return strings.Fields(string(res.Stdout))
}

func (s *session) sockPath() string { return runDir + "/" + s.id + ".sock" }
func (s *session) logPath() string  { return runDir + "/" + s.id + ".log" }
func (s *session) binPath() string  { return runDir + "/" + s.id + ".bin" }

// adapterLog returns the tail of the adapter's own log, for errors.
func (s *session) adapterLog(ctx context.Context) string {
	res, err := s.ag.Exec(ctx, &proto.ExecRequest{Argv: []string{"tail", "-c", "1500", s.logPath()}, Timeout: 5 * time.Second})
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	return strings.TrimSpace(string(res.Stdout))
}

// stdio joins an adapter's stdin and stdout attachments into one stream.
type stdio struct {
	in  io.WriteCloser
	out io.ReadCloser
}

func (p *stdio) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *stdio) Write(b []byte) (int, error) { return p.in.Write(b) }

// SetReadDeadline lets dap.Conn.Close end a read on a half-closed stream.
func (p *stdio) SetReadDeadline(t time.Time) error {
	if d, ok := p.out.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// Close closes both attachments; closing stdin gives the adapter EOF, so
// only terminate closes it (a sandboxd shutdown leaves it open).
func (p *stdio) Close() error {
	err := p.in.Close()
	if err2 := p.out.Close(); err == nil {
		err = err2
	}
	return err
}
