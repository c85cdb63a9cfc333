package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

const startTimeout = 10 * time.Second

// runAttach bridges stdin/stdout to the daemon's socket, starting the
// daemon when none listens. stdout carries only the protocol; every
// message goes to stderr.
func runAttach(args []string) int {
	flags, rest, err := socketFlags("attach", args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("attach takes no arguments besides its flags (got %q)", rest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		return 2
	}
	conn, err := connectOrStart(flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent attach:", err)
		return 1
	}
	if conn.handoff {
		if err := handoff(conn.UnixConn); err == nil {
			return 0
		}
		// Nothing was handed over: copy the bytes on a new connection.
		conn.Close()
		if conn, err = connectOrStart(flags); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-agent attach:", err)
			return 1
		}
	}
	bridge(conn.UnixConn)
	return 0
}

// handoff gives our stdin and stdout to the daemon, which serves the
// session on them directly, and waits until the daemon closes the
// connection (the session ended); exiting then ends the exec. An error
// means nothing was handed over.
func handoff(c *net.UnixConn) error {
	if _, _, err := c.WriteMsgUnix([]byte{proto.HandoffByte}, syscall.UnixRights(0, 1), nil); err != nil {
		return err
	}
	io.Copy(io.Discard, c)
	c.Close()
	return nil
}

// connectOrStart connects to a daemon of our protocol version, starting
// one (detached) when none runs. The start is serialized by a lock so that
// concurrent attaches start one daemon.
func connectOrStart(flags agentFlags) (*daemonConn, error) {
	sock := flags.socket
	if c, err := dialChecked(sock); err == nil {
		return c, nil
	} else if !errors.Is(err, errNoDaemon) {
		return nil, err
	}
	if err := ensureDir(sock); err != nil {
		return nil, err
	}
	lock, err := lockFile(sock+".start.lock", startTimeout)
	if err != nil {
		return nil, fmt.Errorf("cannot take the start lock for %s: %w", sock, err)
	}
	defer lock.Close()
	// Another attach may have started it while we waited for the lock.
	if c, err := dialChecked(sock); err == nil {
		return c, nil
	} else if !errors.Is(err, errNoDaemon) {
		return nil, err
	}
	exited, logPath, err := startDaemon(flags)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := dialChecked(sock)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errNoDaemon) {
			return nil, err
		}
		select {
		case werr := <-exited:
			return nil, fmt.Errorf("the agent daemon exited at start (%v); see %s", werr, logPath)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the agent daemon did not listen on %s within %s; see %s", sock, startTimeout, logPath)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errNoDaemon = errors.New("no agent daemon listens")

func dial(sock string) (*net.UnixConn, error) {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoDaemon
		}
		return nil, fmt.Errorf("cannot connect to the agent daemon at %s: %w", sock, err)
	}
	return c.(*net.UnixConn), nil
}

// startDaemon starts `sandbox-agent daemon` in its own session with its
// output in a log beside the socket, so it outlives this attach and the
// exec that ran it. The channel reports if it exits while we still run.
func startDaemon(flags agentFlags) (<-chan error, string, error) {
	sock := flags.socket
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("cannot find the sandbox-agent binary to start the daemon: %w", err)
	}
	logPath := filepath.Join(filepath.Dir(sock), filepath.Base(sock)+".log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("cannot open the daemon log %s: %w", logPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, append([]string{"daemon"}, flags.daemonArgs()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin: /dev/null
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("cannot start the agent daemon: %w", err)
	}
	exited := make(chan error, 1)
	// Reap it if it dies while this attach lives; once we exit it is
	// re-parented to the sandbox's init.
	go func() { exited <- cmd.Wait() }()
	return exited, logPath, nil
}

// bridge copies stdin to the daemon and the daemon to stdout until either
// side ends.
func bridge(c *net.UnixConn) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(c, os.Stdin)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(os.Stdout, c)
		done <- struct{}{}
	}()
	<-done
	c.Close()
}
