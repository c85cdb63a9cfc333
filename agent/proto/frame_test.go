package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := Request{Op: OpReadFile, ReadFile: &ReadFileRequest{Root: "/w", Path: "a.go", MaxBytes: 10}}
	if err := WriteFrame(&buf, &in); err != nil {
		t.Fatal(err)
	}
	var out Request
	if err := ReadFrame(&buf, &out); err != nil {
		t.Fatal(err)
	}
	if out.Op != in.Op || *out.ReadFile != *in.ReadFile {
		t.Fatalf("got %+v", out)
	}
}

func TestFrameRefusals(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxFrame+1)
	var v Request
	if err := ReadFrame(bytes.NewReader(hdr[:]), &v); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 10)
	if err := ReadFrame(bytes.NewReader(append(hdr[:], "{}"...)), &v); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v", err)
	}
	if err := ReadFrame(bytes.NewReader(nil), &v); !errors.Is(err, io.EOF) {
		t.Fatalf("empty stream: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 3)
	if err := ReadFrame(bytes.NewReader(append(hdr[:], "{x}"...)), &v); err == nil {
		t.Fatal("bad JSON accepted")
	}
}
