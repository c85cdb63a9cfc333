package api

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/tools"
)

// OutputEvent is the data of one `output` event of a streamed tool call.
type OutputEvent struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Text   string `json:"text"`
}

// outputQueue is the tools.OutputSink of one streamed call: the tool's
// goroutine puts text in, the handler's goroutine takes it out and writes
// it. It never blocks the tool: text beyond the buffer is dropped (and a
// marker says how much), and text beyond the stream's cap is cut once with
// "[output truncated ...]". The call's result is never affected.
type outputQueue struct {
	maxBytes int64 // total text the stream shows, all of it offered counted
	bufBytes int   // text waiting for the writer at most

	notify chan struct{} // cap 1: text is waiting

	mu            sync.Mutex // guards the fields below
	pending       []OutputEvent
	pendingBytes  int
	offered       int64  // bytes offered so far, dropped ones included
	dropped       int64  // bytes dropped since the writer last took
	droppedStream string // the stream the first of them belonged to
	truncated     bool   // the cap was reached
	truncStream   string // the stream that reached it, while its marker waits
}

var _ tools.OutputSink = (*outputQueue)(nil)

func newOutputQueue(maxBytes int64, bufBytes int) *outputQueue {
	return &outputQueue{maxBytes: maxBytes, bufBytes: bufBytes, notify: make(chan struct{}, 1)}
}

// Output queues text; see outputQueue.
func (q *outputQueue) Output(stream, text string) {
	if text == "" {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.truncated {
		return
	}
	cut := false
	if room := q.maxBytes - q.offered; int64(len(text)) > room {
		text, cut = prefixUTF8(text, int(max(room, 0))), true
	}
	q.offered += int64(len(text))
	switch {
	case text == "":
	case q.dropped > 0 || q.pendingBytes+len(text) > q.bufBytes:
		// Once anything is dropped, everything is until the writer catches
		// up, so the marker stands exactly where the gap is.
		if q.dropped == 0 {
			q.droppedStream = stream
		}
		q.dropped += int64(len(text))
	default:
		q.appendLocked(stream, text)
	}
	if cut {
		q.truncated, q.truncStream = true, stream
	}
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// appendLocked adds text, joining it to the last event of the same stream.
func (q *outputQueue) appendLocked(stream, text string) {
	q.pendingBytes += len(text)
	if n := len(q.pending); n > 0 && q.pending[n-1].Stream == stream {
		q.pending[n-1].Text += text
		return
	}
	q.pending = append(q.pending, OutputEvent{Stream: stream, Text: text})
}

// take returns what is waiting, with a marker for what was dropped.
func (q *outputQueue) take() []OutputEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending, q.pendingBytes = nil, 0
	// Both markers stand after what is waiting: nothing is queued once
	// text is dropped, and nothing at all once the cap is reached.
	if q.dropped > 0 {
		out = append(out, OutputEvent{Stream: q.droppedStream,
			Text: fmt.Sprintf("\n[%d bytes of output not shown: the client read the stream too slowly]\n", q.dropped)})
		q.dropped = 0
	}
	if q.truncStream != "" {
		out = append(out, OutputEvent{Stream: q.truncStream,
			Text: fmt.Sprintf("\n[output truncated: a streamed call shows at most %d bytes live; the result has the call's own output]\n", q.maxBytes)})
		q.truncStream = ""
	}
	return out
}

// prefixUTF8 is at most n bytes of s, not cutting a character in two.
func prefixUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
