package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// The polling watcher (CreateWatcher, GetWatcherEvents, RemoveWatcher):
// the agent's watch read into a buffer the caller drains.

const (
	maxWatchers      = 64    // per service, open at once
	maxWatcherEvents = 10000 // buffered per watcher; older ones are dropped
	watcherIdle      = 10 * time.Minute
)

type watcher struct {
	tenant, sandbox string
	ws              watchStream
	recursive       bool
	look            func(string) (int64, bool)
	// entries adds each event's entry (includeEntry), through t.
	entries func(base string, evs []fsEvent)

	mu      sync.Mutex
	events  []fsEvent
	dropped int
	err     error // why the watch ended
	polled  time.Time
	done    chan struct{}
	once    sync.Once
}

func (w *watcher) stop() { w.once.Do(func() { w.ws.Close() }) }

// loop buffers the watch's events until it ends.
func (w *watcher) loop() {
	defer close(w.done)
	for {
		ev, err := w.ws.Next()
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		// The looks into the sandbox happen outside the lock, so that a
		// poll is never held up by them.
		evs := eventsOf(ev, w.ws.Info().Base, w.recursive, w.look)
		if w.entries != nil {
			w.entries(w.ws.Info().Base, evs)
		}
		w.mu.Lock()
		w.events = append(w.events, evs...)
		if over := len(w.events) - maxWatcherEvents; over > 0 {
			w.events = append([]fsEvent(nil), w.events[over:]...)
			w.dropped += over
		}
		idle := time.Since(w.polled) > watcherIdle
		w.mu.Unlock()
		if idle {
			// Nobody polls it any more: end it rather than keep a watch
			// of the sandbox open for no one.
			w.stop()
		}
	}
}

type (
	createWatcherResponse struct {
		WatcherID string `json:"watcherId"`
	}
	watcherRequest struct {
		WatcherID string `json:"watcherId"`
	}
	watcherEventsResponse struct {
		Events []fsEvent `json:"events"`
	}
)

func (s *Service) servePolling(w http.ResponseWriter, r *http.Request, t target, method string) {
	switch method {
	case "CreateWatcher":
		var req watchRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		s.mu.Lock()
		n := len(s.watchers)
		s.mu.Unlock()
		if n >= maxWatchers {
			writeUnaryError(w, rpcErr(codeResourceExhausted, "%d watchers are open; remove one with RemoveWatcher first", maxWatchers))
			return
		}
		// The watch outlives this request: it is closed by RemoveWatcher,
		// by ten minutes without a poll, or by the service's Close.
		ws, err := openWatch(context.WithoutCancel(r.Context()), t, t.acct.abs(req.Path))
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		var b [8]byte
		rand.Read(b[:])
		id := "w" + hex.EncodeToString(b[:])
		wt := &watcher{tenant: t.tenant, sandbox: t.info.ID, ws: ws, recursive: req.Recursive, look: lookIn(context.Background(), t), polled: time.Now(), done: make(chan struct{})}
		if req.IncludeEntry {
			wt.entries = func(base string, evs []fsEvent) { withEntries(context.Background(), t, base, evs) }
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			ws.Close()
			writeUnaryError(w, rpcErr(codeUnavailable, "sandboxd is stopping; retry on the next start"))
			return
		}
		s.watchers[id] = wt
		s.mu.Unlock()
		go func() {
			wt.loop()
			s.mu.Lock()
			if s.watchers[id] == wt && time.Since(wt.polled) > watcherIdle {
				delete(s.watchers, id)
			}
			s.mu.Unlock()
		}()
		writeUnary(w, createWatcherResponse{WatcherID: id})
	case "GetWatcherEvents", "RemoveWatcher":
		var req watcherRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		s.mu.Lock()
		wt := s.watchers[req.WatcherID]
		if wt != nil && (wt.tenant != t.tenant || wt.sandbox != t.info.ID) {
			wt = nil
		}
		if wt != nil && method == "RemoveWatcher" {
			delete(s.watchers, req.WatcherID)
		}
		s.mu.Unlock()
		if wt == nil {
			writeUnaryError(w, rpcErr(codeNotFound, "watcher %q does not exist; create one with CreateWatcher", req.WatcherID))
			return
		}
		if method == "RemoveWatcher" {
			wt.stop()
			writeUnary(w, empty{})
			return
		}
		wt.mu.Lock()
		evs, err := wt.events, wt.err
		wt.events, wt.polled = nil, time.Now()
		wt.mu.Unlock()
		if len(evs) == 0 && err != nil {
			s.mu.Lock()
			delete(s.watchers, req.WatcherID)
			s.mu.Unlock()
			writeUnaryError(w, rpcErr(codeUnavailable, "the watch ended: %v", err))
			return
		}
		if evs == nil {
			evs = []fsEvent{}
		}
		writeUnary(w, watcherEventsResponse{Events: evs})
	}
}
