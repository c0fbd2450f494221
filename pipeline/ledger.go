package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptrace"
	"net/url"
	"slices"
	"sync"

	"github.com/ctxopt/ctxopt/llm"
)

// LedgerDir is the run store's spend ledger: with an engine that runs
// work in other processes, every LLM call's usage is recorded there once,
// and the run's spent.json is computed from it.
const LedgerDir = "ledger"

// LedgerKey names one attempt of one piece of work: an activity's attempt
// in a workflow, or a driver's invocation (activity "local").
type LedgerKey struct {
	Workflow string `json:"workflow"`
	Activity string `json:"activity"`
	Attempt  int    `json:"attempt"`
}

// LedgerEntry is one call's usage; (key, request) identifies it, so an
// entry written twice counts once.
type LedgerEntry struct {
	LedgerKey
	Request int `json:"request"`
	Spend
}

// Ledger is the spend ledger of a run: one object per call, under its
// attempt's prefix, written as the call completes. A process killed
// mid-attempt keeps the calls it recorded; an attempt retried writes under
// its own prefix, so calls a failed attempt was billed for count too, and
// an entry written twice is one object, counted once.
type Ledger struct {
	s    *RunStore
	mu   sync.Mutex
	seen map[string]Spend // entries read so far (an entry never changes)
}

// OpenLedger returns the ledger of the run store s.
func OpenLedger(s *RunStore) *Ledger { return &Ledger{s: s, seen: map[string]Spend{}} }

// Writer returns the writer of key's attempt.
func (l *Ledger) Writer(key LedgerKey) *LedgerWriter {
	b, _ := json.Marshal(key)
	h := sha256.Sum256(b)
	return &LedgerWriter{key: key, s: l.s, prefix: LedgerDir + "/" + hex.EncodeToString(h[:12]) + "/"}
}

// Sum is the spend of every entry, each counted once, summed in key order
// so the total does not depend on the order they were listed in.
func (l *Ledger) Sum(ctx context.Context) (Spend, error) {
	keys, err := l.s.List(ctx, LedgerDir+"/")
	if err != nil {
		return Spend{}, fmt.Errorf("read ledger: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if _, ok := l.seen[k]; ok {
			continue
		}
		b, err := l.s.Get(ctx, k)
		if err != nil {
			return Spend{}, fmt.Errorf("read ledger: %w", err)
		}
		var e LedgerEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return Spend{}, fmt.Errorf("ledger %s: %w", k, err)
		}
		l.seen[k] = e.Spend
	}
	slices.Sort(keys)
	var s Spend
	for _, k := range keys {
		s = s.Add(l.seen[k])
	}
	return s, nil
}

// LedgerWriter writes the entries of one attempt.
type LedgerWriter struct {
	key    LedgerKey
	s      *RunStore
	prefix string
	mu     sync.Mutex
	next   int
}

// Record writes one call's usage as its own object.
func (w *LedgerWriter) Record(s Spend) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The write completes even when the work it records was cancelled.
	if err := w.put(context.Background(), w.next, s); err != nil {
		return err
	}
	w.next++
	return nil
}

// reserve takes the next request number for an entry another process
// writes (the metering proxy, meterproxy.go), so that it and this
// writer's own entries never share an object.
func (w *LedgerWriter) reserve() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.next
	w.next++
	return n
}

// put writes the entry of request n: the same (key, request) is the same
// object, so an entry written again still counts once.
func (w *LedgerWriter) put(ctx context.Context, n int, s Spend) error {
	b, err := json.Marshal(LedgerEntry{LedgerKey: w.key, Request: n, Spend: s})
	if err != nil {
		return err
	}
	if err := w.s.Put(ctx, fmt.Sprintf("%s%08d.json", w.prefix, n), b); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// meterLedger is a meter's ledger: the writer of its attempt, the whole
// ledger it sums (nil for a worker's meter, which counts its attempt
// only) and the sum so far.
type meterLedger struct {
	w   *LedgerWriter
	l   *Ledger
	sum Spend
	// proxy, when set, is the metering proxy the calls' requests go
	// through: it records their requests and tokens (meterproxy.go), and
	// this process the rest.
	proxy *url.URL
	// published is what workers spent on the rollouts published since
	// (recordsEngine): the stages' manifests count it, the run's spend
	// (sum) has it already.
	published Spend
}

// published adds s, what workers spent on a rollout now published, to
// the spend the stages' manifests count.
func (m *Meter) published(s Spend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledger.published = m.ledger.published.Add(s)
}

// stageSpend is the spend a stage's manifest counts the difference of:
// the meter's, with what workers spent on the rollouts published.
func (m *Meter) stageSpend() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spent()
	if m.ledger != nil {
		s = s.Add(m.ledger.published)
	}
	return s
}

// UseLedger makes the meter record each call in l under key and take its
// spend (and budget) from the whole ledger.
func (m *Meter) UseLedger(l *Ledger, key LedgerKey) error {
	m.ledger = &meterLedger{w: l.Writer(key), l: l}
	return m.Refresh()
}

// NewAttemptMeter returns a meter without a budget that records one
// attempt's calls under key; its spend is the attempt's.
func NewAttemptMeter(l *Ledger, key LedgerKey) *Meter {
	m, _ := NewMeter(Budget{}, "")
	m.ledger = &meterLedger{w: l.Writer(key)}
	return m
}

// Refresh reads the ledger's total again (work other processes did);
// without a ledger it does nothing.
func (m *Meter) Refresh() error {
	if m.ledger == nil || m.ledger.l == nil {
		return nil
	}
	s, err := m.ledger.l.Sum(context.Background())
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ledger.sum = s
	m.mu.Unlock()
	return nil
}

// traced returns ctx with, when the meter keeps a ledger, a trace that
// records each HTTP request (every attempt of a call, retries too) before
// its first byte goes out: the entry is written when the request has its
// connection, and taken back (a -1 entry) when writing the request fails.
// A process killed once the request is written has it counted, as the
// endpoint will serve it. One killed while the entry is being written, or
// between the entry and the write, leaves a request counted that the
// endpoint never saw: the ledger may count one too many per call in
// flight at a kill, never one too few (recorded after the write instead,
// a kill during the ledger's write lost a request the endpoint served).
//
// With a metering proxy, base's requests go through it instead, each
// named by its attempt's key and a request number of its own: the proxy
// records each where the endpoint answers it, and no process's death
// between the two can part them.
func (m *Meter) traced(ctx context.Context, base string) context.Context {
	if m.ledger == nil {
		return ctx
	}
	if m.ledger.proxy != nil {
		return llm.WithProxy(ctx, meterRoute(m.ledger.proxy, base, m.ledger.w))
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { m.record(Spend{Requests: 1}) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				m.record(Spend{Requests: -1})
			}
		},
	})
}

// record writes one call's spend to the ledger, if any. A call the ledger
// could not record is still counted in this process (and logged).
//
// Through a metering proxy, the requests and tokens of s are the proxy's
// to record: they are counted here (the attempt's spend) but not written.
func (m *Meter) record(s Spend) {
	if m.ledger == nil {
		return
	}
	w := s
	if m.ledger.proxy != nil {
		w.Requests, w.Tokens = 0, 0
	}
	if w != (Spend{}) {
		if err := m.ledger.w.Record(w); err != nil {
			slog.Warn("could not record a call in the spend ledger", "err", err)
		}
	}
	m.mu.Lock()
	m.ledger.sum = m.ledger.sum.Add(s)
	m.mu.Unlock()
}

// Reached reports, as an ErrBudget error, whether s has reached b.
func (b Budget) Reached(s Spend) error {
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
