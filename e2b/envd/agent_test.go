package envd

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// These tests run the service against a real agent daemon in this process
// (package agenttest): the calls E2B's JavaScript SDK does not make
// (StreamInput, the polling watcher, SIGTERM, tags) and the wire details
// it relies on.

type oneSandbox struct {
	info sandbox.Info
	c    *agent.Client
}

func (o oneSandbox) Get(_ context.Context, tenant, id string) (sandbox.Info, error) {
	if tenant != o.info.Tenant || id != o.info.ID {
		return sandbox.Info{}, errdefs.NotFound("no sandbox %s", id)
	}
	return o.info, nil
}

func (o oneSandbox) AgentOf(_ context.Context, info sandbox.Info) (*agent.Client, sandbox.Info, error) {
	return o.c, o.info, nil
}

type rig struct {
	t   *testing.T
	srv *httptest.Server
	ws  string
}

func newRig(t *testing.T) *rig {
	c, _ := agenttest.New(t, daemon.WithStateDir(t.TempDir()))
	ws := t.TempDir()
	// The agent runs on this machine as the sandbox: its accounts are a
	// file of the test's, whose default account is this process's uid
	// with the workspace for its home.
	passwd := filepath.Join(t.TempDir(), "passwd")
	entry := fmt.Sprintf("user:x:%d:%d::%s:/bin/sh\n", os.Getuid(), os.Getgid(), ws)
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/sh\n"+entry), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := New(Options{Sandboxes: oneSandbox{info: sandbox.Info{ID: "sb1", Tenant: "acme", State: "running", Workspace: ws}, c: c}, Passwd: passwd})
	t.Cleanup(func() { svc.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { svc.ServeSandbox(w, r, "acme", "sb1") }))
	t.Cleanup(srv.Close)
	return &rig{t: t, srv: srv, ws: ws}
}

// unary calls a unary method and decodes its answer into out; it returns
// the status and, for an error, its code.
func (g *rig) unary(method string, in, out any) (int, string) {
	g.t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(g.srv.URL+"/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		var e rpcError
		json.Unmarshal(body, &e)
		return resp.StatusCode, e.Code
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			g.t.Fatalf("%s: %v in %s", method, err, body)
		}
	}
	return 200, ""
}

// streamCall opens a server stream and returns its envelopes as they come.
func (g *rig) streamCall(method string, in any, hdr map[string]string) *streamReader {
	g.t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", g.srv.URL+"/"+method, bytes.NewReader(envelope(0, b)))
	req.Header.Set("Content-Type", "application/connect+json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		g.t.Fatalf("%s: status %d", method, resp.StatusCode)
	}
	return &streamReader{t: g.t, r: resp.Body}
}

type streamReader struct {
	t *testing.T
	r io.Reader
}

// next returns the next message; end is set for the end envelope, whose
// error (if any) is in msg.
func (s *streamReader) next() (msg string, end bool) {
	s.t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		s.t.Fatalf("the stream ended without its end envelope: %v", err)
	}
	b := make([]byte, int(hdr[1])<<24|int(hdr[2])<<16|int(hdr[3])<<8|int(hdr[4]))
	io.ReadFull(s.r, b)
	return string(b), hdr[0]&flagEndStream != 0
}

// rest reads to the end: the data events' text and the end envelope.
func (s *streamReader) rest() (out, lastEvent, end string) {
	for {
		msg, isEnd := s.next()
		if isEnd {
			return out, lastEvent, msg
		}
		var ev eventResponse
		json.Unmarshal([]byte(msg), &ev)
		if d := ev.Event.Data; d != nil {
			out += string(d.Stdout) + string(d.Stderr) + string(d.Pty)
		}
		if ev.Event.Keepalive == nil {
			lastEvent = msg
		}
	}
}

func TestProcessTagsStreamInputAndSignals(t *testing.T) {
	g := newRig(t)
	yes := true
	st := g.streamCall("process.Process/Start", startRequest{Process: &processConfig{Cmd: "cat"}, Tag: ptr("echo-tag"), Stdin: &yes}, nil)
	first, _ := st.next()
	var started eventResponse
	if json.Unmarshal([]byte(first), &started); started.Event.Start == nil || started.Event.Start.Pid == 0 {
		t.Fatalf("first message %s, want the start event", first)
	}

	var list listResponse
	g.unary("process.Process/List", empty{}, &list)
	if len(list.Processes) != 1 || list.Processes[0].Tag == nil || *list.Processes[0].Tag != "echo-tag" || list.Processes[0].Config.Cmd != "cat" {
		t.Fatalf("list: %+v", list)
	}

	// A client stream: start naming the process by tag, then input.
	var body bytes.Buffer
	for _, m := range []string{`{"start":{"process":{"tag":"echo-tag"}}}`, `{"keepalive":{}}`, `{"data":{"input":{"stdin":"aGVsbG8K"}}}`} {
		body.Write(envelope(0, []byte(m)))
	}
	resp, err := http.Post(g.srv.URL+"/process.Process/StreamInput", "application/connect+json", &body)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, msgs := frames(t, in); len(msgs) != 2 || msgs[1] != "{}" {
		t.Fatalf("StreamInput answered %q", msgs)
	}
	if code, _ := g.unary("process.Process/CloseStdin", selectRequest{Process: &processSelector{Tag: ptr("echo-tag")}}, nil); code != 200 {
		t.Fatalf("CloseStdin: %d", code)
	}
	out, last, end := st.rest()
	if out != "hello\n" || !strings.Contains(last, `"end":{"exitCode":0,"exited":true`) || end != "{}" {
		t.Errorf("output %q, last event %s, end %s", out, last, end)
	}

	st = g.streamCall("process.Process/Start", startRequest{Process: &processConfig{Cmd: "sleep", Args: []string{"60"}}}, nil)
	first, _ = st.next()
	json.Unmarshal([]byte(first), &started)
	pid := started.Event.Start.Pid
	if code, _ := g.unary("process.Process/SendSignal", json.RawMessage(`{"process":{"pid":`+itoa(pid)+`},"signal":"SIGNAL_SIGTERM"}`), nil); code != 200 {
		t.Fatalf("SIGTERM: %d", code)
	}
	if _, last, _ := st.rest(); !strings.Contains(last, `"status":"signal: term"`) {
		t.Errorf("after SIGTERM: %s", last)
	}
	if code, rc := g.unary("process.Process/SendSignal", json.RawMessage(`{"process":{"pid":`+itoa(pid)+`},"signal":"SIGNAL_SIGKILL"}`), nil); code != 404 || rc != "not_found" {
		t.Errorf("SIGKILL of an ended process: %d %s, want not_found", code, rc)
	}
}

func TestStartTimeoutKillsAndEndsWithDeadlineExceeded(t *testing.T) {
	g := newRig(t)
	st := g.streamCall("process.Process/Start", startRequest{Process: &processConfig{Cmd: "sleep", Args: []string{"60"}}}, map[string]string{"Connect-Timeout-Ms": "300"})
	st.next()
	if _, _, end := st.rest(); !strings.Contains(end, `"code":"deadline_exceeded"`) {
		t.Fatalf("end %s, want deadline_exceeded", end)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list listResponse
		g.unary("process.Process/List", empty{}, &list)
		if len(list.Processes) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out command still runs: %+v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFilesystemAndPollingWatcher(t *testing.T) {
	g := newRig(t)
	if code, rc := g.unary("filesystem.Filesystem/Stat", pathRequest{Path: "nothing"}, nil); code != 404 || rc != "not_found" {
		t.Errorf("Stat of nothing: %d %s", code, rc)
	}
	var made entryResponse
	g.unary("filesystem.Filesystem/MakeDir", pathRequest{Path: "a/b"}, &made)
	if made.Entry == nil || made.Entry.Path != filepath.Join(g.ws, "a/b") || made.Entry.Type != "FILE_TYPE_DIRECTORY" {
		t.Fatalf("MakeDir: %+v", made.Entry)
	}
	if code, rc := g.unary("filesystem.Filesystem/MakeDir", pathRequest{Path: "a/b"}, nil); code != 409 || rc != "already_exists" {
		t.Errorf("MakeDir again: %d %s", code, rc)
	}

	var w createWatcherResponse
	if code, _ := g.unary("filesystem.Filesystem/CreateWatcher", watchRequest{Path: "a"}, &w); code != 200 || w.WatcherID == "" {
		t.Fatalf("CreateWatcher: %d %+v", code, w)
	}
	// Upload, gzip-encoded octet-stream.
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte("payload"))
	zw.Close()
	req, _ := http.NewRequest("POST", g.srv.URL+"/files?path=a/up.txt", &zipped)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(up), `"name":"up.txt"`) {
		t.Fatalf("upload: %d %s", resp.StatusCode, up)
	}
	if b, _ := os.ReadFile(filepath.Join(g.ws, "a/up.txt")); string(b) != "payload" {
		t.Fatalf("the file holds %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var evs watcherEventsResponse
		g.unary("filesystem.Filesystem/GetWatcherEvents", watcherRequest(w), &evs)
		if len(evs.Events) > 0 {
			if evs.Events[0].Name != "up.txt" {
				t.Errorf("events %+v", evs.Events)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no watcher event for the upload within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.unary("filesystem.Filesystem/RemoveWatcher", watcherRequest(w), nil)
	if code, _ := g.unary("filesystem.Filesystem/GetWatcherEvents", watcherRequest(w), nil); code != 404 {
		t.Errorf("a removed watcher answered %d", code)
	}

	var listed listDirResponse
	g.unary("filesystem.Filesystem/ListDir", listDirRequest{Path: "a", Depth: 2}, &listed)
	if len(listed.Entries) != 2 {
		t.Errorf("ListDir depth 2: %+v", listed.Entries)
	}
	var moved entryResponse
	g.unary("filesystem.Filesystem/Move", moveRequest{Source: "a/up.txt", Destination: "c/d.txt"}, &moved)
	if moved.Entry == nil || moved.Entry.Name != "d.txt" || moved.Entry.Size != 7 {
		t.Errorf("Move: %+v", moved.Entry)
	}
	if code, _ := g.unary("filesystem.Filesystem/Remove", pathRequest{Path: "c"}, nil); code != 200 {
		t.Errorf("Remove: %d", code)
	}
	if code, rc := g.unary("filesystem.Filesystem/Remove", pathRequest{Path: "c"}, nil); code != 200 {
		t.Errorf("Remove of a path already gone: %d %s, want 200 as E2B's envd answers", code, rc)
	}

	os.WriteFile(filepath.Join(g.ws, "z.txt"), bytes.Repeat([]byte("z"), 1000), 0o644)
	req, _ = http.NewRequest("GET", g.srv.URL+"/files?path=z.txt", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("download with gzip: %v, encoding %q", err, resp.Header.Get("Content-Encoding"))
	}
	if b, _ := io.ReadAll(zr); len(b) != 1000 {
		t.Errorf("downloaded %d bytes", len(b))
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n uint32) string { b, _ := json.Marshal(n); return string(b) }
