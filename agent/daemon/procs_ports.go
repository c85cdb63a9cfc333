package daemon

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

const copyChunk = 32 << 10

// outPort buffers one output pipe of a spawned process for its attacher.
// The pump stops reading while the buffer is full, so a process that writes
// faster than anyone drains blocks instead of losing bytes. Delivery across
// attachers is at least once: a chunk whose write failed as its session
// died is kept for the next attacher, though the dying session may have
// read it (yamux can report the shutdown after the frame went out), so a
// protocol on these streams must tolerate a repeated chunk (the eval
// kernels name the cell of every message for this).
//
// Goroutines: one pump (until the pipe's EOF) and at most one live copier
// (per attachment; a replaced copier exits once its write fails or it wakes).
type outPort struct {
	max int
	// mu guards buf, eof, discard, cur and gen; cond signals changes of any of them.
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	eof     bool
	discard bool // nobody will read again: drop what the pipe still yields
	cur     net.Conn
	gen     int
	// writing serializes copiers so that a replaced one has finished with
	// its chunk before the next starts: no byte is sent twice.
	writing sync.Mutex
}

func newOutPort(r *os.File, max int) *outPort {
	p := &outPort{max: max}
	p.cond = sync.NewCond(&p.mu)
	go p.pump(r)
	return p
}

func (p *outPort) pump(r *os.File) {
	defer r.Close()
	chunk := make([]byte, copyChunk)
	for {
		p.mu.Lock()
		for len(p.buf) >= p.max && !p.discard {
			p.cond.Wait()
		}
		room := min(p.max-len(p.buf), len(chunk))
		p.mu.Unlock()
		n, err := r.Read(chunk[:room])
		p.mu.Lock()
		if !p.discard {
			p.buf = append(p.buf, chunk[:n]...)
		}
		if err != nil {
			p.eof = true
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// attach makes c the port's one attacher, closing the previous one, and
// returns the copy loop to run on the handler's goroutine.
func (p *outPort) attach(c net.Conn) func() {
	p.mu.Lock()
	old := p.cur
	p.cur = c
	p.gen++
	gen := p.gen
	p.cond.Broadcast()
	p.mu.Unlock()
	if old != nil {
		old.SetDeadline(time.Now())
		old.Close()
	}
	return func() { p.copyTo(c, gen) }
}

func (p *outPort) copyTo(c net.Conn, gen int) {
	defer c.Close()
	p.writing.Lock()
	defer p.writing.Unlock()
	for {
		p.mu.Lock()
		for len(p.buf) == 0 && !p.eof && p.gen == gen {
			p.cond.Wait()
		}
		if p.gen != gen || (len(p.buf) == 0 && p.eof) {
			if p.gen == gen {
				p.cur = nil
			}
			p.mu.Unlock()
			return
		}
		chunk := append([]byte(nil), p.buf[:min(len(p.buf), copyChunk)]...)
		p.mu.Unlock()
		n, err := c.Write(chunk)
		p.mu.Lock()
		p.buf = append(p.buf[:0], p.buf[n:]...)
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// detach closes the current attacher and drops the buffer: the process is
// gone from the table, and its pump must not stay blocked on a full buffer.
func (p *outPort) detach() {
	p.mu.Lock()
	p.discard = true
	p.buf = nil
	old := p.cur
	p.cur = nil
	p.gen++
	p.cond.Broadcast()
	p.mu.Unlock()
	if old != nil {
		old.SetDeadline(time.Now())
		old.Close()
	}
}

// inPort feeds one input pipe of a spawned process from its attacher. A
// half-close by the attacher (EOF while its session lives) closes the pipe,
// so the process reads EOF; a dropped session or a replaced attacher does not.
type inPort struct {
	// mu guards w, cur and gen.
	mu  sync.Mutex
	w   *os.File
	cur net.Conn
	gen int
	// writing serializes copiers' writes into w.
	writing sync.Mutex
}

func (p *inPort) attach(c net.Conn, sessionClosed func() bool) func() {
	p.mu.Lock()
	old := p.cur
	p.cur = c
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	if old != nil {
		old.SetDeadline(time.Now())
		old.Close()
	}
	return func() {
		defer c.Close()
		buf := make([]byte, copyChunk)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if werr := p.write(buf[:n], gen); werr != nil {
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) && !sessionClosed() {
					p.closeIfCurrent(gen)
				}
				return
			}
		}
	}
}

func (p *inPort) write(b []byte, gen int) error {
	p.writing.Lock()
	defer p.writing.Unlock()
	p.mu.Lock()
	w, cur := p.w, p.gen == gen
	p.mu.Unlock()
	if !cur {
		return errors.New("replaced by a newer attacher")
	}
	if w == nil {
		return os.ErrClosed
	}
	_, err := w.Write(b)
	return err
}

func (p *inPort) closeIfCurrent(gen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen == gen && p.w != nil {
		p.w.Close()
		p.w = nil
	}
}

func (p *inPort) close() {
	p.mu.Lock()
	w, old := p.w, p.cur
	p.w, p.cur = nil, nil
	p.gen++
	p.mu.Unlock()
	if w != nil {
		w.Close()
	}
	if old != nil {
		old.SetDeadline(time.Now())
		old.Close()
	}
}
