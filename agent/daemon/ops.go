package daemon

import (
	"context"
	"fmt"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// The operation table: every op the daemon serves has one handler in it,
// put there by the service that owns the op when the Server is made. A
// service is a group of operations and the state they share (files.go,
// procs.go, watch.go, fence.go, dial.go; hello is the Server's own); a new
// kind of work gets a service of its own and registers its ops beside the
// others. The table is only read once New has returned.

// request is one request being served: the decoded frame and what a
// handler may need of its session and stream.
type request struct {
	*proto.Request
	sess *session
	// st is the request's stream. A handler that returns a stream func
	// hands st to it; others only watch it (for the client going away)
	// or write frames before the response (a streamed exec).
	st *yamux.Stream
}

// handler serves one op. A non-nil stream func runs after the response was
// written and owns the stream from then on (it must close it).
type handler func(ctx context.Context, rq *request) (resp *proto.Response, stream func(), err error)

// opTable maps each op to its handler.
type opTable map[proto.Op]handler

// service is a group of operations: register adds each of them to t.
type service interface {
	register(t opTable)
}

// add puts op's handler in t; an op registered twice is a programming
// error, found the first time the daemon is made.
func (t opTable) add(op proto.Op, h handler) {
	if _, dup := t[op]; dup {
		panic(fmt.Sprintf("agent daemon: op %q is registered twice", op))
	}
	t[op] = h
}

// addBody registers an op whose request carries a body (the field named
// like the op, which body picks out of the request): a request without it
// is refused before h runs.
func addBody[T any](t opTable, op proto.Op, body func(*proto.Request) *T, h func(context.Context, *request, *T) (*proto.Response, func(), error)) {
	t.add(op, func(ctx context.Context, rq *request) (*proto.Response, func(), error) {
		b := body(rq.Request)
		if b == nil {
			return nil, nil, errdefs.InvalidArgument("request %q has no %q body; set the field named like the op", rq.Op, rq.Op)
		}
		return h(ctx, rq, b)
	})
}

// dispatch runs one request's op through the table.
func (s *Server) dispatch(ctx context.Context, rq *request) (*proto.Response, func(), error) {
	if s.opts.opHook != nil {
		s.opts.opHook(rq.Op)
	}
	h, ok := s.ops[rq.Op]
	if !ok {
		return nil, nil, unknownOp(rq.Op)
	}
	return h(ctx, rq)
}

// unknownOp is the one refusal of an op the table has no handler for.
func unknownOp(op proto.Op) error {
	if op == "" {
		return errdefs.InvalidArgument("the request has no op; set \"op\" to one of the protocol's operations")
	}
	return errdefs.InvalidArgument("unknown op %q; this agent speaks protocol version %d", op, proto.Version)
}
