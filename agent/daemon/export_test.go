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
