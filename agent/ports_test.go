package agent_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
)

// Ports crosses the pipe: the daemon's listing of a real listener comes
// back to the client whole.
func TestClientPorts(t *testing.T) {
	c, _ := agenttest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ports, err := c.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p.Port == port && p.PID == os.Getpid() {
			return
		}
	}
	t.Fatalf("port %d (pid %d) not in %+v", port, os.Getpid(), ports)
}
