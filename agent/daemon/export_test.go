package daemon

import "github.com/sandboxd/sandboxd/agent/proto"

// WithOpHookForTest runs f before every op (tests use it to panic).
func WithOpHookForTest(f func(proto.Op)) Option { return func(o *options) { o.opHook = f } }
