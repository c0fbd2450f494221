package pipeline

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

func TestMeterBudget(t *testing.T) {
	call := llm.Response{Usage: llm.Usage{PromptTokens: 60, CompletionTokens: 40}}
	tests := []struct {
		name   string
		budget Budget
		calls  int // uncached calls made before the check
		cached int
		want   bool // ErrBudget expected
	}{
		{name: "no budget", budget: Budget{}, calls: 50},
		{name: "calls below the limit", budget: Budget{LLMCalls: 3}, calls: 2},
		{name: "calls at the limit", budget: Budget{LLMCalls: 3}, calls: 3, want: true},
		{name: "cached answers cost nothing", budget: Budget{LLMCalls: 3}, calls: 2, cached: 10},
		{name: "tokens at the limit", budget: Budget{Tokens: 300}, calls: 3, want: true},
		{name: "tokens below the limit", budget: Budget{Tokens: 301}, calls: 3},
		{name: "dollars at the limit", budget: Budget{USD: 0.02}, calls: 2, want: true},
		{name: "dollars below the limit", budget: Budget{USD: 0.02}, calls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMeter(tc.budget, "")
			if err != nil {
				t.Fatal(err)
			}
			for range tc.calls {
				m.add(call, 0.01)
			}
			for range tc.cached {
				m.add(llm.Response{Cached: true, Usage: call.Usage}, 0.01)
			}
			err = m.check()
			if got := errors.Is(err, ErrBudget); got != tc.want {
				t.Fatalf("check: %v, want budget error %v", err, tc.want)
			}
			s := m.Snapshot()
			if s.Calls != tc.calls || s.CacheHits != tc.cached || s.Tokens != 100*tc.calls {
				t.Fatalf("spend %+v", s)
			}
		})
	}
}

// The spend of an earlier invocation counts against the budget, and
// ThisRun leaves it out.
func TestMeterPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spent.json")
	m, err := NewMeter(Budget{LLMCalls: 3}, path)
	if err != nil {
		t.Fatal(err)
	}
	m.add(llm.Response{Usage: llm.Usage{PromptTokens: 1}}, 0.25)
	m.add(llm.Response{Usage: llm.Usage{PromptTokens: 1}}, 0.25)
	if err := m.Persist(); err != nil {
		t.Fatal(err)
	}
	again, err := NewMeter(Budget{LLMCalls: 3}, path)
	if err != nil {
		t.Fatal(err)
	}
	if s := again.Snapshot(); s.Calls != 2 || s.CostUSD != 0.5 {
		t.Fatalf("resumed spend %+v", s)
	}
	if err := again.check(); err != nil {
		t.Fatalf("2 of 3 calls: %v", err)
	}
	again.add(llm.Response{Usage: llm.Usage{PromptTokens: 1}}, 0.25)
	if err := again.check(); !errors.Is(err, ErrBudget) {
		t.Fatalf("3 of 3 calls over two invocations: %v", err)
	}
	if tr := again.ThisRun(); tr.Calls != 1 || tr.CostUSD != 0.25 {
		t.Fatalf("this run %+v", tr)
	}
	if _, err := NewMeter(Budget{}, filepath.Join(t.TempDir(), "missing.json")); err != nil {
		t.Fatalf("no earlier spend: %v", err)
	}
}

// A metered client stops at the budget before calling the model, and
// counts the calls it lets through.
func TestMeteredStopsAtBudget(t *testing.T) {
	m, mc := meteredSim(t, "agent", nil)
	req := llm.Request{Purpose: llm.PurposeAgent, Messages: []llm.Message{{Role: "user", Content: "Answer all 1 questions below.\nQ1: What is the capital of Veloria?"}}}
	for i := range 2 {
		if _, err := mc.Complete(context.Background(), req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := mc.Complete(context.Background(), req); !errors.Is(err, ErrBudget) {
		t.Fatalf("third call: %v, want the budget error", err)
	}
	if s := m.Snapshot(); s.Calls != 2 || s.Tokens == 0 {
		t.Fatalf("spend %+v", s)
	}
}

// Embedding calls count against the budget like every other role's: a
// paid call counts its fresh tokens, one answered wholly from the cache is
// a cache hit, and the budget stops the next call before it is sent.
func TestMeteredEmbed(t *testing.T) {
	cache, err := llm.OpenCache(filepath.Join(t.TempDir(), "llm.db"), llm.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	m, mc := meteredSim(t, "embedder", cache)
	ctx := context.Background()
	steps := []struct {
		texts         []string
		calls, hits   int
		tokensGrew    bool
		budgetReached bool
	}{
		{texts: []string{"the capital of Veloria", "a river"}, calls: 1, tokensGrew: true},
		{texts: []string{"the capital of Veloria", "a river"}, calls: 1, hits: 1},
		{texts: nil, calls: 1, hits: 1},
		{texts: []string{"a river", "a mountain"}, calls: 2, hits: 1, tokensGrew: true},
		{texts: []string{"a lake"}, calls: 2, hits: 1, budgetReached: true},
	}
	tokens := 0
	for i, st := range steps {
		vecs, _, err := mc.Embed(ctx, st.texts)
		if st.budgetReached {
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("step %d: %v, want the budget error", i, err)
			}
		} else if err != nil || len(vecs) != len(st.texts) {
			t.Fatalf("step %d: %d vectors, %v", i, len(vecs), err)
		}
		s := m.Snapshot()
		if s.Calls != st.calls || s.CacheHits != st.hits || (s.Tokens > tokens) != st.tokensGrew {
			t.Fatalf("step %d: spend %+v after %d tokens", i, s, tokens)
		}
		tokens = s.Tokens
	}
}

// meteredSim is a client of role on the embedded model, metered with a
// budget of two calls.
func meteredSim(t *testing.T, role string, cache *llm.Cache) (*Meter, *Metered) {
	t.Helper()
	h, err := sim.NewHandler(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := llm.NewClient(role, llm.RoleConfig{BaseURL: srv.URL + "/v1", Model: "sim", MaxRetries: -1}, cache)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMeter(Budget{LLMCalls: 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	return m, m.Wrap(c)
}
