package tools

import (
	"context"
	"slices"
	"sync"
)

// serializer runs calls that share a key (a conversation) in turns, in
// arrival order. A call's turn is either the whole key (exclusive) or a
// scope within it: the names of the files it changes. Two calls conflict
// when either is exclusive or their scopes share a name; a call waits for
// every call before it that it conflicts with, held or still waiting, and
// for nothing else. So a shell waits for the writes before it and the
// writes after it wait for the shell, while writes of different files by
// two runs of one conversation go side by side.
//
// sync.Mutex is not FIFO (a newcomer may barge past a woken waiter), so each
// key keeps an explicit queue of tickets. A key's entry exists only while
// someone holds or waits for it, so the map does not grow with the number of
// conversations ever seen.
type serializer struct {
	mu    sync.Mutex // guards lines and every line's and ticket's fields
	lines map[string]*line
}

// line is the turns of one key: the tickets granted and not released, and
// the ones waiting, oldest first.
type line struct {
	held    []*ticket
	waiters []*ticket
}

// ticket is one caller. scope nil is the whole key; granted is set (under
// serializer.mu) when the turn is handed to it, and ready is closed at the
// same moment.
type ticket struct {
	scope   []string // sorted, without repeats
	ready   chan struct{}
	granted bool
}

func (t *ticket) conflicts(o *ticket) bool {
	if t.scope == nil || o.scope == nil {
		return true
	}
	i, j := 0, 0
	for i < len(t.scope) && j < len(o.scope) {
		switch {
		case t.scope[i] == o.scope[j]:
			return true
		case t.scope[i] < o.scope[j]:
			i++
		default:
			j++
		}
	}
	return false
}

func newSerializer() *serializer { return &serializer{lines: map[string]*line{}} }

// acquire waits for key's whole turn. It returns a release func, or ctx's
// error if ctx ends first; a canceled waiter leaves the queue without
// disturbing the order of those behind it.
func (s *serializer) acquire(ctx context.Context, key string) (func(), error) {
	return s.acquireScoped(ctx, key, nil)
}

// acquireScoped is acquire for a turn over scope only (nil or empty: the
// whole key).
func (s *serializer) acquireScoped(ctx context.Context, key string, scope []string) (func(), error) {
	t := &ticket{ready: make(chan struct{})}
	if len(scope) > 0 {
		t.scope = slices.Compact(slices.Sorted(slices.Values(scope)))
	}
	s.mu.Lock()
	l := s.lines[key]
	if l == nil {
		l = &line{}
		s.lines[key] = l
	}
	l.waiters = append(l.waiters, t)
	l.grant()
	s.mu.Unlock()

	select {
	case <-t.ready:
		return s.releaser(key, t), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if t.granted {
		// The turn arrived as ctx ended: give it back rather than drop it.
		s.mu.Unlock()
		s.release(key, t)
		return nil, ctx.Err()
	}
	l.waiters = slices.DeleteFunc(l.waiters, func(w *ticket) bool { return w == t })
	l.grant() // those behind it may now go
	s.drop(key, l)
	s.mu.Unlock()
	return nil, ctx.Err()
}

// grant hands the turn to every waiter that conflicts with no held ticket
// and no ticket waiting before it. Called with serializer.mu held.
func (l *line) grant() {
	kept := l.waiters[:0] // the waiters before w that still wait
	for _, w := range l.waiters {
		if !slices.ContainsFunc(l.held, w.conflicts) && !slices.ContainsFunc(kept, w.conflicts) {
			w.granted = true
			close(w.ready)
			l.held = append(l.held, w)
			continue
		}
		kept = append(kept, w)
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
}

func (s *serializer) releaser(key string, t *ticket) func() {
	var once sync.Once
	return func() { once.Do(func() { s.release(key, t) }) }
}

// release ends t's turn and hands turns to the waiters it held back.
func (s *serializer) release(key string, t *ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines[key]
	if l == nil {
		return
	}
	l.held = slices.DeleteFunc(l.held, func(h *ticket) bool { return h == t })
	l.grant()
	s.drop(key, l)
}

// drop forgets key's line once nobody holds or waits for it. Called with
// serializer.mu held.
func (s *serializer) drop(key string, l *line) {
	if len(l.held) == 0 && len(l.waiters) == 0 {
		delete(s.lines, key)
	}
}

// queued reports how many callers wait for a turn of key (tests).
func (s *serializer) queued(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lines[key]; l != nil {
		return len(l.waiters)
	}
	return 0
}

// heldTurns marks, in a call's context, the serial keys whose whole turn
// that call holds. A tool that calls back into the registry while it holds
// its conversation's turn (eval's tool() bridge) must not queue behind
// itself: its nested calls run inside the turn, which is still one at a
// time because the outer call waits for them. A scoped turn (a write) is
// not marked: such tools make no nested calls.
type heldTurns struct{}

func holdsTurn(ctx context.Context, key string) bool {
	held, _ := ctx.Value(heldTurns{}).([]string)
	return slices.Contains(held, key)
}

func withTurn(ctx context.Context, key string) context.Context {
	held, _ := ctx.Value(heldTurns{}).([]string)
	return context.WithValue(ctx, heldTurns{}, append(held[:len(held):len(held)], key))
}
