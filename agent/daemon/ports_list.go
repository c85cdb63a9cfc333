package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// portsService answers which TCP ports listen in the sandbox (op ports),
// read from the kernel's tables of the sandbox's network namespace, which
// the agent shares. It keeps no state and starts no goroutines.
type portsService struct {
	// proc is the proc filesystem's root; "" is /proc (tests point it
	// at a tree of their own).
	proc string
}

var _ service = portsService{}

func (p portsService) register(t opTable) {
	t.add(proto.OpPorts, func(ctx context.Context, _ *request) (*proto.Response, func(), error) {
		ports, err := p.list(ctx)
		if err != nil {
			return nil, nil, err
		}
		return &proto.Response{Ports: &proto.PortsResponse{Ports: ports}}, nil, nil
	})
}

// Caps on what one listing reads: a sandbox with more listening sockets
// or processes than this is answered with the first ones.
const (
	maxListening  = 4096
	maxProcsSeen  = 1 << 15
	maxCommandLen = 512
)

// tcpListen is the state column's value of a listening socket
// (include/net/tcp_states.h: TCP_LISTEN).
const tcpListen = "0A"

func (p portsService) root() string {
	if p.proc == "" {
		return "/proc"
	}
	return p.proc
}

// list reads /proc/net/tcp and tcp6 for sockets in state LISTEN and finds
// the process of each through the socket links in /proc/*/fd.
func (p portsService) list(ctx context.Context) ([]proto.ListeningPort, error) {
	byInode := map[uint64][]int{} // socket inode -> indexes in out
	var out []proto.ListeningPort
	read := 0
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(p.root(), "net", name))
		if os.IsNotExist(err) {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, errdefs.Unavailable("cannot read the sandbox's TCP table: %v", err)
		}
		socks, err := parseTCPTable(f, maxListening-len(out))
		f.Close()
		if err != nil {
			return nil, errdefs.Internal("the sandbox's %s table does not parse: %v", name, err)
		}
		read++
		for _, s := range socks {
			if s.inode != 0 {
				byInode[s.inode] = append(byInode[s.inode], len(out))
			}
			out = append(out, proto.ListeningPort{Port: s.port, Address: s.addr})
		}
	}
	if read == 0 {
		return nil, errdefs.Unavailable("the sandbox has no readable TCP table under %s/net; is /proc mounted?", p.root())
	}
	if len(byInode) > 0 {
		p.owners(ctx, byInode, out)
	}
	slices.SortStableFunc(out, func(a, b proto.ListeningPort) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return strings.Compare(a.Address, b.Address)
	})
	return out, nil
}

// owners fills in the pid and command of each socket found among the
// processes' descriptors. Processes it may not read are passed over: the
// socket stays without an owner.
func (p portsService) owners(ctx context.Context, byInode map[uint64][]int, out []proto.ListeningPort) {
	entries, err := os.ReadDir(p.root())
	if err != nil {
		return
	}
	left := len(byInode)
	for i, e := range entries {
		if i >= maxProcsSeen || left == 0 || ctx.Err() != nil {
			return
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join(p.root(), e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		var cmd string
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
			if err != nil {
				continue
			}
			idx, ok := byInode[ino]
			if !ok {
				continue
			}
			if cmd == "" {
				cmd = p.command(e.Name())
			}
			for _, j := range idx {
				out[j].PID, out[j].Command = pid, cmd
			}
			delete(byInode, ino) // a socket shared by a fork is named for the first process seen
			left--
		}
	}
}

// command is the process's command line with its arguments separated by
// spaces (its name when the line is empty, as a kernel thread's), capped.
func (p portsService) command(pid string) string {
	b, err := os.ReadFile(filepath.Join(p.root(), pid, "cmdline"))
	if err != nil || len(bytes.Trim(b, "\x00")) == 0 {
		b, _ = os.ReadFile(filepath.Join(p.root(), pid, "comm"))
	}
	s := strings.TrimSpace(string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
	if len(s) > maxCommandLen {
		s = s[:maxCommandLen] + "…"
	}
	return s
}

// tcpSocket is one row of /proc/net/tcp{,6} in state LISTEN.
type tcpSocket struct {
	addr  string
	port  int
	inode uint64
}

// parseTCPTable reads the listening sockets of a /proc/net/tcp or tcp6
// table, at most limit of them.
func parseTCPTable(r io.Reader, limit int) ([]tcpSocket, error) {
	var out []tcpSocket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		if f[3] != tcpListen {
			continue
		}
		if len(out) >= limit {
			break
		}
		addr, port, err := parseHexAddr(f[1])
		if err != nil {
			return nil, err
		}
		ino, _ := strconv.ParseUint(f[9], 10, 64)
		out = append(out, tcpSocket{addr: addr, port: port, inode: ino})
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:0BB8": the address as the kernel keeps
// it (32-bit words in the host's byte order), the port in hex.
func parseHexAddr(s string) (string, int, error) {
	h, ps, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("address %q has no port", s)
	}
	port, err := strconv.ParseUint(ps, 16, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %v", s, err)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", 0, fmt.Errorf("address %q is not 8 or 32 hex digits", s)
	}
	ip := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap().String(), int(port), nil
}
