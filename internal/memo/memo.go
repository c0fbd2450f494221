// Package memo is a bounded memo for values a process computes once per
// key: the parsed form of a text, a loaded dataset, a comparison's
// intervals. Past its bound it forgets everything at once: the keys one
// job uses fit well within it, and a memo of pure results needs no
// recency order.
package memo

import "sync"

// Map holds up to its bound of values by key; it is safe for concurrent
// use. Callers only read the values they get, which are shared.
type Map[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int
}

// New returns a Map of at most max values.
func New[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{m: map[K]V{}, max: max}
}

// Get returns the value kept for k, if any.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put keeps v for k, first forgetting every value when the map is full.
func (c *Map[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		c.m = map[K]V{}
	}
	c.m[k] = v
}
