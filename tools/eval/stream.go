package eval

import (
	"context"
	"fmt"
	"sync"

	"github.com/sandboxd/sandboxd/tools"
)

// withLiveOutput gives a cell's context a sink that shows its stdout and
// stderr live (when the caller streams; ctx is returned as is otherwise),
// each up to perStream bytes, the cap of what the result keeps.
func withLiveOutput(ctx context.Context, perStream int) context.Context {
	sink := tools.OutputSinkFrom(ctx)
	if sink == nil {
		return ctx
	}
	return tools.WithOutputSink(ctx, &liveCell{sink: sink, max: perStream, sent: map[string]int{}})
}

// liveCell caps each stream of a cell's live output.
type liveCell struct {
	sink tools.OutputSink
	max  int

	mu   sync.Mutex     // guards sent
	sent map[string]int // bytes of each stream shown; -1 once it reached max
}

func (l *liveCell) Output(stream, text string) {
	if stream != tools.StreamStderr {
		stream = tools.StreamStdout
	}
	l.mu.Lock()
	n := l.sent[stream]
	if n < 0 {
		l.mu.Unlock()
		return
	}
	capped := false
	if room := l.max - n; len(text) > room {
		cut := max(room, 0)
		for cut > 0 && text[cut]&0xC0 == 0x80 { // keep characters whole
			cut--
		}
		text, capped = text[:cut], true
	}
	l.sent[stream] = n + len(text)
	if capped {
		l.sent[stream] = -1
	}
	l.mu.Unlock()
	l.sink.Output(stream, text)
	if capped {
		l.sink.Output(stream, fmt.Sprintf("\n[output truncated: %s is shown live up to %d bytes; the result has its head and tail]\n", stream, l.max))
	}
}
