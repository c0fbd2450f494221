package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
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
			c := priced(t, 100, 100) // $0.01 a call
			for range tc.calls {
				m.add(c, call, call.Usage)
			}
			for range tc.cached {
				m.add(c, llm.Response{Cached: true, Usage: call.Usage}, call.Usage)
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
	c := priced(t, 250000, 0) // $0.25 a call
	one := llm.Usage{PromptTokens: 1}
	m.add(c, llm.Response{Usage: one}, one)
	m.add(c, llm.Response{Usage: one}, one)
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
	again.add(c, llm.Response{Usage: one}, one)
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

// priced is a client at the given USD per million prompt and completion
// tokens, for counting calls the test makes up; it sends nothing.
func priced(t *testing.T, in, out float64) *llm.Client {
	t.Helper()
	c, err := llm.NewClient("agent", llm.RoleConfig{BaseURL: "http://127.0.0.1:9/v1", Model: "m", PriceIn: in, PriceOut: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The spend is the same bytes whatever order the calls of roles at
// different prices complete in, as it is in a run with concurrent calls.
// These calls' costs sum to different floats forwards and backwards.
func TestMeterCostIndependentOfOrder(t *testing.T) {
	// The server answers a call with the token counts its message names.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		var u llm.Usage
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if _, err := fmt.Sscan(req.Messages[0].Content, &u.PromptTokens, &u.CompletionTokens); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "ok"}}},
			"usage":   map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens},
		})
	}))
	t.Cleanup(srv.Close)
	type call struct {
		role string
		u    llm.Usage
	}
	calls := []call{
		{"agent", llm.Usage{PromptTokens: 464, CompletionTokens: 47}},
		{"compressor", llm.Usage{PromptTokens: 696, CompletionTokens: 185}},
		{"agent", llm.Usage{PromptTokens: 1386, CompletionTokens: 377}},
		{"compressor", llm.Usage{PromptTokens: 2525, CompletionTokens: 129}},
	}
	spend := func(order []call) []byte {
		m, err := NewMeter(Budget{USD: 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		clients := map[string]*Metered{}
		for role, p := range map[string][2]float64{"agent": {3, 15}, "compressor": {0.5, 1.5}} {
			c, err := llm.NewClient(role, llm.RoleConfig{BaseURL: srv.URL + "/v1", Model: "m", PriceIn: p[0], PriceOut: p[1], MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			clients[role] = m.Wrap(c)
		}
		for _, c := range order {
			msg := fmt.Sprintf("%d %d", c.u.PromptTokens, c.u.CompletionTokens)
			if _, err := clients[c.role].Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: msg}}}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := json.Marshal([]Spend{m.Snapshot(), m.ThisRun()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backward := slices.Clone(calls)
	slices.Reverse(backward)
	if fwd, back := spend(calls), spend(backward); !bytes.Equal(fwd, back) {
		t.Fatalf("the spend depends on the order of the calls:\n%s\n%s", fwd, back)
	}
}
