package debug

import (
	"context"
	"strings"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/tools/debug/dap"
)

// resumedReason is the stop reason of a session picked up after a sandboxd
// restart: the adapter does not repeat why it stopped.
const resumedReason = "stopped before sandboxd restarted (the original reason is not known)"

// resumedNote follows a recorded stop reason after a restart.
const resumedNote = "(before sandboxd restarted)"

// inProject tells whether a frame's source lies in the project root.
func inProject(f godap.StackFrame, root string) bool {
	return f.Source != nil && root != "" && strings.HasPrefix(f.Source.Path, root+"/")
}

// resume picks up a session whose adapter the sandbox agent still runs but
// this supervisor does not know: sandboxd restarted. Its stdio is
// re-attached (the agent kept its output meanwhile); delve's connection is
// held by its dap-bridge, so it is resumed the same way. An adapter that a
// sandboxd before the bridge dialed directly (labelled socket) lost its
// session with the connection. It returns nil, nil when there is nothing to
// resume.
func (c *call) resume(ctx context.Context) (*session, error) {
	o, err := orphans(ctx, c.conn.Agent, c.label)
	if err != nil || len(o) == 0 {
		return nil, nil
	}
	p := o[0]
	adapter := p.Labels[labelAdapter]
	if p.Labels[labelSocket] == "true" {
		return nil, userf("A %s debug adapter from before a sandboxd restart is still running, but its session ended when the connection dropped: call terminate to clear it, then launch again.", adapter)
	}
	s := newSession(p.Labels[labelSession], adapter, c.conn.Agent)
	s.procID, s.adapterPID, s.started, s.resumed = p.ID, p.PID, p.StartedAt, true
	s.program, s.root = p.Labels[labelProgram], p.Labels[labelRoot]
	rwc, err := connectAdapter(ctx, c.conn.Agent, s)
	if err != nil {
		return nil, err
	}
	s.conn = dap.NewConn(rwc, s)
	go s.watch()
	s.initOnce.Do(func() { close(s.initialized) })

	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	var threads godap.ThreadsResponseBody
	if err := s.conn.Do(rctx, "threads", nil, &threads); err != nil {
		s.conn.Close()
		return nil, userf("A %s debug adapter from before a sandboxd restart is running but does not answer (%v); call terminate to end it, then launch again.", adapter, err)
	}
	// A thread whose stack can be read is stopped; otherwise it runs. The
	// adapter does not say again which thread stopped or why: the record
	// the previous sandboxd kept says, when that thread is still stopped;
	// else the thread stopped in the project's own code is taken (a Go
	// program's other goroutines sit in the runtime), else the first.
	rec := s.recordedStop(rctx)
	var stop *godap.StoppedEventBody
	fallback, fallbackInProject := 0, false
	for _, t := range threads.Threads {
		var st godap.StackTraceResponseBody
		if s.conn.Do(rctx, "stackTrace", godap.StackTraceArguments{ThreadId: t.Id, Levels: 1}, &st) != nil || len(st.StackFrames) == 0 {
			continue
		}
		if rec != nil && rec.ThreadId == t.Id {
			r := *rec
			r.Reason += " " + resumedNote
			stop = &r
			break
		}
		if in := inProject(st.StackFrames[0], s.root); fallback == 0 || in && !fallbackInProject {
			fallback, fallbackInProject = t.Id, in
		}
	}
	if stop == nil && fallback != 0 {
		stop = &godap.StoppedEventBody{Reason: resumedReason, ThreadId: fallback}
	}
	if stop != nil {
		s.mu.Lock()
		if s.stop == nil {
			s.stop = stop
			s.bumpLocked()
		}
		s.mu.Unlock()
	}
	c.sv.adopt(c.key, s)
	c.sv.log.Info("debug session resumed after a restart", "adapter", adapter, "session", s.id)
	return s, nil
}

// session returns the conversation's session, resuming one left by a
// previous sandboxd; nil when there is none.
func (c *call) session(ctx context.Context) (*session, string, error) {
	s, expired := c.sv.current(c.key)
	if s != nil || expired != "" {
		return s, expired, nil
	}
	s, err := c.resume(ctx)
	return s, "", err
}
