package daemon

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

func TestHelloAdvertisesStreamReuse(t *testing.T) {
	sess := rawSession(t, New())
	if resp := exchange(t, sess, frame(`{"op":"hello"}`)); resp.Hello == nil || !resp.Hello.StreamReuse {
		t.Fatalf("hello = %+v, want stream_reuse", resp.Hello)
	}
}

// A file op asking to keep its stream is followed by more requests on it,
// raw responses and error responses included; the stream ends when the client
// closes it.
func TestReusedStreamServesRequestsInTurn(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("first"), 0o644)
	sess := rawSession(t, New())
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	for i, req := range []string{
		`{"op":"read_file","again":true,"raw":true,"read_file":{"root":"` + root + `","path":"a.txt"}}`,
		`{"op":"stat","again":true,"stat":{"root":"` + root + `","path":"missing.txt"}}`,
		`{"op":"read_file","again":true,"read_file":{"root":"` + root + `","path":"a.txt"}}`,
	} {
		if _, err := st.Write(frame(req)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var resp proto.Response
		if err := proto.ReadFrame(st, &resp); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !resp.Kept {
			t.Fatalf("answer %d does not say the stream is kept: %+v", i, resp)
		}
		switch i {
		case 0:
			if blobs, err := proto.ReadRaw(st, proto.MaxRawTotal); err != nil || len(blobs) != 1 || string(blobs[0]) != "first" {
				t.Fatalf("raw read on the kept stream: %q, %v", blobs, err)
			}
		case 1:
			if resp.Error == nil || resp.Error.Code != "not_found" {
				t.Fatalf("stat of a missing file = %+v, want not_found", resp)
			}
		case 2:
			if resp.ReadFile == nil || string(resp.ReadFile.Data) != "first" {
				t.Fatalf("third answer = %+v", resp)
			}
		}
	}
	st.Close()
	var b [1]byte
	if _, err := st.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the client closed: %v, want EOF from the daemon's close", err)
	}
}

// Ops that are not reusable (an exec watches its stream for the client
// leaving) close their stream after the response even when asked to keep it.
func TestAgainIsIgnoredForExec(t *testing.T) {
	sess := rawSession(t, New())
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	st.Write(frame(`{"op":"exec","again":true,"exec":{"argv":["true"]}}`))
	var resp proto.Response
	if err := proto.ReadFrame(st, &resp); err != nil || resp.Error != nil || resp.Kept {
		t.Fatalf("exec answer: %+v, %v; want an answer that does not keep the stream", resp, err)
	}
	var b [1]byte
	if _, err := st.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the exec's answer: %v, want EOF", err)
	}
}

// A refusal after which the daemon closes the stream (raw frames it could
// not read leave it out of step) says so: the response is not kept, and the
// stream ends.
func TestRefusedRawWriteIsNotKept(t *testing.T) {
	root := t.TempDir()
	sess := rawSession(t, New())
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	st.Write(append(frame(`{"op":"write_files","again":true,"raw":true,"write_files":{"root":"`+root+`","files":[{"path":"a.txt"}]}}`), 'z', 0, 0, 0, 0))
	var resp proto.Response
	if err := proto.ReadFrame(st, &resp); err != nil || resp.Error == nil || resp.Kept {
		t.Fatalf("answer to bad raw frames: %+v, %v; want a refusal that does not keep the stream", resp, err)
	}
	var b [1]byte
	if _, err := st.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the refusal: %v, want EOF", err)
	}
}
