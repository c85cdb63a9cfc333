package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// A request body must arrive at a pace: a client that trickles one byte a
// second would otherwise hold a connection and a goroutine for as long as
// it likes. One fixed bound for every body (http.Server's ReadTimeout) is
// either long for a small body or short for a 16 MiB tool call on a slow
// link, and its failure reads as an i/o error; so the API gives each body
// a deadline of its own — a grace plus time in proportion to its length —
// responds to a body that misses it with an error message, and closes the
// connection. The deadline is on the connection's read side only and ends
// with the body: responses (SSE streams, tool calls that run for minutes)
// get no deadline.

// DefaultBodyTimeout is the time every body gets; a long one gets one more
// second per minBodyRate bytes.
const (
	DefaultBodyTimeout = 10 * time.Second
	minBodyRate        = 256 << 10 // bytes per second
)

// WithBodyTimeout sets how long a request body may take to arrive (plus a
// second per 256 KiB of it); <= 0 keeps DefaultBodyTimeout.
func WithBodyTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.bodyTimeout = d
		}
	}
}

// BodyAllowance is how long a body of n bytes may take to arrive.
func BodyAllowance(grace time.Duration, n int64) time.Duration {
	return grace + time.Duration(n)*time.Second/minBodyRate
}

var errBodyTooSlow = errors.New("request body arrived too slowly")

// pacedBody is a request body under a read deadline. It is read by one
// handler goroutine only.
type pacedBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	start    time.Time
	grace    time.Duration
	length   int64 // Content-Length; -1 when unknown (chunked)
	read     int64
	deadline time.Time
	done     bool // the deadline has been cleared
}

// paceBody puts r's body under its deadline. A connection that takes no
// deadlines (a relay's) leaves the body as it is.
func (s *Server) paceBody(w http.ResponseWriter, r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r
	}
	p := &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), grace: s.bodyTimeout, length: r.ContentLength}
	p.deadline = p.allowed()
	if err := p.rc.SetReadDeadline(p.deadline); err != nil {
		return r
	}
	r.Body = p
	return r
}

// allowed is when the body must be in: the grace, plus a second per
// minBodyRate bytes of its length (or of what came so far, when the length
// is not known).
func (p *pacedBody) allowed() time.Time {
	return p.start.Add(BodyAllowance(p.grace, max(p.length, p.read)))
}

func (p *pacedBody) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	p.read += int64(n)
	switch {
	case err == io.EOF:
		p.finish()
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		return n, errBodyTooSlow
	case err == nil && p.length < 0:
		// A chunked body earns time as it arrives; move the deadline in
		// whole seconds, not on every read.
		if d := p.allowed(); d.Sub(p.deadline) >= time.Second {
			p.deadline = d
			p.rc.SetReadDeadline(d)
		}
	}
	return n, err
}

// finish clears the deadline once the body is in, so that nothing after it
// (net/http's own read that watches for a hang-up) inherits it.
func (p *pacedBody) finish() {
	if !p.done {
		p.done = true
		p.rc.SetReadDeadline(time.Time{})
	}
}

// tooSlow is the error message for a body that missed its deadline.
func (p *pacedBody) tooSlow() string {
	got := fmt.Sprintf("%d bytes", p.read)
	if p.length >= 0 {
		got = fmt.Sprintf("%d of %d bytes", p.read, p.length)
	}
	return fmt.Sprintf("request body arrived too slowly (%s in %s; a body gets %s plus a second per 256 KiB); send the whole body without pauses",
		got, time.Since(p.start).Round(100*time.Millisecond), p.grace)
}
