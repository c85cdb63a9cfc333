package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// FuzzServe feeds Serve arbitrary bytes: it must neither panic nor hang,
// whatever arrives. Upstream dials fail at once, so no network is used.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"CONNECT pypi.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",
		"CONNECT pypi.test:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"GET http://pypi.test/ HTTP/1.1\r\nHost: pypi.test\r\n\r\n",
		"POST http://pypi.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"CONNECT [::1]:0 HTTP/1.1\r\n\r\n",
		"\x00\xff\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	cfg := Config{
		Hosts:          map[string][]netip.Addr{},
		IdleTimeout:    200 * time.Millisecond,
		ConnectTimeout: 200 * time.Millisecond,
		Resolver:       fakeResolver{},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, errors.New("no network in the fuzz test")
		},
	}
	cfg.Hosts["pypi.test"] = []netip.Addr{loopback}
	_, ca := authorities(f)
	cfg.Authority = ca
	p, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	g := p.Gate(Identity{Sandbox: "fuzz"}, mustLayered(f, "pypi.test", "127.0.0.0/8"), []Secret{bearer("pypi.test")})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Serve(context.Background(), server)
		}()
		go func() {
			client.SetDeadline(time.Now().Add(2 * time.Second))
			client.Write(data)
			buf := make([]byte, 4096)
			for {
				if _, err := client.Read(buf); err != nil {
					break
				}
			}
		}()
		time.AfterFunc(50*time.Millisecond, func() { client.Close() })
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Serve did not return within 5s of the client closing, after %q", data)
		}
	})
}
