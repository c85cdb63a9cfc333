package daemon

import (
	"io"
	"net"
	"testing"
)

// The splice's io.Copy must go through quickAckConn's Read and Write: a
// ReadFrom or WriteTo lent by the TCP connection would read and write past
// them, and a server that answers in two small writes would wait 40 ms for
// each acknowledgement again.
func TestQuickAckConnReadsAndWritesThroughItself(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var q net.Conn = &quickAckConn{Conn: tc, tc: tc, rc: rc}
	if _, ok := q.(io.ReaderFrom); ok {
		t.Error("quickAckConn has ReadFrom: io.Copy into it bypasses its Write")
	}
	if _, ok := q.(io.WriterTo); ok {
		t.Error("quickAckConn has WriteTo: io.Copy out of it bypasses its Read")
	}
	if _, err := q.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(q, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through quickAckConn: %q %v", buf, err)
	}
	q.Close()
}
