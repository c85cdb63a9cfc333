package debug

import (
	"context"
	"strings"

	godap "github.com/google/go-dap"
)

// maxFocusThreads bounds the threads whose top frame focus reads.
const maxFocusThreads = 64

// isFault tells a stop on a panic, an exception or a crash signal.
func isFault(stop *godap.StoppedEventBody) bool {
	return stop.Reason == "exception" || stop.Reason == "panic"
}

// workspace is the sandbox's workspace without a trailing slash.
func (c *call) workspace() string { return strings.TrimSuffix(c.conn.Workspace, "/") }

// focus picks the thread a stop is reported from. Adapters name the thread
// that stopped, but not always usefully: delve's pause can name thread 0
// or a goroutine parked in the runtime (runtime.futex) while main.main
// runs the loop that was paused. A stop without a thread, or a pause whose
// thread is outside the workspace, is reported from the first thread stopped
// in the user's code, the adapter's focused one first (delve marks it
// "*"), else the focused one, else as named. The choice is kept as the
// session's stop, so a later step or stack acts on the same thread.
func (c *call) focus(ctx context.Context, s *session, stop *godap.StoppedEventBody) *godap.StoppedEventBody {
	if stop.ThreadId != 0 && stop.Reason != "pause" {
		return stop
	}
	if stop.ThreadId != 0 && c.topInWorkspace(ctx, s, stop.ThreadId) {
		return stop
	}
	threads, err := c.listThreads(ctx, s)
	if err != nil || len(threads) == 0 {
		return stop
	}
	focused := 0
	for _, t := range threads {
		if strings.HasPrefix(t.Name, "* ") || strings.Contains(t.Name, " * ") {
			focused = t.Id
			break
		}
	}
	pick := 0
	if focused != 0 && focused != stop.ThreadId && c.topInWorkspace(ctx, s, focused) {
		pick = focused
	}
	for i, t := range threads {
		if pick != 0 || i == maxFocusThreads {
			break
		}
		if t.Id != stop.ThreadId && t.Id != focused && c.topInWorkspace(ctx, s, t.Id) {
			pick = t.Id
		}
	}
	switch {
	case pick != 0:
	case stop.ThreadId != 0:
		return stop
	case focused != 0:
		pick = focused
	default:
		pick = threads[0].Id
	}
	n := *stop
	n.ThreadId = pick
	return s.refocus(stop, &n)
}

func (c *call) topInWorkspace(ctx context.Context, s *session, tid int) bool {
	var body godap.StackTraceResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if s.conn.Do(rctx, "stackTrace", godap.StackTraceArguments{ThreadId: tid, Levels: 1}, &body) != nil || len(body.StackFrames) == 0 {
		return false
	}
	return inProject(body.StackFrames[0], c.workspace())
}

// refocus replaces the session's stop old by n when it is still current,
// and returns the stop to describe.
func (s *session) refocus(old, n *godap.StoppedEventBody) *godap.StoppedEventBody {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != old {
		return old
	}
	s.stop = n
	return n
}
