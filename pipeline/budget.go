package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ctxopt/ctxopt/llm"
)

// ErrBudget is returned when a job's budget is spent. The run stops
// cleanly: finished work is kept and a re-run with a larger budget resumes,
// answering repeated calls from the cache.
var ErrBudget = errors.New("budget reached")

// Spend is what LLM calls used.
type Spend struct {
	Calls     int     `json:"calls"` // calls that reached an endpoint
	CacheHits int     `json:"cache_hits"`
	Tokens    int     `json:"tokens"`
	CostUSD   float64 `json:"cost_usd"`
}

// Sub returns s − o.
func (s Spend) Sub(o Spend) Spend {
	return Spend{s.Calls - o.Calls, s.CacheHits - o.CacheHits, s.Tokens - o.Tokens, s.CostUSD - o.CostUSD}
}

// Meter counts the spend of every role and enforces the job's budget.
// Cached answers cost nothing and do not count against it.
type Meter struct {
	budget Budget
	mu     sync.Mutex
	spent  Spend
}

// NewMeter returns a meter enforcing b.
func NewMeter(b Budget) *Meter { return &Meter{budget: b} }

// Snapshot returns the spend so far.
func (m *Meter) Snapshot() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent
}

func (m *Meter) check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, s := m.budget, m.spent
	switch {
	case b.LLMCalls > 0 && s.Calls >= b.LLMCalls:
		return fmt.Errorf("%w: %d LLM calls of budget.llm_calls %d", ErrBudget, s.Calls, b.LLMCalls)
	case b.Tokens > 0 && s.Tokens >= b.Tokens:
		return fmt.Errorf("%w: %d tokens of budget.tokens %d", ErrBudget, s.Tokens, b.Tokens)
	case b.USD > 0 && s.CostUSD >= b.USD:
		return fmt.Errorf("%w: $%.4f of budget.usd $%.4f", ErrBudget, s.CostUSD, b.USD)
	}
	return nil
}

func (m *Meter) add(resp llm.Response, cost float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if resp.Cached {
		m.spent.CacheHits++
		return
	}
	m.spent.Calls++
	m.spent.Tokens += resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	m.spent.CostUSD += cost
}

// Metered is a client whose calls the meter counts and stops at the budget.
// A call already in flight when the budget runs out still completes, so
// the budget can be exceeded by at most the calls in flight.
type Metered struct {
	*llm.Client
	meter *Meter
}

// Meter wraps c.
func (m *Meter) Wrap(c *llm.Client) *Metered { return &Metered{Client: c, meter: m} }

// Complete checks the budget, then calls the model.
func (c *Metered) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := c.meter.check(); err != nil {
		return llm.Response{}, err
	}
	resp, err := c.Client.Complete(ctx, req)
	if err == nil {
		c.meter.add(resp, c.Cost(resp.Usage))
	}
	return resp, err
}
