package openapitest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/api/openapi"
)

// maxChecked caps the JSON body the transport reads to check it; a longer
// one is reported rather than read without end.
const maxChecked = 64 << 20

// Transport checks every response under prefix ("/v1/") that next brings
// back, and calls report with each mismatch; the response is passed on
// unchanged. A JSON body is read whole (then given back to the caller); a
// stream is checked event by event as the caller reads it.
func (c *Checker) Transport(next http.RoundTripper, prefix string, report func(error)) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{c: c, next: next, prefix: prefix, report: report}
}

type transport struct {
	c      *Checker
	next   http.RoundTripper
	prefix string
	report func(error)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, t.prefix) {
		return resp, err
	}
	method, path := req.Method, req.URL.Path
	if !t.c.Documented(method, path) && resp.StatusCode == http.StatusNotFound {
		return resp, nil // an unknown endpoint's 404 is the contract too
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, _ := mime.ParseMediaType(ct); mt == openapi.MediaStream {
		if err := t.c.Check(method, path, resp.StatusCode, ct, nil); err != nil {
			t.report(err)
		}
		resp.Body = &streamBody{ReadCloser: resp.Body, check: func(event string, data []byte) {
			if err := t.c.CheckEvent(method, path, resp.StatusCode, event, data); err != nil {
				t.report(err)
			}
		}}
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxChecked+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s to check it: %w", method, path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > maxChecked {
		t.report(fmt.Errorf("%s %s answered more than %d bytes; not checked", method, path, maxChecked))
		return resp, nil
	}
	if err := t.c.Check(method, path, resp.StatusCode, ct, body); err != nil {
		t.report(err)
	}
	return resp, nil
}

// streamBody parses the SSE stream the caller reads and checks each event
// when its blank line arrives.
type streamBody struct {
	io.ReadCloser
	check func(event string, data []byte)

	line  []byte // an unfinished line
	event string
	data  [][]byte
}

func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.feed(p[:n])
	return n, err
}

func (s *streamBody) feed(b []byte) {
	s.line = append(s.line, b...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSuffix(s.line[:i], []byte("\r"))
		s.line = s.line[i+1:]
		s.handle(line)
	}
}

func (s *streamBody) handle(line []byte) {
	switch {
	case len(line) == 0:
		if s.data != nil {
			ev := s.event
			if ev == "" {
				ev = "message"
			}
			s.check(ev, bytes.Join(s.data, []byte("\n")))
		}
		s.event, s.data = "", nil
	case line[0] == ':':
	default:
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			s.event = string(value)
		case "data":
			s.data = append(s.data, append([]byte(nil), value...))
		}
	}
}
