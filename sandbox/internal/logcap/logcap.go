// Package logcap turns a child's stderr into log lines, up to a byte cap, so
// that a chatty or looping process cannot flood sandboxd's log.
package logcap

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxLine cuts a line that never ends.
const maxLine = 4 << 10

// Writer logs each line written to it at Warn level until cap bytes were
// logged, then says once that the rest is dropped. It is safe for concurrent use.
type Writer struct {
	log *slog.Logger
	cap int

	mu      sync.Mutex // guards the fields below
	buf     []byte
	logged  int
	dropped bool
}

// New returns a Writer logging to log at most limit bytes.
func New(log *slog.Logger, limit int) *Writer { return &Writer{log: log, cap: limit} }

// Write never fails, so that the copier feeding it never stalls.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLine - len(w.buf)
			w.buf = append(w.buf, p[:min(room, len(p))]...)
			if len(w.buf) >= maxLine {
				w.emit()
			}
			break
		}
		w.buf = append(w.buf, p[:min(i, maxLine-len(w.buf))]...)
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs a last unterminated line.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit()
	}
}

func (w *Writer) emit() {
	line := string(bytes.TrimRight(w.buf, "\r"))
	w.buf = w.buf[:0]
	if w.logged >= w.cap {
		if !w.dropped {
			w.dropped = true
			w.log.Warn("further output dropped", "cap_bytes", w.cap)
		}
		return
	}
	w.logged += len(line)
	w.log.Warn(line)
}
