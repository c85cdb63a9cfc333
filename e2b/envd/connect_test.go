package envd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// frames splits a streamed body into its envelopes.
func frames(t *testing.T, body []byte) (flags []byte, msgs []string) {
	t.Helper()
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("a stream ends inside an envelope header: %q", body)
		}
		n := binary.BigEndian.Uint32(body[1:5])
		if uint32(len(body)-5) < n {
			t.Fatalf("an envelope says %d bytes, %d follow", n, len(body)-5)
		}
		flags = append(flags, body[0])
		msgs = append(msgs, string(body[5:5+n]))
		body = body[5+n:]
	}
	return flags, msgs
}

func TestStreamFramesMessagesThenEndWithError(t *testing.T) {
	req := httptest.NewRequest("POST", "/process.Process/Start", nil)
	req.Header.Set("Content-Type", "application/connect+json")
	rec := httptest.NewRecorder()
	st, err := startStream(rec, req)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(eventResponse{Event: processEvent{Start: &startEvent{Pid: 7}}})
	st.Send(eventResponse{Event: processEvent{Data: &dataEvent{Stdout: []byte("hi\n")}}})
	st.End(errdefs.NotFound("no such process"))
	if st.Send(empty{}) == nil {
		t.Error("a message was sent after the end of the stream")
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/connect+json" {
		t.Errorf("content type %q", ct)
	}
	flags, msgs := frames(t, rec.Body.Bytes())
	want := []string{`{"event":{"start":{"pid":7}}}`, `{"event":{"data":{"stdout":"aGkK"}}}`, `{"error":{"code":"not_found","message":"no such process"}}`}
	if fmt.Sprint(flags) != fmt.Sprint([]byte{0, 0, flagEndStream}) || strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("flags %v, messages:\n%s\nwant:\n%s", flags, strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}

func TestStreamEndsCleanWithAnEmptyEnd(t *testing.T) {
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("Content-Type", "application/connect+json; charset=utf-8")
	rec := httptest.NewRecorder()
	st, err := startStream(rec, req)
	if err != nil {
		t.Fatal(err)
	}
	st.End(nil)
	flags, msgs := frames(t, rec.Body.Bytes())
	if len(msgs) != 1 || flags[0] != flagEndStream || msgs[0] != "{}" {
		t.Errorf("flags %v messages %q, want one end envelope {}", flags, msgs)
	}
}

func TestStartStreamRefusesAnotherContentType(t *testing.T) {
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("Content-Type", "application/connect+proto")
	if _, err := startStream(httptest.NewRecorder(), req); err == nil || toRPC(err).Code != codeInvalidArgument {
		t.Errorf("binary messages: %v, want invalid_argument", err)
	}
}

func TestReadEnvelope(t *testing.T) {
	msg := func(flags byte, s string) []byte { return envelope(flags, []byte(s)) }
	body := bytes.Join([][]byte{msg(0, `{"process":{"pid":3}}`), msg(flagEndStream, `{}`)}, nil)
	r := bytes.NewReader(body)
	var sel selectRequest
	if end, err := readEnvelope(r, &sel); err != nil || end || sel.Process == nil || *sel.Process.Pid != 3 {
		t.Fatalf("first envelope: end=%v err=%v sel=%+v", end, err, sel.Process)
	}
	if end, err := readEnvelope(r, &sel); err != nil || !end {
		t.Fatalf("second envelope: end=%v err=%v, want the end", end, err)
	}
	if _, err := readEnvelope(r, &sel); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last envelope: %v, want io.EOF", err)
	}
	for name, bad := range map[string][]byte{
		"compressed": msg(flagCompressed, `{}`),
		"cut":        msg(0, `{"process":{}}`)[:8],
		"over cap":   {0, 0xff, 0xff, 0xff, 0xff},
		"not json":   msg(0, `{`),
	} {
		if _, err := readEnvelope(bytes.NewReader(bad), &sel); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}

func TestUnaryErrorsHaveConnectStatusAndBody(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   string
		status int
	}{
		{errdefs.InvalidArgument("bad"), "invalid_argument", 400},
		{errdefs.NotFound("gone"), "not_found", 404},
		{errdefs.Conflict("there"), "already_exists", 409},
		{errdefs.ResourceExhausted("many"), "resource_exhausted", 429},
		{errdefs.Unauthenticated("who"), "unauthenticated", 401},
		{errdefs.Unavailable("down"), "unavailable", 503},
		{context.DeadlineExceeded, "deadline_exceeded", 504},
		{errors.New("odd"), "unknown", 500},
		{rpcErr(codeUnimplemented, "no"), "unimplemented", 501},
	} {
		rec := httptest.NewRecorder()
		writeUnaryError(rec, c.err)
		var body rpcError
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: body %q: %v", c.err, rec.Body, err)
		}
		if rec.Code != c.status || body.Code != c.code || body.Message != c.err.Error() {
			t.Errorf("%v: %d %+v, want %d %s", c.err, rec.Code, body, c.status, c.code)
		}
	}
}

func TestReadUnary(t *testing.T) {
	req := httptest.NewRequest("POST", "/x", strings.NewReader(`{"path":"/tmp","depth":2}`))
	req.Header.Set("Content-Type", "application/json")
	var l listDirRequest
	if err := readUnary(req, &l); err != nil || l.Path != "/tmp" || l.Depth != 2 {
		t.Errorf("got %+v, %v", l, err)
	}
	req = httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/proto")
	if err := readUnary(req, &l); err == nil {
		t.Error("a binary unary call was taken")
	}
}

func TestSignalTakesNameOrNumber(t *testing.T) {
	for in, want := range map[string]signal{`"SIGNAL_SIGKILL"`: 9, `"SIGNAL_SIGTERM"`: 15, `9`: 9, `15`: 15} {
		var s signal
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: %d, %v", in, s, err)
		}
	}
	var s signal
	if json.Unmarshal([]byte(`"SIGHUP"`), &s) == nil {
		t.Error("an unknown signal name was taken")
	}
}

func TestEndOf(t *testing.T) {
	zero, three := 0, 3
	for _, c := range []struct {
		p    proto.ProcInfo
		want string
	}{
		{proto.ProcInfo{State: "exited", ExitCode: &zero}, `{"exitCode":0,"exited":true,"status":"exit status 0"}`},
		{proto.ProcInfo{State: "exited", ExitCode: &three}, `{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}`},
		{proto.ProcInfo{State: "killed", Signal: "KILL"}, `{"exitCode":-1,"exited":false,"status":"signal: kill","error":"signal: kill"}`},
	} {
		b, _ := json.Marshal(endOf(&c.p))
		if string(b) != c.want {
			t.Errorf("%+v: %s, want %s", c.p, b, c.want)
		}
	}
}

func TestParseEntries(t *testing.T) {
	out := "d\x004096\x00755\x00root\x00root\x001700000000.5\x00\x00/w/dir\x00" +
		"l\x007\x00777\x00u\x00g\x001700000000\x00target\x00/w/link\x00" +
		"l\x007\x00777\x00u\x00g\x001700000000\x00../etc/x\x00/w/up\x00" +
		"l\x007\x00777\x00u\x00g\x001700000000\x00/abs/t\x00/w/abs\x00"
	es := parseEntries([]byte(out))
	if len(es) != 4 {
		t.Fatalf("%d entries", len(es))
	}
	if e := es[0]; e.Name != "dir" || e.Type != "FILE_TYPE_DIRECTORY" || e.Permissions != "drwxr-xr-x" || e.Mode != 0o755 || e.ModifiedTime != "2023-11-14T22:13:20.5Z" || e.SymlinkTarget != nil {
		t.Errorf("dir: %+v", e)
	}
	if e := es[1]; e.Type != "FILE_TYPE_SYMLINK" || e.SymlinkTarget == nil || *e.SymlinkTarget != "/w/target" || e.Owner != "u" || e.Group != "g" {
		t.Errorf("link: %+v", e)
	}
	if e := es[2]; e.SymlinkTarget == nil || *e.SymlinkTarget != "/etc/x" {
		t.Errorf("relative link out of its directory: %+v", e)
	}
	if e := es[3]; e.SymlinkTarget == nil || *e.SymlinkTarget != "/abs/t" {
		t.Errorf("absolute link: %+v", e)
	}
	b, _ := json.Marshal(es[0])
	if !strings.Contains(string(b), `"size":"4096"`) {
		t.Errorf("size is not an int64 string: %s", b)
	}
}

func TestEventsOf(t *testing.T) {
	ev := proto.WatchEvent{Changes: []proto.WatchChange{
		{Path: "/w/a.txt", Kind: proto.Created}, {Path: "/w/sub/b.txt", Kind: proto.Changed},
		{Path: "/w/c.txt", Kind: proto.Deleted}, {Path: "/w", Kind: proto.Changed},
		{Path: "/w/empty", Kind: proto.Created}, {Path: "/w/d", Kind: proto.Created, IsDir: true},
		{Path: "/w/replaced.txt", Kind: proto.Deleted},
	}}
	// What the sandbox holds after the change: c.txt is gone.
	files := map[string]int64{"/w/a.txt": 3, "/w/sub/b.txt": 1, "/w/empty": 0, "/w/replaced.txt": 5}
	look := func(p string) (int64, bool) { n, ok := files[p]; return n, ok }
	got, _ := json.Marshal(eventsOf(ev, "/w", false, look))
	want := `[{"name":"a.txt","type":"EVENT_TYPE_CREATE"},{"name":"a.txt","type":"EVENT_TYPE_WRITE"},` +
		`{"name":"c.txt","type":"EVENT_TYPE_REMOVE"},{"name":"empty","type":"EVENT_TYPE_CREATE"},` +
		`{"name":"d","type":"EVENT_TYPE_CREATE"},{"name":"replaced.txt","type":"EVENT_TYPE_WRITE"}]`
	if string(got) != want {
		t.Errorf("non-recursive: %s, want %s", got, want)
	}
	got, _ = json.Marshal(eventsOf(ev, "/w", true, look))
	if !strings.Contains(string(got), `{"name":"sub/b.txt","type":"EVENT_TYPE_WRITE"}`) {
		t.Errorf("recursive: %s", got)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{"gzip": true, "br, gzip;q=0.5": true, "gzip;q=0": false, "identity": false, "": false} {
		r := httptest.NewRequest("GET", "/files", nil)
		r.Header.Set("Accept-Encoding", h)
		if acceptsGzip(r) != want {
			t.Errorf("%q: %v", h, !want)
		}
	}
}

var _ http.ResponseWriter = httptest.NewRecorder()

func TestStreamFailIsA200WithTheEnd(t *testing.T) {
	rec := httptest.NewRecorder()
	streamFail(rec, rpcErr(codeNotFound, "process with pid 9 not found"))
	flags, msgs := frames(t, rec.Body.Bytes())
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/connect+json" || len(msgs) != 1 || flags[0] != flagEndStream ||
		msgs[0] != `{"error":{"code":"not_found","message":"process with pid 9 not found"}}` {
		t.Errorf("%d %q %v %q", rec.Code, rec.Header().Get("Content-Type"), flags, msgs)
	}
}

func TestWalkOrder(t *testing.T) {
	paths := []string{"/p/a-b", "/p/b", "/p/a/x", "/p/a", "/p/a/x/y", "/p/a.txt"}
	sort.Slice(paths, func(i, j int) bool { return walkBefore(paths[i], paths[j]) })
	if want := "/p/a /p/a/x /p/a/x/y /p/a-b /p/a.txt /p/b"; strings.Join(paths, " ") != want {
		t.Errorf("%v, want %s", paths, want)
	}
}

// E2B's SDK takes a stream's end for a dropped connection, and then asks
// /health whether the sandbox is gone, only for code unknown with
// "terminated" in the message.
func TestSandboxEndedIsWhatTheSDKTakesForADroppedConnection(t *testing.T) {
	e := sandboxEnded("abc")
	if e.Code != codeUnknown || !strings.Contains(e.Message, "terminated") || !strings.Contains(e.Message, "sandbox abc was killed") {
		t.Errorf("%+v", e)
	}
}

// dyingSandbox is a sandbox whose record says running for its first
// `running` looks, as the manager's does while it removes the container.
type dyingSandbox struct {
	mu      sync.Mutex
	running int
	looks   int
}

func (d *dyingSandbox) Get(context.Context, string, string) (sandbox.Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.looks++
	if d.looks <= d.running {
		return sandbox.Info{ID: "abc", Tenant: "acme", State: sandbox.StateRunning}, nil
	}
	return sandbox.Info{}, errdefs.NotFound("no sandbox abc")
}

func (d *dyingSandbox) AgentOf(context.Context, sandbox.Info) (*agent.Client, sandbox.Info, error) {
	return nil, sandbox.Info{}, errdefs.NotFound("no sandbox abc")
}

// The stream of a killed sandbox ends only once /health would say it is
// gone: the SDK asks /health right then.
func TestSandboxEndedWaitsForTheRecordToSayGone(t *testing.T) {
	d := &dyingSandbox{running: 3}
	s := New(Options{Sandboxes: d})
	defer s.Close()
	e := s.sandboxEnded(context.Background(), target{tenant: "acme", info: sandbox.Info{ID: "abc"}})
	if d.looks != 4 {
		t.Errorf("ended after %d looks at the record, want 4 (3 running, then gone)", d.looks)
	}
	if e.Code != codeUnknown || !strings.Contains(e.Message, "sandbox abc was killed") {
		t.Errorf("%+v", e)
	}
}
