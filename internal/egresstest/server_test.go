package egresstest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// byName is a client that trusts ca alone and reaches s's name at s's
// address, as a program in a sandbox does through sandboxd's resolver
// override.
func byName(ca *CA, s *Server) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool()},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == s.HostPort() {
					addr = s.Addr()
				}
				return d.DialContext(ctx, network, addr)
			},
		},
	}
}

// The server records what it was asked, by whom and under which name, and
// answers; a name its certificate is not for fails the handshake.
func TestServerRecordsRequests(t *testing.T) {
	ca := NewCA(t)
	s := start(t, ca, "files.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "tea")
	}), nil)
	req, _ := http.NewRequest("GET", s.URL()+"/pot?x=1", nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := byName(ca, s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(body) != "tea" {
		t.Fatalf("answer = %s %q, want 418 \"tea\"", resp.Status, body)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1: %+v", len(reqs), reqs)
	}
	r := reqs[0]
	if r.Method != "GET" || r.Path != "/pot" || r.RawQuery != "x=1" || r.Host != s.HostPort() ||
		r.TLSServer != "files.test" || r.Header.Get("Authorization") != "Bearer t0ken" || r.Status != http.StatusTeapot {
		t.Errorf("recorded %+v; want GET /pot?x=1 to %s, server name files.test, the Authorization header, status 418", r, s.HostPort())
	}

	// A client that asks for a name the certificate does not hold.
	conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: ca.Pool(), ServerName: "other.test"})
	if err == nil {
		conn.Close()
		t.Fatal("the certificate was accepted for other.test")
	}
	if !strings.Contains(err.Error(), "other.test") {
		t.Errorf("handshake for other.test failed for another reason: %v", err)
	}
}

// Requests keeps the latest maxRequests, and says how many it dropped.
func TestServerRequestCap(t *testing.T) {
	ca := NewCA(t)
	s := start(t, ca, "files.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	c := byName(ca, s)
	n := maxRequests + 5
	for i := range n {
		resp, err := c.Get(fmt.Sprintf("%s/%d", s.URL(), i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	reqs := s.Requests()
	if len(reqs) != maxRequests || s.Dropped() != 5 {
		t.Fatalf("kept %d, dropped %d; want %d and 5", len(reqs), s.Dropped(), maxRequests)
	}
	if first, last := reqs[0].Path, reqs[len(reqs)-1].Path; first != "/5" || last != fmt.Sprintf("/%d", n-1) {
		t.Errorf("kept %s to %s, want /5 to /%d", first, last, n-1)
	}
}

// A bad name is refused with a sentence saying what to pass.
func TestServerNameMustBeBare(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		start(ft, NewCA(t), "pypi.test:443", http.NotFoundHandler(), nil)
	}()
	if !strings.Contains(ft.msg, "not a host name") {
		t.Errorf("message = %q, want one saying the name is not a host name", ft.msg)
	}
}

// fatalRecorder keeps a Fatalf message and stops the calling function.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f.msg)
}
