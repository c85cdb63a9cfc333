package files

import (
	"fmt"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// liveShell feeds a streamed exec's output to the call's sink as text,
// saying where the agent left bytes out or stopped streaming a stream (its
// head and tail are still in the result).
func liveShell(sink tools.OutputSink) func(*proto.ExecOutput) {
	chunkers := map[string]*tools.UTF8Chunker{}
	return func(o *proto.ExecOutput) {
		c := chunkers[o.Stream]
		if c == nil {
			c = &tools.UTF8Chunker{}
			chunkers[o.Stream] = c
		}
		if o.Dropped > 0 {
			sink.Output(o.Stream, fmt.Sprintf("\n[%d bytes of %s not shown live]\n", o.Dropped, o.Stream))
		}
		if text := c.Next(o.Data); text != "" {
			sink.Output(o.Stream, text)
		}
		if o.Capped {
			sink.Output(o.Stream, fmt.Sprintf("\n[output truncated: %s is shown live up to the call's cap; the result has its head and tail]\n", o.Stream))
		}
	}
}
