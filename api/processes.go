package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools/files"
)

// Long-lived processes over HTTP (/v1/sandboxes/{id}/processes...), for
// platforms, the console's process list and its terminal: the same
// processes as the process tool's, kept by the sandbox's agent.

// StartProcess is the body of POST /v1/sandboxes/{id}/processes.
type StartProcess struct {
	Command string            `json:"command"` // a shell command line
	Workdir string            `json:"workdir,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Pty     *TermSize         `json:"pty,omitempty"` // a terminal of this size
}

// TermSize is a terminal's size in character cells; also the body of POST
// .../processes/{pid}/resize.
type TermSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// Process is a long-lived process as the API reports it.
type Process struct {
	ID      string    `json:"id"` // p1, p2, ...
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Argv    []string  `json:"argv"`
	Workdir string    `json:"workdir,omitempty"`
	Pty     *TermSize `json:"pty,omitempty"`
	// State is running, exited (exit_code says how), killed (signal says
	// by what; oom_killed when the out-of-memory killer did it) or stopped
	// (by the sandbox's hibernation: no exit code or signal of its own).
	State     string     `json:"state"`
	Status    string     `json:"status"` // in words: "running", "exited 3", "killed by SIGTERM", "stopped by hibernation"
	ExitCode  *int       `json:"exit_code,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	OOMKilled bool       `json:"oom_killed,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	ExitedAt  *time.Time `json:"exited_at,omitempty"`
	// Output is the offset after the last byte it printed (how much it has
	// printed in all).
	Output int64 `json:"output"`
}

// ProcessOutput is the answer of GET .../processes/{pid}/output.
type ProcessOutput struct {
	Chunks []OutputChunk `json:"chunks"`
	// Next is the cursor to read on from (?since=next).
	Next int64 `json:"next"`
	// Dropped bytes were lost before the first chunk: the output buffer
	// keeps the newest bytes only.
	Dropped int64   `json:"dropped,omitempty"`
	Process Process `json:"process"`
}

// OutputChunk is a piece of output: Text written to Stream (stdout, stderr
// or pty) at byte Offset.
type OutputChunk struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
	Offset int64  `json:"offset"`
}

// ProcessExit is the last event of an output stream.
type ProcessExit struct {
	Code      *int   `json:"code,omitempty"`
	Signal    string `json:"signal,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Status    string `json:"status"`
}

// ProcessInput is the body of POST .../processes/{pid}/input.
type ProcessInput struct {
	Text string `json:"text"`
	// EOF closes the process's stdin after Text (not for a terminal: send
	// "\u0004", Ctrl-D, instead).
	EOF bool `json:"eof,omitempty"`
}

// ProcessSignal is the body of POST .../processes/{pid}/signal.
type ProcessSignal struct {
	Signal string `json:"signal"` // TERM, INT, HUP, QUIT, USR1, USR2, KILL
}

// Process output streams.
const (
	EventProcessOutput  = "output"
	EventProcessDropped = "dropped"
	EventProcessExit    = "exit"
)

// WithProcesses sets the limits of the processes started over HTTP: how
// many run at once in a sandbox and the output kept per process (0: the
// agent's defaults).
func WithProcesses(maxRunning int, ringBytes int64) Option {
	return func(s *Server) { s.procMax, s.procRing = maxRunning, ringBytes }
}

// processAgent is the sandbox's agent pipe for a process route.
func (s *Server) processAgent(r *http.Request, tenant string) (*agent.Client, sandbox.Info, error) {
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	if ao, ok := s.sandboxes.(agentOf); ok {
		return ao.AgentOf(r.Context(), info)
	}
	return s.sandboxes.Agent(r.Context(), tenant, info.Conversation)
}

func processOf(p proto.ProcInfo) Process {
	out := Process{ID: p.ID, PID: p.PID, Command: files.CommandLine(p), Argv: p.Argv, Workdir: p.Dir, State: p.State,
		Status: files.StateText(p), ExitCode: p.ExitCode, Signal: p.Signal, OOMKilled: p.OOMKilled,
		StartedAt: p.StartedAt.UTC(), Output: p.Output}
	if out.Argv == nil {
		out.Argv = []string{}
	}
	if p.Pty != nil {
		out.Pty = &TermSize{Rows: int(p.Pty.Rows), Cols: int(p.Pty.Cols)}
	}
	if !p.ExitedAt.IsZero() {
		t := p.ExitedAt.UTC()
		out.ExitedAt = &t
	}
	return out
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request, tenant string) error {
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	ps, err := c.ProcList(r.Context(), nil)
	if err != nil {
		return err
	}
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		out = append(out, processOf(p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req StartProcess
	if err := decodeJSON(w, r, s.maxBody, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Command) == "" {
		return errdefs.InvalidArgument("command is empty; give the command line to run, e.g. \"python3 -m http.server 8000\"")
	}
	var pty *proto.PtySize
	if req.Pty != nil {
		if err := checkTermSize(*req.Pty); err != nil {
			return err
		}
		pty = &proto.PtySize{Rows: uint16(req.Pty.Rows), Cols: uint16(req.Pty.Cols)}
	}
	c, info, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	dir := info.Workspace
	if req.Workdir != "" {
		dir = req.Workdir
	}
	// The agent resolves the directory inside the workspace and refuses
	// one that leads out of it (a symlink included).
	st, err := c.Stat(r.Context(), &proto.StatRequest{Root: info.Workspace, Path: dir})
	if err != nil {
		return err
	}
	if !st.IsDir {
		return errdefs.InvalidArgument("workdir %s is not a directory; give a directory inside the workspace", dir)
	}
	p, err := c.ProcStart(r.Context(), &proto.ProcStartRequest{Argv: files.ShellArgv(req.Command), Dir: st.Path, Env: req.Env,
		Labels: map[string]string{"started_by": "api"}, Pty: pty, RingBytes: s.procRing, MaxLive: s.procMax})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, processOf(*p))
	return nil
}

func checkTermSize(t TermSize) error {
	if t.Rows < 1 || t.Rows > 1000 || t.Cols < 1 || t.Cols > 1000 {
		return errdefs.InvalidArgument("a terminal of %d rows and %d columns is not possible; give rows and cols from 1 to 1000", t.Rows, t.Cols)
	}
	return nil
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request, tenant string) error {
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	p, err := c.ProcGet(r.Context(), r.PathValue("pid"), 0)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, processOf(*p))
	return nil
}

func (s *Server) deleteProcess(w http.ResponseWriter, r *http.Request, tenant string) error {
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	if _, err := c.ProcKill(r.Context(), r.PathValue("pid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) processInput(w http.ResponseWriter, r *http.Request, tenant string) error {
	var in ProcessInput
	if err := decodeJSON(w, r, s.maxBody, &in); err != nil {
		return err
	}
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	if err := c.ProcInput(r.Context(), r.PathValue("pid"), []byte(in.Text), in.EOF); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request, tenant string) error {
	var in ProcessSignal
	if err := decodeJSON(w, r, s.maxBody, &in); err != nil {
		return err
	}
	sig := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(in.Signal)), "SIG")
	if sig == "" {
		return errdefs.InvalidArgument("signal is empty; give TERM, INT, HUP, QUIT, USR1, USR2 or KILL")
	}
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	if err := c.ProcSignal(r.Context(), r.PathValue("pid"), sig); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) resizeProcess(w http.ResponseWriter, r *http.Request, tenant string) error {
	var in TermSize
	if err := decodeJSON(w, r, s.maxBody, &in); err != nil {
		return err
	}
	if err := checkTermSize(in); err != nil {
		return err
	}
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	if err := c.ProcResize(r.Context(), r.PathValue("pid"), uint16(in.Rows), uint16(in.Cols)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) processOutput(w http.ResponseWriter, r *http.Request, tenant string) error {
	since := int64(0)
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errdefs.InvalidArgument("since %q is not a byte offset; give a next cursor an earlier answer returned, or 0", v)
		}
		since = n
	}
	c, _, err := s.processAgent(r, tenant)
	if err != nil {
		return err
	}
	id := r.PathValue("pid")
	if wantsStream(r) {
		return s.followProcess(w, r, c, id, since)
	}
	out, err := c.ProcOutput(r.Context(), &proto.ProcOutputRequest{ID: id, Since: since})
	if err != nil {
		return err
	}
	res := ProcessOutput{Chunks: []OutputChunk{}, Next: out.Next, Dropped: out.Dropped, Process: processOf(out.Process)}
	var cut utf8Carry
	for _, ch := range out.Chunks {
		res.Chunks = append(res.Chunks, cut.chunk(ch)...)
	}
	// A rune cut at the end is left for the next read: next points at it.
	res.Next -= int64(len(cut.pending))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// followHeartbeat is how often an idle output stream gets a comment.
const followHeartbeat = 15 * time.Second

// followProcess streams a process's output as SSE: output events {stream,
// text, offset}, a dropped event when bytes were lost, and one exit event.
// A client that reconnects with ?since= its last offset plus the text's
// length gets no gap and no repeat.
func (s *Server) followProcess(w http.ResponseWriter, r *http.Request, c *agent.Client, id string, since int64) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	f, err := c.ProcFollow(ctx, id, since)
	if err != nil {
		return err // before the stream began: its status and JSON body
	}
	defer f.Close()
	sw := newSSEWriter(w)
	defer sw.release()
	sw.send([]byte("retry: 2000\n: connected\n\n"))

	frames := make(chan *proto.ProcFrame)
	errc := make(chan error, 1)
	go func() {
		for {
			fr, err := f.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case frames <- fr:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(followHeartbeat)
	defer tick.Stop()
	var cut utf8Carry
	for !sw.failed {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			sw.send([]byte(": heartbeat\n\n"))
		case err := <-errc:
			if !errors.Is(err, io.EOF) {
				sw.send(sseEvent(EventError, StreamError{Status: StatusOf(err), Error: ErrorDetail{Code: errdefs.Code(err), Message: err.Error()}}))
			}
			return nil
		case fr := <-frames:
			if fr.Dropped > 0 {
				sw.send(sseEvent(EventProcessDropped, map[string]int64{"bytes": fr.Dropped}))
			}
			for _, ch := range fr.Chunks {
				for _, oc := range cut.chunk(ch) {
					sw.send(sseEvent(EventProcessOutput, oc))
				}
			}
			if e := fr.Exit; e != nil {
				if len(cut.pending) > 0 {
					sw.send(sseEvent(EventProcessOutput, OutputChunk{Stream: cut.stream, Text: strings.ToValidUTF8(string(cut.pending), "\uFFFD"), Offset: cut.offset}))
				}
				sw.send(sseEvent(EventProcessExit, ProcessExit{Code: e.ExitCode, Signal: e.Signal, OOMKilled: e.OOMKilled, Status: files.StateText(*e)}))
				return nil
			}
		}
	}
	return nil
}

// utf8Carry turns chunks of bytes into chunks of text without cutting a
// character in two: the bytes of a character cut at a chunk's end wait for
// the next chunk of the same stream. Offsets stay those of the bytes.
type utf8Carry struct {
	pending []byte
	stream  string
	offset  int64 // of pending's first byte
}

func (u *utf8Carry) chunk(ch proto.ProcChunk) []OutputChunk {
	var out []OutputChunk
	if len(u.pending) > 0 && (u.stream != ch.Stream || u.offset+int64(len(u.pending)) != ch.Offset) {
		// Another stream or a gap: the cut character will not be completed.
		out = append(out, OutputChunk{Stream: u.stream, Text: strings.ToValidUTF8(string(u.pending), "\uFFFD"), Offset: u.offset})
		u.pending = nil
	}
	data, off := ch.Data, ch.Offset
	if len(u.pending) > 0 {
		data, off = append(append([]byte(nil), u.pending...), data...), u.offset
		u.pending = nil
	}
	keep := incompleteTail(data)
	if keep > 0 {
		u.pending = append([]byte(nil), data[len(data)-keep:]...)
		u.stream, u.offset = ch.Stream, off+int64(len(data)-keep)
		data = data[:len(data)-keep]
	}
	if len(data) > 0 {
		out = append(out, OutputChunk{Stream: ch.Stream, Text: strings.ToValidUTF8(string(data), "\uFFFD"), Offset: off})
	}
	return out
}

// incompleteTail is how many bytes at the end of b begin a UTF-8 character
// that b does not finish (0 to 3).
func incompleteTail(b []byte) int {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(b); n++ {
		c := b[len(b)-n]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
