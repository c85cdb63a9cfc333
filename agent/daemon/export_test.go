package daemon

import (
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// WithOpHookForTest runs f before every op (tests use it to panic).
func WithOpHookForTest(f func(proto.Op)) Option { return func(o *options) { o.opHook = f } }

// WithEgressWaitForTest shortens how long a proxied connection waits for a
// session before the program is told why not.
func WithEgressWaitForTest(d time.Duration) Option { return func(o *options) { o.egressWait = d } }

// WithOOMCounterForTest reads the OOM kill count from path (a cgroup's
// memory.events or memory.oom_control) instead of the agent's own cgroup.
func WithOOMCounterForTest(path string) Option { return func(o *options) { o.oomCounter = path } }
