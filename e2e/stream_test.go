package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// sseEvent is one event of a streamed tool call as a client reads it;
// comment holds a comment line's text (a heartbeat).
type sseEvent struct{ name, data, comment string }

// streamCall posts a tool call with Accept: text/event-stream and returns
// the response; events reads its events one at a time.
func streamCall(t *testing.T, ctx context.Context, d *daemon, run, tool string, args any) (*http.Response, func() (sseEvent, bool)) {
	t.Helper()
	raw, _ := json.Marshal(args)
	req, err := http.NewRequestWithContext(ctx, "POST", d.URL+"/v1/runs/"+run+"/tools/"+tool, strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return resp, func() (sseEvent, bool) {
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.name != "":
				return ev, true
			case strings.HasPrefix(line, ":"):
				return sseEvent{comment: strings.TrimSpace(line[1:])}, true
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[len("data: "):]
			}
		}
		return ev, false
	}
}

// plainBody is a plain call's response, as bytes.
func plainBody(t *testing.T, d *daemon, run, tool string, args any) string {
	t.Helper()
	raw, _ := json.Marshal(args)
	req, _ := http.NewRequestWithContext(ctx(t), "POST", d.URL+"/v1/runs/"+run+"/tools/"+tool, strings.NewReader(string(raw)))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain %s call: %d %s", tool, resp.StatusCode, b)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// TestStreamedToolCalls drives streamed calls through the HTTP API against
// a real sandbox: shell's first line arrives as an output event before the
// command has printed its second, and before the result; the result event
// is byte for byte the plain call's response; a silent call heartbeats; a
// client that disconnects ends its call as a plain call's would and the
// conversation goes on; eval streams a cell's output too.
func TestStreamedToolCalls(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, "limits:\n  stream_heartbeat: 200ms\n")
	d := startDaemon(t, "docker", t.TempDir(), "--config", cfg)
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-stream"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-stream"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("shell output arrives while the command runs", func(t *testing.T) {
		args := map[string]any{"command": "echo first; sleep 3; echo second"}
		resp, next := streamCall(t, ctx(t), d, run.ID, "shell", args)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("streamed shell: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var order []string // "output:<text>" and "result", heartbeats left out
		result := ""
		for {
			ev, ok := next()
			if !ok {
				break
			}
			switch ev.name {
			case api.EventOutput:
				var o api.OutputEvent
				if err := json.Unmarshal([]byte(ev.data), &o); err != nil {
					t.Fatal(err)
				}
				order = append(order, "output:"+o.Stream+":"+o.Text)
			case api.EventResult:
				order, result = append(order, "result"), ev.data
			case api.EventError:
				t.Fatalf("error event %s", ev.data)
			}
		}
		// The first event holds only the first line: "second" was not
		// printed yet when it was sent, so it was sent while the command ran.
		if len(order) < 3 || order[0] != "output:stdout:first\n" || order[len(order)-1] != "result" ||
			!strings.Contains(strings.Join(order[1:len(order)-1], ""), "second") {
			t.Fatalf("events %q, want the first line alone first, then the second, then the result", order)
		}
		if plain := plainBody(t, d, run.ID, "shell", args); result != plain {
			t.Fatalf("result event\n%s\nplain answer\n%s", result, plain)
		}
	})

	t.Run("a silent call heartbeats", func(t *testing.T) {
		_, next := streamCall(t, ctx(t), d, run.ID, "shell", map[string]any{"command": "sleep 1.5"})
		beats, result := 0, false
		for {
			ev, ok := next()
			if !ok {
				break
			}
			if ev.comment == "heartbeat" && !result {
				beats++
			}
			result = result || ev.name == api.EventResult
		}
		if beats < 2 || !result {
			t.Fatalf("%d heartbeats before the result (result seen: %v)", beats, result)
		}
	})

	t.Run("a client that disconnects", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx(t))
		_, next := streamCall(t, cctx, d, run.ID, "shell", map[string]any{"command": "echo started; sleep 20; echo finished > left.txt"})
		ev, _ := next()
		for ev.comment == "heartbeat" {
			ev, _ = next()
		}
		if ev.name != api.EventOutput {
			t.Fatalf("first event %+v", ev)
		}
		cancel()
		// The conversation's next call runs at once: the disconnected call
		// was ended as a plain call's is (its command killed), not left to
		// hold the conversation for its 20 s.
		start := time.Now()
		out := mustCall(t, d, run.ID, "shell", map[string]any{"command": "sleep 1; ls"})
		if strings.Contains(out, "left.txt") || time.Since(start) > 15*time.Second {
			t.Fatalf("after the disconnect (%s): %s", time.Since(start), out)
		}
	})

	// A plain print, unflushed, and console.log before an awaited sleep
	// reach the stream while the cell still runs: the first event holds the
	// first line alone.
	for lang, code := range map[string]string{
		"python":     "import time\nprint('first')\ntime.sleep(2)\nprint('second')\n'done'",
		"javascript": "console.log('first');\nawait new Promise(r => setTimeout(r, 2000));\nconsole.log('second');\n'done'",
	} {
		t.Run("eval streams a "+lang+" cell", func(t *testing.T) {
			var got []api.OutputEvent
			res, err := d.Client.CallToolStream(ctx(t), run.ID, "eval", json.RawMessage(mustJSON(t, evalArgs(lang, code))), func(ev api.OutputEvent) {
				got = append(got, ev)
			})
			if err != nil || res.IsError {
				t.Fatalf("eval: %v %s", err, res.Text())
			}
			if len(got) < 2 || got[0].Text != "first\n" || !strings.Contains(got[len(got)-1].Text, "second") || !strings.Contains(res.Text(), "done") {
				t.Fatalf("eval output %+v, result %s", got, res.Text())
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
