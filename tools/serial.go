package tools

import (
	"context"
	"sync"
)

// serializer runs calls that share a key one at a time, in arrival order.
// sync.Mutex is not FIFO (a newcomer may barge past a woken waiter), so each
// key keeps an explicit queue of tickets. A key's entry exists only while
// someone holds or waits for it, so the map does not grow with the number of
// conversations ever seen.
type serializer struct {
	mu    sync.Mutex // guards lines and every line's fields
	lines map[string]*line
}

// line is the queue of one key.
type line struct {
	busy    bool
	waiters []*ticket
}

// ticket is one queued caller; granted is set (under serializer.mu) when the
// turn is handed to it, and ready is closed at the same moment.
type ticket struct {
	ready   chan struct{}
	granted bool
}

func newSerializer() *serializer { return &serializer{lines: map[string]*line{}} }

// acquire waits for key's turn. It returns a release func, or ctx's error if
// ctx ends first; a canceled waiter leaves the queue without disturbing the
// order of those behind it.
func (s *serializer) acquire(ctx context.Context, key string) (func(), error) {
	s.mu.Lock()
	l := s.lines[key]
	if l == nil {
		l = &line{}
		s.lines[key] = l
	}
	if !l.busy {
		l.busy = true
		s.mu.Unlock()
		return s.releaser(key), nil
	}
	t := &ticket{ready: make(chan struct{})}
	l.waiters = append(l.waiters, t)
	s.mu.Unlock()

	select {
	case <-t.ready:
		return s.releaser(key), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if t.granted {
		// The turn arrived as ctx ended: pass it on rather than drop it.
		s.mu.Unlock()
		s.release(key)
		return nil, ctx.Err()
	}
	for i, w := range l.waiters {
		if w == t {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return nil, ctx.Err()
}

func (s *serializer) releaser(key string) func() {
	var once sync.Once
	return func() { once.Do(func() { s.release(key) }) }
}

// release hands the turn to the oldest waiter, or frees the key.
func (s *serializer) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines[key]
	if l == nil {
		return
	}
	if len(l.waiters) == 0 {
		delete(s.lines, key)
		return
	}
	next := l.waiters[0]
	l.waiters[0] = nil
	l.waiters = l.waiters[1:]
	next.granted = true
	close(next.ready)
}

// queued reports how many callers wait behind the holder of key (tests).
func (s *serializer) queued(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lines[key]; l != nil {
		return len(l.waiters)
	}
	return 0
}

// heldTurns marks, in a call's context, the serial keys whose turn that call
// holds. A tool that calls back into the registry while it holds its
// conversation's turn (eval's tool() bridge) must not queue behind itself:
// its nested calls run inside the turn, which is still one at a time
// because the outer call waits for them.
type heldTurns struct{}

func holdsTurn(ctx context.Context, key string) bool {
	held, _ := ctx.Value(heldTurns{}).([]string)
	for _, k := range held {
		if k == key {
			return true
		}
	}
	return false
}

func withTurn(ctx context.Context, key string) context.Context {
	held, _ := ctx.Value(heldTurns{}).([]string)
	return context.WithValue(ctx, heldTurns{}, append(held[:len(held):len(held)], key))
}
