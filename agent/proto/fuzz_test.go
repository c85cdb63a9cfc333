package proto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzLimit keeps the fuzzers' allowed totals small, so an input that
// announces a large body is refused or truncated rather than read.
const fuzzLimit = 1 << 16

// FuzzReadRaw feeds arbitrary bytes to the raw frame reader: it must end
// with data or one of the protocol's errors, never panic, and never hand
// back more than the input held.
func FuzzReadRaw(f *testing.F) {
	var good []byte
	for _, b := range []string{"hello", "", "world"} {
		good = append(good, rawFrame(RawData, uint32(len(b)), []byte(b))...)
	}
	f.Add(append(good, rawFrame(RawEnd, 0, nil)...))
	f.Add(rawFrame(RawEnd, 0, nil))
	f.Add(rawFrame(RawData, 3, []byte("ab")))         // truncated body
	f.Add(rawFrame(RawData, MaxFrame+1, nil))         // over the frame cap
	f.Add(rawFrame(RawData, 0xffffffff, []byte("x"))) // largest length
	f.Add(rawFrame(RawData, fuzzLimit, nil))          // over the fuzz limit with its header
	f.Add(rawFrame(0, 0, nil))                        // unknown kind
	f.Add(rawFrame(RawEnd, 7, nil))                   // end with a length
	f.Add([]byte{byte(RawData), 0})                   // truncated header
	f.Fuzz(func(t *testing.T, in []byte) {
		blobs, err := ReadRaw(bytes.NewReader(in), fuzzLimit)
		if err != nil {
			if blobs != nil {
				t.Fatal("data returned with an error")
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrRawFrame) {
				t.Fatalf("an error that is not the protocol's: %v", err)
			}
			return
		}
		total := RawHeaderSize
		for _, b := range blobs {
			total += RawHeaderSize + len(b)
		}
		if total > len(in) || total > fuzzLimit {
			t.Fatalf("%d bytes of frames read from %d bytes of input, limit %d", total, len(in), fuzzLimit)
		}
		// What was read writes back to the same bytes.
		var w bytes.Buffer
		for _, b := range blobs {
			w.Write(rawFrame(RawData, uint32(len(b)), b))
		}
		w.Write(rawFrame(RawEnd, 0, nil))
		if !bytes.Equal(w.Bytes(), in[:total]) {
			t.Fatal("the frames read do not write back to their input")
		}
	})
}

// FuzzReadFrame feeds arbitrary bytes to the JSON frame reader.
func FuzzReadFrame(f *testing.F) {
	var good bytes.Buffer
	WriteFrame(&good, &Request{Op: OpReadFile, Raw: true, ReadFile: &ReadFileRequest{Root: "/w", Path: "a"}})
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:len(good.Bytes())-3])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var req Request
		err := ReadFrame(bytes.NewReader(in), &req)
		if err == nil && len(in) < 4 {
			t.Fatalf("a frame read from %d bytes", len(in))
		}
	})
}

// FuzzMessageRoundTrip checks that what WriteMessage writes, ReadFrame and
// ReadRaw read back unchanged, for any data split into any blobs.
func FuzzMessageRoundTrip(f *testing.F) {
	f.Add([]byte("hello world"), uint8(3))
	f.Add([]byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte{0}, 300), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, parts uint8) {
		var blobs [][]byte
		for i := 0; i < int(parts); i++ {
			lo, hi := len(data)*i/int(parts), len(data)*(i+1)/int(parts)
			blobs = append(blobs, data[lo:hi])
		}
		var w bytes.Buffer
		if err := WriteMessage(&w, &Request{Op: OpWriteFiles}, blobs); err != nil {
			t.Fatal(err)
		}
		var req Request
		if err := ReadFrame(&w, &req); err != nil || req.Op != OpWriteFiles {
			t.Fatalf("frame back: %v %+v", err, req)
		}
		got, err := ReadRaw(&w, MaxRawTotal)
		if err != nil || len(got) != len(blobs) {
			t.Fatalf("raw back: %v, %d of %d blobs", err, len(got), len(blobs))
		}
		for i := range got {
			if !bytes.Equal(got[i], blobs[i]) {
				t.Fatalf("blob %d differs", i)
			}
		}
	})
}
