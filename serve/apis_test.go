package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

// responsesConversation is a Responses request body of an agent
// conversation with steps turns, each a reasoning item, a text and two
// parallel function calls answered by two outputs; extra items go after
// the first user message.
func responsesConversation(steps int, tag string, extra ...map[string]any) []byte {
	input := []map[string]any{{"role": "user", "content": "Answer: Q1: What is the river of Ostrel? (" + tag + ")"}}
	input = append(input, extra...)
	for i := range steps {
		a, b := "call_"+tag+"_a"+strconv.Itoa(i), "call_"+tag+"_b"+strconv.Itoa(i)
		input = append(input,
			map[string]any{"type": "reasoning", "id": "rs_" + strconv.Itoa(i), "summary": []any{}, "encrypted_content": "gAAA"},
			map[string]any{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "I search step " + strconv.Itoa(i)}}},
			map[string]any{"type": "function_call", "call_id": a, "name": "search", "arguments": `{"query":"river ` + strconv.Itoa(i) + `"}`},
			map[string]any{"type": "function_call", "call_id": b, "name": "search", "arguments": `{"query":"Ostrel ` + strconv.Itoa(i) + `"}`},
			map[string]any{"type": "function_call_output", "call_id": a, "output": observation(i)},
			map[string]any{"type": "function_call_output", "call_id": b, "output": observation(i + 1)},
		)
	}
	body, _ := json.Marshal(map[string]any{"model": sim.ModelName, "instructions": "You answer questions by searching.", "input": input,
		"context_management": []map[string]any{{"type": "compaction", "compact_threshold": 200000}},
		"tools":              []map[string]any{{"type": "function", "name": "search", "description": "search", "parameters": map[string]any{"type": "object"}}}})
	return body
}

// TestResponsesCompressed: a long Responses conversation goes upstream to
// /v1/responses as instructions + first user message + summary + the last
// turn, every call with its output and the parallel calls of a turn
// together; the compaction item and context_management go as sent.
func TestResponsesCompressed(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, promoted, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	compaction := map[string]any{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque"}
	resp, b := post(t, url+"/v1/responses", responsesConversation(5, "r", compaction), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "true" || resp.Header.Get(HeaderGuideline) != promoted {
		t.Fatalf("status %d compressed %q: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
	}
	if gjson.GetBytes(b, "object").Str != "response" || !gjson.GetBytes(b, `output.#(type=="function_call")`).Exists() {
		t.Errorf("not a Responses answer with a call: %s", b)
	}
	sent, _ := up.last()
	up.mu.Lock()
	path := up.paths[len(up.paths)-1]
	up.mu.Unlock()
	if path != "/v1/responses" {
		t.Errorf("upstream path %s, want /v1/responses", path)
	}
	checkPairsIn(t, formatResponses, sent)
	types := gjson.GetBytes(sent, "input.#.type").Array()
	input := gjson.GetBytes(sent, "input").Array()
	if len(input) < 4 || input[1].Get("type").Str != "compaction" || input[1].Raw != mustJSON(compaction) ||
		!strings.Contains(input[2].Get("content").Str, "older turns were compressed") {
		t.Fatalf("layout: %s", gjson.GetBytes(sent, "input.#.type").Raw)
	}
	calls := 0
	for _, ty := range types {
		if ty.Str == "function_call" {
			calls++
		}
	}
	if calls != 2 || gjson.GetBytes(sent, "context_management").Raw != gjson.GetBytes(responsesConversation(5, "r"), "context_management").Raw ||
		gjson.GetBytes(sent, "instructions").Str == "" {
		t.Errorf("sent %d calls (want the last turn's 2), context_management %s", calls, gjson.GetBytes(sent, "context_management").Raw)
	}

	// A request continuing a stored response has no history to compress.
	stored, _ := json.Marshal(map[string]any{"model": sim.ModelName, "previous_response_id": "resp_1",
		"input": json.RawMessage(gjson.GetBytes(responsesConversation(5, "s"), "input").Raw)})
	if resp, b := post(t, url+"/responses", stored, nil); resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "false" {
		t.Errorf("previous_response_id: status %d compressed %q: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestParseResponses: the parser's messages, roles and cuts.
func TestParseResponses(t *testing.T) {
	conv, err := parseConversation(formatResponses, responsesConversation(2, "p"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// user, then per turn: one assistant run (4 items) and two outputs.
	want := []string{"user", "assistant", "tool", "tool", "assistant", "tool", "tool"}
	if strings.Join(conv.roles, ",") != strings.Join(want, ",") || conv.head != 1 || conv.system == "" {
		t.Fatalf("roles %v head %d", conv.roles, conv.head)
	}
	if v := conv.views[1]; len(v) != 1 || len(v[0].ToolCalls) != 2 || v[0].Content != "I search step 0" {
		t.Errorf("turn view %+v", v)
	}
	if cuts := conv.cutPoints(); len(cuts) != 2 || cuts[0] != 1 || cuts[1] != 4 {
		t.Errorf("cuts %v", cuts)
	}
	for _, bad := range []string{`{"input":3}`, `{"input":[]}`, `{"input":[{"role":"robot","content":"x"}]}`, `{"input":[{"id":"x"}]}`, `{"input":"hi","instructions":[1]}`} {
		if _, err := parseConversation(formatResponses, []byte(bad), nil); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if c, err := parseConversation(formatResponses, []byte(`{"input":"hi"}`), nil); err != nil || c.head != 1 || c.task() != "hi" {
		t.Errorf("string input: %v", err)
	}
}

// stubUpstream records requests and answers each with a fixed JSON body.
type stubUpstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
	bodys [][]byte
	auth  []string
}

func newStubUpstream(t *testing.T) *stubUpstream {
	u := &stubUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.paths, u.bodys, u.auth = append(u.paths, r.URL.Path), append(u.bodys, b), append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","usage":{"prompt_tokens":3,"completion_tokens":2}}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// TestPassthroughRoutes: embeddings, completions and responses/compact go
// to the OpenAI upstream unchanged, under /v1 or not, behind the client
// key and the body bound.
func TestPassthroughRoutes(t *testing.T) {
	up := newStubUpstream(t)
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.srv.URL+"/v1", up.srv.URL+"/v1", dir)
	cfg.Auth = Auth{KeyHashes: []string{HashKey("k")}}
	cfg.Limits.BodyBytes = 1000
	_, url := start(t, cfg)
	auth := map[string]string{"Authorization": "Bearer k"}
	body := []byte(`{"model":"m","input":["a \u00e9 b"],"encoding_format":"float"}`)
	n := 0
	for _, route := range []string{"/embeddings", "/completions", "/responses/compact"} {
		for _, prefix := range []string{"/v1", ""} {
			resp, b := post(t, url+prefix+route, body, auth)
			if resp.StatusCode != http.StatusOK || gjson.GetBytes(b, "object").Str != "list" {
				t.Fatalf("%s%s: %d %s", prefix, route, resp.StatusCode, b)
			}
			up.mu.Lock()
			got, path, key := up.bodys[n], up.paths[n], up.auth[n]
			up.mu.Unlock()
			n++
			if string(got) != string(body) || path != "/v1"+route || key != "" {
				t.Errorf("%s%s: upstream got %s at %s with Authorization %q", prefix, route, got, path, key)
			}
		}
		if resp, b := post(t, url+"/v1"+route, body, nil); resp.StatusCode != http.StatusUnauthorized || gjson.GetBytes(b, "error.type").Str != "authentication_error" {
			t.Errorf("%s without a key: %d %s", route, resp.StatusCode, b)
		}
		if resp, b := post(t, url+"/v1"+route, []byte(`{"input":"`+strings.Repeat("x", 2000)+`"}`), auth); resp.StatusCode != http.StatusRequestEntityTooLarge || !gjson.GetBytes(b, "error.message").Exists() {
			t.Errorf("%s too large: %d %s", route, resp.StatusCode, b)
		}
	}
	if got := metric(t, url, `ctxopt_serve_requests_total{code="200",endpoint="embeddings"}`); got != 2 {
		t.Errorf("embeddings requests counted %v, want 2", got)
	}
}

// TestRoutesWithoutV1: every API route answers with and without /v1, and
// the upstream gets its /v1 path either way.
func TestRoutesWithoutV1(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	for _, c := range []struct{ path, body string }{
		{"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"/responses", `{"model":"m","input":"hi"}`},
		{"/messages", `{"model":"m","max_tokens":200,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		for _, prefix := range []string{"/v1", ""} {
			resp, b := post(t, url+prefix+c.path, []byte(c.body), nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), sim.ChatReply) {
				t.Errorf("%s%s: %d %s", prefix, c.path, resp.StatusCode, b)
				continue
			}
			up.mu.Lock()
			path := up.paths[len(up.paths)-1]
			up.mu.Unlock()
			if path != "/v1"+c.path {
				t.Errorf("%s%s reached the upstream at %s", prefix, c.path, path)
			}
		}
	}
	for _, p := range []string{"/v1/models", "/models"} {
		resp, err := client.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	resp, b := post(t, url+"/messages/count_tokens", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != http.StatusOK || gjson.GetBytes(b, "input_tokens").Int() <= 0 {
		t.Errorf("count_tokens without /v1: %d %s", resp.StatusCode, b)
	}
}

// TestErrorShapes: every error is JSON in the shape of the route's API,
// unknown routes and wrong methods included.
func TestErrorShapes(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	for _, c := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		anthropic                bool
	}{
		{"unknown route", "POST", "/v1/nope", "{}", nil, 404, false},
		{"unknown route without v1", "GET", "/nope", "", nil, 404, false},
		{"unknown Anthropic route", "POST", "/v1/messages/batches", "{}", nil, 404, true},
		{"unknown route with Anthropic header", "POST", "/v1/other", "{}", map[string]string{"anthropic-version": "2023-06-01"}, 404, true},
		{"wrong method", "GET", "/v1/chat/completions", "", nil, 405, false},
		{"wrong method on responses", "DELETE", "/responses", "", nil, 405, false},
		{"wrong method on messages", "GET", "/v1/messages", "", nil, 405, true},
		{"wrong method on models", "POST", "/v1/models", "{}", nil, 405, false},
		{"bad responses body", "POST", "/v1/responses", `{"input":3}`, nil, 400, false},
		{"bad count_tokens body", "POST", "/v1/messages/count_tokens", `{"messages":3}`, nil, 400, true},
		{"bad messages body", "POST", "/messages", `[]`, nil, 400, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			if c.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if c.anthropic {
				if gjson.GetBytes(b, "type").Str != "error" || gjson.GetBytes(b, "error.type").Str == "" || gjson.GetBytes(b, "error.message").Str == "" {
					t.Errorf("not an Anthropic error: %s", b)
				}
			} else if gjson.GetBytes(b, "error.type").Str == "" || gjson.GetBytes(b, "error.message").Str == "" || gjson.GetBytes(b, "type").Exists() {
				t.Errorf("not an OpenAI error: %s", b)
			}
		})
	}
}

// TestAnthropicCompactionBlockKept: a message holding an Anthropic
// compaction block is never summarized or dropped: when the turns around
// it are compressed it goes as sent, before the summary.
func TestAnthropicCompactionBlockKept(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, _, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	block := map[string]any{"role": "assistant", "content": []map[string]any{{"type": "compaction", "content": "Earlier: the river of Ostrel is the Vell."}}}
	body := anthropicConversation(6)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	msgs := req["messages"].([]any)
	req["messages"] = append([]any{msgs[0], block, map[string]any{"role": "user", "content": "go on"}}, msgs[1:]...)
	req["context_management"] = map[string]any{"edits": []map[string]any{{"type": "compact_20260112"}}}
	body, _ = json.Marshal(req)
	resp, b := post(t, url+"/v1/messages", body, anthropicHeader)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderCompressed) != "true" {
		t.Fatalf("status %d compressed %q: %s", resp.StatusCode, resp.Header.Get(HeaderCompressed), b)
	}
	sent, _ := up.last()
	got := gjson.GetBytes(sent, "messages").Array()
	if len(got) < 4 || got[1].Raw != mustJSON(block) || !strings.Contains(got[2].Get("content").Str, "older turns were compressed") {
		t.Fatalf("layout: %s", gjson.GetBytes(sent, "messages.#.role").Raw)
	}
	if gjson.GetBytes(sent, "context_management").Raw != mustJSON(req["context_management"]) {
		t.Errorf("context_management: %s", gjson.GetBytes(sent, "context_management").Raw)
	}
	checkPairsIn(t, formatAnthropic, sent)
}

// TestReadyzErrorIsJSON: /readyz's 503 is a JSON error too.
func TestReadyzErrorIsJSON(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	_, url := start(t, testConfig(t, up.url(), up.url(), t.TempDir()))
	resp, err := client.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || gjson.GetBytes(b, "error.message").Str != "no promoted history guideline loaded" {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
