package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// WatchStream is one OpWatch stream: the agent's events, in order.
// Next and Flush may be called from different goroutines; Next from one.
type WatchStream struct {
	st   *yamux.Stream
	info *proto.WatchResponse
	wmu  sync.Mutex // guards writes of control frames
}

// Watch opens a watch of r.Root (see proto.WatchRequest). ctx bounds only
// the opening, which returns once the agent watches every directory; the
// stream lives until Close or the session's end.
func (c *Client) Watch(ctx context.Context, r *proto.WatchRequest) (*WatchStream, error) {
	if c.hello != nil && !c.hello.Watch {
		return nil, errdefs.FailedPrecondition("the sandbox agent (pid %d) predates workspace watching; restart the sandbox's agent with the current sandbox-agent binary", c.hello.PID)
	}
	st, resp, err := c.open(ctx, &proto.Request{Op: proto.OpWatch, Watch: r})
	if err != nil {
		return nil, err
	}
	info, err := need(resp.Watch, proto.OpWatch)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &WatchStream{st: st, info: info}, nil
}

// Info is what the agent watches, as of the opening.
func (w *WatchStream) Info() proto.WatchResponse { return *w.info }

// Next returns the next event; an error means the stream has ended.
func (w *WatchStream) Next() (proto.WatchEvent, error) {
	var ev proto.WatchEvent
	err := proto.ReadFrame(w.st, &ev)
	return ev, err
}

// Flush asks for every change made so far; the agent responds with an
// event whose Flushed is id, after those changes.
func (w *WatchStream) Flush(id uint64) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.st.SetWriteDeadline(time.Now().Add(10 * time.Second))
	defer w.st.SetWriteDeadline(time.Time{})
	return proto.WriteFrame(w.st, &proto.WatchControl{Flush: id})
}

// Close ends the stream; the agent stops watching once no stream is left.
func (w *WatchStream) Close() error { return w.st.Close() }

// WatchStatus is a subscription's view of its watch, for status output.
type WatchStatus struct {
	Active  bool   // the agent's watch is established
	Dirs    int    // directories watched
	Limited bool   // the directory cap was hit: some changes go unreported
	Err     string // why the watch is not active, when it is not
	Events  uint64 // batches delivered
	Resyncs uint64 // of them, overflows ("many files changed")
}

// errNoWatch is Sync's error while the watch is not established.
var errNoWatch = errors.New("the workspace watch is not established")

// Subscribe delivers the changes under root to fn, one batch at a time on
// a goroutine of the subscription's own. One agent watch per root serves
// every subscriber of this client; it opens with the first and is opened
// again (after a pause) when its stream fails while the session lives,
// and each reopening is delivered as an Overflow batch, since changes may
// have been missed. A second Subscribe with the same name for the same
// root returns the first subscription (fn is not used). Subscribe never
// blocks; the subscription ends (Done) with the session or Close.
func (c *Client) Subscribe(root, name string, fn func(proto.WatchEvent)) *Subscription {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.feeds == nil {
		c.feeds = map[string]*feed{}
	}
	f := c.feeds[root]
	if f != nil {
		if s := f.lookup(name); s != nil {
			return s
		}
	}
	if f == nil || f.ended() {
		f = newFeed(c, root)
		c.feeds[root] = f
		go f.run()
	}
	s := newSubscription(f, name, fn)
	if !f.add(s) {
		s.end()
	}
	return s
}

// Subscription is one subscriber of a root's watch.
//
// Goroutines: one that runs fn for each queued batch; it ends with done.
type Subscription struct {
	f    *feed
	name string
	fn   func(proto.WatchEvent)

	mu      sync.Mutex // guards queue, queued, handled, events, resyncs
	queue   []proto.WatchEvent
	queued  uint64 // batches accepted (collapsed ones count once)
	handled uint64 // batches fn has returned from
	events  uint64
	resyncs uint64
	wake    chan struct{} // cap 1: the queue or handled changed
	done    chan struct{}
	once    sync.Once
}

// subQueue caps a subscriber's backlog; past it the backlog collapses
// into one overflow batch.
const subQueue = 64

func newSubscription(f *feed, name string, fn func(proto.WatchEvent)) *Subscription {
	if fn == nil {
		fn = func(proto.WatchEvent) {}
	}
	s := &Subscription{f: f, name: name, fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s
}

// Done is closed when the subscription has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close ends the subscription; the watch ends with its last subscriber.
func (s *Subscription) Close() {
	s.end()
	s.f.remove(s)
}

func (s *Subscription) end() { s.once.Do(func() { close(s.done) }) }

// Status describes the watch as this subscriber sees it.
func (s *Subscription) Status() WatchStatus {
	st := s.f.status()
	s.mu.Lock()
	st.Events, st.Resyncs = s.events, s.resyncs
	s.mu.Unlock()
	return st
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver queues ev without blocking the feed.
func (s *Subscription) deliver(ev proto.WatchEvent) {
	s.mu.Lock()
	if len(s.queue) >= subQueue {
		s.queue = []proto.WatchEvent{{Overflow: true, Dirs: ev.Dirs, Limited: ev.Limited}}
	} else {
		s.queue = append(s.queue, ev)
		s.queued++
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) loop() {
	for {
		s.mu.Lock()
		var ev proto.WatchEvent
		have := len(s.queue) > 0
		if have {
			ev = s.queue[0]
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		if !have {
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		s.fn(ev)
		s.mu.Lock()
		s.events++
		if ev.Overflow {
			s.resyncs++
		}
		if len(s.queue) == 0 {
			s.handled = s.queued
		} else {
			s.handled++
		}
		s.mu.Unlock()
		s.f.notifyHandled()
	}
}

// Sync returns once fn has handled every change made in the sandbox before
// the call: the agent is asked to flush, and its response comes after those
// changes. It fails when the watch is not established (the caller then
// relies on its own checks) or ctx ends first.
func (s *Subscription) Sync(ctx context.Context) error {
	if err := s.f.flush(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	target := s.queued
	s.mu.Unlock()
	for {
		s.mu.Lock()
		ok := s.handled >= target
		s.mu.Unlock()
		if ok {
			return nil
		}
		ch := s.f.handledChan()
		s.mu.Lock()
		ok = s.handled >= target
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-s.done:
			return errNoWatch
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// feed is the client's side of one root's watch, fanned out to its
// subscribers.
//
// Goroutines: run, which opens the stream, reads its events and opens it
// again after a failure; it ends with the session or the last subscriber,
// and then ends every subscription.
type feed struct {
	c    *Client
	root string

	mu        sync.Mutex // guards everything below
	subs      map[string]*Subscription
	stream    *WatchStream
	info      proto.WatchEvent // latest Dirs, Limited
	err       string
	flushID   uint64
	flushed   uint64
	flushCh   chan struct{} // closed and replaced when flushed rises or the stream changes
	handledCh chan struct{} // closed and replaced when a subscriber handled a batch
	stop      chan struct{} // closed when the last subscriber leaves
	done      bool
}

func newFeed(c *Client, root string) *feed {
	return &feed{c: c, root: root, subs: map[string]*Subscription{}, flushCh: make(chan struct{}),
		handledCh: make(chan struct{}), stop: make(chan struct{}), err: "starting"}
}

func (f *feed) lookup(name string) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.subs[name]; s != nil {
		select {
		case <-s.done:
			return nil
		default:
			return s
		}
	}
	return nil
}

func (f *feed) ended() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

func (f *feed) add(s *Subscription) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.subs[s.name] = s
	return true
}

func (f *feed) remove(s *Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[s.name] == s {
		delete(f.subs, s.name)
	}
	if len(f.subs) == 0 && !f.done {
		f.done = true
		close(f.stop)
		if f.stream != nil {
			f.stream.Close()
		}
	}
}

func (f *feed) status() WatchStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return WatchStatus{Active: f.stream != nil, Dirs: f.info.Dirs, Limited: f.info.Limited, Err: f.err}
}

func (f *feed) notifyHandled() {
	f.mu.Lock()
	close(f.handledCh)
	f.handledCh = make(chan struct{})
	f.mu.Unlock()
}

func (f *feed) handledChan() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handledCh
}

// flush asks the agent for every change so far and waits for its response,
// which run has fanned out after those changes.
func (f *feed) flush(ctx context.Context) error {
	f.mu.Lock()
	st := f.stream
	if st == nil {
		err := f.err
		f.mu.Unlock()
		return errdefs.Unavailable("%v: %s", errNoWatch, err)
	}
	f.flushID++
	id := f.flushID
	f.mu.Unlock()
	if err := st.Flush(id); err != nil {
		return errdefs.Unavailable("%v: %v", errNoWatch, err)
	}
	for {
		f.mu.Lock()
		ok, same, ch := f.flushed >= id, f.stream == st, f.flushCh
		f.mu.Unlock()
		if ok {
			return nil
		}
		if !same {
			return errdefs.Unavailable("%v: the watch stream ended", errNoWatch)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Reopening backs off from watchRetryMin to watchRetryMax.
const (
	watchRetryMin = time.Second
	watchRetryMax = 30 * time.Second
)

func (f *feed) run() {
	defer f.finish()
	backoff := watchRetryMin
	opened := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.c.file)
		go func() {
			select {
			case <-f.stop:
			case <-f.c.Done():
			case <-ctx.Done():
			}
			cancel()
		}()
		st, err := f.c.Watch(ctx, &proto.WatchRequest{Root: f.root})
		cancel()
		if err != nil {
			f.setErr(err.Error())
			if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrNotFound) {
				return // will not get better by retrying
			}
			if !f.pause(backoff) {
				return
			}
			backoff = min(2*backoff, watchRetryMax)
			continue
		}
		info := st.Info()
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			st.Close()
			return
		}
		f.stream, f.err = st, ""
		f.info = proto.WatchEvent{Dirs: info.Dirs, Limited: info.Limited}
		f.mu.Unlock()
		if opened {
			// Changes made while no stream was open are unknown.
			f.fanOut(proto.WatchEvent{Overflow: true, Dirs: info.Dirs, Limited: info.Limited})
		}
		opened = true
		backoff = watchRetryMin
		for {
			ev, err := st.Next()
			if err != nil {
				break
			}
			f.mu.Lock()
			f.info.Dirs, f.info.Limited = ev.Dirs, ev.Limited
			f.mu.Unlock()
			if len(ev.Changes) > 0 || ev.Overflow {
				f.fanOut(ev)
			}
			if ev.Flushed != 0 {
				f.mu.Lock()
				f.flushed = max(f.flushed, ev.Flushed)
				close(f.flushCh)
				f.flushCh = make(chan struct{})
				f.mu.Unlock()
			}
		}
		st.Close()
		f.mu.Lock()
		f.stream, f.err = nil, "the watch stream ended; reopening"
		close(f.flushCh)
		f.flushCh = make(chan struct{})
		f.mu.Unlock()
		if !f.pause(backoff) {
			return
		}
	}
}

// pause waits d unless the feed stops or the session ends first.
func (f *feed) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.stop:
		return false
	case <-f.c.Done():
		return false
	}
}

func (f *feed) setErr(msg string) {
	f.mu.Lock()
	f.err = msg
	f.mu.Unlock()
}

func (f *feed) fanOut(ev proto.WatchEvent) {
	f.mu.Lock()
	subs := make([]*Subscription, 0, len(f.subs))
	for _, s := range f.subs {
		subs = append(subs, s)
	}
	f.mu.Unlock()
	for _, s := range subs {
		s.deliver(ev)
	}
}

// finish ends the feed and every subscription on it.
func (f *feed) finish() {
	f.mu.Lock()
	f.done = true
	subs := f.subs
	f.subs = map[string]*Subscription{}
	if f.stream != nil {
		f.stream.Close()
		f.stream = nil
	}
	f.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
}
