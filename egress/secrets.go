package egress

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
)

// redactedMark replaces a secret found in a response header.
const redactedMark = "[redacted by sandboxd]"

// minBodyNeedle is the shortest secret form masked in response bodies: a
// shorter one would match by chance in binary downloads and corrupt them.
const minBodyNeedle = 8

// matchSecrets returns the secrets whose host rules match host and port.
func matchSecrets(secrets []Secret, host string, port int) []Secret {
	var out []Secret
	ip, ipErr := netip.ParseAddr(host)
	for _, s := range secrets {
		for _, r := range s.Hosts {
			if ipErr == nil && r.matchesAddr(ip.Unmap(), port) || ipErr != nil && r.matchesHost(host, port) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// HeaderName is the header the secret sets.
func (s Secret) HeaderName() string {
	if s.Header == "" {
		return "Authorization"
	}
	return http.CanonicalHeaderKey(s.Header)
}

// injection is the header values to set on one request and the forms of the
// secrets to keep out of the response.
type injection struct {
	names   []string
	headers map[string]string
	needles []string // every form of every value, longest first
}

// render reads each secret's value now (a rotated file takes effect at the
// next request) and builds the headers. An error names the secret, never
// its value.
func render(secrets []Secret) (*injection, error) {
	inj := &injection{headers: map[string]string{}}
	for _, s := range secrets {
		if s.Value == nil {
			return nil, fmt.Errorf("the secret %s has no value source", s.Name)
		}
		v, err := s.Value()
		if err != nil {
			return nil, fmt.Errorf("reading the secret %s failed: %v", s.Name, err)
		}
		v = strings.TrimRight(v, "\r\n")
		if v == "" {
			return nil, fmt.Errorf("the secret %s is empty", s.Name)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("the secret %s contains a line break or NUL, which a header cannot carry", s.Name)
		}
		var hv string
		if s.Basic {
			enc := base64.StdEncoding.EncodeToString([]byte(s.BasicUser + ":" + v))
			hv = "Basic " + enc
			inj.needles = append(inj.needles, enc)
		} else {
			f := s.Format
			if f == "" {
				f = "{}"
			}
			hv = strings.ReplaceAll(f, "{}", v)
		}
		inj.headers[s.HeaderName()] = hv
		inj.names = append(inj.names, s.Name)
		inj.needles = append(inj.needles, hv, v)
	}
	// Longest first, so a header value holding the bare value is replaced
	// whole rather than leaving its prefix.
	for i := 1; i < len(inj.needles); i++ {
		for j := i; j > 0 && len(inj.needles[j]) > len(inj.needles[j-1]); j-- {
			inj.needles[j], inj.needles[j-1] = inj.needles[j-1], inj.needles[j]
		}
	}
	return inj, nil
}

// apply sets the secret headers on h, replacing whatever the client sent.
func (inj *injection) apply(h http.Header) {
	for k, v := range inj.headers {
		h[k] = []string{v}
	}
}

// redactHeader replaces every form of a secret found in h's names or values.
func (inj *injection) redactHeader(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = inj.redact(v)
		}
		if r := inj.redact(k); r != k {
			delete(h, k)
			h["X-Sandboxd-Redacted"] = append(h["X-Sandboxd-Redacted"], redactedMark)
		}
	}
}

func (inj *injection) redact(s string) string {
	for _, n := range inj.needles {
		if n != "" && strings.Contains(s, n) {
			s = strings.ReplaceAll(s, n, redactedMark)
		}
	}
	return s
}

// bodyNeedles are the forms long enough to mask in a body.
func (inj *injection) bodyNeedles() [][]byte {
	var out [][]byte
	for _, n := range inj.needles {
		if len(n) >= minBodyNeedle {
			out = append(out, []byte(n))
		}
	}
	return out
}

// maskReader masks every occurrence of its needles in a stream with '*'
// bytes of the same length, so a body's declared length stays true. It
// holds back the last few bytes of each read until it knows no needle
// starts there.
type maskReader struct {
	r       io.ReadCloser
	needles [][]byte
	keep    int    // the longest needle's length less one
	buf     []byte // bytes read and masked, not yet returned
	ready   int    // how many of buf may be returned
	err     error
	chunk   []byte // the read buffer, reused
}

func newMaskReader(r io.ReadCloser, needles [][]byte) io.ReadCloser {
	if len(needles) == 0 {
		return r
	}
	keep := 0
	for _, n := range needles {
		keep = max(keep, len(n)-1)
	}
	return &maskReader{r: r, needles: needles, keep: keep}
}

func (m *maskReader) Read(p []byte) (int, error) {
	for m.ready == 0 {
		if m.err != nil {
			if len(m.buf) == 0 {
				return 0, m.err
			}
			m.ready = len(m.buf)
			break
		}
		if m.chunk == nil {
			m.chunk = make([]byte, 16<<10)
		}
		n, err := m.r.Read(m.chunk)
		if len(m.buf) == 0 {
			m.buf = m.buf[:0:0] // let the consumed prefix go
		}
		m.buf = append(m.buf, m.chunk[:n]...)
		m.err = err
		for _, nd := range m.needles {
			for off := 0; ; {
				i := bytes.Index(m.buf[off:], nd)
				if i < 0 {
					break
				}
				for j := range nd {
					m.buf[off+i+j] = '*'
				}
				off += i + len(nd)
			}
		}
		if m.err == nil {
			m.ready = max(len(m.buf)-m.keep, 0)
		}
	}
	n := copy(p, m.buf[:m.ready])
	m.buf = m.buf[n:]
	m.ready -= n
	return n, nil
}

func (m *maskReader) Close() error { return m.r.Close() }
