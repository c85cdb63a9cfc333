package docker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The engine multiplexes an exec's stdout and stderr on one connection
// (no TTY): each frame is an 8-byte header — stream id, three zero bytes,
// a big-endian payload length — then the payload.
const (
	frameStdin     = 0
	frameStdout    = 1
	frameStderr    = 2
	frameSystemErr = 3

	frameHeader = 8
	// maxSystemErr bounds the engine's own error message kept for the
	// error a Read returns.
	maxSystemErr = 4 << 10
)

// demuxReader reads the stdout of a multiplexed exec stream in the
// caller's goroutine: stdout payload goes straight into the caller's
// buffer and stderr payload to stderr. Doing it inline (rather than in a
// goroutine feeding an io.Pipe) saves every message of the agent pipe one
// goroutine hand-off on its way to the session.
//
// It is not safe for concurrent Reads; the agent session has one reader.
type demuxReader struct {
	src    io.Reader
	stderr io.Writer
	hdr    [frameHeader]byte
	left   int // stdout payload bytes of the current frame not yet read
	err    error
}

func newDemuxReader(src io.Reader, stderr io.Writer) *demuxReader {
	return &demuxReader{src: src, stderr: stderr}
}

func (d *demuxReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for d.left == 0 {
		if d.err != nil {
			return 0, d.err
		}
		if d.err = d.next(); d.err != nil {
			return 0, d.err
		}
	}
	n, err := d.src.Read(b[:min(len(b), d.left)])
	d.left -= n
	if err == io.EOF && d.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		d.err = err
		if n > 0 {
			return n, nil // the error comes with the next Read
		}
	}
	return n, err
}

// next reads frame headers until one starts stdout payload, passing stderr
// frames on. io.EOF between frames is the stream's clean end.
func (d *demuxReader) next() error {
	if _, err := io.ReadFull(d.src, d.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("the engine's exec stream ended inside a frame header: %w", err)
		}
		return err
	}
	size := int64(binary.BigEndian.Uint32(d.hdr[4:]))
	switch d.hdr[0] {
	case frameStdin, frameStdout:
		d.left = int(size)
		return nil
	case frameStderr:
		if _, err := io.CopyN(d.stderr, d.src, size); err != nil {
			return unexpected(err)
		}
		return nil
	case frameSystemErr:
		msg, err := io.ReadAll(io.LimitReader(d.src, min(size, maxSystemErr)))
		if err == nil && int64(len(msg)) < min(size, maxSystemErr) {
			err = io.ErrUnexpectedEOF
		}
		if err == nil && size > maxSystemErr {
			_, err = io.CopyN(io.Discard, d.src, size-maxSystemErr)
		}
		if err != nil {
			return unexpected(err)
		}
		return fmt.Errorf("the engine reported an error on the exec stream: %s", msg)
	default:
		return fmt.Errorf("the engine's exec stream has a frame of unknown stream %d; it is not a multiplexed exec stream", d.hdr[0])
	}
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
