package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// rawSession serves srv over a pipe and returns a bare yamux client, so a
// test can send frames that the real client never would.
func rawSession(t *testing.T, srv *Server) *yamux.Session {
	t.Helper()
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	sess, err := yamux.Client(a, yamuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(); srv.Close() })
	return sess
}

// exchange writes raw bytes on a new stream and reads the response frame.
func exchange(t *testing.T, sess *yamux.Session, raw []byte) *proto.Response {
	t.Helper()
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := st.Write(raw); err != nil {
		t.Fatal(err)
	}
	var resp proto.Response
	if err := proto.ReadFrame(st, &resp); err != nil {
		t.Fatalf("no response frame: %v", err)
	}
	return &resp
}

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestBadFramesGetErrorResponses(t *testing.T) {
	srv := New(WithOpHookForTest(func(op proto.Op) {
		if op == proto.OpList {
			panic("boom")
		}
	}))
	sess := rawSession(t, srv)
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, 0xFFFFFFFF)
	cases := []struct {
		name, code, says string
		raw              []byte
	}{
		{"not json", "invalid_argument", "request frame", frame("{not json")},
		{"oversized", "invalid_argument", "cap", huge},
		{"no op", "invalid_argument", "no op", frame(`{}`)},
		{"unknown op", "invalid_argument", "unknown op", frame(`{"op":"format_disk"}`)},
		{"missing body", "invalid_argument", "read_file", frame(`{"op":"read_file"}`)},
		{"wrong type", "invalid_argument", "request frame", frame(`{"op":"read_file","read_file":{"path":7}}`)},
		{"panic", "internal", "boom", frame(`{"op":"list"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := exchange(t, sess, tc.raw)
			if resp.Error == nil || resp.Error.Code != tc.code || !strings.Contains(resp.Error.Message, tc.says) {
				t.Fatalf("response = %+v", resp.Error)
			}
		})
	}
	// The session still works.
	resp := exchange(t, sess, frame(`{"op":"hello"}`))
	if resp.Error != nil || resp.Hello == nil || resp.Hello.Version != proto.Version {
		t.Fatalf("hello after bad frames = %+v", resp)
	}
}

func TestSlowRequestTimesOut(t *testing.T) {
	srv := New(WithRequestTimeout(200 * time.Millisecond))
	sess := rawSession(t, srv)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte{0, 0}) // half a header, then nothing
	st.SetReadDeadline(time.Now().Add(10 * time.Second))
	var resp proto.Response
	err = proto.ReadFrame(st, &resp)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v", err)
	}
	if err == nil && (resp.Error == nil || resp.Error.Code != "invalid_argument") {
		t.Fatalf("response = %+v", resp)
	}
}
