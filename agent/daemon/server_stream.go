package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Serving the protocol: one yamux session per connection, one stream per
// request (or a reused stream, one request after another), one request
// frame and one response frame each, the op in between run through the
// operation table (ops.go).

// yamuxConfig is the session configuration; agent.Client uses the same.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.MaxStreamWindowSize = 1 << 20
	cfg.StreamCloseTimeout = time.Minute
	return cfg
}

// ServeConn runs one yamux server session over c and returns when it ends.
// sandboxd opens one stream per request. Processes survive the session.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) error {
	return s.serveSession(ctx, c)
}

// serveSession runs one yamux session over rwc until it ends.
func (s *Server) serveSession(ctx context.Context, c io.ReadWriteCloser) error {
	ys, err := yamux.Server(proto.CoalesceWrites(c, proto.DefaultHold), yamuxConfig())
	if err != nil {
		c.Close()
		return fmt.Errorf("start agent session: %w", err)
	}
	sess := &session{Session: ys}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sess.Close()
		return errServerClosed
	}
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, sess)
		s.mu.Unlock()
		sess.Close()
		s.fence.forget(sess)
	}()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		go s.handle(ctx, sess, st)
	}
}

// handle serves one stream: one request frame, one response frame, and for
// attach and dial the raw bytes after it; a request that asks to keep the
// stream (proto.Request.Again, for a reusable op) is followed by the
// client's next one, served the same way, until either side closes it.
func (s *Server) handle(ctx context.Context, sess *session, st *yamux.Stream) {
	keepOpen := false
	defer func() {
		if !keepOpen {
			st.Close()
		}
	}()
	wait := s.opts.requestTimeout
	for {
		again, handedOff := s.serveOne(ctx, sess, st, wait)
		if handedOff {
			keepOpen = true
			return
		}
		if !again {
			return
		}
		// The client sends its next request when it has one; it gives the
		// stream up after proto.ReuseIdle, so waiting twice that ends only
		// streams it has forgotten.
		wait = 2 * proto.ReuseIdle
	}
}

// serveOne serves one request on st, read within wait. It reports whether
// the stream stays for another request, and whether it was handed to a
// streaming op (which then owns it).
func (s *Server) serveOne(ctx context.Context, sess *session, st *yamux.Stream, wait time.Duration) (again, handedOff bool) {
	st.SetReadDeadline(time.Now().Add(wait))
	var req proto.Request
	if err := proto.ReadFrame(st, &req); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrTimeout) && wait != s.opts.requestTimeout {
			return false, false // the client closed the stream, or left it idle
		}
		s.reply(st, nil, errdefs.InvalidArgument("the request frame could not be read (%v); send one length-prefixed JSON request per stream", err))
		return false, false
	}
	if req.Raw && req.Op == proto.OpWriteFiles {
		if err := readRawWrite(st, &req); err != nil {
			s.reply(st, nil, err)
			return false, false
		}
	}
	st.SetReadDeadline(time.Time{})
	reuse := req.Again && proto.Reusable(req.Op)
	if err := s.fence.begin(sess); err != nil {
		s.reply(st, nil, err)
		return false, false
	}
	defer s.fence.end(sess)
	replied := false
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("agent handler panicked", "op", req.Op, "panic", p, "stack", string(debug.Stack()))
			again, handedOff = false, false
			if !replied { // after the response the stream carries raw bytes
				s.reply(st, nil, errdefs.Internal("the agent failed while handling %q: %v", req.Op, p))
			}
		}
	}()
	resp, stream, err := s.dispatch(ctx, &request{Request: &req, sess: sess, st: st})
	if err != nil {
		return s.reply(st, &proto.Response{Kept: reuse}, err) && reuse, false
	}
	replied = true
	resp.Kept = reuse && stream == nil
	ok := false
	if req.Raw {
		ok = s.replyRaw(st, resp)
	} else {
		ok = s.reply(st, resp, nil)
	}
	if !ok {
		return false, false
	}
	if stream == nil {
		return reuse, false
	}
	stream()
	return false, true
}

// reply writes the response frame; it reports whether that worked.
func (s *Server) reply(st *yamux.Stream, resp *proto.Response, err error) bool {
	if resp == nil {
		resp = &proto.Response{}
	}
	if err != nil {
		resp = &proto.Response{Kept: resp.Kept, Error: &proto.Error{Code: errdefs.Code(err), Message: err.Error()}}
	}
	st.SetWriteDeadline(time.Now().Add(s.opts.requestTimeout))
	werr := proto.WriteFrame(st, resp)
	st.SetWriteDeadline(time.Time{})
	if werr != nil && errors.Is(werr, proto.ErrFrameTooLarge) {
		werr = proto.WriteFrame(st, &proto.Response{Error: &proto.Error{
			Code:    errdefs.ErrResourceExhausted.Error(),
			Message: "the answer is larger than the protocol's frame cap; ask for less (lower max_bytes or fewer paths)",
		}})
	}
	return werr == nil
}

// replyRaw writes a successful response with its file data as raw frames
// (proto.Request.Raw); a response over the caps becomes the same error
// that reply gives responses over the cap.
func (s *Server) replyRaw(st *yamux.Stream, resp *proto.Response) bool {
	if resp.ReadFile == nil && resp.ReadFiles == nil {
		return s.reply(st, resp, nil)
	}
	st.SetWriteDeadline(time.Now().Add(s.opts.requestTimeout))
	werr := proto.WriteMessage(st, resp, resp.TakeData())
	st.SetWriteDeadline(time.Time{})
	if werr != nil && errors.Is(werr, proto.ErrFrameTooLarge) {
		return s.reply(st, nil, errdefs.ResourceExhausted("the answer is larger than the protocol's frame cap; ask for less (lower max_bytes or fewer paths)"))
	}
	return werr == nil
}

// readRawWrite reads the raw frames that follow a write_files request
// frame into its files.
func readRawWrite(st *yamux.Stream, req *proto.Request) error {
	blobs, err := proto.ReadRaw(st, proto.MaxRawTotal)
	if err != nil {
		return errdefs.InvalidArgument("the raw data frames after the write_files request could not be read (%v); send one raw frame per file, then the end frame", err)
	}
	if req.WriteFiles == nil {
		return nil // dispatch says what is missing
	}
	if err := req.WriteFiles.PutData(blobs); err != nil {
		return errdefs.InvalidArgument("%v", err)
	}
	return nil
}
