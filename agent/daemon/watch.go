package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// watchWriteTimeout bounds writing one event frame.
const watchWriteTimeout = 30 * time.Second

// watchService serves the workspace watch (op watch): one inotify watch per
// resolved root (watch_root.go), shared by every stream on it, each stream
// a subscriber with its own bounded queue (watch_stream.go).
//
// Goroutines: per root watch its event loop and flush timer; per stream a
// control reader beside the handler that writes its events. close ends
// every root watch, which ends their subscribers and so their streams'
// writers; the control readers end when their streams are closed.
type watchService struct {
	hub *watchHub
	// settle settles an interrupted commit on a root before it is watched
	// (fileService.settle), so a watch never starts on a half-written tree.
	settle func(root string) error
}

var _ service = (*watchService)(nil)

func newWatchService(log *slog.Logger, settle func(root string) error) *watchService {
	return &watchService{hub: newWatchHub(log), settle: settle}
}

func (w *watchService) register(t opTable) {
	addBody(t, proto.OpWatch, func(r *proto.Request) *proto.WatchRequest { return r.Watch }, w.watch)
}

func (w *watchService) watch(_ context.Context, rq *request, r *proto.WatchRequest) (*proto.Response, func(), error) {
	if err := w.settle(r.Root); err != nil {
		return nil, nil, err
	}
	info, run, err := w.serve(rq.st, r)
	return &proto.Response{Watch: info}, run, err
}

// close ends every workspace watch (the Server's Close).
func (w *watchService) close() { w.hub.closeAll() }

// serve subscribes a stream to root's watch. The control reader starts at
// once, so a stream that closes (even before the response is written)
// ends the subscription; the returned func writes the events.
func (w *watchService) serve(st *yamux.Stream, r *proto.WatchRequest) (*proto.WatchResponse, func(), error) {
	rw, sub, err := w.hub.subscribe(r)
	if err != nil {
		return nil, nil, err
	}
	go func() {
		defer func() {
			sub.end()
			w.hub.leave(rw, sub)
		}()
		for {
			var c proto.WatchControl
			if err := proto.ReadFrame(st, &c); err != nil {
				return
			}
			if c.Flush != 0 {
				rw.requestFlush(sub, c.Flush)
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
				st := rw.state()
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
	return rw.state(), run, nil
}
