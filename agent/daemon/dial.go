package daemon

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const defaultDialTimeout = 10 * time.Second

// dialService connects the client to sockets inside the sandbox (op dial):
// a unix socket or a loopback TCP port, spliced to the request's stream.
// It keeps no state. Goroutines: each dial's splice, on its request's
// goroutine, waits for one copier per direction; they end when both
// directions have ended, or either fails (the session dropping).
type dialService struct{}

var _ service = dialService{}

func (dialService) register(t opTable) {
	addBody(t, proto.OpDial, func(r *proto.Request) *proto.DialRequest { return r.Dial },
		func(ctx context.Context, rq *request, r *proto.DialRequest) (*proto.Response, func(), error) {
			run, err := dial(ctx, r, rq.st)
			return &proto.Response{}, run, err
		})
}

// dial connects to a unix socket or a loopback TCP port and returns the
// splice to run once the response is out.
func dial(ctx context.Context, r *proto.DialRequest, st *yamux.Stream) (func(), error) {
	switch r.Network {
	case "unix":
		if r.Address == "" {
			return nil, errdefs.InvalidArgument("dial has no address; give the socket's path")
		}
	case "tcp", "tcp4", "tcp6":
		host, _, err := net.SplitHostPort(r.Address)
		if err != nil {
			return nil, errdefs.InvalidArgument("address %q is not host:port (%v); give e.g. 127.0.0.1:5678", r.Address, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, errdefs.InvalidArgument("address %q is not on the loopback interface; the agent dials only 127.0.0.1, ::1 or localhost", r.Address)
		}
	default:
		return nil, errdefs.InvalidArgument("network %q is not supported; use \"unix\" or \"tcp\" (loopback only)", r.Network)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, r.Network, r.Address)
	if err != nil {
		if dctx.Err() != nil {
			return nil, errdefs.DeadlineExceeded("dialing %s %s did not succeed within %s; check that the server is up", r.Network, r.Address, timeout)
		}
		return nil, errdefs.Unavailable("cannot connect to %s %s: %v; check that the server is listening", r.Network, r.Address, err)
	}
	return func() { splice(st, c) }, nil
}

// splice copies both ways until both directions end; the end of one
// direction is passed on as a half-close where the connection allows it.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if ys, ok := src.(*yamux.Stream); ok && ys.Session().IsClosed() {
			err = io.ErrClosedPipe // the session dropped: nobody will read on
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
			return
		}
		if ys, ok := dst.(*yamux.Stream); ok && err == nil {
			ys.Close() // a yamux Close is a half-close: it only ends our writes
			return
		}
		// An error in one direction ends both.
		a.Close()
		b.Close()
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
