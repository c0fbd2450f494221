package llm

import (
	"context"
	"strings"
	"sync"
)

// limiter bounds the requests in flight to one endpoint. Unlike a channel
// semaphore its limit can grow, so the largest Concurrency configured for a
// URL wins whatever order the roles are built in.
type limiter struct {
	mu      sync.Mutex
	limit   int
	inUse   int
	waiters []chan struct{}
}

var (
	limitersMu sync.Mutex
	limiters   = map[string]*limiter{}
)

// endpointLimiter returns the limiter shared by every Client of baseURL,
// raising its limit to n if n is larger.
func endpointLimiter(baseURL string, n int) *limiter {
	key := strings.TrimRight(baseURL, "/")
	limitersMu.Lock()
	l, ok := limiters[key]
	if !ok {
		l = &limiter{}
		limiters[key] = l
	}
	limitersMu.Unlock()
	l.raise(n)
	return l
}

func (l *limiter) raise(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n <= l.limit {
		return
	}
	l.limit = n
	for len(l.waiters) > 0 && l.inUse < l.limit {
		l.inUse++
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
	}
}

func (l *limiter) acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.inUse < l.limit && len(l.waiters) == 0 {
		l.inUse++
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				return ctx.Err()
			}
		}
		// The slot was granted while we gave up: pass it on.
		l.releaseLocked()
		return ctx.Err()
	}
}

func (l *limiter) release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

// releaseLocked hands the slot straight to the oldest waiter, so waiters are
// served in order and none is starved by newcomers.
func (l *limiter) releaseLocked() {
	if len(l.waiters) > 0 {
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
		return
	}
	l.inUse--
}
