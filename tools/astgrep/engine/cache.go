package engine

import (
	"container/list"
	"strings"
	"sync"
	"time"
)

// FileKey identifies one version of a file: a change of size or
// modification time is a new version.
type FileKey struct {
	Path    string
	Size    int64
	ModTime time.Time
}

// lru is a least-recently-used map bounded by the summed cost of its values.
type lru[K comparable, V any] struct {
	mu    sync.Mutex // guards everything below
	max   int64
	used  int64
	order *list.List // front: most recently used; elements hold *entry[K, V]
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

func newLRU[K comparable, V any](max int64) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*entry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put stores v; a value costing more than the whole bound is not kept.
func (c *lru[K, V]) put(k K, v V, cost int64) {
	if cost > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		old := e.Value.(*entry[K, V])
		c.used += cost - old.cost
		old.val, old.cost = v, cost
		c.order.MoveToFront(e)
	} else {
		c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, cost: cost})
		c.used += cost
	}
	for c.used > c.max {
		e := c.order.Back()
		old := e.Value.(*entry[K, V])
		c.order.Remove(e)
		delete(c.items, old.key)
		c.used -= old.cost
	}
}

// stats returns the number of entries and their summed cost.
func (c *lru[K, V]) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.used
}

// resultKey names the matches of one pattern in one file version.
type resultKey struct {
	file    FileKey
	pattern string
}

func matchesCost(ms []Match) int64 {
	c := int64(96)
	for _, m := range ms {
		c += 96 + int64(len(m.Text))
		for _, cp := range m.Captures {
			c += 64 + int64(len(cp.Name)+len(cp.Text))
		}
	}
	return c
}

// dropIf removes the entries whose key drop selects.
func (c *lru[K, V]) dropIf(drop func(K) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, e := range c.items {
		if drop(k) {
			c.used -= e.Value.(*entry[K, V]).cost
			c.order.Remove(e)
			delete(c.items, k)
			n++
		}
	}
	return n
}

// Forget drops the cached trees and matches of every version of the given
// files (paths as the Source names them): they changed. Callers that learn
// of changes (a workspace watch) use it; the size and modification time in
// each FileKey remain the check for changes no one reported.
func (e *Engine) Forget(paths ...string) int {
	if len(paths) == 0 {
		return 0
	}
	set := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		set[p] = struct{}{}
	}
	n := e.trees.dropIf(func(k FileKey) bool { _, ok := set[k.Path]; return ok })
	n += e.results.dropIf(func(k resultKey) bool { _, ok := set[k.file.Path]; return ok })
	return n
}

// ForgetPrefix drops the cached trees and matches of every file whose
// path begins with prefix (a whole sandbox, after "many files changed").
func (e *Engine) ForgetPrefix(prefix string) int {
	n := e.trees.dropIf(func(k FileKey) bool { return strings.HasPrefix(k.Path, prefix) })
	n += e.results.dropIf(func(k resultKey) bool { return strings.HasPrefix(k.file.Path, prefix) })
	return n
}
