package daemon

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// watchQueue caps the events waiting for one stream; past it they are
// collapsed into one overflow event, so a slow reader never holds the
// watch back.
const watchQueue = 64

// watchWriteTimeout bounds writing one event frame.
const watchWriteTimeout = 30 * time.Second

// watchSub is one watch stream's subscription.
type watchSub struct {
	w    *rootWatch
	ch   chan proto.WatchEvent
	lost atomic.Bool   // events were dropped for a full queue
	kick chan struct{} // wakes the writer to report lost events
	done chan struct{} // closed by end
	once sync.Once
}

func newWatchSub(w *rootWatch) *watchSub {
	return &watchSub{w: w, ch: make(chan proto.WatchEvent, watchQueue), kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// send queues ev without blocking.
func (s *watchSub) send(ev proto.WatchEvent) {
	select {
	case s.ch <- ev:
	default:
		s.lost.Store(true)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *watchSub) end() { s.once.Do(func() { close(s.done) }) }

// serveWatch subscribes a stream to root's watch. The control reader
// starts at once, so a stream that closes (even before the response is
// written) ends the subscription; the returned func writes the events.
func (s *Server) serveWatch(st *yamux.Stream, r *proto.WatchRequest) (*proto.WatchResponse, func(), error) {
	w, sub, err := s.watches.subscribe(r)
	if err != nil {
		return nil, nil, err
	}
	go func() {
		defer func() {
			sub.end()
			s.watches.leave(w, sub)
		}()
		for {
			var c proto.WatchControl
			if err := proto.ReadFrame(st, &c); err != nil {
				return
			}
			if c.Flush != 0 {
				w.requestFlush(sub, c.Flush)
			}
		}
	}()
	run := func() {
		defer st.Close()
		defer sub.end()
		var seq uint64
		write := func(ev proto.WatchEvent) bool {
			seq++
			ev.Seq = seq
			st.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
			return proto.WriteFrame(st, &ev) == nil
		}
		for {
			var ev proto.WatchEvent
			select {
			case ev = <-sub.ch:
			case <-sub.kick:
			case <-sub.done:
				return
			}
			if sub.lost.Swap(false) {
				st := w.state()
				if !write(proto.WatchEvent{Overflow: true, Dirs: st.Dirs, Limited: st.Limited}) {
					return
				}
			}
			if len(ev.Changes) > 0 || ev.Overflow || ev.Flushed != 0 {
				if !write(ev) {
					return
				}
			}
		}
	}
	return w.state(), run, nil
}
