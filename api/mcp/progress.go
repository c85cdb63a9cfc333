package mcp

import (
	"encoding/json"
	"sync"

	"github.com/sandboxd/sandboxd/tools"
)

const (
	// progressQueue is how many progress notifications wait for a slow
	// client before more are dropped (the call never waits for it).
	progressQueue = 256
	// progressMax caps the output text one call sends as progress; the
	// result carries the output the tool keeps either way.
	progressMax = 1 << 20
)

// progressToken is the token a request asks progress under
// (params._meta.progressToken), or nil.
func progressToken(m *message) json.RawMessage {
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return nil
	}
	t := p.Meta.ProgressToken
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	return t
}

// progressSink turns a tool's live output (tools.OutputSink) into
// notifications/progress messages for the call's SSE response: progress is
// the output's length so far (it only grows, as the protocol asks), the
// message the text, stderr marked. A client that does not keep up loses
// notifications, never slows the call.
type progressSink struct {
	token json.RawMessage
	out   chan []byte // encoded notifications, in order; closed by nobody

	mu      sync.Mutex // guards sent and dropped
	sent    int        // output bytes passed on
	dropped bool
}

var _ tools.OutputSink = (*progressSink)(nil)

func newProgressSink(token json.RawMessage) *progressSink {
	return &progressSink{token: token, out: make(chan []byte, progressQueue)}
}

func (p *progressSink) Output(stream, text string) {
	if text == "" {
		return
	}
	if stream == "stderr" {
		text = "[stderr] " + text
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped || p.sent+len(text) > progressMax {
		p.dropped = true
		return
	}
	p.sent += len(text)
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/progress",
		"params":  map[string]any{"progressToken": p.token, "progress": p.sent, "message": text},
	})
	if err != nil {
		return
	}
	select {
	case p.out <- b:
	default:
		p.dropped = true
	}
}
