package egress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// dest is where a client connection currently goes, as decided.
type dest struct {
	host    string
	port    int
	addr    netip.Addr
	trusted bool
}

// clientConn is one client connection a Gate serves: it counts the bytes
// each way and knows its current destination, so that a policy change can
// cut it.
type clientConn struct {
	net.Conn
	g *Gate
	// counted is set by Gate.admit under Gate.mu and read under it.
	counted bool
	// up counts bytes read from the client, down bytes written to it.
	up, down atomic.Int64

	// mu guards cur, upstream and cutWhy.
	mu       sync.Mutex
	cur      *dest
	upstream net.Conn
	cutWhy   string
}

func (c *clientConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.up.Add(int64(n))
	return n, err
}

// Write gives up when the client reads nothing for the idle timeout, so a
// client that stops reading cannot hold the proxy's goroutines.
func (c *clientConn) Write(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.g.p.cfg.IdleTimeout))
	n, err := c.Conn.Write(p)
	c.down.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the client connection when it can, so a tunnel
// whose upstream finished still delivers what the client sends.
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// setDest records where the connection now goes and, since a policy change
// may have happened between the decision and now, decides it once more
// under the current policy. It reports false when the connection was cut.
func (c *clientConn) setDest(d dest, upstream net.Conn) bool {
	c.mu.Lock()
	if c.cutWhy != "" {
		c.mu.Unlock()
		upstream.Close()
		return false
	}
	c.cur, c.upstream = &d, upstream
	c.mu.Unlock()
	c.recheck(c.g.Policy())
	return c.cutReason() == ""
}

// clearDest forgets the destination once the upstream connection is closed.
func (c *clientConn) clearDest() {
	c.mu.Lock()
	c.cur, c.upstream = nil, nil
	c.mu.Unlock()
}

// recheck decides the current destination under e and cuts the connection
// when e refuses it.
func (c *clientConn) recheck(e Effective) {
	c.mu.Lock()
	d := c.cur
	c.mu.Unlock()
	if d == nil {
		return
	}
	v := e.Host(d.host, d.port)
	if v.Allowed && d.addr.IsValid() {
		v = e.Addr(d.addr, d.port, d.trusted)
	}
	if !v.Allowed {
		c.cut("cut by a policy change: " + v.Why)
	}
}

// cut closes the client connection and its upstream; why is kept for the
// decision record, the first reason winning.
func (c *clientConn) cut(why string) {
	c.mu.Lock()
	if c.cutWhy == "" {
		c.cutWhy = why
	}
	up := c.upstream
	c.mu.Unlock()
	c.Conn.Close()
	if up != nil {
		up.Close()
	}
}

func (c *clientConn) cutReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutWhy
}

// prefixConn replays bytes already read from a connection before reading on.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// spliceBuf is the copy buffer of one direction of a tunnel.
const spliceBuf = 32 << 10

// splice copies both ways between the client side (read from cr, written to
// cw) and the upstream until both directions end, either errs, or both are
// idle for idle. It returns the bytes sent upstream and downstream.
func splice(cr io.Reader, cw net.Conn, up net.Conn, idle time.Duration) (sentUp, sentDown int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cw.Close()
			up.Close()
		})
	}
	dir := func(dst net.Conn, src io.Reader, srcConn net.Conn, n *int64) {
		defer wg.Done()
		buf := make([]byte, spliceBuf)
		for {
			srcConn.SetReadDeadline(time.Unix(0, last.Load()).Add(idle))
			m, err := src.Read(buf)
			if m > 0 {
				last.Store(time.Now().UnixNano())
				dst.SetWriteDeadline(time.Now().Add(idle))
				if _, werr := dst.Write(buf[:m]); werr != nil {
					stop()
					return
				}
				*n += int64(m)
			}
			if err == nil {
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, last.Load())) < idle {
				continue // the other direction was busy
			}
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
					return
				}
			}
			stop()
			return
		}
	}
	wg.Add(2)
	go dir(up, cr, cw, &sentUp)
	go dir(cw, up, up, &sentDown)
	wg.Wait()
	stop()
	return sentUp, sentDown
}

// headerEnd returns the length of the header block at the start of b (up to
// and including its blank line), or -1 when b does not hold all of it yet.
// from is where the previous call stopped looking, so a header trickling in
// a byte at a time is scanned once.
func headerEnd(b []byte, from int) int {
	from = max(from-2, 0)
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			return -1
		}
		j := from + i + 1
		if j < len(b) && b[j] == '\n' {
			return j + 1
		}
		if j+1 < len(b) && b[j] == '\r' && b[j+1] == '\n' {
			return j + 2
		}
		if j+1 >= len(b) {
			return -1
		}
		from = j
	}
}

// capReader fails once more than n bytes were read through it, with n < 0
// meaning no cap; it bounds a response's header block.
type capReader struct {
	r io.Reader
	n int64
}

var errHeaderTooLarge = errors.New("the header block is larger than the proxy accepts")

func (c *capReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return c.r.Read(p)
	}
	if c.n == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// deadlineConn gives every read and write on an upstream connection the
// idle timeout, so a server that stalls mid-response frees the proxy.
type deadlineConn struct {
	net.Conn
	idle time.Duration
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	d.Conn.SetReadDeadline(time.Now().Add(d.idle))
	return d.Conn.Read(p)
}

func (d *deadlineConn) Write(p []byte) (int, error) {
	d.Conn.SetWriteDeadline(time.Now().Add(d.idle))
	return d.Conn.Write(p)
}

// deadlineBody gives each read of a request body from the client the idle
// timeout.
type deadlineBody struct {
	io.ReadCloser
	c    net.Conn
	idle time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	b.c.SetReadDeadline(time.Now().Add(b.idle))
	return b.ReadCloser.Read(p)
}
