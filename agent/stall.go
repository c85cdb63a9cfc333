package agent

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// A sandbox frozen in its engine (docker pause) behind sandboxd's back
// keeps its pipe open and responds to nothing: without help a call on that
// pipe waits for the session's keepalive to give up (about 40 s) and then
// says the session ended, which tells the caller nothing useful. So a
// call that has had no response for a short while pings the agent, and
// when the ping gets no response either, asks the client's owner (the
// sandbox manager, which can read the engine's state) why; an error from
// the owner ends the call with that error message at once.

const (
	// endCheckTimeout bounds the question to the owner of why a session
	// ended under a call.
	endCheckTimeout = 5 * time.Second
	// defaultStallAfter is how long a call waits for its response before
	// the agent is pinged, and how long that ping may take.
	defaultStallAfter = time.Second
	// stallEvery is how often a call that keeps waiting (a long exec, a
	// wait) pings again once the agent has responded to a ping.
	stallEvery = 5 * time.Second
	// stallCheckTimeout bounds one question to the owner.
	stallCheckTimeout = 5 * time.Second
)

// WithStallCheck makes a call whose response has not come within after (0:
// 1 s) ping the agent and, when the ping gets no response within after
// either, call check. A non-nil error from check (the sandbox is paused,
// stopped or gone) ends the call with that error, its errdefs class kept;
// nil lets it wait on, to be asked again a few seconds later. check runs
// on its own goroutine, with a context that ends when the call does.
func WithStallCheck(after time.Duration, check func(context.Context) error) ClientOption {
	return func(c *Client) {
		if after <= 0 {
			after = defaultStallAfter
		}
		c.stallAfter, c.stallCheck = after, check
	}
}

// watchStall watches one call for a sandbox that stopped responding; fail
// is called (at most once, on the watcher's goroutine) with check's error.
// The watcher starts only once the call has waited stallAfter, so a quick
// call costs a timer. stop ends the watch and waits for its goroutine.
func (c *Client) watchStall(ctx context.Context, fail func(error)) (stop func()) {
	if c.stallCheck == nil {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	timer := time.AfterFunc(c.stallAfter, func() {
		defer close(finished)
		c.stallLoop(wctx, fail)
	})
	return func() {
		cancel()
		if !timer.Stop() {
			<-finished
		}
	}
}

// stallLoop pings, and asks check when the ping goes unanswered, every
// stallEvery until ctx ends or check gives a reason to fail.
func (c *Client) stallLoop(ctx context.Context, fail func(error)) {
	for {
		if !c.answersPing(ctx) {
			cctx, cancel := context.WithTimeout(ctx, stallCheckTimeout)
			err := c.stallCheck(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				fail(err)
				return
			}
		}
		t := time.NewTimer(stallEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// answersPing reports whether the agent's end of the session responds to a
// ping within stallAfter (or ctx ends first, when nobody needs to know).
func (c *Client) answersPing(ctx context.Context) bool {
	got := make(chan error, 1)
	// yamux's Ping waits up to its connection write timeout (10 s); this
	// goroutine ends by then, whatever happens here.
	go func() {
		_, err := c.sess.Ping()
		got <- err
	}()
	t := time.NewTimer(c.stallAfter)
	defer t.Stop()
	select {
	case err := <-got:
		return err == nil
	case <-t.C:
		return false
	case <-ctx.Done():
		return true
	}
}

// WithEndCheck makes a call whose session ends under it, other than by
// Close, ask check why (as the stall check does, the client's owner reads
// the engine): a non-nil error (the sandbox restarted, stopped or is
// gone) ends the call instead of "the session has ended", its errdefs
// class kept; nil leaves that. check runs on the call's goroutine, with
// its own deadline of endCheckTimeout.
func WithEndCheck(check func(context.Context) error) ClientOption {
	return func(c *Client) { c.endCheck = check }
}

// endedError is sessionError for a call, explained by the owner's end
// check when the session ended from the other side.
func (c *Client) endedError(ctx context.Context, err error, op proto.Op) error {
	serr := c.sessionError(err, op)
	// Before NewClient's hello has its answer the caller explains a
	// failure itself.
	if c.endCheck == nil || c.hello == nil || c.closing.Load() || !c.ended(err) {
		return serr
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endCheckTimeout)
	defer cancel()
	if why := c.endCheck(cctx); why != nil {
		return why
	}
	return serr
}

// ended reports whether err is the session's end rather than one call's
// failure.
func (c *Client) ended(err error) bool {
	return c.sess.IsClosed() || errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
