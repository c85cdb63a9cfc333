package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrFrameTooLarge is returned by ReadFrame and WriteFrame for a frame over
// MaxFrame; the stream is out of sync afterwards and must be closed.
var ErrFrameTooLarge = errors.New("frame exceeds the protocol's size cap")

// WriteFrame encodes v as one frame. Header and body go out in a single
// Write so that a multiplexed stream sends them as one data frame.
func WriteFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(body) > MaxFrame {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, len(body), MaxFrame)
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err = w.Write(buf)
	return err
}

// ReadFrame reads one frame into v. A frame over MaxFrame is refused before
// its body is read, and a long body is allocated as it arrives, so a
// corrupt length costs no more memory than the bytes that follow it; a
// body that is not valid JSON for v is a decode error.
func ReadFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return fmt.Errorf("%w: %d bytes announced, cap %d", ErrFrameTooLarge, n, MaxFrame)
	}
	body, err := readBody(r, int(n))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode frame: %w", err)
	}
	return nil
}
