package daemon

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// outputClock keeps when a long-lived process last wrote output, any of
// them: every ring of the longTable marks it (op activity, for sandboxd's
// idle detection).
type outputClock struct {
	last atomic.Int64 // unix nanoseconds; 0: no output yet
}

// mark moves the clock to now, never back (two writers may race).
func (c *outputClock) mark(now time.Time) {
	n := now.UnixNano()
	for {
		old := c.last.Load()
		if old >= n || c.last.CompareAndSwap(old, n) {
			return
		}
	}
}

func (c *outputClock) time() time.Time {
	if n := c.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// activity answers op activity: the last output of any long-lived process
// and how many run.
func (ps *processService) activity(context.Context, *request) (*proto.Response, func(), error) {
	a := &proto.Activity{At: time.Now(), LastOutput: ps.long.clock.time(), Running: ps.long.running()}
	return &proto.Response{Activity: a}, nil, nil
}

// running counts the processes that have not ended.
func (t *longTable) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.order {
		if !p.ended() {
			n++
		}
	}
	return n
}
