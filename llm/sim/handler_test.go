package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

var searchTools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "search", "description": "Search the corpus.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}},
	{"type": "function", "function": map[string]any{"name": "finish", "description": "Submit the answers.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"answers": map[string]any{"type": "array"}}}}},
}

// chatBody renders messages as an OpenAI chat request.
func chatBody(t testing.TB, msgs []llm.Message, tools bool) []byte {
	t.Helper()
	var wire []map[string]any
	for _, m := range msgs {
		w := map[string]any{"role": m.Role, "content": m.Content}
		if m.ToolCallID != "" {
			w["tool_call_id"] = m.ToolCallID
		}
		var calls []any
		for _, c := range m.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		if calls != nil {
			w["tool_calls"] = calls
		}
		wire = append(wire, w)
	}
	req := map[string]any{"model": "sim-test", "messages": wire, "temperature": 0, "seed": 42}
	if tools {
		req["tools"] = searchTools
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func post(t testing.TB, h http.Handler, path string, body []byte, headers ...string) result {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return result{w.Code, w.Header(), w.Body.Bytes()}
}

func newHandlerT(t testing.TB, cfg Config) http.Handler {
	t.Helper()
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestChatAgentOverHTTP(t *testing.T) {
	srv := httptest.NewServer(newHandlerT(t, Config{}))
	defer srv.Close()
	body := chatBody(t, agentMsgs(taskText, [2]string{"What is the capital of Veloria?", obsVeloria}), true)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got struct {
		Model             string `json:"model"`
		SystemFingerprint string `json:"system_fingerprint"`
		Choices           []struct {
			Message struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "sim-test" || got.SystemFingerprint != "ctxopt-sim" || len(got.Choices) != 1 {
		t.Fatalf("response = %+v", got)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Role != "assistant" {
		t.Fatalf("choice = %+v", c)
	}
	tc := c.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "search" ||
		tc.Function.Arguments != `{"query":"What is the founding year of Ostrel?"}` {
		t.Errorf("tool call = %+v", tc)
	}
	if got.Usage.PromptTokens < 100 || got.Usage.CompletionTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Errorf("usage = %+v", got.Usage)
	}
}

// TestClientRoundTrip talks to the model through ctxopt's own client, as the
// pipeline does: role header, go-openai decoding, embeddings.
func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/v1") {
		t.Errorf("URL = %s", s.URL())
	}
	agent, err := llm.NewClient("agent", llm.RoleConfig{BaseURL: s.URL(), Model: "sim"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := agent.Complete(ctx, llm.Request{Purpose: llm.PurposeAgent, Messages: agentMsgs(taskText),
		Tools: []llm.Tool{{Name: "search", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Arguments != `{"query":"What is the capital of Veloria?"}` {
		t.Errorf("agent reply = %+v", resp.Message)
	}
	comp, err := llm.NewClient("compressor", llm.RoleConfig{BaseURL: s.URL(), Model: "sim"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt := compressorPrompt(vagueGuideline+strictRule, "", stepBlock(1, "What is the capital of Veloria?", obsVeloria))
	cresp, err := comp.Complete(ctx, llm.Request{Purpose: llm.PurposeCompressor, Messages: []llm.Message{{Role: "user", Content: prompt}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cresp.Message.Content, "- Q1: The capital of Veloria is Marnth.") {
		t.Errorf("compressor reply:\n%s", cresp.Message.Content)
	}
	vecs, _, err := comp.Embed(ctx, []string{"Veloria", "Ostrel"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 2 || len(vecs[0]) != embeddingDims {
		t.Errorf("embeddings: %d vectors", len(vecs))
	}
	st := s.Stats()
	if st.ByRole["agent"] != 1 || st.ByRole["compressor"] != 1 || st.ByRole["embedder"] != 1 || st.Requests != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestChatRoles(t *testing.T) {
	h := newHandlerT(t, Config{})
	compressorReq := chatBody(t, []llm.Message{{Role: "user", Content: compressorPrompt(vagueGuideline, "", stepBlock(1, "q", obsOstrel))}}, false)
	tests := []struct {
		name    string
		body    []byte
		headers []string
		status  int
		want    string
	}{
		{"tools without a role header is the agent", chatBody(t, agentMsgs(taskText), true), nil, 200, `"name":"search"`},
		{"compressor", compressorReq, []string{llm.RoleHeader, "compressor"}, 200, "HISTORY_SUMMARY"},
		{"analyzer", chatBody(t, []llm.Message{{Role: "user", Content: utPrompt("t", "", utOptimized)}}, false), []string{llm.RoleHeader, "analyzer"}, 200, "missing_or_distorted_facts"},
		{"optimizer", chatBody(t, []llm.Message{{Role: "user", Content: updatePrompt(guidelineV0, utFeedback...)}}, false), []string{llm.RoleHeader, "optimizer"}, 200, "Rules:"},
		{"judge", chatBody(t, []llm.Message{{Role: "user", Content: "OUTPUT_A\nx\nOUTPUT_B\ny\n"}}, false), []string{llm.RoleHeader, "judge"}, 200, `\"winner\"`},
		{"no header and no tools is a plain chat", compressorReq, nil, 200, ChatReply},
		{"unknown role header", compressorReq, []string{llm.RoleHeader, "poet"}, 400, "unknown role"},
		{"embedder on chat", compressorReq, []string{llm.RoleHeader, "embedder"}, 400, "/v1/embeddings"},
		{"bad JSON", []byte(`{"messages": [`), []string{llm.RoleHeader, "agent"}, 400, "invalid JSON"},
		{"unknown message role", []byte(`{"messages":[{"role":"wizard","content":"hi"}]}`), []string{llm.RoleHeader, "judge"}, 400, "messages[0].role"},
		{"bad sample header", compressorReq, []string{llm.RoleHeader, "compressor", llm.SampleHeader, "x"}, 400, llm.SampleHeader},
		{"analyzer prompt without markers", chatBody(t, []llm.Message{{Role: "user", Content: "hi"}}, false), []string{llm.RoleHeader, "analyzer"}, 400, "BASELINE_HISTORY_START"},
		{"content parts", []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"OUTPUT_A\nx\n"},{"type":"text","text":"OUTPUT_B\nyy"}]}]}`), []string{llm.RoleHeader, "judge"}, 200, `\"winner\": \"A\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, h, "/v1/chat/completions", tt.body, tt.headers...)
			if r.status != tt.status || !bytes.Contains(r.body, []byte(tt.want)) {
				t.Errorf("status %d body %s; want %d with %q", r.status, r.body, tt.status, tt.want)
			}
			if tt.status == 400 {
				var e struct {
					Error struct{ Message, Type string }
				}
				if json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
					t.Errorf("not an OpenAI error body: %s", r.body)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	h := newHandlerT(t, Config{})
	cases := map[string][]byte{
		"agent":      chatBody(t, agentMsgs(taskText, [2]string{"What is the capital of Veloria?", obsVeloria}), true),
		"compressor": chatBody(t, []llm.Message{{Role: "user", Content: compressorPrompt(vagueGuideline, "", stepBlock(1, "q", obsVeloria)+stepBlock(2, "r", obsOstrel))}}, false),
		"analyzer":   chatBody(t, []llm.Message{{Role: "user", Content: utPrompt("t", "", utOptimized)}}, false),
		"optimizer":  chatBody(t, []llm.Message{{Role: "user", Content: updatePrompt(guidelineV0, utFeedback...)}}, false),
	}
	for role, body := range cases {
		a := post(t, h, "/v1/chat/completions", body, llm.RoleHeader, role, llm.SampleHeader, "3")
		b := post(t, h, "/v1/chat/completions", body, llm.RoleHeader, role, llm.SampleHeader, "3")
		if a.status != 200 || !bytes.Equal(a.body, b.body) {
			t.Errorf("%s: two identical requests gave different answers (status %d):\n%s\n%s", role, a.status, a.body, b.body)
		}
	}
	// The sample index varies the optimizer's candidates.
	body := cases["optimizer"]
	a := post(t, h, "/v1/chat/completions", body, llm.RoleHeader, "optimizer")
	b := post(t, h, "/v1/chat/completions", body, llm.RoleHeader, "optimizer", llm.SampleHeader, "4")
	if bytes.Equal(contentOf(t, a.body), contentOf(t, b.body)) {
		t.Error("samples 0 and 4 of an optimizer prompt are the same candidate")
	}
}

func contentOf(t *testing.T, body []byte) []byte {
	t.Helper()
	var v struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Choices) == 0 {
		t.Fatalf("bad response %s", body)
	}
	return []byte(v.Choices[0].Message.Content)
}

func TestMaxTokens(t *testing.T) {
	h := newHandlerT(t, Config{})
	body := bytes.Replace(chatBody(t, []llm.Message{{Role: "user", Content: utPrompt("t", "", utOptimized)}}, false), []byte(`"model"`), []byte(`"max_tokens":20,"model"`), 1)
	r := post(t, h, "/v1/chat/completions", body, llm.RoleHeader, "analyzer")
	var v struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.Choices[0].FinishReason != "length" || v.Usage.CompletionTokens > 20 {
		t.Errorf("finish %q with %d tokens, want length and at most 20", v.Choices[0].FinishReason, v.Usage.CompletionTokens)
	}
}

func TestOtherEndpoints(t *testing.T) {
	h := newHandlerT(t, Config{})
	get := func(path string) result {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return result{w.Code, w.Header(), w.Body.Bytes()}
	}
	if r := get("/healthz"); r.status != 200 {
		t.Errorf("healthz: %d", r.status)
	}
	if r := get("/v1/models"); r.status != 200 || !bytes.Contains(r.body, []byte(`"id":"ctxopt-sim"`)) {
		t.Errorf("models: %d %s", r.status, r.body)
	}
	if r := get("/v1/chat/completions"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET chat: %d", r.status)
	}
	if r := get("/v2/nothing"); r.status != http.StatusNotFound {
		t.Errorf("unknown path: %d", r.status)
	}

	var floats struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	r := post(t, h, "/v1/embeddings", []byte(`{"model":"e","input":["Veloria capital","Ostrel"]}`))
	if err := json.Unmarshal(r.body, &floats); err != nil || len(floats.Data) != 2 || floats.Data[1].Index != 1 || floats.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings: %d %s", r.status, r.body)
	}
	var b64 struct {
		Data []struct{ Embedding string }
	}
	r = post(t, h, "/v1/embeddings", []byte(`{"input":"Veloria capital","encoding_format":"base64"}`))
	if err := json.Unmarshal(r.body, &b64); err != nil || len(b64.Data) != 1 {
		t.Fatalf("base64 embeddings: %s", r.body)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*embeddingDims {
		t.Errorf("base64 embedding decodes to %d bytes (%v)", len(raw), err)
	}
	for _, bad := range []string{`{"input":[]}`, `{"input":{}}`, `{"input":"x","encoding_format":"int8"}`} {
		if r := post(t, h, "/v1/embeddings", []byte(bad)); r.status != 400 {
			t.Errorf("%s: status %d", bad, r.status)
		}
	}
}

func TestFaults(t *testing.T) {
	agentBody := chatBody(t, agentMsgs(taskText), true)
	t.Run("429 has Retry-After", func(t *testing.T) {
		r := post(t, newHandlerT(t, Config{Rate429: 1, RetryAfter: 2 * time.Second}), "/v1/chat/completions", agentBody)
		if r.status != 429 || r.header.Get("Retry-After") != "2" || !bytes.Contains(r.body, []byte("rate_limit_exceeded")) {
			t.Errorf("status %d Retry-After %q body %s", r.status, r.header.Get("Retry-After"), r.body)
		}
	})
	t.Run("5xx", func(t *testing.T) {
		h := newHandlerT(t, Config{Rate5xx: 1})
		seen := map[int]bool{}
		for i := range 40 {
			r := post(t, h, "/v1/embeddings", []byte(`{"input":"`+strings.Repeat("x", i)+`"}`))
			seen[r.status] = true
		}
		if !seen[500] || !seen[503] || len(seen) != 2 {
			t.Errorf("statuses %v, want 500 and 503", seen)
		}
	})
	t.Run("malformed agent arguments", func(t *testing.T) {
		r := post(t, newHandlerT(t, Config{RateMalformed: 1}), "/v1/chat/completions", agentBody)
		var v struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		args := v.Choices[0].Message.ToolCalls[0].Function.Arguments
		full := `{"query":"What is the capital of Veloria?"}`
		if json.Valid([]byte(args)) || args != full[:len(full)/2] {
			t.Errorf("arguments %q, want the first half of the call", args)
		}
	})
	t.Run("malformed leaves other roles alone", func(t *testing.T) {
		body := chatBody(t, []llm.Message{{Role: "user", Content: "OUTPUT_A\nx\nOUTPUT_B\ny"}}, false)
		r := post(t, newHandlerT(t, Config{RateMalformed: 1}), "/v1/chat/completions", body, llm.RoleHeader, "judge")
		if !json.Valid(contentOf(t, r.body)) {
			t.Errorf("judge answer damaged: %s", r.body)
		}
	})
	t.Run("timeout holds until hang", func(t *testing.T) {
		start := time.Now()
		r := post(t, newHandlerT(t, Config{RateTimeout: 1, Hang: 30 * time.Millisecond}), "/v1/chat/completions", agentBody)
		if r.status != http.StatusGatewayTimeout || time.Since(start) < 30*time.Millisecond {
			t.Errorf("status %d after %v", r.status, time.Since(start))
		}
	})
	t.Run("timeout ends when the client goes away", func(t *testing.T) {
		h := newHandlerT(t, Config{RateTimeout: 1, Hang: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(agentBody)).WithContext(ctx)
		done := make(chan struct{})
		go func() { h.ServeHTTP(httptest.NewRecorder(), req); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("held request did not end with its client")
		}
	})
	t.Run("latency", func(t *testing.T) {
		start := time.Now()
		post(t, newHandlerT(t, Config{Latency: 20 * time.Millisecond}), "/v1/chat/completions", agentBody)
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Errorf("answered after %v", d)
		}
	})
	t.Run("a retry of the same body can succeed", func(t *testing.T) {
		h := newHandlerT(t, Config{Rate429: 0.5})
		seen := map[int]bool{}
		for range 20 {
			seen[post(t, h, "/v1/chat/completions", agentBody).status] = true
		}
		if !seen[200] || !seen[429] {
			t.Errorf("20 tries of one body gave %v, want both 200 and 429", seen)
		}
	})
	t.Run("rates are honoured", func(t *testing.T) {
		cfg := Config{Rate429: 0.1, Rate5xx: 0.1, RateMalformed: 0.2}
		h := newHandlerT(t, cfg)
		count := map[string]int{}
		const n = 1000
		for i := range n {
			body := chatBody(t, agentMsgs(taskText+"\nQ9: What is the capital of X"+strings.Repeat("a", i%50)+"?"), true)
			body = append(body[:len(body)-1], []byte(`,"user":"`+strings.Repeat("u", i/50)+`"}`)...)
			r := post(t, h, "/v1/chat/completions", body)
			switch {
			case r.status == 429:
				count["429"]++
			case r.status >= 500:
				count["5xx"]++
			case r.status == 200 && !json.Valid([]byte(toolArgs(t, r.body))):
				count["malformed"]++
			}
		}
		// The draws are independent: 5xx is drawn only when 429 was not, and
		// malformed only for answered requests.
		want := map[string]float64{"429": 0.1 * n, "5xx": 0.9 * 0.1 * n, "malformed": 0.81 * 0.2 * n}
		for k, w := range want {
			if got := float64(count[k]); got < 0.7*w || got > 1.3*w {
				t.Errorf("%s: %v of %d requests, want about %.0f", k, got, n, w)
			}
		}
	})
}

func toolArgs(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Choices) == 0 || len(v.Choices[0].Message.ToolCalls) == 0 {
		t.Fatalf("no tool call in %s", body)
	}
	return v.Choices[0].Message.ToolCalls[0].Function.Arguments
}

func TestServerLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, "127.0.0.1:0", Config{RateTimeout: 1, Hang: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// A request held by a timeout fault must not keep the server alive.
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(s.URL()+"/embeddings", "application/json", strings.NewReader(`{"input":"x"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Faults[FaultTimeout] == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the context did not end the held request")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
	if _, err := http.Get(s.URL() + "/models"); err == nil {
		t.Error("server still answers after Close")
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := NewHandler(Config{Rate429: 1.5, Latency: -time.Second}); err == nil ||
		!strings.Contains(err.Error(), "rate_429") || !strings.Contains(err.Error(), "latency") {
		t.Errorf("err = %v, want both fields named", err)
	}
	if _, err := Start(context.Background(), "256.0.0.1:1", Config{}); err == nil {
		t.Error("listening on a bad address succeeded")
	}
}

// TestChatReplyDocumented: a plain chat (no role header, no tools) gets the
// fixed reply the documentation quotes, in both wire formats and streamed,
// whatever it asks.
func TestChatReplyDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "embedded-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("> "+ChatReply)) {
		t.Errorf("docs/embedded-model.md does not quote the plain-chat reply %q", ChatReply)
	}
	h := newHandlerT(t, Config{})
	quoted, _ := json.Marshal(ChatReply)
	tests := []struct {
		name, path string
		body       string
	}{
		{"openai hello", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`},
		{"openai question", "/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is 2+2?"}]}`},
		{"openai streamed", "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic hello", "/v1/messages", `{"model":"claude-3-5-haiku-latest","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, h, tt.path, []byte(tt.body))
			want := quoted
			if strings.Contains(tt.body, `"stream":true`) {
				want = []byte(`"Hello from`) // streamed in pieces
			}
			if r.status != http.StatusOK || !bytes.Contains(r.body, want) {
				t.Errorf("status %d body %s; want 200 with %s", r.status, r.body, want)
			}
		})
	}
}
