package llm

import (
	"errors"
	"sync"
)

// Stats sums a client's calls since it was built.
type Stats struct {
	// Calls counts requests answered, from the server or the cache.
	Calls int64 `json:"calls"`
	// CacheHits counts calls answered wholly from the cache, with no request.
	CacheHits int64 `json:"cache_hits"`
	// Retries counts failed attempts that were retried.
	Retries int64 `json:"retries"`
	// Failures counts calls that returned an error; Unavailable those of
	// them that wrap ErrUnavailable.
	Failures    int64 `json:"failures"`
	Unavailable int64 `json:"unavailable"`
	// Malformed counts replies that could not be used as asked (see
	// MalformedKind); they are among Calls.
	Malformed int64 `json:"malformed"`
	// Token counts include cache hits; CostUSD does not, since a hit spends
	// no money. CostUSD prices the sum of the billed tokens, so it does not
	// depend on the order the calls completed in.
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// stats is the mutable, lock-guarded form of Stats. A mutex rather than
// atomics keeps the counts consistent with each other. Cost is kept as the
// billed (uncached) token sums, integers, and priced at the snapshot: a
// float sum of each call's cost would round differently with the order
// concurrent calls complete in, and two identical runs would differ.
type stats struct {
	mu     sync.Mutex
	s      Stats
	billed Usage
}

func (st *stats) snapshot(price func(Usage) float64) Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.CostUSD = price(st.billed)
	return s
}

// answered counts a call that used u tokens, of which billed were paid for.
func (st *stats) answered(u, billed Usage, cached bool, retries int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Calls++
	if cached {
		st.s.CacheHits++
	}
	st.s.Retries += int64(retries)
	st.s.PromptTokens += int64(u.PromptTokens)
	st.s.CompletionTokens += int64(u.CompletionTokens)
	st.billed.PromptTokens += billed.PromptTokens
	st.billed.CompletionTokens += billed.CompletionTokens
}

func (st *stats) failed(err error, retries int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Failures++
	if errors.Is(err, ErrUnavailable) {
		st.s.Unavailable++
	}
	st.s.Retries += int64(retries)
}

func (st *stats) malformed() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Malformed++
}
