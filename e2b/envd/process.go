package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// process.Process onto the agent's long-lived processes (the ones the
// process tool and /v1/sandboxes/{id}/processes show). E2B's pid is the
// process's pid in the sandbox, as envd's is, so `kill` and `ps` in the
// sandbox agree with the SDK; a pid is looked up among the agent's
// processes, the newest first.

// Wire messages of process.Process (proto3 JSON names).
type (
	processConfig struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  *string           `json:"cwd,omitempty"`
	}
	ptySize struct {
		Cols uint32 `json:"cols"`
		Rows uint32 `json:"rows"`
	}
	ptyConfig struct {
		Size *ptySize `json:"size,omitempty"`
	}
	startRequest struct {
		Process *processConfig `json:"process"`
		Pty     *ptyConfig     `json:"pty,omitempty"`
		Tag     *string        `json:"tag,omitempty"`
		Stdin   *bool          `json:"stdin,omitempty"`
	}
	processSelector struct {
		Pid *uint32 `json:"pid,omitempty"`
		Tag *string `json:"tag,omitempty"`
	}
	selectRequest struct {
		Process *processSelector `json:"process"`
	}
	processInput struct {
		Stdin []byte `json:"stdin,omitempty"`
		Pty   []byte `json:"pty,omitempty"`
	}
	sendInputRequest struct {
		Process *processSelector `json:"process"`
		Input   *processInput    `json:"input"`
	}
	sendSignalRequest struct {
		Process *processSelector `json:"process"`
		Signal  signal           `json:"signal"`
	}
	updateRequest struct {
		Process *processSelector `json:"process"`
		Pty     *ptyConfig       `json:"pty,omitempty"`
	}
	streamInputRequest struct {
		Start *struct {
			Process *processSelector `json:"process"`
		} `json:"start,omitempty"`
		Data *struct {
			Input *processInput `json:"input"`
		} `json:"data,omitempty"`
	}
	startEvent struct {
		Pid uint32 `json:"pid"`
	}
	dataEvent struct {
		Stdout []byte `json:"stdout,omitempty"`
		Stderr []byte `json:"stderr,omitempty"`
		Pty    []byte `json:"pty,omitempty"`
	}
	endEvent struct {
		ExitCode int32   `json:"exitCode"`
		Exited   bool    `json:"exited"`
		Status   string  `json:"status"`
		Error    *string `json:"error,omitempty"`
	}
	processEvent struct {
		Start     *startEvent `json:"start,omitempty"`
		Data      *dataEvent  `json:"data,omitempty"`
		End       *endEvent   `json:"end,omitempty"`
		Keepalive *struct{}   `json:"keepalive,omitempty"`
	}
	eventResponse struct {
		Event processEvent `json:"event"`
	}
	processInfo struct {
		Config processConfig `json:"config"`
		Pid    uint32        `json:"pid"`
		Tag    *string       `json:"tag,omitempty"`
	}
	listResponse struct {
		Processes []processInfo `json:"processes"`
	}
	empty struct{}
)

// signal is the Signal enum, sent as its name or its number.
type signal int

func (s *signal) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		switch name {
		case "SIGNAL_SIGKILL":
			*s = 9
		case "SIGNAL_SIGTERM":
			*s = 15
		case "SIGNAL_UNSPECIFIED":
			*s = 0
		default:
			return fmt.Errorf("signal %q is not SIGNAL_SIGKILL or SIGNAL_SIGTERM", name)
		}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("signal is neither a name nor a number")
	}
	*s = signal(n)
	return nil
}

// Labels the processes started here carry.
const (
	labelTag = "e2b.tag"
)

// pidOf is E2B's pid of an agent's process.
func pidOf(p *proto.ProcInfo) uint32 { return uint32(max(p.PID, 0)) }

// resolve finds the agent's process id of sel.
func resolve(ctx context.Context, c *agent.Client, sel *processSelector) (string, error) {
	switch {
	case sel == nil:
		return "", rpcErr(codeInvalidArgument, "the request names no process; give process.pid or process.tag")
	case sel.Pid != nil:
		ps, err := c.ProcList(ctx, nil)
		if err != nil {
			return "", err
		}
		// The running one first: an ended process's pid may be reused.
		for _, running := range []bool{true, false} {
			for i := len(ps) - 1; i >= 0; i-- {
				if uint32(ps[i].PID) == *sel.Pid && (ps[i].State == proto.ProcRunning) == running {
					return ps[i].ID, nil
				}
			}
		}
		return "", rpcErr(codeNotFound, "process with pid %d not found", *sel.Pid)
	case sel.Tag != nil:
		ps, err := c.ProcList(ctx, map[string]string{labelTag: *sel.Tag})
		if err != nil {
			return "", err
		}
		for i := len(ps) - 1; i >= 0; i-- {
			if ps[i].State == proto.ProcRunning {
				return ps[i].ID, nil
			}
		}
		return "", rpcErr(codeNotFound, "no running process has the tag %q", *sel.Tag)
	}
	return "", rpcErr(codeInvalidArgument, "the process selector is empty; give process.pid or process.tag")
}

// notFoundProc words the agent's unknown-process error as envd's.
func notFoundProc(err error, sel *processSelector) error {
	if errors.Is(err, errdefs.ErrNotFound) && sel != nil && sel.Pid != nil {
		return rpcErr(codeNotFound, "process with pid %d not found", *sel.Pid)
	}
	return err
}

func (s *Service) serveProcess(w http.ResponseWriter, r *http.Request, t target, method string) {
	ctx := r.Context()
	switch method {
	case "Start":
		s.startProcess(w, r, t)
	case "Connect":
		s.connectProcess(w, r, t)
	case "StreamInput":
		s.streamInput(w, r, t)
	case "List":
		var req empty
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		ps, err := t.c.ProcList(ctx, nil)
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		out := listResponse{Processes: []processInfo{}}
		for _, p := range ps {
			if p.State != proto.ProcRunning {
				continue
			}
			pi := processInfo{Pid: pidOf(&p), Config: processConfig{Envs: map[string]string{}}}
			if len(p.Argv) > 0 {
				pi.Config.Cmd, pi.Config.Args = p.Argv[0], p.Argv[1:]
			}
			if p.Dir != "" {
				d := p.Dir
				pi.Config.Cwd = &d
			}
			if tag, ok := p.Labels[labelTag]; ok {
				pi.Tag = &tag
			}
			out.Processes = append(out.Processes, pi)
		}
		writeUnary(w, out)
	case "SendInput":
		onProcess(w, r, t, func(req *sendInputRequest) *processSelector { return req.Process }, func(req *sendInputRequest, id string) error {
			if req.Input == nil {
				return nil
			}
			data := req.Input.Stdin
			if data == nil {
				data = req.Input.Pty
			}
			if len(data) == 0 {
				return nil
			}
			return t.c.ProcInput(ctx, id, data, false)
		})
	case "CloseStdin":
		onProcess(w, r, t, func(req *selectRequest) *processSelector { return req.Process }, func(_ *selectRequest, id string) error {
			return t.c.ProcInput(ctx, id, nil, true)
		})
	case "SendSignal":
		onProcess(w, r, t, func(req *sendSignalRequest) *processSelector { return req.Process }, func(req *sendSignalRequest, id string) error {
			return s.signalProcess(ctx, t.c, id, req.Signal)
		})
	case "Update":
		onProcess(w, r, t, func(req *updateRequest) *processSelector { return req.Process }, func(req *updateRequest, id string) error {
			if req.Pty == nil || req.Pty.Size == nil {
				return nil
			}
			return t.c.ProcResize(ctx, id, clamp16(req.Pty.Size.Rows), clamp16(req.Pty.Size.Cols))
		})
	default:
		writeUnaryError(w, rpcErr(codeUnimplemented, "process.Process/%s is not a method sandboxd serves; it serves Start, Connect, List, SendInput, StreamInput, SendSignal, Update and CloseStdin", method))
	}
}

// onProcess serves a unary call on one process: it reads the request,
// finds the process it names (sel), runs do on its id and answers empty or
// with the error, worded as envd's for a process that is not there.
func onProcess[T any](w http.ResponseWriter, r *http.Request, t target, sel func(*T) *processSelector, do func(req *T, id string) error) {
	var req T
	err := readUnary(r, &req)
	var id string
	if err == nil {
		id, err = resolve(r.Context(), t.c, sel(&req))
	}
	if err == nil {
		err = do(&req, id)
	}
	answer(w, notFoundProc(err, sel(&req)))
}

// answer ends a unary call with an empty message or err.
func answer(w http.ResponseWriter, err error) {
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, empty{})
}

func clamp16(v uint32) uint16 { return uint16(min(v, 65535)) }

func (s *Service) signalProcess(ctx context.Context, c *agent.Client, id string, sig signal) error {
	switch sig {
	case 9:
		// The whole tree, as envd's SIGKILL of a command's shell leaves
		// nothing of it running.
		p, err := c.ProcGet(ctx, id, 0)
		if err != nil {
			return err
		}
		if p.State != proto.ProcRunning {
			return rpcErr(codeNotFound, "process with pid %d is not running (it %s)", pidOf(p), p.State)
		}
		_, err = c.ProcKill(ctx, id)
		return err
	case 15:
		return c.ProcSignal(ctx, id, "TERM")
	}
	return rpcErr(codeInvalidArgument, "signal %d is not one sandboxd sends; use SIGNAL_SIGKILL or SIGNAL_SIGTERM", int(sig))
}

func (s *Service) startProcess(w http.ResponseWriter, r *http.Request, t target) {
	var req startRequest
	if err := readRequest(r, &req); err != nil {
		streamFail(w, err)
		return
	}
	timeout, err := callTimeout(r)
	if err != nil {
		streamFail(w, err)
		return
	}
	if req.Process == nil || req.Process.Cmd == "" {
		streamFail(w, rpcErr(codeInvalidArgument, "the request has no process.cmd; give the program to run"))
		return
	}
	ps := &proto.ProcStartRequest{
		Argv: append([]string{req.Process.Cmd}, req.Process.Args...), Env: req.Process.Envs,
		Dir: t.acct.home, User: t.acct.agentUser(), Labels: map[string]string{"e2b": "1"}, MaxLive: s.o.MaxLive, RingBytes: s.o.RingBytes,
	}
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		ps.Dir = t.acct.abs(*req.Process.Cwd)
	}
	if req.Tag != nil {
		ps.Labels[labelTag] = *req.Tag
	}
	if req.Pty != nil {
		ps.Pty = &proto.PtySize{Rows: 24, Cols: 80}
		if sz := req.Pty.Size; sz != nil && sz.Rows > 0 && sz.Cols > 0 {
			ps.Pty = &proto.PtySize{Rows: clamp16(sz.Rows), Cols: clamp16(sz.Cols)}
		}
	}
	p, err := t.c.ProcStart(r.Context(), ps)
	if err != nil {
		streamFail(w, err)
		return
	}
	if req.Pty == nil && (req.Stdin == nil || !*req.Stdin) {
		// E2B gives a command no stdin unless asked: a program that reads
		// it sees its end at once rather than waiting forever.
		if err := t.c.ProcInput(r.Context(), p.ID, nil, true); err != nil {
			s.o.Log.Warn("e2b: closing a new process's stdin failed", "sandbox", t.info.ID, "process", p.ID, "err", err)
		}
	}
	if timeout > 0 {
		// envd kills a command at its timeout, whoever still listens.
		s.killAt(t.tenant, t.info.ID, p.ID, timeout)
	}
	s.stream(w, r, t, p.ID, pidOf(p), 0, timeout)
}

func (s *Service) connectProcess(w http.ResponseWriter, r *http.Request, t target) {
	var req selectRequest
	if err := readRequest(r, &req); err != nil {
		streamFail(w, err)
		return
	}
	timeout, err := callTimeout(r)
	if err != nil {
		streamFail(w, err)
		return
	}
	id, err := resolve(r.Context(), t.c, req.Process)
	if err != nil {
		streamFail(w, err)
		return
	}
	p, err := t.c.ProcGet(r.Context(), id, 0)
	if err != nil {
		streamFail(w, notFoundProc(err, req.Process))
		return
	}
	if p.State != proto.ProcRunning {
		streamFail(w, rpcErr(codeNotFound, "process with pid %d is not running (it %s)", pidOf(p), p.State))
		return
	}
	// Like envd, a connection gets the output from now on.
	s.stream(w, r, t, id, pidOf(p), p.Output, timeout)
}

// stream answers a Start or Connect call: the start event, the process's
// output from since as data events, and its end. A timeout ends the stream
// with deadline_exceeded (Start has set the process's kill for it).
func (s *Service) stream(w http.ResponseWriter, r *http.Request, t target, id string, pid uint32, since int64, timeout time.Duration) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if timeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, timeout)
		defer c2()
	}
	st, err := startStream(w, r)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	if st.Send(eventResponse{Event: processEvent{Start: &startEvent{Pid: pid}}}) != nil {
		return
	}
	go keepalive(ctx, r, func() error { return st.Send(eventResponse{Event: processEvent{Keepalive: &struct{}{}}}) })
	st.End(s.follow(ctx, st, t, id, since, timeout))
}

// follow sends the output of process id from since until it ends; a pipe
// that breaks meanwhile is followed again through the pipe of the moment,
// and a sandbox gone under it ends the stream as the sandbox's end.
func (s *Service) follow(ctx context.Context, st *stream, t target, id string, since int64, timeout time.Duration) error {
	c := t.c
	for attempt := 0; ; attempt++ {
		f, err := c.ProcFollow(ctx, id, since)
		for err == nil {
			var fr *proto.ProcFrame
			fr, err = f.Next()
			if err != nil {
				f.Close()
				break
			}
			since = fr.Next
			for _, ch := range fr.Chunks {
				if len(ch.Data) == 0 {
					continue
				}
				var d dataEvent
				switch ch.Stream {
				case proto.StreamStderr:
					d.Stderr = ch.Data
				case proto.StreamPty:
					d.Pty = ch.Data
				default:
					d.Stdout = ch.Data
				}
				if err := st.Send(eventResponse{Event: processEvent{Data: &d}}); err != nil {
					f.Close()
					return err
				}
			}
			if fr.Exit != nil {
				f.Close()
				s.stopKill(t.info.ID, id)
				return st.Send(eventResponse{Event: processEvent{End: endOf(fr.Exit)}})
			}
		}
		if ctx.Err() != nil {
			return timeoutWording(ctx, err, timeout)
		}
		if !errors.Is(err, errdefs.ErrUnavailable) {
			return s.endedBy(ctx, t, err)
		}
		// The pipe broke: a new pipe, or the sandbox's end. The pause
		// lets a sandbox being removed get far enough to tell.
		select {
		case <-ctx.Done():
			return timeoutWording(ctx, ctx.Err(), timeout)
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
		_, cur, cerr := s.conn(ctx, t.tenant, t.info.ID)
		var g errGone
		switch {
		case errors.As(cerr, &g):
			return s.sandboxEnded(ctx, t)
		case attempt >= 3:
			return err
		case cerr == nil:
			c = cur
		}
	}
}

// endedBy is how a follow that failed with err ends: as the sandbox's end
// when the sandbox is gone, err otherwise.
func (s *Service) endedBy(ctx context.Context, t target, err error) error {
	var g errGone
	if _, _, cerr := s.conn(ctx, t.tenant, t.info.ID); errors.As(cerr, &g) {
		return s.sandboxEnded(ctx, t)
	}
	return err
}

// goneWait bounds how long the end of a stream waits for a sandbox whose
// container is gone to be reported gone (not running) as well.
const goneWait = 10 * time.Second

// sandboxEnded is the end of a stream whose sandbox is gone. The container
// goes before the sandbox's record does, and the SDK asks /health (which
// reads the record) as soon as the stream ends: so the end waits, a
// bounded time, for the record to say the sandbox is not running.
func (s *Service) sandboxEnded(ctx context.Context, t target) *rpcError {
	ctx, cancel := context.WithTimeout(ctx, goneWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := s.o.Sandboxes.Get(ctx, t.tenant, t.info.ID)
		if err != nil || info.State != sandbox.StateRunning {
			break
		}
		select {
		case <-ctx.Done():
			return sandboxEnded(t.info.ID)
		case <-tick.C:
		}
	}
	return sandboxEnded(t.info.ID)
}

// sandboxEnded ends the stream of a command whose sandbox was killed (or
// reached its timeout) under it. E2B's SDK recognises a dropped connection
// by Connect's code unknown with "terminated" in the message, asks /health
// (502 for a sandbox that is gone) and then says the sandbox was killed or
// reached its end of life, after this sentence.
func sandboxEnded(id string) *rpcError {
	return rpcErr(codeUnknown, "the command's stream was terminated: sandbox %s was killed or its timeout ended while the command ran", id)
}

// timeoutWording says a command's or a stream's timeout ended it.
func timeoutWording(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return rpcErr(codeDeadlineExceeded, "the call reached its timeout of %s (a command is killed then); pass a larger timeoutMs, or 0 for none", timeout)
	}
	return err
}

// endOf is the end event of an ended process.
func endOf(p *proto.ProcInfo) *endEvent {
	e := &endEvent{Exited: p.ExitCode != nil, Status: p.State}
	switch {
	case p.ExitCode != nil:
		e.ExitCode = int32(*p.ExitCode)
		e.Status = "exit status " + strconv.Itoa(*p.ExitCode)
		if *p.ExitCode != 0 {
			msg := e.Status
			e.Error = &msg
		}
	case p.Signal != "":
		e.ExitCode = -1
		e.Status = "signal: " + strings.ToLower(p.Signal)
		if p.OOMKilled {
			e.Status += " (out of memory)"
		}
		msg := e.Status
		e.Error = &msg
	}
	return e
}

func (s *Service) streamInput(w http.ResponseWriter, r *http.Request, t target) {
	if _, err := startStreamCheck(r); err != nil {
		writeUnaryError(w, err)
		return
	}
	var id string
	var err error
	for {
		var m streamInputRequest
		end, rerr := readEnvelope(r.Body, &m)
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
			break
		}
		if end {
			break
		}
		switch {
		case m.Start != nil:
			id, err = resolve(r.Context(), t.c, m.Start.Process)
		case m.Data != nil && m.Data.Input != nil && id == "":
			err = rpcErr(codeFailedPrecondition, "input came before the start message naming the process; send start first")
		case m.Data != nil && m.Data.Input != nil:
			data := m.Data.Input.Stdin
			if data == nil {
				data = m.Data.Input.Pty
			}
			if len(data) > 0 {
				err = t.c.ProcInput(r.Context(), id, data, false)
			}
		}
		if err != nil {
			break
		}
	}
	st, serr := startStream(w, r)
	if serr != nil {
		return
	}
	if err == nil {
		st.Send(empty{})
	}
	st.End(err)
}

// startStreamCheck checks a client stream's content type before its body
// is read.
func startStreamCheck(r *http.Request) (bool, error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+json") {
		return false, rpcErr(codeInvalidArgument, "content type %q is not served here; send Connect streaming calls as application/connect+json", r.Header.Get("Content-Type"))
	}
	return true, nil
}
