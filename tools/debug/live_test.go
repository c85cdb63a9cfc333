package debug_test

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// gateSink records what it is shown and, on seeing "tick", writes the gate
// file the debuggee waits for (off its own goroutine: a sink must not block).
type gateSink struct {
	gate string
	mu   sync.Mutex // guards got
	got  []string
}

func (g *gateSink) Output(stream, text string) {
	g.mu.Lock()
	g.got = append(g.got, stream+":"+text)
	g.mu.Unlock()
	if strings.Contains(text, "tick") {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sb.ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: path.Dir(g.gate), Files: []proto.WriteFile{{Path: path.Base(g.gate), Data: []byte("go")}}})
		}()
	}
}

// TestContinueStreamsOutput: a continue whose caller streams shows the
// program's output while it waits. The program goes past its first line
// only once that line was shown (it waits for a file the sink writes), so
// the output reached the caller while the program ran.
func TestContinueStreamsOutput(t *testing.T) {
	h := newHarness(t)
	gate := path.Join(h.dir, "gate")
	h.put("requirements.txt", "")
	h.put("app.py", "import os, sys, time\n"+
		"print('tick', flush=True)\n"+
		"while not os.path.exists("+jsonString(gate)+"):\n"+
		"    time.sleep(0.05)\n"+
		"sys.stderr.write('tock\\n')\n")
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "print('tick'")}), "saved")
	h.ok(op("launch", "program", "app.py"), "Stopped: breakpoint", h.at("app.py", "print('tick'"))

	sink := &gateSink{gate: gate}
	ctx, cancel := context.WithTimeout(tools.WithOutputSink(context.Background(), sink), 2*time.Minute)
	defer cancel()
	res, err := h.reg.Call(ctx, h.env, "debug", json.RawMessage(`{"operation":"continue"}`))
	if err != nil || res.IsError {
		t.Fatalf("continue: %v %s", err, res.Text())
	}
	sink.mu.Lock()
	got := strings.Join(sink.got, "|")
	sink.mu.Unlock()
	if !strings.HasPrefix(got, "stdout:tick") || !strings.Contains(got, "stderr:tock") {
		t.Fatalf("the continue showed %q live; result:\n%s", got, res.Text())
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
