package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Bounds of the relay.
const (
	// relayPool caps the connections sandboxd keeps waiting in the relay
	// (it keeps one; more are closed).
	relayPool = 16
	// relayPairWait bounds how long a worker's connection waits for one
	// from sandboxd before it is closed.
	relayPairWait = 30 * time.Second
)

// runRelay lets a worker in a sandbox without networking reach sandboxd:
// it listens on SOCK (a unix socket sandboxd dials through the agent) and
// on an ephemeral port of the sandbox's loopback, prints that port, and
// pairs each connection a worker makes to the port with one connection
// sandboxd opened to SOCK, copying bytes both ways. sandboxd serves its API
// on the connections it opened. Nothing listens outside the loopback and
// no port of the host is opened.
func runRelay(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent relay SOCKET")
		return 2
	}
	sock := args[0]
	_ = os.Remove(sock) // a socket left by an earlier relay of this name
	back, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent relay: cannot listen on %s: %v\n", sock, err)
		return 1
	}
	defer back.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent relay: %v\n", err)
		return 1
	}
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent relay: cannot listen on the loopback: %v\n", err)
		return 1
	}
	defer front.Close()
	fmt.Println(front.Addr().(*net.TCPAddr).Port)

	pool := make(chan net.Conn, relayPool)
	go func() {
		for {
			c, err := back.Accept()
			if err != nil {
				front.Close() // sandboxd's side is gone: stop serving workers
				return
			}
			select {
			case pool <- c:
			default:
				c.Close()
			}
		}
	}()
	for {
		c, err := front.Accept()
		if err != nil {
			return 0
		}
		go relayPair(c, pool)
	}
}

// relayPair joins a worker's connection with one of sandboxd's.
func relayPair(client net.Conn, pool <-chan net.Conn) {
	defer client.Close()
	var up net.Conn
	select {
	case up = <-pool:
	case <-time.After(relayPairWait):
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(client, up)
		closeWrite(client)
	}()
	_, _ = io.Copy(up, client)
	closeWrite(up)
	<-done
}

// closeWrite ends c's write side so the peer sees EOF and can respond.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
