package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// daemonConn is a connection to a daemon of our protocol version and
// whether that daemon takes descriptors (proto.HelloResponse.FDHandoff).
type daemonConn struct {
	*net.UnixConn
	handoff bool
}

// dialChecked connects to the daemon after checking on a separate
// connection that it speaks our protocol version. A daemon of another
// version that owns no running process is stopped (errNoDaemon follows, so
// the caller starts ours); one that still owns processes is refused.
func dialChecked(sock string) (*daemonConn, error) {
	c, err := dial(sock)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hello, running, err := probe(ctx, c)
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("the agent daemon at %s does not answer (%v); stop it or remove the socket", sock, err)
	}
	if hello.Version != proto.Version {
		if running > 0 {
			return nil, fmt.Errorf("the agent daemon at %s (pid %d) speaks protocol %d, not %d, and owns %d running processes; stop them or use another --socket", sock, hello.PID, hello.Version, proto.Version, running)
		}
		if err := stopDaemon(sock, hello.PID); err != nil {
			return nil, err
		}
		return nil, errNoDaemon
	}
	c, err = dial(sock)
	if err != nil {
		return nil, err
	}
	return &daemonConn{UnixConn: c, handoff: hello.FDHandoff}, nil
}

// probe asks for hello and the number of running processes.
func probe(ctx context.Context, c net.Conn) (*proto.HelloResponse, int, error) {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.EnableKeepAlive = false
	sess, err := yamux.Client(c, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer sess.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	call := func(req *proto.Request) (*proto.Response, error) {
		st, err := sess.OpenStream()
		if err != nil {
			return nil, err
		}
		defer st.Close()
		if dl, ok := ctx.Deadline(); ok {
			st.SetDeadline(dl)
		}
		if err := proto.WriteFrame(st, req); err != nil {
			return nil, err
		}
		var resp proto.Response
		if err := proto.ReadFrame(st, &resp); err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, errors.New(resp.Error.Message)
		}
		return &resp, nil
	}
	resp, err := call(&proto.Request{Op: proto.OpHello})
	if err != nil || resp.Hello == nil {
		return nil, 0, fmt.Errorf("hello failed: %v", err)
	}
	if resp.Hello.Version == proto.Version {
		return resp.Hello, 0, nil
	}
	lr, err := call(&proto.Request{Op: proto.OpList, List: &proto.ListRequest{}})
	if err != nil || lr.List == nil {
		return nil, 0, fmt.Errorf("list failed: %v", err)
	}
	running := 0
	for _, p := range lr.List.Processes {
		if p.Running {
			running++
		}
	}
	return resp.Hello, running, nil
}

// stopDaemon sends SIGTERM to an idle daemon of another version and waits
// until its socket stops responding.
func stopDaemon(sock string, pid int) error {
	if pid <= 1 {
		return fmt.Errorf("the agent daemon at %s has another protocol version and cannot be stopped (pid %d); restart the sandbox", sock, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("cannot stop the old agent daemon (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		c, err := dial(sock)
		if errors.Is(err, errNoDaemon) {
			return nil
		}
		if c != nil {
			c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the old agent daemon (pid %d) did not stop within %s", pid, startTimeout)
}
