package docker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/docker/docker/pkg/stdcopy"
)

func frame(stream byte, payload string) []byte {
	h := make([]byte, frameHeader, frameHeader+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func TestDemuxSplitsStdoutFromStderr(t *testing.T) {
	var in []byte
	in = append(in, frame(frameStdout, "hello ")...)
	in = append(in, frame(frameStderr, "warning: x\n")...)
	in = append(in, frame(frameStdout, "")...)
	in = append(in, frame(frameStdout, "world")...)
	var errOut bytes.Buffer
	// One byte at a time: frame boundaries fall inside every Read.
	out, err := io.ReadAll(newDemuxReader(iotest.OneByteReader(bytes.NewReader(in)), &errOut))
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if string(out) != "hello world" || errOut.String() != "warning: x\n" {
		t.Fatalf("stdout %q stderr %q, want %q and %q", out, errOut.String(), "hello world", "warning: x\n")
	}
}

func TestDemuxTruncatedAndBadFrames(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"cut inside a header", frame(frameStdout, "ab")[:5], "inside a frame header"},
		{"cut inside stdout payload", frame(frameStdout, "abcdef")[:10], io.ErrUnexpectedEOF.Error()},
		{"cut inside stderr payload", frame(frameStderr, "abcdef")[:10], io.ErrUnexpectedEOF.Error()},
		{"engine error", frame(frameSystemErr, "exec failed: no such process"), "engine reported an error on the exec stream: exec failed: no such process"},
		{"unknown stream", frame(7, "x"), "unknown stream 7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := io.ReadAll(newDemuxReader(bytes.NewReader(c.in), io.Discard))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestDemuxOversizedEngineErrorIsCapped(t *testing.T) {
	in := frame(frameSystemErr, strings.Repeat("e", 3*maxSystemErr))
	_, err := io.ReadAll(newDemuxReader(bytes.NewReader(in), io.Discard))
	if err == nil || len(err.Error()) > maxSystemErr+200 {
		t.Fatalf("error of %d bytes, want one under %d", len(err.Error()), maxSystemErr+200)
	}
}

// FuzzDemuxMatchesStdCopy checks the inline demultiplexer against the
// engine's own library on any byte stream: where the stream is whole, the
// same stdout and stderr, and an error where stdcopy fails. On a stream cut
// inside a frame stdcopy stops silently; the demultiplexer says so
// (io.ErrUnexpectedEOF), having passed on at most the cut frame's start.
func FuzzDemuxMatchesStdCopy(f *testing.F) {
	f.Add(append(frame(frameStdout, "a"), frame(frameStderr, "b")...), uint8(3))
	f.Add(frame(frameStdin, "in"), uint8(1))
	f.Add(frame(frameStdout, "abc")[:9], uint8(2))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0x10, 0}, uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		if declaresHuge(in) {
			t.Skip("stdcopy allocates a frame's declared size up front")
		}
		var wantOut, wantErr bytes.Buffer
		_, stdErr := stdcopy.StdCopy(&wantOut, &wantErr, bytes.NewReader(in))
		var gotErrBuf bytes.Buffer
		src := iotest.HalfReader(bytes.NewReader(in))
		d := newDemuxReader(src, &gotErrBuf)
		buf := make([]byte, int(chunk)%7+1)
		var gotOut bytes.Buffer
		var err error
		for {
			var n int
			n, err = d.Read(buf)
			gotOut.Write(buf[:n])
			if err != nil {
				break
			}
		}
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || err != nil && strings.Contains(err.Error(), "inside a frame header"):
			if stdErr != nil || !bytes.HasPrefix(gotOut.Bytes(), wantOut.Bytes()) || !bytes.HasPrefix(gotErrBuf.Bytes(), wantErr.Bytes()) {
				t.Fatalf("cut stream: stdcopy %v stdout %q stderr %q; demux %v stdout %q stderr %q", stdErr, wantOut.Bytes(), wantErr.Bytes(), err, gotOut.Bytes(), gotErrBuf.Bytes())
			}
		case errors.Is(err, io.EOF):
			if stdErr != nil || !bytes.Equal(gotOut.Bytes(), wantOut.Bytes()) || !bytes.Equal(gotErrBuf.Bytes(), wantErr.Bytes()) {
				t.Fatalf("whole stream: stdcopy %v stdout %q stderr %q; demux stdout %q stderr %q", stdErr, wantOut.Bytes(), wantErr.Bytes(), gotOut.Bytes(), gotErrBuf.Bytes())
			}
		default:
			if stdErr == nil {
				t.Fatalf("demux failed (%v) where stdcopy did not", err)
			}
		}
	})
}

// declaresHuge reports whether a frame header of in declares over 1 MiB.
func declaresHuge(in []byte) bool {
	for len(in) >= frameHeader {
		n := binary.BigEndian.Uint32(in[4:8])
		if n > 1<<20 {
			return true
		}
		if uint64(len(in)) < uint64(frameHeader)+uint64(n) {
			return false
		}
		in = in[frameHeader+int(n):]
	}
	return false
}
