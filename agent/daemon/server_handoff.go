package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// firstMessageTimeout bounds how long an accepted connection may stay
// silent before its first byte says what it carries.
const firstMessageTimeout = 10 * time.Second

// serveAccepted serves a connection accepted on the daemon's socket. It
// carries either a yamux session directly (probes, tests, old attaches) or,
// as its first message, proto.HandoffByte with the attach's stdin and stdout
// as SCM_RIGHTS descriptors: then the session runs on those descriptors and
// the connection only tells attach, by closing, that the session is over.
// Serving the exec's pipes directly saves two process hops per message.
func (s *Server) serveAccepted(ctx context.Context, c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return s.ServeConn(ctx, c)
	}
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	uc.SetReadDeadline(time.Now().Add(firstMessageTimeout))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	uc.SetReadDeadline(time.Time{})
	if err != nil {
		uc.Close()
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("read the first message of a connection: %w", err)
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil {
		uc.Close()
		return err
	}
	if n == 1 && buf[0] == proto.HandoffByte {
		return s.serveHandoff(ctx, uc, fds)
	}
	closeFDs(fds) // descriptors nobody asked for
	return s.ServeConn(ctx, &replayConn{UnixConn: uc, first: buf[:n]})
}

// serveHandoff serves the session on the handed-over stdin (read) and
// stdout (write), then closes them and the connection.
func (s *Server) serveHandoff(ctx context.Context, uc *net.UnixConn, fds []int) error {
	defer uc.Close()
	if len(fds) != 2 {
		closeFDs(fds)
		return fmt.Errorf("a handoff carried %d descriptors, want 2 (stdin and stdout)", len(fds))
	}
	// Non-blocking descriptors join the runtime poller, so closing them
	// ends a pending read when the session is closed from our side.
	for _, fd := range fds {
		if err := syscall.SetNonblock(fd, true); err != nil {
			closeFDs(fds)
			return fmt.Errorf("handoff descriptor %d: %w", fd, err)
		}
	}
	p := &pipePair{r: os.NewFile(uintptr(fds[0]), "attach-stdin"), w: os.NewFile(uintptr(fds[1]), "attach-stdout")}
	// attach closing its end (it was killed) also ends the session.
	go func() {
		io.Copy(io.Discard, uc)
		p.Close()
	}()
	return s.serveSession(ctx, p)
}

func receivedFDs(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse a connection's control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// pipePair is one byte stream made of a read and a write descriptor.
type pipePair struct {
	r, w *os.File
}

func (p *pipePair) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipePair) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p *pipePair) Close() error {
	err := p.r.Close()
	if werr := p.w.Close(); err == nil {
		err = werr
	}
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// replayConn returns the bytes already read to tell the kind of connection
// before reading on.
type replayConn struct {
	*net.UnixConn
	first []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(b, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.UnixConn.Read(b)
}
