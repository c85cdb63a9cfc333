package daemon

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"testing"
)

// A socket this process listens on is listed with its port, address, pid
// and command; a connected socket is not.
func TestPortsListsThisProcessListener(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	local := c.LocalAddr().(*net.TCPAddr).Port

	ports, err := portsService{}.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ports {
		if p.Port == local {
			t.Errorf("the client side of a connection (port %d) is listed as listening: %+v", local, p)
		}
		if p.Port != port {
			continue
		}
		found = true
		if p.Address != "127.0.0.1" || p.PID != os.Getpid() || !strings.Contains(p.Command, ".test") {
			t.Errorf("listener on %d listed as %+v; want address 127.0.0.1, pid %d and this test binary's command", port, p, os.Getpid())
		}
	}
	if !found {
		t.Fatalf("listener on port %d not in %+v", port, ports)
	}
}

func TestPortsIPv6Listener(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ports, err := portsService{}.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p.Port == port {
			if p.Address != "::1" || p.PID != os.Getpid() {
				t.Errorf("listed as %+v; want ::1 and pid %d", p, os.Getpid())
			}
			return
		}
	}
	t.Fatalf("listener on [::1]:%d not in %+v", port, ports)
}

// The table's rows are read as the kernel writes them: only state 0A,
// addresses in host word order, the port in hex.
func TestParseTCPTable(t *testing.T) {
	word := func(a, b, c, d byte) string { // one 32-bit word as the kernel prints it
		var w [4]byte
		binary.NativeEndian.PutUint32(w[:], binary.BigEndian.Uint32([]byte{a, b, c, d}))
		return strings.ToUpper(hexOf(w[:]))
	}
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: " + word(127, 0, 0, 1) + ":0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n" +
		"   1: " + word(0, 0, 0, 0) + ":1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0\n" +
		"   2: " + word(127, 0, 0, 1) + ":9C40 " + word(127, 0, 0, 1) + ":0BB8 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0\n"
	socks, err := parseTCPTable(strings.NewReader(table), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []tcpSocket{{"127.0.0.1", 3000, 111}, {"0.0.0.0", 8080, 222}}
	if len(socks) != len(want) || socks[0] != want[0] || socks[1] != want[1] {
		t.Fatalf("parsed %+v; want %+v", socks, want)
	}
	six := word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0, 1)
	addr, port, err := parseHexAddr(six + ":0050")
	if err != nil || addr != "::1" || port != 80 {
		t.Fatalf("parseHexAddr(::1:80) = %q %d %v", addr, port, err)
	}
	if _, _, err := parseHexAddr("zz:0050"); err == nil {
		t.Fatal("a bad address parsed")
	}
	if socks, _ := parseTCPTable(strings.NewReader(table), 1); len(socks) != 1 {
		t.Fatalf("the cap of 1 gave %d sockets", len(socks))
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
