package e2e

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// engineProxy stands between sandboxd and the real Docker engine so a test
// can make the engine "go away" (every connection cut, nothing listening)
// and "come back" without touching the engine other tests share.
type engineProxy struct {
	path, target string

	mu    sync.Mutex // guards ln and conns
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newEngineProxy(t *testing.T, target string) *engineProxy {
	p := &engineProxy{path: filepath.Join(t.TempDir(), "docker.sock"), target: target, conns: map[net.Conn]struct{}{}}
	p.up(t)
	t.Cleanup(p.down)
	return p
}

func (p *engineProxy) up(t *testing.T) {
	os.Remove(p.path)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *engineProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("unix", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// down closes the listener and cuts every open connection.
func (p *engineProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// TestDockerEngineOutage: while the engine cannot be reached, calls fail
// with a clear unavailable error and nothing crashes; when it comes back,
// the same sandbox works again without restarting sandboxd, and the file
// written before the outage is intact.
func TestDockerEngineOutage(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		target = strings.TrimPrefix(h, "unix://")
	}
	proxy := newEngineProxy(t, target)
	t.Setenv("DOCKER_HOST", "unix://"+proxy.path)

	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-outage"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.up(t)
		d.Client.DeleteSandbox(ctx(t), sb.ID)
	})
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-outage"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "before.txt", "content": "written before the outage\n"})

	proxy.down()

	// The pipe is cut and the engine unreachable: a clear error, not a hang.
	_, err = call(t, d, run.ID, "read", map[string]any{"path": "before.txt"})
	if err == nil {
		t.Fatal("read succeeded while the engine was unreachable")
	}
	t.Logf("read during the outage: %v", err)
	if msg := err.Error(); !strings.Contains(strings.ToLower(msg), "docker") && !strings.Contains(strings.ToLower(msg), "engine") && !strings.Contains(msg, "sandbox") {
		t.Fatalf("error while the engine is away does not say what is wrong: %q", msg)
	}
	_, err = d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-outage-2"))
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("create while the engine is away: %v, want unavailable", err)
	}
	t.Logf("create during the outage: %v", err)
	if err := d.Client.Healthz(ctx(t)); err != nil {
		t.Fatalf("sandboxd itself is unhealthy during an engine outage: %v", err)
	}

	proxy.up(t)

	waitFor(t, 30*time.Second, "tool call after the engine came back", func() error {
		out, err := call(t, d, run.ID, "read", map[string]any{"path": "before.txt"})
		if err == nil && !strings.Contains(out, "written before the outage") {
			t.Fatalf("after the outage read = %q", out)
		}
		return err
	})
}
