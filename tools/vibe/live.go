package vibe

import (
	"io"
	"sync"

	"github.com/sandboxd/sandboxd/tools"
)

// workerLive fans a worker's output out to the vibe_wait calls that watch
// it while they wait (streamed calls); nothing is kept for later watchers.
type workerLive struct {
	mu     sync.Mutex // guards sinks, next and chunks
	sinks  map[int]tools.OutputSink
	next   int
	chunks map[string]*tools.UTF8Chunker // per stream, so characters stay whole
}

// write shows p to every watcher. Sinks never block, so this is called
// with mu held, which keeps each watcher's text in order.
func (l *workerLive) write(stream string, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chunks == nil {
		l.chunks = map[string]*tools.UTF8Chunker{}
	}
	c := l.chunks[stream]
	if c == nil {
		c = &tools.UTF8Chunker{}
		l.chunks[stream] = c
	}
	text := c.Next(p)
	if text == "" {
		return
	}
	for _, s := range l.sinks {
		s.Output(stream, text)
	}
}

// watch adds sink until the returned func is called; a nil sink watches nothing.
func (l *workerLive) watch(sink tools.OutputSink) (stop func()) {
	if sink == nil {
		return func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sinks == nil {
		l.sinks = map[int]tools.OutputSink{}
	}
	id := l.next
	l.next++
	l.sinks[id] = sink
	return func() {
		l.mu.Lock()
		delete(l.sinks, id)
		l.mu.Unlock()
	}
}

// tee is the writer a runner copies a stream into: its tail buffer, and the
// live copy when the attempt has one.
func tee(live func(stream string, p []byte), stream string, buf io.Writer) io.Writer {
	if live == nil {
		return buf
	}
	return io.MultiWriter(buf, liveWriter{live, stream})
}

type liveWriter struct {
	live   func(stream string, p []byte)
	stream string
}

func (w liveWriter) Write(p []byte) (int, error) {
	w.live(w.stream, p)
	return len(p), nil
}
