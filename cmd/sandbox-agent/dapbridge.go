package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// childExitWait bounds how long the bridge waits for the adapter to exit
// after its connection ended, before it kills it.
const childExitWait = 10 * time.Second

// runDAPBridge runs a debug adapter that only listens on a unix socket
// (delve's `dlv dap --listen unix:...`) as if it spoke on stdio: it starts
// the adapter, connects to its socket once it listens, and copies the
// connection to and from its own stdin and stdout. The connection is
// thereby held inside the sandbox by a process of the agent, whose stdio
// the agent keeps while sandboxd is away: a sandboxd restart re-attaches to
// the same debug session instead of dropping it (which would end delve's).
// The adapter's own output goes to --log. The bridge exits when the
// adapter's connection ends, with the adapter's exit status.
func runDAPBridge(args []string) int {
	fs := flag.NewFlagSet("dap-bridge", flag.ContinueOnError)
	sock := fs.String("socket", "", "the unix socket the adapter listens on")
	logPath := fs.String("log", "", "file the adapter's stdout and stderr are appended to (default: the bridge's stderr)")
	wait := fs.Duration("wait", time.Minute, "how long the adapter may take to listen")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *sock == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent dap-bridge --socket PATH [--log FILE] [--wait 1m] -- ADAPTER [ARGS...]")
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox-agent dap-bridge: "+format+"\n", a...)
		return 1
	}
	if err := os.MkdirAll(filepath.Dir(*sock), 0o700); err != nil {
		return fail("cannot make the socket's directory: %v", err)
	}
	_ = os.Remove(*sock) // a socket left by an earlier adapter of this name

	child := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fail("cannot open the adapter's log: %v", err)
		}
		defer f.Close()
		child.Stdout, child.Stderr = f, f
	}
	// The adapter stays in the bridge's process group, so the agent's group
	// signals reach both; a signal to the bridge alone is passed on.
	if err := child.Start(); err != nil {
		return fail("cannot start %s: %v", fs.Arg(0), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = child.Process.Signal(s)
		}
	}()

	conn, err := dialUntil(*sock, *wait, exited)
	if err != nil {
		_ = child.Process.Kill()
		if errors.Is(err, errChildExited) {
			return exitCode(child) // the adapter's own status; its log says why
		}
		return fail("%v", err)
	}
	go func() {
		_, _ = io.Copy(conn, os.Stdin)
		closeWrite(conn)
	}()
	_, _ = io.Copy(os.Stdout, conn)
	conn.Close()
	select {
	case <-exited:
	case <-time.After(childExitWait):
		_ = child.Process.Kill()
		<-exited
	}
	return exitCode(child)
}

var errChildExited = errors.New("the adapter exited before it listened")

// dialUntil connects to sock, retrying until it listens, the adapter exits
// (its Wait result arrives on exited, and is put back), or wait passes.
func dialUntil(sock string, wait time.Duration, exited chan error) (net.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			return c, nil
		}
		select {
		case e := <-exited:
			exited <- e
			return nil, errChildExited
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the adapter did not listen on %s within %s: %v", sock, wait, err)
		}
	}
}

func exitCode(c *exec.Cmd) int {
	if c.ProcessState == nil {
		return 1
	}
	if code := c.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	return 128 + int(c.ProcessState.Sys().(syscall.WaitStatus).Signal())
}
