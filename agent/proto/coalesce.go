package proto

import (
	"encoding/binary"
	"io"
	"sync"
	"time"
)

// The yamux frame header as the session's send loop writes it (see the
// yamux spec): version, type, flags, stream id, length.
const (
	yamuxHeaderSize       = 12
	yamuxVersion          = 0
	yamuxTypeData         = 0
	yamuxTypeWindowUpdate = 1
	yamuxFlagSYN          = 1
	yamuxFlagACK          = 2
	yamuxFlagFIN          = 4
	yamuxFlagRST          = 8
)

// DefaultHold is how long CoalesceWrites keeps a stream's open or accept
// frame back waiting for the next write: a request follows its stream's
// open at once, a response its accept within the handler's time.
const DefaultHold = time.Millisecond

const (
	// maxHeld caps the headers held back; more are written out.
	maxHeld = 64 * yamuxHeaderSize
	// maxJoined is the largest body copied behind the held headers so
	// both leave in one write; a larger one is written after them.
	maxJoined = 32 << 10
)

// CoalesceWrites wraps the byte stream a yamux session runs over so that
// every relay hop between the two ends (dockerd, the exec's shim, the
// attach bridge) wakes once per message rather than once per write. The
// session's send loop writes a frame's header and its body as two writes;
// the wrapper holds the header and writes it together with the body. It
// also holds the header-only frames that open or accept a stream (no one
// waits on them) until the next write, or at most hold, so they ride along
// with the next frame: a request goes out with its stream's open, a response
// with its stream's accept. Everything else — closes, window updates,
// pings, go-aways, resets — goes out at once, after what was held, so the
// order of the bytes never changes. (Closes are not held: a close is
// rarely followed by a write within the hold, so holding it would cost a
// timer and a wake-up and save nothing, and it would delay the
// cancellation of an exec, which is a close.)
//
// Writes must come from one goroutine at a time (yamux's send loop); the
// hold timer's flush is the only other writer and is serialized with it.
// A write that does not look like the send loop's is written out as it
// comes: what the wrapper decides only ever changes when bytes leave, never
// their order.
// Close stops the timer and closes rwc without waiting on a pending write.
func CoalesceWrites(rwc io.ReadWriteCloser, hold time.Duration) io.ReadWriteCloser {
	c := &coalescer{rwc: rwc, hold: hold}
	c.timer = time.AfterFunc(time.Hour, c.flushHeld)
	c.timer.Stop()
	return c
}

type coalescer struct {
	rwc   io.ReadWriteCloser
	hold  time.Duration
	timer *time.Timer // runs flushHeld; set once, before any write

	// mu guards held, bodyLen, armed and err, and serializes the writes to rwc.
	mu      sync.Mutex
	held    []byte // headers written to us but not yet to rwc
	bodyLen uint32 // the body the last held header announced (0: none expected)
	armed   bool   // the timer will flush held
	err     error  // a failed flush by the timer, returned by every later write
}

func (c *coalescer) Read(p []byte) (int, error) { return c.rwc.Read(p) }

func (c *coalescer) Close() error {
	c.timer.Stop()
	return c.rwc.Close()
}

func (c *coalescer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.bodyLen > 0 {
		// The body of the data frame whose header is held (or, should
		// the send loop ever split it, its first part).
		c.bodyLen = 0
		return c.writeOut(p)
	}
	if len(p) == yamuxHeaderSize && p[0] == yamuxVersion {
		typ, flags, n := p[1], binary.BigEndian.Uint16(p[2:4]), binary.BigEndian.Uint32(p[8:12])
		hold := false
		switch typ {
		case yamuxTypeData:
			hold, c.bodyLen = n > 0, n
		case yamuxTypeWindowUpdate:
			// A plain window update may unblock a writer: it goes now.
			hold = flags&(yamuxFlagSYN|yamuxFlagACK) != 0 && flags&(yamuxFlagFIN|yamuxFlagRST) == 0
		}
		if hold && len(c.held)+len(p) <= maxHeld {
			c.held = append(c.held, p...)
			if !c.armed {
				c.armed = true
				c.timer.Reset(c.hold)
			}
			return len(p), nil
		}
	}
	return c.writeOut(p)
}

// writeOut writes what is held and then p, in one write when p is small.
func (c *coalescer) writeOut(p []byte) (int, error) {
	if len(c.held) == 0 {
		return c.rwc.Write(p)
	}
	if len(p) <= maxJoined {
		c.held = append(c.held, p...)
		if err := c.writeHeld(); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if err := c.writeHeld(); err != nil {
		return 0, err
	}
	return c.rwc.Write(p)
}

// writeHeld writes out what is held; the timer has nothing left to do.
func (c *coalescer) writeHeld() error {
	_, err := c.rwc.Write(c.held)
	c.held = c.held[:0]
	if c.armed {
		c.armed = false
		c.timer.Stop()
	}
	if cap(c.held) > maxHeld+maxJoined {
		c.held = nil // a large join's buffer is not kept
	}
	return err
}

// flushHeld is the timer's: nothing followed the held frames in time.
func (c *coalescer) flushHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if len(c.held) == 0 || c.err != nil {
		return
	}
	if err := c.writeHeld(); err != nil {
		// The session learns of it at its next write; closing the
		// stream ends its read loop now.
		c.err = err
		c.rwc.Close()
	}
}
