package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// procHTTP calls a process route and decodes its JSON answer.
func procHTTP(t *testing.T, d *daemon, method, path string, body, out any, want int) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequestWithContext(ctx(t), method, d.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var e map[string]any
		json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("%s %s = %d, want %d: %v", method, path, resp.StatusCode, want, e)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// sseEvents reads an SSE stream until it ends or the context does.
func sseEvents(t *testing.T, d *daemon, path string, within time.Duration) []struct{ name, data string } {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, "GET", d.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []struct{ name, data string }
	sc := bufio.NewScanner(resp.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			evs = append(evs, struct{ name, data string }{name, strings.TrimPrefix(line, "data: ")})
			if name == "exit" {
				return evs
			}
		}
	}
	return evs
}

// TestProcesses: long-lived processes in a Docker sandbox through the
// process tool and HTTP: their first words, true exit statuses, output by
// cursor as JSON and as a stream, a terminal, the limit, and survival of
// the run's end and a sandboxd kill -9.
func TestProcesses(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandboxd.yaml")
	os.WriteFile(cfg, []byte("processes: {max_running: 6}\n"), 0o600)
	d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfg)
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "procs", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "procs"})
	if err != nil {
		t.Fatal(err)
	}
	proc := func(args map[string]any) string { return mustCall(t, d, run.ID, "process", args) }
	idOf := func(out string) string {
		m := regexp.MustCompile(`started (p\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no process id in %q", out)
		}
		return m[1]
	}

	// A server shows its first words; it keeps running after the call.
	out := proc(map[string]any{"action": "start", "command": "python3 -u -m http.server 8123"})
	server := idOf(out)
	if !strings.Contains(out, "Serving HTTP on") || !strings.Contains(out, "state: running") {
		t.Fatalf("start of a server: %s", out)
	}
	if got := mustCall(t, d, run.ID, "shell", map[string]any{"command": "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8123/"}); !strings.Contains(got, "200") {
		t.Fatalf("the server started with process does not answer: %s", got)
	}

	// Exit statuses are the process's own.
	for _, c := range []struct{ cmd, want string }{
		{"exit 0", "exited 0"}, {"echo bye; exit 3", "exited 3"},
		{"kill -KILL $$", "killed by SIGKILL"}, {"kill -TERM $$", "killed by SIGTERM"},
	} {
		id := idOf(proc(map[string]any{"action": "start", "command": c.cmd}))
		if got := proc(map[string]any{"action": "wait", "id": id, "timeout_s": 20}); !strings.Contains(got, c.want) {
			t.Errorf("%q: wait says %q, want %q", c.cmd, got, c.want)
		}
	}
	sleeper := idOf(proc(map[string]any{"action": "start", "command": "sleep 300 & sleep 300; wait"}))
	if got := proc(map[string]any{"action": "signal", "id": sleeper, "signal": "KILL"}); !strings.Contains(got, "killed by SIGKILL") {
		t.Errorf("signal KILL: %s", got)
	}
	if got := mustCall(t, d, run.ID, "shell", map[string]any{"command": "ps -eo args | grep -c '^sleep 300$' || true"}); !strings.Contains(got, "\n0\n") {
		t.Errorf("a killed process's children live on: %s", got)
	}

	// Output by cursor: no gap and no repeat across reads.
	var seen []int
	collect := func(got string) {
		for _, m := range regexp.MustCompile(`(?m)^n(\d+)$`).FindAllStringSubmatch(got, -1) {
			n, _ := strconv.Atoi(m[1])
			seen = append(seen, n)
		}
	}
	// Lines end each read (a read ends where the output did), so a line is
	// never split between two answers here: each echo is one write.
	first := proc(map[string]any{"action": "start", "command": "i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo n$i; sleep 0.01; done"})
	counter := idOf(first)
	collect(first) // what it printed in its first second
	waitFor(t, 30*time.Second, "the counter's output", func() error {
		collect(proc(map[string]any{"action": "output", "id": counter}))
		if len(seen) < 400 {
			return fmt.Errorf("%d lines so far", len(seen))
		}
		return nil
	})
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("output read in pieces has a gap or a repeat at %d: %v", i, seen[max(0, i-3):min(len(seen), i+3)])
		}
	}

	// HTTP: a start, its output as a stream ending with the exit.
	var p api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "for i in 1 2 3; do echo line $i; sleep 0.2; done; echo done >&2; exit 4"}, &p, http.StatusCreated)
	evs := sseEvents(t, d, "/v1/sandboxes/"+sb.ID+"/processes/"+p.ID+"/output?since=0", 30*time.Second)
	var text strings.Builder
	for _, e := range evs {
		if e.name == "output" {
			var oc api.OutputChunk
			json.Unmarshal([]byte(e.data), &oc)
			text.WriteString(oc.Text)
		}
	}
	if last := evs[len(evs)-1]; last.name != "exit" || !strings.Contains(last.data, `"code":4`) || text.String() != "line 1\nline 2\nline 3\ndone\n" {
		t.Fatalf("the output stream: %q then %+v", text.String(), evs[len(evs)-1])
	}
	var got api.Process
	procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+p.ID, nil, &got, http.StatusOK)
	if got.State != "exited" || got.ExitCode == nil || *got.ExitCode != 4 || got.Status != "exited 4" {
		t.Fatalf("GET the process: %+v", got)
	}

	// A terminal: stty sees its size, and a resize.
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "bash", Pty: &api.TermSize{Rows: 24, Cols: 80}}, &p, http.StatusCreated)
	term := p.ID
	readAll := func() string {
		var po api.ProcessOutput
		procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+term+"/output?since=0", nil, &po, http.StatusOK)
		var b strings.Builder
		for _, c := range po.Chunks {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes/"+term+"/input", api.ProcessInput{Text: "stty size\n"}, nil, http.StatusNoContent)
	waitFor(t, 10*time.Second, "stty size in the terminal", func() error {
		if !strings.Contains(readAll(), "24 80") {
			return fmt.Errorf("not yet: %q", readAll())
		}
		return nil
	})
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes/"+term+"/resize", api.TermSize{Rows: 40, Cols: 100}, nil, http.StatusNoContent)
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes/"+term+"/input", api.ProcessInput{Text: "stty size\n"}, nil, http.StatusNoContent)
	waitFor(t, 10*time.Second, "the new size in the terminal", func() error {
		if !strings.Contains(readAll(), "40 100") {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// The limit: six running (the server, the terminal, a ticker and three
	// more).
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "i=0; while :; do i=$((i+1)); echo t$i; sleep 0.05; done"}, &p, http.StatusCreated)
	ticker := p.ID
	for i := 0; i < 3; i++ {
		proc(map[string]any{"action": "start", "command": "sleep 600"})
	}
	if _, err := call(t, d, run.ID, "process", map[string]any{"action": "start", "command": "sleep 600"}); err == nil || !strings.Contains(err.Error(), "6") {
		t.Fatalf("a start past the limit: %v", err)
	}

	// The run ends, sandboxd is killed and restarted: the server still runs,
	// under the same id, and the ticker's output continues from the cursor
	// with no gap and no repeat.
	ticks := func(since int64) ([]int, int64) {
		var po api.ProcessOutput
		procHTTP(t, d, "GET", fmt.Sprintf("/v1/sandboxes/%s/processes/%s/output?since=%d", sb.ID, ticker, since), nil, &po, http.StatusOK)
		var text strings.Builder
		for _, c := range po.Chunks {
			text.WriteString(c.Text)
		}
		var ns []int
		for _, m := range regexp.MustCompile(`(?m)^t(\d+)$`).FindAllStringSubmatch(text.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			ns = append(ns, n)
		}
		if po.Dropped != 0 {
			t.Fatalf("the ticker's buffer dropped %d bytes", po.Dropped)
		}
		return ns, po.Next
	}
	before, cursor := ticks(0)
	if err := d.Client.DeleteRun(ctx(t), run.ID); err != nil {
		t.Fatal(err)
	}
	d.kill()
	time.Sleep(500 * time.Millisecond) // the ticker prints on while sandboxd is down
	d.start()
	after, _ := ticks(cursor)
	all := append(before, after...)
	if len(before) == 0 || len(after) < 5 {
		t.Fatalf("the ticker printed %d lines before the kill and %d after", len(before), len(after))
	}
	for i, n := range all {
		if n != i+1 {
			t.Fatalf("the ticker's output across a kill -9 of sandboxd has a gap or a repeat at %d: %v", i, all[max(0, i-3):min(len(all), i+3)])
		}
	}
	var list []api.Process
	procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes", nil, &list, http.StatusOK)
	alive := false
	for _, q := range list {
		alive = alive || q.ID == server && q.State == "running"
	}
	if !alive {
		t.Fatalf("after the run's end and a kill -9 of sandboxd the server is not running: %+v", list)
	}
	procHTTP(t, d, "DELETE", "/v1/sandboxes/"+sb.ID+"/processes/"+server, nil, nil, http.StatusNoContent)
	procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+server, nil, &got, http.StatusOK)
	if got.State != "killed" || got.Signal != "KILL" {
		t.Fatalf("after DELETE: %+v", got)
	}
}
