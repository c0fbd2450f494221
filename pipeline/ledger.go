package pipeline

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// LedgerDir is the run directory's spend ledger: with an engine that runs
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

// Ledger is the spend ledger of a run directory: one append-only file per
// attempt, one line per call, written as the call completes. A process
// killed mid-attempt keeps the calls it recorded; an attempt retried
// writes its own file, so calls a failed attempt was billed for count too.
type Ledger struct{ dir string }

// OpenLedger returns the ledger of runDir.
func OpenLedger(runDir string) *Ledger { return &Ledger{dir: filepath.Join(runDir, LedgerDir)} }

// Writer returns the writer of key's attempt.
func (l *Ledger) Writer(key LedgerKey) *LedgerWriter {
	b, _ := json.Marshal(key)
	h := sha256.Sum256(b)
	return &LedgerWriter{key: key, path: filepath.Join(l.dir, hex.EncodeToString(h[:12])+".jsonl")}
}

// Sum is the spend of every entry, each counted once, summed in key order
// so the total does not depend on the order files are read in.
func (l *Ledger) Sum() (Spend, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return Spend{}, nil
	}
	if err != nil {
		return Spend{}, fmt.Errorf("read ledger: %w", err)
	}
	seen := map[string]LedgerEntry{}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".jsonl" {
			continue
		}
		if err := readLedgerFile(filepath.Join(l.dir, e.Name()), seen); err != nil {
			return Spend{}, err
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	var s Spend
	for _, k := range keys {
		s = s.Add(seen[k].Spend)
	}
	return s, nil
}

// readLedgerFile adds path's entries to seen. A last line without its
// newline was torn by a killed writer and is left out: its call was not
// recorded as complete.
func readLedgerFile(path string, seen map[string]LedgerEntry) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	for n := 1; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		line := b[:i]
		b = b[i+1:]
		var e LedgerEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		k, _ := json.Marshal(struct {
			LedgerKey
			Request int
		}{e.LedgerKey, e.Request})
		seen[string(k)] = e
	}
	return nil
}

// LedgerWriter appends the entries of one attempt.
type LedgerWriter struct {
	key  LedgerKey
	path string
	mu   sync.Mutex
	next int
}

// Record appends one call's usage as one line (one write, so a crash
// tears at most the last line).
func (w *LedgerWriter) Record(s Spend) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := LedgerEntry{LedgerKey: w.key, Request: w.next, Spend: s}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	w.next++
	return nil
}

// meterLedger is a meter's ledger: the writer of its attempt, the whole
// ledger it sums (nil for a worker's meter, which counts its attempt
// only) and the sum so far.
type meterLedger struct {
	w   *LedgerWriter
	l   *Ledger
	sum Spend
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
	s, err := m.ledger.l.Sum()
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ledger.sum = s
	m.mu.Unlock()
	return nil
}

// begin records a request about to be sent, before it is sent: a process
// killed while it is in flight has it counted (the endpoint may have
// billed it). The call's completion records the rest of its spend, less
// this request (record's callers in the meter). Without a ledger it does
// nothing.
func (m *Meter) begin() { m.record(Spend{Requests: 1}) }

// record writes one call's spend to the ledger, if any. A call the ledger
// could not record is still counted in this process (and logged).
func (m *Meter) record(s Spend) {
	if m.ledger == nil {
		return
	}
	if err := m.ledger.w.Record(s); err != nil {
		slog.Warn("could not record a call in the spend ledger", "err", err)
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
