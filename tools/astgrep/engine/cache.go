package engine

import (
	"container/list"
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
