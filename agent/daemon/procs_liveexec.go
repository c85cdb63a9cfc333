package daemon

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

const (
	// liveBuffer caps the output waiting for a slow reader; beyond it bytes
	// are dropped from the live copy (never from the response).
	liveBuffer = 256 << 10
	// liveWriteTimeout bounds one output frame's write: a reader that stops
	// reading loses the live copy, never the command's progress.
	liveWriteTimeout = 10 * time.Second
)

// liveOutput streams an exec's output as ExecOutput frames before its
// response (proto.ExecRequest.Stream). The pipe readers put output in and
// never wait; one sender goroutine writes the frames.
//
// Goroutines: the sender, started by newLiveOutput and ended by close,
// which returns once it has written what was left (each write bounded by
// liveWriteTimeout), so the response frame comes after every output frame.
type liveOutput struct {
	st     *yamux.Stream
	max    int           // bytes of each stream sent at most
	notify chan struct{} // cap 1: output is waiting
	stop   chan struct{} // closed by close
	done   chan struct{} // closed when the sender has exited
	once   sync.Once

	mu      sync.Mutex // guards the fields below
	pending []proto.ExecOutput
	bytes   int            // of pending's Data
	sent    map[string]int // bytes of each stream taken in, dropped ones included
	dropped map[string]int64
}

func newLiveOutput(st *yamux.Stream, max int) *liveOutput {
	l := &liveOutput{st: st, max: max, notify: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		sent: map[string]int{}, dropped: map[string]int64{}}
	go l.send()
	return l
}

// tee returns the writer a pipe's reader copies into: the response's
// buffer, and this stream's live copy.
func (l *liveOutput) tee(stream string, buf io.Writer) io.Writer {
	if l == nil {
		return buf
	}
	return io.MultiWriter(buf, liveWriter{l, stream})
}

type liveWriter struct {
	l      *liveOutput
	stream string
}

func (w liveWriter) Write(p []byte) (int, error) {
	w.l.put(w.stream, p)
	return len(p), nil
}

// put queues p (up to the stream's cap) without waiting.
func (l *liveOutput) put(stream string, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := l.max - l.sent[stream]
	if room <= 0 {
		return
	}
	capped := len(p) >= room
	p = p[:min(len(p), room)]
	l.sent[stream] += len(p)
	if l.bytes+len(p) > liveBuffer {
		l.dropped[stream] += int64(len(p))
		if !capped {
			return
		}
		p = nil // the cap still has to be said
	}
	if n, d := len(l.pending), l.dropped[stream]; n > 0 && d == 0 && l.pending[n-1].Stream == stream {
		l.pending[n-1].Data = append(l.pending[n-1].Data, p...)
		l.pending[n-1].Capped = capped
	} else {
		l.pending = append(l.pending, proto.ExecOutput{Stream: stream, Data: append([]byte(nil), p...), Dropped: d, Capped: capped})
		l.dropped[stream] = 0
	}
	l.bytes += len(p)
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *liveOutput) take() []proto.ExecOutput {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.pending
	l.pending, l.bytes = nil, 0
	for stream, n := range l.dropped {
		if n > 0 {
			out = append(out, proto.ExecOutput{Stream: stream, Dropped: n})
			l.dropped[stream] = 0
		}
	}
	return out
}

// send writes frames until close; after a failed write it only drains.
func (l *liveOutput) send() {
	defer close(l.done)
	failed := false
	write := func() {
		for _, o := range l.take() {
			if failed {
				continue
			}
			l.st.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
			if proto.WriteFrame(l.st, &proto.Response{Output: &o}) != nil {
				failed = true
			}
		}
	}
	for {
		select {
		case <-l.notify:
			write()
		case <-l.stop:
			write()
			l.st.SetWriteDeadline(time.Time{})
			return
		}
	}
}

// close writes what is left and stops the sender; nil-safe.
func (l *liveOutput) close() {
	if l == nil {
		return
	}
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
