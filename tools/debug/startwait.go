package debug

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// startGrace is how long launch, attach and continue wait for a stop or an
// exit when nothing is expected to stop the program (no breakpoints): long
// enough that an exception or exit right after the start is reported as
// such, short enough that a program that simply runs is reported "running"
// at once instead of after the whole stop wait.
const startGrace = time.Second

// runWait is how long to wait for the next stop after the program was
// started or resumed: the full stop wait when a breakpoint the adapter
// placed may stop it, else the grace. A session resumed after a restart
// does not know which breakpoints its adapter holds (they were placed by
// the sandboxd before), so it keeps the full wait: otherwise a program
// that ends a moment past the grace would be reported "running".
func (c *call) runWait(s *session) time.Duration {
	s.mu.Lock()
	armed := len(s.armed) > 0
	s.mu.Unlock()
	if armed || s.resumed {
		return c.sv.to.stop
	}
	return min(startGrace, c.sv.to.stop)
}

// outputTailCap bounds the program output quoted when a result says the
// program ended.
const outputTailCap = 2000

// endedTail is the tail of the program's unread output, for a result that
// says the program ended; the output stays unread, so output still returns
// all of it.
func (s *session) endedTail() string {
	st := s.state()
	if !st.ended && st.exitCode == nil {
		return ""
	}
	s.mu.Lock()
	out := string(s.out)
	s.mu.Unlock()
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return ""
	}
	if len(out) > outputTailCap {
		out = "…" + out[len(out)-outputTailCap:]
	}
	return fmt.Sprintf("\nIts output (tail):\n%s", out)
}

// waitRun waits for a stop or an exit after the program started or
// resumed at epoch since.
func (c *call) waitRun(ctx context.Context, s *session, since int) {
	s.waitChange(ctx, since, c.runWait(s))
}
