package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// echoUpgradeServer answers one upgrade request with 101 and then echoes
// what it reads, as a websocket server would carry frames.
func echoUpgradeServer(t *testing.T) (port int, got chan *http.Request) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan *http.Request, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		got <- req
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		io.Copy(c, br)
	}()
	return ln.Addr().(*net.TCPAddr).Port, got
}

func TestPlainHTTPUpgrade(t *testing.T) {
	port, got := echoUpgradeServer(t)
	f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "127.0.0.0/8"), nil)
	resp, _, c, br := f.rawRequest(fmt.Sprintf("GET http://pypi.test:%d/ws HTTP/1.1\r\nHost: pypi.test:%d\r\nConnection: keep-alive, Upgrade\r\nUpgrade: echo\r\n\r\n", port, port))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("answer %s %v, want 101 with Upgrade: echo", resp.Status, resp.Header)
	}
	req := <-got
	if req.Header.Get("Upgrade") != "echo" || req.Header.Get("Connection") != "Upgrade" {
		t.Errorf("the upstream received Connection %q, Upgrade %q; want the upgrade forwarded", req.Header.Get("Connection"), req.Header.Get("Upgrade"))
	}
	io.WriteString(c, "ping over the upgraded connection")
	buf := make([]byte, len("ping over the upgraded connection"))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping over the upgraded connection" {
		t.Errorf("echo read %q, %v", buf, err)
	}
	c.Close()
	d := f.waitDecision(func(d Decision) bool { return d.Kind == "http" })
	if !d.Allowed || d.BytesUp < int64(len(buf)) || d.BytesDown < int64(len(buf)) {
		t.Errorf("decision %+v, want allowed with the upgraded bytes counted", d)
	}
}
