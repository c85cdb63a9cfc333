package debug

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

func (c *call) adapters(ctx context.Context) (string, error) {
	p, err := runProbe(ctx, c.conn.Agent, c.root, c.root, true)
	if err != nil {
		return "", err
	}
	return describeAdapters(p, c.root), nil
}

// live returns the session when it can still be driven.
func (c *call) live(ctx context.Context) (*session, error) {
	s, expired, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	if s == nil {
		if expired != "" {
			return nil, userf("%s", expired)
		}
		return nil, userf("No debug session runs in this conversation; call launch (or attach) first.")
	}
	st := s.state()
	if st.expired {
		return nil, userf("%s", st.endReason)
	}
	if st.ended {
		return nil, userf("The debug session has ended (%s%s); call terminate to clear it, or launch again.", st.endReason, exitText(st.exitCode))
	}
	return s, nil
}

func exitText(code *int) string {
	if code == nil {
		return ""
	}
	return fmt.Sprintf(", exit code %d", *code)
}

func (c *call) status(ctx context.Context) (string, error) {
	s, expired, err := c.session(ctx)
	if err != nil {
		return err.Error(), nil
	}
	if s == nil {
		if expired != "" {
			return expired, nil
		}
		bps := c.sv.breakpoints(c.key)
		return fmt.Sprintf("No debug session. %d file(s) with breakpoints waiting for launch.", len(bps)), nil
	}
	if st := s.state(); st.expired {
		return st.endReason, nil
	}
	head := fmt.Sprintf("Session: %s on %s, %s left before it expires.", s.adapter, c.rel(s.program), remaining(s.started, c.sv.ttl))
	return head + "\n" + c.describe(ctx, s), nil
}

func (c *call) breakpoints(ctx context.Context) (string, error) {
	if c.a.File == "" {
		return "", userf("breakpoints needs file (and lines; an empty list clears the file).")
	}
	file, err := c.conn.Resolve("breakpoint file", c.a.File)
	if err != nil {
		return "", userf("%s; breakpoints go in the project's source files.", err)
	}
	c.sv.setBreakpoints(c.key, file, c.a.Lines)
	s, _ := c.sv.current(c.key)
	if s == nil || s.state().ended {
		if len(c.a.Lines) == 0 {
			return fmt.Sprintf("Cleared the breakpoints of %s.", c.rel(file)), nil
		}
		return fmt.Sprintf("Breakpoints for %s at lines %s saved; they are sent when you launch.", c.rel(file), joinInts(c.a.Lines)), nil
	}
	if !canStopIn(s.adapter, file) {
		// Never sent: the adapter could not stop there, and debugpy
		// would call it verified (placement.go).
		if len(c.a.Lines) == 0 {
			return fmt.Sprintf("Cleared the breakpoints of %s.", c.rel(file)), nil
		}
		return fmt.Sprintf("Breakpoints for %s at lines %s saved for a later launch, not placed in this %s session (%s).",
			c.rel(file), joinInts(c.a.Lines), s.adapter, foreignReason(s.adapter, file)), nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	got, err := s.setBreakpoints(rctx, file, c.a.Lines)
	if err != nil {
		return "", err
	}
	if len(c.a.Lines) == 0 {
		return fmt.Sprintf("Cleared the breakpoints of %s.", c.rel(file)), nil
	}
	return describeBreakpoints(file, c.a.Lines, got), nil
}

// refuseSecond says why a second session cannot start, or cleans up a
// session that has already ended.
func (c *call) refuseSecond(ctx context.Context) error {
	s, _, err := c.session(ctx)
	if err != nil {
		return err
	}
	if s != nil {
		if !s.state().ended {
			return userf("A debug session (%s on %s) is already running in this conversation; call terminate first, then %s again.", s.adapter, c.rel(s.program), c.a.Operation)
		}
		s.terminate()
		c.sv.drop(c.key, s)
	}
	return nil
}

func (c *call) launch(ctx context.Context) (string, error) {
	if c.a.Program == "" {
		return "", userf("launch needs program: the file or binary to debug, relative to the working directory.")
	}
	if err := c.refuseSecond(ctx); err != nil {
		return "", err
	}
	program := c.abs(c.a.Program)
	pr, err := runProbe(ctx, c.conn.Agent, c.root, program, false)
	if err != nil {
		return "", err
	}
	if !pr.exists {
		return "", userf("The program %s does not exist; give a path relative to %s.", c.a.Program, c.root)
	}
	name := adapterFor(program, pr.isDir)
	info := lookupAdapter(name)
	markerDir, _ := pr.marker(info)
	if markerDir == "" {
		return "", userf("The %s adapter needs a root marker (%s) in %s or a directory above it up to %s; none was found. Create one at the project root (an empty %s is enough), then launch again.",
			name, strings.Join(info.markers, ", "), path.Dir(program), c.root, info.markers[len(info.markers)-1])
	}
	root := c.projectRoot(markerDir)
	p := &plan{adapter: name, root: root, program: program, request: "launch"}
	args := nonNil(c.a.Args)
	switch name {
	case adapterDebugpy:
		py, _ := pr.python()
		if py == "" {
			return "", userf("debugpy needs python: no .venv/bin/python or venv/bin/python in the project and no python3 on $PATH.")
		}
		p.argv = debugpyAdapterArgv(py)
		p.args = map[string]any{"type": "python", "request": "launch", "name": "sandboxd", "program": program, "args": args,
			"cwd": root, "console": "internalConsole", "redirectOutput": true, "python": []string{py},
			// The project's own packages import from its root, as with the
			// project installed or run from there.
			"env": map[string]string{"PYTHONPATH": root}}
	case adapterDelve:
		bin := pr.binary(info)
		if bin == "" {
			return "", userf("delve (dlv) is not installed in the sandbox; install it with: go install github.com/go-delve/delve/cmd/dlv@latest")
		}
		pkg := program
		if !pr.isDir {
			pkg = path.Dir(program)
		}
		p.argv, p.socket = []string{bin, "dap"}, true
		p.args = map[string]any{"request": "launch", "mode": "debug", "program": pkg, "args": args, "cwd": root, "outputMode": "remote"}
	case adapterLLDB, adapterDart:
		bin := pr.binary(info)
		if bin == "" {
			return "", userf("The %s adapter is not installed in the sandbox (%s).", name, info.notFound())
		}
		p.argv = []string{bin}
		if name == adapterDart {
			p.argv = []string{bin, "debug_adapter"}
		}
		p.args = map[string]any{"name": "sandboxd", "request": "launch", "program": program, "args": args, "cwd": root}
		if name == adapterLLDB {
			// Turning ASLR off needs personality(2), which the container's
			// seccomp profile refuses; the launch would fail.
			// lldb also takes the target setting, which defaults to on.
			p.args["disableASLR"] = false
			p.args["initCommands"] = []string{"settings set target.disable-aslr false"}
		}
	}
	return c.begin(ctx, p)
}

// begin starts the session, adopts it and waits for the first stop.
func (c *call) begin(ctx context.Context, p *plan) (string, error) {
	send, foreign := splitBreakpoints(p.adapter, c.sv.breakpoints(c.key))
	s, placed, err := startSession(ctx, c.conn.Agent, c.label, p, send, c.sv.to)
	if err != nil {
		return "", err
	}
	c.sv.adopt(c.key, s)
	c.sv.log.Info("debug session started", "adapter", s.adapter, "session", s.id)
	defer s.showOutput(tools.OutputSinkFrom(ctx))()
	c.waitRun(ctx, s, 0)
	var b strings.Builder
	verb := "Launched"
	if p.request == "attach" {
		verb = "Attached to"
	}
	fmt.Fprintf(&b, "%s %s with %s (the session expires in %s).\n", verb, c.rel(p.program), p.adapter, c.sv.ttl)
	if r := describePlacement(p.adapter, placed, foreign, c.rel); r != "" {
		b.WriteString(r + "\n")
	}
	b.WriteString(c.describe(ctx, s))
	b.WriteString(s.endedTail())
	return b.String(), nil
}

func (c *call) attach(ctx context.Context) (string, error) {
	if c.a.Port == 0 {
		return "", userf("attach needs port: the port the debuggee listens on inside the sandbox.")
	}
	if err := c.refuseSecond(ctx); err != nil {
		return "", err
	}
	// The project is the listener's: its root marker is looked for from
	// the directory the listening program runs in.
	walkRoot, start := c.root, c.root
	if dir := c.listenerDir(ctx, c.a.Port); dir != "" {
		start = dir
		if !strings.HasPrefix(dir+"/", c.root+"/") {
			walkRoot = strings.TrimSuffix(path.Clean(c.conn.Workspace), "/")
		}
	}
	pr, err := runProbe(ctx, c.conn.Agent, walkRoot, start, false)
	if err != nil {
		return "", err
	}
	goDir, _ := pr.marker(lookupAdapter(adapterDelve))
	pyDir, _ := pr.marker(lookupAdapter(adapterDebugpy))
	p := &plan{adapter: adapterDebugpy, root: c.projectRoot(pyDir), program: fmt.Sprintf("127.0.0.1:%d", c.a.Port), request: "attach", port: c.a.Port,
		args: map[string]any{"type": "python", "request": "attach", "name": "sandboxd", "justMyCode": false}}
	// A Go project's listener is delve (dlv dap --listen, or a headless
	// dlv); everything else is taken to be debugpy --listen.
	if goDir != "" && pyDir == "" {
		p.adapter, p.root = adapterDelve, c.projectRoot(goDir)
		p.args = map[string]any{"request": "attach", "mode": "remote", "name": "sandboxd"}
	}
	return c.begin(ctx, p)
}

// thread picks the thread an operation applies to: the argument, else the
// one that last stopped, else the first the adapter lists.
func (c *call) thread(ctx context.Context, s *session) (int, error) {
	if c.a.ThreadID != nil {
		if err := s.checkThread(ctx, c, *c.a.ThreadID); err != nil {
			return 0, err
		}
		return *c.a.ThreadID, nil
	}
	if st := s.state(); st.stop != nil && st.stop.ThreadId != 0 {
		return st.stop.ThreadId, nil
	}
	threads, err := c.listThreads(ctx, s)
	if err != nil {
		return 0, err
	}
	if len(threads) == 0 {
		return 0, userf("The debuggee has no threads to act on.")
	}
	return threads[0].Id, nil
}

func (c *call) move(ctx context.Context, op string) (string, error) {
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	st := s.state()
	switch op {
	case "pause":
		if st.stop != nil {
			return "Already stopped.\n" + c.describe(ctx, s), nil
		}
	case "step_over", "step_in", "step_out":
		if st.stop == nil {
			return "", userf("%s needs a stopped program, and it is running; call pause first.", op)
		}
	}
	tid, err := c.thread(ctx, s)
	if err != nil {
		return "", err
	}
	command := map[string]string{"continue": "continue", "pause": "pause", "step_over": "next", "step_in": "stepIn", "step_out": "stepOut"}[op]
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	s.mu.Lock()
	if op == "pause" {
		s.pausing = true
	} else {
		s.stop = nil
	}
	s.mu.Unlock()
	if op == "continue" {
		// Before the request: the program may print the moment it runs.
		defer s.showOutput(tools.OutputSinkFrom(ctx))()
	}
	if err := s.conn.Do(rctx, command, map[string]any{"threadId": tid}, nil); err != nil {
		if op == "pause" {
			s.mu.Lock()
			s.pausing = false
			s.mu.Unlock()
			return "", err
		}
		if !s.restoreStop(st) {
			return "", err
		}
		return "", userf("%s failed (%v); the program did not move and is still stopped.\n%s", op, err, c.describe(ctx, s))
	}
	if op == "continue" {
		c.waitRun(ctx, s, st.epoch)
		return c.describe(ctx, s) + s.endedTail(), nil
	}
	s.waitChange(ctx, st.epoch, c.sv.to.stop)
	if op == "pause" {
		c.pauseInUserCode(ctx, s, tid)
	}
	return c.describe(ctx, s), nil
}

// pauseAgain bounds how often a pause is taken again, and pauseGap is how
// long the program runs in between.
const (
	pauseAgain = 3
	pauseGap   = 20 * time.Millisecond
)

// pauseInUserCode takes a pause again, a moment later, while it caught no
// thread with a frame in the user's code: a Go program stopped in its
// signal trampoline has a stack no debugger unwinds to the caller, so the
// answer could not show where the program spins.
func (c *call) pauseInUserCode(ctx context.Context, s *session, tid int) {
	for range pauseAgain {
		st := s.state()
		if st.stop == nil || st.stop.Reason != "pause" || st.ended || c.stopInUserCode(ctx, s, st.stop) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
		s.mu.Lock()
		s.stop = nil
		s.mu.Unlock()
		err := s.conn.Do(rctx, "continue", map[string]any{"threadId": tid}, nil)
		cancel()
		if err != nil {
			s.restoreStop(st)
			return
		}
		select {
		case <-time.After(pauseGap):
		case <-ctx.Done():
			return
		}
		running := s.state()
		s.mu.Lock()
		s.pausing = true
		s.mu.Unlock()
		rctx, cancel = context.WithTimeout(ctx, c.sv.to.request)
		err = s.conn.Do(rctx, "pause", map[string]any{"threadId": tid}, nil)
		cancel()
		if err != nil {
			s.mu.Lock()
			s.pausing = false
			s.mu.Unlock()
			return
		}
		s.waitChange(ctx, running.epoch, c.sv.to.stop)
	}
}

// stopInUserCode reports whether stop (or the thread focus picks for it)
// has a frame in the user's code within the frames a stop shows.
func (c *call) stopInUserCode(ctx context.Context, s *session, stop *godap.StoppedEventBody) bool {
	stop = c.focus(ctx, s, stop)
	frames, _, err := c.frames(ctx, s, stop.ThreadId, maxFrames)
	if err != nil {
		return true // nothing better is known: show what there is
	}
	for _, f := range frames {
		if inProject(f, c.workspace()) {
			return true
		}
	}
	return false
}

func (c *call) threads(ctx context.Context) (string, error) {
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	threads, err := c.listThreads(ctx, s)
	if err != nil {
		return "", err
	}
	return describeThreads(threads, s.state().stop), nil
}

func (c *call) stack(ctx context.Context) (string, error) {
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	if s.state().stop == nil && c.a.ThreadID == nil {
		return "", userf("The program is running; stack needs it stopped (call pause) or a thread_id.")
	}
	tid, err := c.thread(ctx, s)
	if err != nil {
		return "", err
	}
	frames, total, err := c.frames(ctx, s, tid, maxFrames)
	if err != nil {
		return "", err
	}
	return c.describeStack(ctx, s, tid, frames, total), nil
}

func (c *call) frames(ctx context.Context, s *session, tid, levels int) ([]godap.StackFrame, int, error) {
	var body godap.StackTraceResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if err := s.conn.Do(rctx, "stackTrace", godap.StackTraceArguments{ThreadId: tid, Levels: levels}, &body); err != nil {
		return nil, 0, err
	}
	s.noteFrames(body.StackFrames)
	return body.StackFrames, body.TotalFrames, nil
}

func (c *call) scopes(ctx context.Context) (string, error) {
	if c.a.FrameID == nil {
		return "", userf("scopes needs frame_id: a frame id from a stop or from stack.")
	}
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	if err := s.checkFrame(*c.a.FrameID); err != nil {
		return "", err
	}
	var body godap.ScopesResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if err := s.conn.Do(rctx, "scopes", godap.ScopesArguments{FrameId: *c.a.FrameID}, &body); err != nil {
		return "", err
	}
	for _, sc := range body.Scopes {
		s.noteRefs(sc.VariablesReference)
	}
	return describeScopes(*c.a.FrameID, body.Scopes), nil
}

func (c *call) variables(ctx context.Context) (string, error) {
	if c.a.Reference == 0 {
		return "", userf("variables needs reference: a reference from scopes or from a variable's [ref N].")
	}
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	if err := s.checkRef(c.a.Reference); err != nil {
		return "", err
	}
	var body godap.VariablesResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if err := s.conn.Do(rctx, "variables", godap.VariablesArguments{VariablesReference: c.a.Reference}, &body); err != nil {
		return "", err
	}
	for _, v := range body.Variables {
		s.noteRefs(v.VariablesReference)
	}
	return describeVariables(c.a.Reference, body.Variables), nil
}

func (c *call) evaluate(ctx context.Context) (string, error) {
	if c.a.Expression == "" {
		return "", userf("evaluate needs expression.")
	}
	s, err := c.live(ctx)
	if err != nil {
		return "", err
	}
	args := godap.EvaluateArguments{Expression: c.a.Expression, Context: "repl"}
	if c.a.FrameID != nil {
		if err := s.checkFrame(*c.a.FrameID); err != nil {
			return "", err
		}
		args.FrameId = *c.a.FrameID
	} else if st := s.state(); st.stop != nil {
		frames, _, err := c.frames(ctx, s, st.stop.ThreadId, 1)
		if err == nil && len(frames) > 0 {
			args.FrameId = frames[0].Id
		}
	}
	var body godap.EvaluateResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if err := s.conn.Do(rctx, "evaluate", args, &body); err != nil {
		return "", userf("Evaluating %q failed: %s", c.a.Expression, adapterErrorLine(strings.TrimPrefix(err.Error(), "the adapter refused evaluate: ")))
	}
	s.noteRefs(body.VariablesReference)
	return describeValue(c.a.Expression, body.Type, body.Result, body.VariablesReference), nil
}

func (c *call) output(ctx context.Context) (string, error) {
	s, expired, err := c.session(ctx)
	if err != nil {
		return "", err
	}
	if s == nil {
		if expired != "" {
			return "", userf("%s", expired)
		}
		return "", userf("No debug session runs in this conversation, so there is no output; call launch first.")
	}
	out, dropped := s.takeOutput()
	if out == "" && dropped == 0 {
		return "(no new output since the previous call)", nil
	}
	if dropped > 0 {
		out = fmt.Sprintf("[%d earlier bytes dropped; the last %d bytes follow]\n", dropped, len(out)) + out
	}
	return out, nil
}

func (c *call) terminate(ctx context.Context) (string, error) {
	s, _ := c.sv.current(c.key)
	killed := 0
	if o, _ := orphans(ctx, c.conn.Agent, c.label); len(o) > 0 {
		for _, p := range o {
			if s != nil && p.ID == s.procID {
				continue
			}
			_ = c.conn.Agent.Signal(ctx, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
			killed++
		}
	}
	if s == nil {
		c.sv.drop(c.key, nil)
		if killed > 0 {
			return fmt.Sprintf("Killed %d debug adapter(s) left from before a sandboxd restart.", killed), nil
		}
		return "No debug session was running.", nil
	}
	s.terminate()
	c.sv.drop(c.key, s)
	st := s.state()
	msg := fmt.Sprintf("Terminated the %s session on %s%s.", s.adapter, c.rel(s.program), exitText(st.exitCode))
	if n := s.pendingOutput(); n > 0 {
		out, _ := s.takeOutput()
		msg += "\nOutput not yet read:\n" + capText(out, 4000)
	}
	return msg, nil
}
