package vibe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// relayStartTimeout bounds how long the relay may take to print its port.
const relayStartTimeout = 15 * time.Second

// relay lets a worker inside a sandbox call sandboxd although the sandbox
// has no network and sandboxd listens on no address it could reach: the
// agent's `relay` command listens on the sandbox's loopback, and sandboxd
// serves its API on connections it opens into the sandbox through the
// agent (see cmd/sandbox-agent/relay.go). It needs nothing in the image. Goroutines: the http.Server's accept loop and its
// connection goroutines. Shutdown: close stops the server (ending its
// connections and the accept loop) and kills the relay process.
type relay struct {
	port  int
	agent *agent.Client
	proc  string
	srv   *http.Server
	lis   *dialListener
	done  chan struct{} // closed when Serve returns
}

// startRelay starts the relay for one worker attempt and serves h on it.
func startRelay(ctx context.Context, a *agent.Client, h http.Handler, name string, labels map[string]string) (*relay, error) {
	sock := "/tmp/sandboxd-relay-" + name + ".sock"
	info, err := a.Spawn(ctx, &proto.SpawnRequest{Argv: []string{proto.AgentSelf, "relay", sock}, Dir: "/", Labels: labels})
	if err != nil {
		return nil, fmt.Errorf("the worker relay cannot start: %w", err)
	}
	kill := func() {
		kctx, cancel := context.WithTimeout(context.Background(), killGrace)
		defer cancel()
		a.Signal(kctx, &proto.SignalRequest{ID: info.ID, Signal: "KILL", Group: true})
	}
	port, err := readPort(ctx, a, info.ID)
	if err != nil {
		kill()
		return nil, err
	}
	r := &relay{port: port, agent: a, proc: info.ID, done: make(chan struct{})}
	r.lis = &dialListener{dial: func(ctx context.Context) (net.Conn, error) {
		return a.Dial(ctx, &proto.DialRequest{Network: "unix", Address: sock})
	}, closed: make(chan struct{})}
	r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go func() {
		defer close(r.done)
		r.srv.Serve(r.lis)
	}()
	return r, nil
}

// readPort reads the first line the relay prints: its loopback port.
func readPort(ctx context.Context, a *agent.Client, id string) (int, error) {
	out, err := a.Attach(ctx, id, "stdout")
	if err != nil {
		return 0, fmt.Errorf("the worker relay's output cannot be read: %w", err)
	}
	defer out.Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(out, 64)).ReadString('\n')
		line <- s
	}()
	var s string
	select {
	case s = <-line:
	case <-time.After(relayStartTimeout):
		return 0, fmt.Errorf("the worker relay printed no port within %v", relayStartTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	port, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || port <= 0 {
		return 0, fmt.Errorf("the worker relay did not start (it printed %q); the sandbox's agent may be older than sandboxd: recreate the sandbox", strings.TrimSpace(s))
	}
	return port, nil
}

// URL is the SANDBOXD_URL a worker in the sandbox uses.
func (r *relay) URL() string { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

func (r *relay) close() {
	r.srv.Close()
	select {
	case <-r.done:
	case <-time.After(killGrace):
	}
	kctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	r.agent.Signal(kctx, &proto.SignalRequest{ID: r.proc, Signal: "KILL", Group: true})
}

// dialListener is a net.Listener whose connections are dialed: Accept
// opens a connection into the sandbox and returns it once the relay has
// paired it with a worker's connection (its first byte arrived), so
// exactly one idle connection waits in the relay at a time.
type dialListener struct {
	dial func(ctx context.Context) (net.Conn, error)

	mu      sync.Mutex // guards pending and isDone
	pending net.Conn   // the connection waiting for its first byte
	isDone  bool
	closed  chan struct{}
}

var _ net.Listener = (*dialListener)(nil)

func (l *dialListener) Accept() (net.Conn, error) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-l.closed:
			return nil, net.ErrClosed
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := l.dial(ctx)
		cancel()
		if err != nil {
			select {
			case <-l.closed:
				return nil, net.ErrClosed
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		l.mu.Lock()
		if l.isDone {
			l.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		l.pending = c
		l.mu.Unlock()
		br := bufio.NewReader(c)
		_, perr := br.Peek(1)
		l.mu.Lock()
		l.pending = nil
		l.mu.Unlock()
		if perr != nil {
			c.Close()
			continue // the relay dropped it (or we closed): dial again
		}
		return &bufConn{Conn: c, r: br}, nil
	}
}

func (l *dialListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.isDone {
		l.isDone = true
		close(l.closed)
		if l.pending != nil {
			// A yamux stream's Close is a half-close: the deadline is what
			// ends the Peek blocked on it.
			l.pending.SetDeadline(time.Now())
			l.pending.Close()
		}
	}
	return nil
}

func (l *dialListener) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "relay" }
func (relayAddr) String() string  { return "worker-relay" }

// bufConn is a conn whose first bytes were peeked into r.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
