package daemon

import (
	"sync"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// watchQueue caps the events waiting for one stream; past it they are
// collapsed into one overflow event, so a slow reader never holds the
// watch back.
const watchQueue = 64

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
