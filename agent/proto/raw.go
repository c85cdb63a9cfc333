package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Raw frames carry file data next to a JSON frame instead of inside it, so
// that neither side spells the bytes in base64 (see HelloResponse.RawData).
// A raw frame is RawHeaderSize bytes, its kind and a 4-byte big-endian
// length, then that many bytes. The raw frames of one message end with a
// frame of kind RawEnd and length 0.
const RawHeaderSize = 5

// RawKind is the first byte of a raw frame.
type RawKind byte

const (
	RawData RawKind = 'd' // one file's data
	RawEnd  RawKind = 'e' // ends a message's raw frames; carries nothing
)

// MaxRawTotal caps the raw frames that follow one message, headers
// included: a reader refuses more, a writer does not send more.
const MaxRawTotal = MaxFrame

// ErrRawFrame is returned by ReadRaw for a raw frame that is not one the
// protocol has (an unknown kind, an end frame with a length); like a
// frame over the cap, it leaves the stream out of step.
var ErrRawFrame = errors.New("malformed raw frame")

// directRead is how large a body is allocated at once; a longer one grows
// as its bytes arrive, so a corrupt length never allocates more than the
// stream actually carries (twice over at most).
const directRead = 1 << 20

// inlineBlob is how large a blob WriteMessage copies next to the frames
// around it so that they leave in one write; a larger one is written on
// its own, which costs one more write but no copy.
const inlineBlob = 64 << 10

// WriteMessage writes v as a JSON frame followed by blobs as raw frames and
// the end frame. Small parts are gathered into one Write, so a multiplexed
// stream sends a small message as one data frame. Nothing is written when
// v or the blobs are over their caps.
func WriteMessage(w io.Writer, v any, blobs [][]byte) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(body) > MaxFrame {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, len(body), MaxFrame)
	}
	total, inline := int64(RawHeaderSize), 0
	for _, b := range blobs {
		total += RawHeaderSize + int64(len(b))
		if len(b) <= inlineBlob {
			inline += len(b)
		}
	}
	if total > MaxRawTotal {
		return fmt.Errorf("%w: %d bytes of raw frames, cap %d", ErrFrameTooLarge, total, MaxRawTotal)
	}
	buf := make([]byte, 4, 4+len(body)+RawHeaderSize*(len(blobs)+1)+inline)
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	buf = append(buf, body...)
	for _, b := range blobs {
		buf = appendRawHeader(buf, RawData, len(b))
		if len(b) <= inlineBlob {
			buf = append(buf, b...)
			continue
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		buf = buf[:0]
	}
	buf = appendRawHeader(buf, RawEnd, 0)
	_, err = w.Write(buf)
	return err
}

func appendRawHeader(buf []byte, kind RawKind, n int) []byte {
	return binary.BigEndian.AppendUint32(append(buf, byte(kind)), uint32(n))
}

// ReadRaw reads raw frames up to and including the end frame and returns
// their data in order. It refuses, before reading the body, a frame over
// MaxFrame or one that would take the message's raw frames over limit
// (at most MaxRawTotal, headers included). A stream that ends before the
// end frame is io.ErrUnexpectedEOF.
func ReadRaw(r io.Reader, limit int64) ([][]byte, error) {
	limit = min(limit, MaxRawTotal)
	var blobs [][]byte
	var used int64
	var hdr [RawHeaderSize]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, unexpectedEOF(err)
		}
		kind, n := RawKind(hdr[0]), binary.BigEndian.Uint32(hdr[1:])
		used += RawHeaderSize + int64(n)
		switch {
		case kind == RawEnd && n == 0:
			if used > limit {
				return nil, fmt.Errorf("%w: more than %d bytes of raw frames", ErrFrameTooLarge, limit)
			}
			return blobs, nil
		case kind == RawEnd:
			return nil, fmt.Errorf("%w: an end frame announces %d bytes; it carries none", ErrRawFrame, n)
		case kind != RawData:
			return nil, fmt.Errorf("%w: unknown kind 0x%02x", ErrRawFrame, byte(kind))
		case n > MaxFrame:
			return nil, fmt.Errorf("%w: a raw frame announces %d bytes, cap %d", ErrFrameTooLarge, n, MaxFrame)
		case used > limit:
			return nil, fmt.Errorf("%w: more than %d bytes of raw frames", ErrFrameTooLarge, limit)
		}
		b, err := readBody(r, int(n))
		if err != nil {
			return nil, err
		}
		blobs = append(blobs, b)
	}
}

// readBody reads the n bytes of a body whose length was already checked.
func readBody(r io.Reader, n int) ([]byte, error) {
	if n <= directRead {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpectedEOF(err)
		}
		return b, nil
	}
	b := make([]byte, 0, directRead)
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(n-len(b), cap(b)))
		}
		m, err := io.ReadFull(r, b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return b, nil
}

// unexpectedEOF is err with a clean end of stream turned into a truncated
// one: it is only called where more bytes were announced.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// TakeData moves the file data out of a read response, in the order raw
// frames carry it: the one file of ReadFile, or each file of ReadFiles.
// The response's Data fields are left nil.
func (r *Response) TakeData() [][]byte {
	switch {
	case r.ReadFile != nil:
		b := r.ReadFile.Data
		r.ReadFile.Data = nil
		return [][]byte{b}
	case r.ReadFiles != nil:
		blobs := make([][]byte, len(r.ReadFiles.Files))
		for i := range r.ReadFiles.Files {
			blobs[i], r.ReadFiles.Files[i].Data = r.ReadFiles.Files[i].Data, nil
		}
		return blobs
	}
	return nil
}

// PutData puts raw frames' data back into a read response (TakeData's
// inverse); a count that does not match the response is an error.
func (r *Response) PutData(blobs [][]byte) error {
	switch {
	case r.ReadFile != nil:
		if len(blobs) != 1 {
			return fmt.Errorf("%w: a read_file answer came with %d data frames, want 1", ErrRawFrame, len(blobs))
		}
		r.ReadFile.Data = blobs[0]
	case r.ReadFiles != nil:
		if len(blobs) != len(r.ReadFiles.Files) {
			return fmt.Errorf("%w: a read_files answer of %d files came with %d data frames", ErrRawFrame, len(r.ReadFiles.Files), len(blobs))
		}
		for i, b := range blobs {
			if len(b) > 0 {
				r.ReadFiles.Files[i].Data = b
			}
		}
	case len(blobs) > 0:
		return fmt.Errorf("%w: an answer without file data came with %d data frames", ErrRawFrame, len(blobs))
	}
	return nil
}

// TakeData returns a copy of r whose files carry no data, and the data in
// the order raw frames carry it (one per file, empty for a delete); r
// itself is not changed.
func (r *WriteFilesRequest) TakeData() (*WriteFilesRequest, [][]byte) {
	out := *r
	out.Files = make([]WriteFile, len(r.Files))
	blobs := make([][]byte, len(r.Files))
	for i, f := range r.Files {
		blobs[i] = f.Data
		f.Data = nil
		out.Files[i] = f
	}
	return &out, blobs
}

// PutData puts raw frames' data into r's files (TakeData's inverse). A
// count that does not match, or a file that also carries data in JSON,
// is an error.
func (r *WriteFilesRequest) PutData(blobs [][]byte) error {
	if len(blobs) != len(r.Files) {
		return fmt.Errorf("%w: a write_files request of %d files came with %d data frames; send one per file, in order", ErrRawFrame, len(r.Files), len(blobs))
	}
	for i, b := range blobs {
		if len(r.Files[i].Data) > 0 {
			return fmt.Errorf("%w: file %d (%s) carries its data both in JSON and as a raw frame; send it once", ErrRawFrame, i, r.Files[i].Path)
		}
		if len(b) > 0 {
			r.Files[i].Data = b
		}
	}
	return nil
}
