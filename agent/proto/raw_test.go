package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// countingWriter records each Write's length.
type countingWriter struct {
	bytes.Buffer
	writes []int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

func TestMessageRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), inlineBlob+1)
	for _, tc := range []struct {
		name   string
		blobs  [][]byte
		writes int
	}{
		{"no blobs", nil, 1},
		{"one small", [][]byte{[]byte("hello\n")}, 1},
		{"empty and small", [][]byte{{}, []byte("a"), nil}, 1},
		{"large one between small ones", [][]byte{[]byte("a"), big, []byte("b")}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w countingWriter
			in := Response{ReadFile: &ReadFileResponse{Path: "/w/a", Size: 6}}
			if err := WriteMessage(&w, &in, tc.blobs); err != nil {
				t.Fatal(err)
			}
			if len(w.writes) != tc.writes {
				t.Errorf("%d writes %v, want %d", len(w.writes), w.writes, tc.writes)
			}
			var out Response
			if err := ReadFrame(&w, &out); err != nil {
				t.Fatal(err)
			}
			if out.ReadFile == nil || out.ReadFile.Path != "/w/a" {
				t.Fatalf("JSON part: %+v", out)
			}
			blobs, err := ReadRaw(&w, MaxRawTotal)
			if err != nil {
				t.Fatal(err)
			}
			if len(blobs) != len(tc.blobs) {
				t.Fatalf("%d blobs back, want %d", len(blobs), len(tc.blobs))
			}
			for i := range blobs {
				if !bytes.Equal(blobs[i], tc.blobs[i]) {
					t.Errorf("blob %d: %d bytes back, want %d", i, len(blobs[i]), len(tc.blobs[i]))
				}
			}
			if w.Len() != 0 {
				t.Errorf("%d bytes left after the end frame", w.Len())
			}
		})
	}
}

func rawFrame(kind RawKind, n uint32, body []byte) []byte {
	b := []byte{byte(kind), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, body...)
}

func TestReadRawRefusals(t *testing.T) {
	end := rawFrame(RawEnd, 0, nil)
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int64
		want  error
	}{
		{"empty stream", nil, MaxRawTotal, io.ErrUnexpectedEOF},
		{"no end frame", rawFrame(RawData, 3, []byte("abc")), MaxRawTotal, io.ErrUnexpectedEOF},
		{"truncated header", []byte{byte(RawData), 0, 0}, MaxRawTotal, io.ErrUnexpectedEOF},
		{"truncated body", rawFrame(RawData, 10, []byte("abc")), MaxRawTotal, io.ErrUnexpectedEOF},
		{"huge length, few bytes", rawFrame(RawData, MaxFrame-64, []byte("abc")), MaxRawTotal, io.ErrUnexpectedEOF},
		{"over the frame cap", rawFrame(RawData, MaxFrame+1, nil), MaxRawTotal, ErrFrameTooLarge},
		{"over the limit", append(rawFrame(RawData, 100, make([]byte, 100)), end...), 50, ErrFrameTooLarge},
		{"end over the limit", end, 2, ErrFrameTooLarge},
		{"unknown kind", append(rawFrame('x', 0, nil), end...), MaxRawTotal, ErrRawFrame},
		{"end with a length", rawFrame(RawEnd, 1, []byte("a")), MaxRawTotal, ErrRawFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRaw(bytes.NewReader(tc.in), tc.limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestWriteMessageRefusesOverCap(t *testing.T) {
	var w countingWriter
	blobs := [][]byte{make([]byte, MaxRawTotal/2), make([]byte, MaxRawTotal/2)}
	if err := WriteMessage(&w, &Request{Op: OpWriteFiles}, blobs); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if len(w.writes) != 0 {
		t.Fatalf("%d writes made before the refusal", len(w.writes))
	}
}

func TestReadBodyGrowsAsBytesArrive(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), (3*directRead)/10+7)
	got, err := readBody(bytes.NewReader(want), len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readBody: %d bytes, %v", len(got), err)
	}
	allocs := testing.AllocsPerRun(5, func() {
		readBody(bytes.NewReader(make([]byte, 10)), MaxFrame)
	})
	// One buffer of directRead for a body that announced 64 MiB and had 10 bytes.
	if allocs > 3 {
		t.Fatalf("%v allocations for a truncated huge body", allocs)
	}
}

func TestResponseDataRoundTrip(t *testing.T) {
	r := &Response{ReadFiles: &ReadFilesResponse{Files: []FileData{
		{Path: "a", Data: []byte("A")}, {Path: "b", Skipped: "not found"}, {Path: "c", Data: []byte("CC")},
	}}}
	blobs := r.TakeData()
	for _, f := range r.ReadFiles.Files {
		if f.Data != nil {
			t.Fatalf("%s still carries data after TakeData", f.Path)
		}
	}
	if err := r.PutData(blobs); err != nil {
		t.Fatal(err)
	}
	if string(r.ReadFiles.Files[0].Data) != "A" || r.ReadFiles.Files[1].Data != nil || string(r.ReadFiles.Files[2].Data) != "CC" {
		t.Fatalf("data back: %+v", r.ReadFiles.Files)
	}
	if err := r.PutData(blobs[:2]); !errors.Is(err, ErrRawFrame) {
		t.Fatalf("a short count: %v", err)
	}
	one := &Response{ReadFile: &ReadFileResponse{}}
	if err := one.PutData(nil); !errors.Is(err, ErrRawFrame) {
		t.Fatalf("read_file without its frame: %v", err)
	}
}

func TestWriteFilesDataRoundTrip(t *testing.T) {
	in := &WriteFilesRequest{Root: "/w", Files: []WriteFile{{Path: "a", Data: []byte("A")}, {Path: "gone", Delete: true}}}
	bare, blobs := in.TakeData()
	if string(in.Files[0].Data) != "A" {
		t.Fatal("TakeData changed the caller's request")
	}
	if bare.Files[0].Data != nil || len(blobs) != 2 {
		t.Fatalf("bare %+v, %d blobs", bare.Files, len(blobs))
	}
	if err := bare.PutData(blobs); err != nil || string(bare.Files[0].Data) != "A" || !bare.Files[1].Delete {
		t.Fatalf("PutData: %v, %+v", err, bare.Files)
	}
	twice := &WriteFilesRequest{Files: []WriteFile{{Path: "a", Data: []byte("A")}}}
	if err := twice.PutData([][]byte{[]byte("B")}); !errors.Is(err, ErrRawFrame) {
		t.Fatalf("data in JSON and raw: %v", err)
	}
}
