package sandbox

import (
	"context"
	"sync"
)

// keyLocks hands out one lock per key and forgets keys nobody holds, so the
// map does not grow with every conversation ever seen.
type keyLocks struct {
	mu sync.Mutex // guards m and every keyLock's refs
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds one token while locked
	refs int           // holders plus waiters
}

// lock waits for key's lock or ctx; the returned func releases it.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyLock)
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
