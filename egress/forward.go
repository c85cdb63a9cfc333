package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// hopHeaders concern one connection only and are never forwarded
// (RFC 9110 §7.6.1); Proxy-Authorization is the sandbox's business with
// this proxy and never goes upstream.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHop deletes the hop-by-hop headers and those the Connection header
// names, and returns the protocol an upgrade asks for, if any.
func removeHop(h http.Header) (upgrade string) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			f = textproto.TrimString(f)
			if strings.EqualFold(f, "upgrade") {
				upgrade = h.Get("Upgrade")
			}
			if f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	return upgrade
}

// clientSide is where an exchange reads the request body and writes the
// response: the client connection, or the TLS connection over it.
type clientSide struct {
	conn net.Conn
	br   *bufio.Reader
}

// outcome is how one request exchange ended.
type outcome struct {
	status     int    // the status sent to the client, 0 if none
	keepClient bool   // the client connection may carry another request
	keepUp     bool   // the upstream connection may carry another request
	stale      bool   // a reused upstream had closed before answering
	reason     string // what failed, for the record; "" when it went well
}

// exchange sends out upstream on u and relays the response to the client,
// masking inj's secrets in it. The request body is sent while the response
// is read, so a server answering early is not deadlocked.
func (s *session) exchange(out *http.Request, u *upstreamConn, cl clientSide, inj *injection, label string) outcome {
	idle := s.cfg().IdleTimeout
	upgrade := removeHop(out.Header)
	if upgrade != "" {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", upgrade)
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // Request.Write would add Go's own
	}
	if inj != nil {
		inj.apply(out.Header)
	}
	if out.Body != nil && out.Body != http.NoBody {
		out.Body = &deadlineBody{ReadCloser: out.Body, c: cl.conn, idle: idle}
	}
	written := make(chan error, 1)
	go func() { written <- out.Write(u.conn) }()
	// finish waits for the request to be written; when the response ended
	// first and the body is still flowing, both connections are dropped.
	finish := func(o outcome) outcome {
		select {
		case err := <-written:
			if err != nil {
				o.keepUp, o.keepClient = false, false
			}
		case <-time.After(time.Second):
			o.keepUp, o.keepClient = false, false
			u.conn.Close()
			cl.conn.SetReadDeadline(time.Now())
			<-written
		}
		return o
	}
	var resp *http.Response
	for {
		u.cr.n = maxHeaderBytes + int64(u.br.Size())
		r, err := http.ReadResponse(u.br, out)
		u.cr.n = -1
		if err != nil {
			u.conn.Close()
			o := outcome{reason: "the upstream did not answer with HTTP: " + errText(err)}
			if errors.Is(err, io.EOF) && u.br.Buffered() == 0 {
				o.stale = true
			}
			select {
			case <-written:
			case <-time.After(time.Second):
				cl.conn.SetReadDeadline(time.Now())
				<-written
			}
			if !o.stale {
				o.status = http.StatusBadGateway
				writeRefusal(cl.conn, o.status, fmt.Sprintf("sandboxd: the server at %s did not answer the request (%s); retry, or check the server.", label, errText(err)))
			}
			return o
		}
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			removeHop(r.Header)
			if inj != nil {
				inj.redactHeader(r.Header)
			}
			if err := writeHead(cl.conn, r); err != nil {
				u.conn.Close()
				return finish(outcome{reason: "the client went away"})
			}
			continue
		}
		resp = r
		break
	}
	upClose := resp.Close
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return s.upgraded(resp, upgrade, u, cl, inj, finish)
	}
	removeHop(resp.Header)
	if inj != nil {
		inj.redactHeader(resp.Header)
		resp.Body = newMaskReader(resp.Body, inj.bodyNeedles())
	}
	resp.ProtoMajor, resp.ProtoMinor = 1, 1
	resp.Close = out.Close
	if resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && out.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified {
		resp.TransferEncoding = []string{"chunked"} // keeps the client connection open
	}
	bw := bufio.NewWriterSize(cl.conn, spliceBuf)
	resp.Body = &flushBody{ReadCloser: resp.Body, w: bw}
	// Response.Write copies the body with io.Copy, which would hand the
	// body bw's own buffer through bufio.Writer.ReadFrom; flushBody flushes
	// that buffer from under it, so bw is hidden behind a plain Writer.
	err := resp.Write(struct{ io.Writer }{bw})
	if err == nil {
		err = bw.Flush()
	}
	resp.Body.Close()
	o := outcome{status: resp.StatusCode, keepClient: !out.Close && !resp.Close, keepUp: !upClose}
	if err != nil {
		u.conn.Close()
		o.keepClient, o.keepUp = false, false
		o.reason = "relaying the response failed: " + errText(err)
	}
	if !o.keepUp {
		u.conn.Close()
	}
	return finish(o)
}

// upgraded relays a 101 answer and splices the two connections, which now
// speak the upgraded protocol.
func (s *session) upgraded(resp *http.Response, asked string, u *upstreamConn, cl clientSide, inj *injection, finish func(outcome) outcome) outcome {
	if asked == "" {
		u.conn.Close()
		writeRefusal(cl.conn, http.StatusBadGateway, "sandboxd: the server switched protocols though the request asked for no upgrade.")
		return finish(outcome{status: http.StatusBadGateway, reason: "the upstream switched protocols unasked"})
	}
	proto := resp.Header.Get("Upgrade")
	if proto == "" {
		proto = asked
	}
	removeHop(resp.Header)
	resp.Header.Set("Connection", "Upgrade")
	resp.Header.Set("Upgrade", proto)
	if inj != nil {
		inj.redactHeader(resp.Header)
	}
	o := finish(outcome{status: resp.StatusCode})
	if err := writeHead(cl.conn, resp); err != nil {
		u.conn.Close()
		o.reason = "the client went away"
		return o
	}
	splice(cl.br, cl.conn, &readerConn{Conn: u.conn, r: u.br}, s.cfg().IdleTimeout)
	return o
}

// readerConn reads through r (which holds bytes already buffered from the
// connection) and writes to the connection.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// writeHead writes a response's status line and header, for a response
// without a body (1xx).
func writeHead(w io.Writer, r *http.Response) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", r.StatusCode, http.StatusText(r.StatusCode))
	r.Header.Write(bw)
	bw.WriteString("\r\n")
	return bw.Flush()
}

// flushBody flushes what was written to the client before each read of the
// upstream body, so a slow or streamed response reaches the client as it
// comes rather than when the buffer fills.
type flushBody struct {
	io.ReadCloser
	w *bufio.Writer
}

func (f *flushBody) Read(p []byte) (int, error) {
	if f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.ReadCloser.Read(p)
}

// errText is an error's text without the address noise of a net.OpError.
func errText(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// newUpstream wraps a dialed (and for HTTPS, TLS) connection for exchanges.
func newUpstream(to dest, conn net.Conn, idle time.Duration) *upstreamConn {
	dc := &deadlineConn{Conn: conn, idle: idle}
	cr := &capReader{r: dc, n: -1}
	return &upstreamConn{to: to, conn: dc, cr: cr, br: bufio.NewReaderSize(cr, 4<<10)}
}
