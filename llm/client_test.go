package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/internal/logtest"
)

func TestRequestBody(t *testing.T) {
	const key = "sk-test-secret-123"
	t.Setenv("CTXOPT_TEST_KEY", key)
	tests := []struct {
		name        string
		temperature float64
		seed        *int
		purpose     Purpose
		sample      int
		wantTemp    string
		wantSeed    string // "" means absent
		wantRole    string
		wantSample  string
	}{
		{name: "zero temperature and seed", temperature: 0, seed: intp(42), wantTemp: "0", wantSeed: "42", wantRole: "agent"},
		{name: "zero seed kept", temperature: 0, seed: intp(0), purpose: PurposeCompressor, wantTemp: "0", wantSeed: "0", wantRole: "compressor"},
		{name: "no seed", temperature: 0.7, purpose: PurposeJudge, sample: 3, wantTemp: "0.7", wantRole: "judge", wantSample: "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil)
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", KeyEnv: "CTXOPT_TEST_KEY",
				Temperature: tt.temperature, Seed: tt.seed}, nil)
			req := Request{Purpose: tt.purpose, Sample: tt.sample, Messages: []Message{
				{Role: "system", Content: "be brief"},
				{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "look", Arguments: `{"x":1}`}}},
				{Role: "tool", ToolCallID: "c1", Content: ""},
			}, Tools: []Tool{{Name: "look", Description: "looks", Parameters: json.RawMessage(`{"type":"object"}`)}}}
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			body, h := f.body(0), f.header(0)
			if got := string(body["temperature"]); got != tt.wantTemp {
				t.Errorf("temperature = %q, want %q", got, tt.wantTemp)
			}
			if got := string(body["seed"]); got != tt.wantSeed {
				t.Errorf("seed = %q, want %q", got, tt.wantSeed)
			}
			if _, ok := body["n"]; ok {
				t.Errorf("n sent: %s", body["n"])
			}
			if got := h.Get(RoleHeader); got != tt.wantRole {
				t.Errorf("%s = %q, want %q", RoleHeader, got, tt.wantRole)
			}
			if got := h.Get(SampleHeader); got != tt.wantSample {
				t.Errorf("%s = %q, want %q", SampleHeader, got, tt.wantSample)
			}
			if got := h.Get("Authorization"); got != "Bearer "+key {
				t.Errorf("Authorization = %q", got)
			}
			var msgs []map[string]json.RawMessage
			if err := json.Unmarshal(body["messages"], &msgs); err != nil {
				t.Fatal(err)
			}
			if got := string(msgs[2]["content"]); got != `""` {
				t.Errorf("empty tool content sent as %q, want \"\"", got)
			}
			var tools []struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(body["tools"], &tools); err != nil {
				t.Fatal(err)
			}
			if len(tools) != 1 || tools[0].Type != "function" || tools[0].Function.Name != "look" {
				t.Errorf("tools = %s", body["tools"])
			}
		})
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	const key = "sk-leaky-key-456"
	t.Setenv("CTXOPT_TEST_KEY", key)
	echo := func(code int) fault {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"bad key %s","type":"auth"}}`, r.Header.Get("Authorization"))
		}
	}
	tests := []struct {
		name string
		code int
	}{{"not retried", 401}, {"exhausted", 503}}
	logs := logtest.Capture(t, slog.LevelDebug)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			f := newFake(t, func(f *fake) { f.always = echo(tt.code) })
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", KeyEnv: "CTXOPT_TEST_KEY", MaxRetries: 1}, nil)
			_, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("key in error: %v", err)
			}
			if !strings.Contains(err.Error(), "[REDACTED]") {
				t.Errorf("server message lost: %v", err)
			}
			if !strings.Contains(logs.String(), "llm attempt") || strings.Contains(logs.String(), key) {
				t.Errorf("debug log lacks attempts or holds the key:\n%s", logs.String())
			}
		})
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name        string
		faults      []fault
		always      fault
		maxRetries  int
		timeout     time.Duration
		minElapsed  time.Duration
		wantCalls   int64
		wantRetries int64
		wantErr     bool
		unavailable bool
	}{
		{name: "429 honours Retry-After", faults: []fault{status(429, "1")}, minElapsed: 900 * time.Millisecond, wantCalls: 2, wantRetries: 1},
		{name: "500 retried", faults: []fault{status(500, "")}, wantCalls: 2, wantRetries: 1},
		{name: "502 and 503 retried", faults: []fault{status(502, ""), status(503, "")}, wantCalls: 3, wantRetries: 2},
		{name: "400 not retried", faults: []fault{status(400, "")}, wantCalls: 1, wantErr: true},
		{name: "404 not retried", faults: []fault{status(404, "")}, wantCalls: 1, wantErr: true},
		{name: "attempt timeout retried", faults: []fault{stall}, timeout: 300 * time.Millisecond, wantCalls: 2, wantRetries: 1},
		{name: "malformed body retried", faults: []fault{malformed}, wantCalls: 2, wantRetries: 1},
		{name: "hang-up retried", faults: []fault{hangUp}, wantCalls: 2, wantRetries: 1},
		{name: "exhausted", always: status(503, ""), maxRetries: 2, wantCalls: 3, wantRetries: 2, wantErr: true, unavailable: true},
		{name: "exhausted by timeouts", always: stall, maxRetries: 1, timeout: 100 * time.Millisecond, wantCalls: 2, wantRetries: 1, wantErr: true, unavailable: true},
		{name: "retries disabled", always: status(500, ""), maxRetries: -1, wantCalls: 1, wantErr: true, unavailable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(f *fake) { f.faults, f.always = tt.faults, tt.always })
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", MaxRetries: tt.maxRetries, Timeout: tt.timeout}, nil)
			start := time.Now()
			resp, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")})
			elapsed := time.Since(start)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := errors.Is(err, ErrUnavailable); got != tt.unavailable {
				t.Errorf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, got, tt.unavailable)
			}
			if tt.unavailable {
				u, _ := url.Parse(f.srv.URL)
				if !strings.Contains(err.Error(), u.Host) {
					t.Errorf("error %q does not name the endpoint %s", err, u.Host)
				}
			}
			if got := f.calls.Load(); got != tt.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tt.wantCalls)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("took %v, want at least %v", elapsed, tt.minElapsed)
			}
			st := c.Stats()
			if st.Retries != tt.wantRetries {
				t.Errorf("Stats.Retries = %d, want %d", st.Retries, tt.wantRetries)
			}
			if !tt.wantErr && (resp.Retries != int(tt.wantRetries) || st.Calls != 1 || st.Failures != 0) {
				t.Errorf("resp.Retries = %d, stats %+v", resp.Retries, st)
			}
			if tt.wantErr && (st.Failures != 1 || st.Calls != 0 || (st.Unavailable == 1) != tt.unavailable) {
				t.Errorf("stats %+v after failure", st)
			}
		})
	}
}

func TestParentCancelStopsRetrying(t *testing.T) {
	f := newFake(t, func(f *fake) { f.always = status(429, "30") })
	c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Complete(ctx, Request{Messages: userMsg("hi")})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want the parent's deadline, not ErrUnavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
	if got := f.calls.Load(); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}

func TestCache(t *testing.T) {
	f := newFake(t, nil)
	path := filepath.Join(t.TempDir(), "sub", "cache.db")
	cache, err := OpenCache(path, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := RoleConfig{BaseURL: f.url(), Model: "m", Seed: intp(42), PriceIn: 1, PriceOut: 2}
	c := testClient(t, "agent", cfg, cache)
	ctx := context.Background()
	req := Request{Messages: userMsg("hello")}

	first, err := c.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached {
		t.Fatal("first answer marked cached")
	}
	second, err := c.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || f.calls.Load() != 1 {
		t.Fatalf("second: cached %v, server calls %d; want a hit and 1 call", second.Cached, f.calls.Load())
	}
	second.Cached = false
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Errorf("cached answer differs:\n%+v\n%+v", first, second)
	}
	st := c.Stats()
	wantCost := c.Cost(first.Usage)
	if st.Calls != 2 || st.CacheHits != 1 || st.PromptTokens != 22 || st.CompletionTokens != 14 || st.CostUSD != wantCost {
		t.Errorf("stats %+v; want 2 calls, 1 hit, tokens of both, cost of one (%g)", st, wantCost)
	}

	if err := cache.Close(); err != nil {
		t.Fatal(err)
	}
	cache, err = OpenCache(path, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()

	tests := []struct {
		name      string
		req       Request
		cfg       RoleConfig
		wantCache bool
	}{
		{"same request after reopen", req, cfg, true},
		{"other sample", Request{Messages: req.Messages, Sample: 1}, cfg, false},
		{"other sample again", Request{Messages: req.Messages, Sample: 1}, cfg, true},
		{"other purpose", Request{Messages: req.Messages, Purpose: PurposeJudge}, cfg, false},
		{"other max tokens", Request{Messages: req.Messages, MaxTokens: 10}, cfg, false},
		{"other seed", req, RoleConfig{BaseURL: f.url(), Model: "m", Seed: intp(7)}, false},
		{"other model", req, RoleConfig{BaseURL: f.url(), Model: "m2", Seed: intp(42)}, false},
		{"other temperature", req, RoleConfig{BaseURL: f.url(), Model: "m", Seed: intp(42), Temperature: 0.5}, false},
		{"other key env", req, RoleConfig{BaseURL: f.url(), Model: "m", Seed: intp(42), KeyEnv: "CTXOPT_OTHER_KEY", PriceIn: 1, PriceOut: 2}, true},
		{"stable cache endpoint", req, RoleConfig{BaseURL: f.url(), Model: "m", Seed: intp(42), CacheEndpoint: "embedded:m"}, false},
		{"same cache endpoint on another address", req, RoleConfig{BaseURL: "http://127.0.0.1:9/v1", Model: "m", Seed: intp(42), CacheEndpoint: "embedded:m"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testClient(t, "agent", tt.cfg, cache)
			before := f.calls.Load()
			resp, err := c.Complete(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			calls := f.calls.Load() - before
			if resp.Cached != tt.wantCache || (calls == 0) != tt.wantCache {
				t.Errorf("cached %v with %d server calls, want cached %v", resp.Cached, calls, tt.wantCache)
			}
		})
	}
}

func TestCacheLocked(t *testing.T) {
	defer func(d time.Duration) { cacheLockTimeout = d }(cacheLockTimeout)
	cacheLockTimeout = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = OpenCache(path, CacheOptions{})
	if err == nil || !strings.Contains(err.Error(), "cache "+path+" is locked by another optimize process") {
		t.Fatalf("second open: %v", err)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	f := newFake(t, func(f *fake) { f.delay = 30 * time.Millisecond })
	// Two roles on one endpoint share one limit, the larger of the two.
	a := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", Concurrency: 3}, nil)
	b := testClient(t, "judge", RoleConfig{BaseURL: f.url() + "/", Model: "m", Concurrency: 5}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Go(func() {
			_, err := c.Complete(context.Background(), Request{Messages: userMsg(fmt.Sprint(i))})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := f.peak.Load(); p != 5 {
		t.Errorf("peak in flight = %d, want 5", p)
	}
}

func TestLimiterCancelWhileWaiting(t *testing.T) {
	l := &limiter{}
	l.raise(1)
	if err := l.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire on a full limiter = %v, want deadline", err)
	}
	l.release()
	// The abandoned wait must not have kept the slot.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := l.acquire(ctx2); err != nil {
		t.Fatalf("slot leaked: %v", err)
	}
	if l.inUse != 1 || len(l.waiters) != 0 {
		t.Errorf("inUse %d, waiters %d", l.inUse, len(l.waiters))
	}
}

func TestUsage(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Name three primes."}}
	tests := []struct {
		name    string
		noUsage bool
		want    func(tok *Tokenizer) Usage
	}{
		{"from server", false, func(*Tokenizer) Usage { return Usage{PromptTokens: 11, CompletionTokens: 7} }},
		{"counted locally", true, func(tok *Tokenizer) Usage {
			return Usage{PromptTokens: tok.CountMessages(msgs), CompletionTokens: tok.Count("echo: Name three primes.")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(f *fake) { f.noUsage = tt.noUsage })
			c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", PriceIn: 3, PriceOut: 15}, nil)
			resp, err := c.Complete(context.Background(), Request{Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(c.Tokenizer())
			if resp.Usage != want || want.PromptTokens == 0 || want.CompletionTokens == 0 {
				t.Errorf("usage %+v, want %+v", resp.Usage, want)
			}
			wantCost := (float64(want.PromptTokens)*3 + float64(want.CompletionTokens)*15) / 1e6
			if got := c.Stats().CostUSD; got != wantCost {
				t.Errorf("cost %g, want %g", got, wantCost)
			}
			if resp.Message.Role != "assistant" || resp.Message.Content != "echo: Name three primes." || resp.Model != "fake-model" || resp.FinishReason != "stop" {
				t.Errorf("response %+v", resp)
			}
		})
	}
}

func TestEmbed(t *testing.T) {
	f := newFake(t, nil)
	cache, err := OpenCache(filepath.Join(t.TempDir(), "cache.db"), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	c := testClient(t, "embedder", RoleConfig{BaseURL: f.url(), Model: "emb", PriceIn: 1}, cache)
	ctx := context.Background()

	tests := []struct {
		name       string
		texts      []string
		wantSent   []string // nil: no request
		wantTokens int
	}{
		{"fresh", []string{"a", "bb", "ccc"}, []string{"a", "bb", "ccc"}, 15},
		{"all cached", []string{"ccc", "a"}, nil, 2},
		{"one new", []string{"bb", "dddd"}, []string{"dddd"}, 1 + 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.mu.Lock()
			f.embedded = nil
			f.mu.Unlock()
			vecs, u, err := c.Embed(ctx, tt.texts)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vecs {
				if len(v) != 2 || int(v[0]) != len(tt.texts[i]) {
					t.Errorf("vector %d = %v, want [%d 1]", i, v, len(tt.texts[i]))
				}
			}
			f.mu.Lock()
			sent := f.embedded
			f.mu.Unlock()
			if tt.wantSent == nil && len(sent) != 0 || tt.wantSent != nil && (len(sent) != 1 || fmt.Sprint(sent[0]) != fmt.Sprint(tt.wantSent)) {
				t.Errorf("sent %v, want %v", sent, tt.wantSent)
			}
			if u.PromptTokens != tt.wantTokens {
				t.Errorf("prompt tokens %d, want %d", u.PromptTokens, tt.wantTokens)
			}
			if got := f.header(len(f.headers) - 1).Get(RoleHeader); got != "embedder" {
				t.Errorf("%s = %q", RoleHeader, got)
			}
		})
	}
	st := c.Stats()
	if st.Calls != 3 || st.CacheHits != 1 || st.CostUSD != 20.0/1e6 {
		t.Errorf("stats %+v", st)
	}
}

func TestValidate(t *testing.T) {
	ok := RoleConfig{BaseURL: "http://127.0.0.1:8080/v1", Model: "m"}
	tests := []struct {
		name string
		edit func(*RoleConfig)
		want string // "" means valid
	}{
		{"valid", func(*RoleConfig) {}, ""},
		{"no model", func(c *RoleConfig) { c.Model = "" }, "roles.agent.model: must not be empty"},
		{"no url", func(c *RoleConfig) { c.BaseURL = "" }, "roles.agent.base_url: must not be empty"},
		{"bad url", func(c *RoleConfig) { c.BaseURL = "localhost:8080" }, "roles.agent.base_url:"},
		{"key pasted", func(c *RoleConfig) { c.KeyEnv = "sk-abc.def" }, "roles.agent.key_env: must be the name"},
		{"credentials in url", func(c *RoleConfig) { c.BaseURL = "https://me:sk-abc@proxy.example/v1" }, "roles.agent.base_url: must not carry credentials"},
		{"key in query", func(c *RoleConfig) { c.BaseURL = "https://x.example/v1?api-key=sk-abc" }, "roles.agent.base_url: must not carry credentials"},
		{"azure api-version is fine", func(c *RoleConfig) { c.BaseURL = "https://x.example/openai?api-version=2024-06-01" }, ""},
		{"temperature", func(c *RoleConfig) { c.Temperature = 3 }, "roles.agent.temperature:"},
		{"negative price", func(c *RoleConfig) { c.PriceOut = -1 }, "roles.agent.price_out:"},
		{"negative concurrency", func(c *RoleConfig) { c.Concurrency = -2 }, "roles.agent.concurrency:"},
		{"negative timeout", func(c *RoleConfig) { c.Timeout = -time.Second }, "roles.agent.timeout:"},
		{"encoding", func(c *RoleConfig) { c.Encoding = "gpt2" }, "roles.agent.encoding:"},
		{"tool choice", func(c *RoleConfig) { c.ToolChoice = "any" }, `roles.agent.tool_choice: "any" is unknown; use auto, required or none`},
		{"tool choice required", func(c *RoleConfig) { c.ToolChoice = ToolChoiceRequired }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate("roles.agent")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "sk-abc") {
				t.Errorf("error echoes the key: %v", err)
			}
		})
	}
	d := RoleConfig{}.WithDefaults()
	if d.Concurrency != 8 || d.Timeout != 120*time.Second || d.MaxRetries != 5 || d.Encoding != "o200k_base" {
		t.Errorf("defaults %+v", d)
	}
}

func TestRoleConfigYAML(t *testing.T) {
	src := `
base_url: http://127.0.0.1:8080/v1
model: m
key_env: OPENAI_API_KEY
temperature: 0
seed: 42
max_tokens: 512
price_in: 0.15
price_out: 0.6
concurrency: 16
timeout: 30s
max_retries: 3
encoding: cl100k_base
tool_choice: required
`
	var c RoleConfig
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	want := RoleConfig{BaseURL: "http://127.0.0.1:8080/v1", Model: "m", KeyEnv: "OPENAI_API_KEY", Seed: intp(42),
		MaxTokens: 512, PriceIn: 0.15, PriceOut: 0.6, Concurrency: 16, Timeout: 30 * time.Second, MaxRetries: 3, Encoding: "cl100k_base", ToolChoice: "required"}
	if c.Seed == nil || *c.Seed != 42 {
		t.Fatalf("seed %v", c.Seed)
	}
	c.Seed, want.Seed = nil, nil
	if c != want {
		t.Errorf("decoded %+v\nwant    %+v", c, want)
	}
}

// An answer past MaxAnswerBytes is refused, naming the bound, not held
// whole in memory nor handed on as a reply.
func TestAnswerTooLarge(t *testing.T) {
	f := newFake(t, func(f *fake) {
		f.always = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			chunk := []byte(strings.Repeat(" ", 1<<20))
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"x"}}],"pad":"`))
			for range MaxAnswerBytes>>20 + 4 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			w.Write([]byte(`"}`))
		}
	})
	c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", MaxRetries: -1}, nil)
	_, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")})
	if err == nil || !strings.Contains(err.Error(), "llm.MaxAnswerBytes") {
		t.Fatalf("err = %v, want the answer refused naming llm.MaxAnswerBytes", err)
	}
	if got := f.calls.Load(); got != 1 {
		t.Errorf("server saw %d calls, want 1 (retries disabled)", got)
	}
}
