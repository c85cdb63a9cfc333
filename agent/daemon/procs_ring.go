package daemon

import (
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

const (
	// ringChunkMax caps one chunk's data: appends of the same stream go
	// into the last chunk until it holds this much.
	ringChunkMax = 32 << 10
	// ringChunkCost is what a chunk costs beyond its data (its header in
	// the slice, the slice header), counted against the ring's size so
	// that a program writing single bytes to both streams in turn cannot
	// make the ring's memory many times its size.
	ringChunkCost = 64
)

// ringChunk is a run of bytes from one stream, starting at off.
type ringChunk struct {
	stream string
	off    int64
	data   []byte
	cost   int64 // the memory counted for it: its buffer's capacity and ringChunkCost
}

// outRing is a long-lived process's output: the newest bytes, up to max of
// memory counted, with absolute offsets from 0. Writers never wait: when a
// write makes the ring too large, whole chunks are dropped from its front.
// Readers copy what they take, under the lock.
type outRing struct {
	max   int64
	clock *outputClock // marked at every write; nil: none

	// mu guards every field below.
	mu     sync.Mutex
	chunks []ringChunk // in offset order, without gaps from start to end
	start  int64       // offset of the first byte held
	end    int64       // offset after the last byte written
	used   int64       // the memory counted for chunks
	closed bool        // no more output will come
	// wake is closed and replaced at every write and at close, so a
	// follower waits for the next change without polling.
	wake chan struct{}
}

func newOutRing(max int64) *outRing {
	return &outRing{max: max, wake: make(chan struct{})}
}

// write appends p, written to stream, dropping the oldest chunks past max.
func (r *outRing) write(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	for len(p) > 0 {
		if n := len(r.chunks); n > 0 {
			last := &r.chunks[n-1]
			if last.stream == stream && len(last.data) < ringChunkMax {
				room := min(ringChunkMax-len(last.data), len(p))
				old := cap(last.data)
				last.data = append(last.data, p[:room]...)
				if grown := int64(cap(last.data) - old); grown > 0 {
					last.cost += grown
					r.used += grown
				}
				r.end += int64(room)
				p = p[room:]
				continue
			}
		}
		n := min(len(p), ringChunkMax)
		data := make([]byte, n)
		copy(data, p[:n])
		c := ringChunk{stream: stream, off: r.end, data: data, cost: int64(cap(data)) + ringChunkCost}
		r.chunks = append(r.chunks, c)
		r.used += c.cost
		r.end += int64(n)
		p = p[n:]
	}
	if r.clock != nil {
		r.clock.mark(time.Now())
	}
	for r.used > r.max && len(r.chunks) > 1 {
		c := r.chunks[0]
		r.chunks[0] = ringChunk{}
		r.chunks = r.chunks[1:]
		r.used -= c.cost
		r.start = c.off + int64(len(c.data))
	}
	r.signalLocked()
}

// close says no more output will come; readers then see the end as final.
func (r *outRing) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.signalLocked()
	}
}

func (r *outRing) signalLocked() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// ringRead is what a read found.
type ringRead struct {
	chunks  []proto.ProcChunk
	next    int64 // the cursor after chunks
	dropped int64 // bytes lost between since and the first chunk
	end     int64 // the ring's end when read
	closed  bool  // the ring was closed when read (and next == end: nothing more will come)
	wake    <-chan struct{}
}

// read copies up to max bytes from offset since (at most end; the caller
// checks). A since before the ring's start reads from the start, and
// dropped says how many bytes were missed.
func (r *outRing) read(since int64, max int) ringRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := ringRead{end: r.end, closed: r.closed, wake: r.wake, next: since}
	if since < r.start {
		out.dropped = r.start - since
		since = r.start
		out.next = since
	}
	i := sort.Search(len(r.chunks), func(i int) bool {
		c := r.chunks[i]
		return c.off+int64(len(c.data)) > since
	})
	left := max
	for ; i < len(r.chunks) && left > 0; i++ {
		c := r.chunks[i]
		from := int(since - c.off)
		if from < 0 {
			from = 0
		}
		n := min(len(c.data)-from, left)
		data := make([]byte, n)
		copy(data, c.data[from:from+n])
		// Consecutive chunks of one stream are one to a reader.
		if k := len(out.chunks); k > 0 && out.chunks[k-1].Stream == c.stream {
			out.chunks[k-1].Data = append(out.chunks[k-1].Data, data...)
		} else {
			out.chunks = append(out.chunks, proto.ProcChunk{Stream: c.stream, Offset: c.off + int64(from), Data: data})
		}
		left -= n
		since = c.off + int64(from+n)
		out.next = since
	}
	return out
}

// bounds returns the first offset held, the end, and the memory counted.
func (r *outRing) bounds() (start, end, used int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start, r.end, r.used
}
