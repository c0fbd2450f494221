package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// ErrBudget is returned when a job's budget is spent. The run stops
// cleanly: finished work is kept and a re-run with a larger budget resumes,
// answering repeated calls from the cache.
var ErrBudget = errors.New("budget reached")

// Spend is what LLM calls used.
type Spend struct {
	Calls int `json:"calls"` // calls that reached an endpoint
	// Requests counts every request sent: each call's retries, and the
	// attempts of calls that failed in the end.
	Requests  int     `json:"requests"`
	CacheHits int     `json:"cache_hits"`
	Tokens    int     `json:"tokens"`
	CostUSD   float64 `json:"cost_usd"`
}

// Sub returns s − o.
func (s Spend) Sub(o Spend) Spend {
	return Spend{Calls: s.Calls - o.Calls, Requests: s.Requests - o.Requests, CacheHits: s.CacheHits - o.CacheHits, Tokens: s.Tokens - o.Tokens, CostUSD: s.CostUSD - o.CostUSD}
}

// Add is the spend of s and o together.
func (s Spend) Add(o Spend) Spend {
	return Spend{Calls: s.Calls + o.Calls, Requests: s.Requests + o.Requests, CacheHits: s.CacheHits + o.CacheHits, Tokens: s.Tokens + o.Tokens, CostUSD: s.CostUSD + o.CostUSD}
}

// Meter counts the spend of every role and enforces the job's budget.
// Cached answers cost nothing and do not count against it. The spend of
// earlier invocations of the same run counts too, so re-running a stopped
// job does not reset its budget.
type Meter struct {
	budget Budget
	path   string // where the spend is kept between invocations ("" none)
	// journalMu orders the journal writes, so the file only grows.
	journalMu sync.Mutex
	mu        sync.Mutex
	before    Spend // spent by earlier invocations
	run       Spend // spent by this one, but for its CostUSD
	// billed sums this invocation's uncached tokens per client, priced at
	// the snapshot: a float sum of each call's cost would round differently
	// with the order concurrent calls complete in.
	billed map[*llm.Client]llm.Usage
	// started is when this invocation began: a stage finished since was
	// run by it, not taken from an earlier run.
	started time.Time
	// ledger, when set, records every call once (ledger.go) and the spend
	// is the ledger's: an engine runs work in other processes.
	ledger *meterLedger
}

// NewMeter returns a meter enforcing b, starting from the spend recorded in
// path by earlier invocations (path may be empty).
func NewMeter(b Budget, path string) (*Meter, error) {
	m := &Meter{budget: b, path: path, billed: make(map[*llm.Client]llm.Usage), started: time.Now().UTC()}
	if path == "" {
		return m, nil
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return m, nil
	case err != nil:
		return nil, fmt.Errorf("read spend: %w", err)
	}
	if err := json.Unmarshal(data, &m.before); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Persist records the spend so far for later invocations.
func (m *Meter) Persist() error {
	if m.path == "" {
		return nil
	}
	return rollout.WriteJSON(m.path, m.Snapshot())
}

// ThisRun is what this invocation spent.
func (m *Meter) ThisRun() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.thisRun()
}

// Snapshot returns the spend so far.
func (m *Meter) Snapshot() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent()
}

// spent is the spend so far; m.mu is held.
func (m *Meter) spent() Spend {
	if m.ledger != nil {
		return m.ledger.sum
	}
	return m.before.Add(m.thisRun())
}

// thisRun prices this invocation's tokens, summing the clients' costs in
// ascending order so the total does not depend on the map's order; m.mu
// is held.
func (m *Meter) thisRun() Spend {
	costs := make([]float64, 0, len(m.billed))
	for c, u := range m.billed {
		costs = append(costs, c.Cost(u))
	}
	slices.Sort(costs)
	s := m.run
	for _, c := range costs {
		s.CostUSD += c
	}
	return s
}

func (m *Meter) check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.Reached(m.spent())
}

// add counts a call of c that used resp.Usage tokens, of which billed were
// paid for.
func (m *Meter) add(c *llm.Client, resp llm.Response, billed llm.Usage) {
	m.mu.Lock()
	if resp.Cached {
		m.run.CacheHits++
		m.mu.Unlock()
		m.record(Spend{CacheHits: 1})
		return
	}
	m.run.Calls++
	m.run.Requests += 1 + resp.Retries
	m.run.Tokens += resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	u := m.billed[c]
	u.PromptTokens += billed.PromptTokens
	u.CompletionTokens += billed.CompletionTokens
	m.billed[c] = u
	proxied := m.ledger != nil && m.ledger.proxy != nil
	m.mu.Unlock()
	// Its requests were recorded as they were sent (traced); through a
	// metering proxy, this process counts them, and the proxy records them.
	s := Spend{Calls: 1, Tokens: resp.Usage.PromptTokens + resp.Usage.CompletionTokens, CostUSD: c.Cost(billed)}
	if proxied {
		s.Requests = 1 + resp.Retries
	}
	m.record(s)
	m.journal()
}

// failed counts the requests of a call that failed.
func (m *Meter) failed(err error) {
	n := llm.Attempts(err)
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.run.Requests += n
	proxied := m.ledger != nil && m.ledger.proxy != nil
	m.mu.Unlock()
	if proxied {
		m.record(Spend{Requests: n}) // counted here, recorded by the proxy
	}
	m.journal() // a ledger has its requests: they were recorded as sent
}

// journal records the spend as each paid call completes, so a crash (even
// kill -9) loses at most the calls in flight. The rename is not synced: a
// killed process's writes survive in the page cache, and a synced write per
// call would throttle the run.
func (m *Meter) journal() {
	if m.path == "" {
		return
	}
	m.journalMu.Lock()
	defer m.journalMu.Unlock()
	b, err := json.Marshal(m.Snapshot())
	if err == nil {
		tmp := m.path + atomicfile.TempSuffix + "journal"
		if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
			err = os.Rename(tmp, m.path)
		}
	}
	if err != nil {
		slog.Warn("could not record the spend; the budget still holds in this run", "path", m.path, "err", err)
	}
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
	resp, err := c.Client.Complete(c.meter.traced(ctx, c.Client.BaseURL()), req)
	if err == nil {
		c.meter.add(c.Client, resp, resp.Usage)
	} else {
		c.meter.failed(err)
	}
	return resp, err
}

// Embed checks the budget, then embeds texts. A call answered wholly from
// the cache costs nothing, like a cached completion.
func (c *Metered) Embed(ctx context.Context, texts []string) ([][]float32, llm.Usage, error) {
	if err := c.meter.check(); err != nil {
		return nil, llm.Usage{}, err
	}
	e, err := c.Client.Embeddings(c.meter.traced(ctx, c.Client.BaseURL()), texts)
	switch {
	case err != nil:
		c.meter.failed(err)
		return nil, llm.Usage{}, err
	case len(texts) > 0:
		c.meter.add(c.Client, llm.Response{Usage: e.Fresh, Cached: e.Cached, Retries: e.Retries}, e.Fresh)
	}
	return e.Vectors, e.Usage, nil
}
