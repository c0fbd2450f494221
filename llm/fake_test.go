package llm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fault replaces the normal answer of one call of the fake server.
type fault func(w http.ResponseWriter, r *http.Request)

// fake is an OpenAI-compatible server on loopback that records what it is
// sent and can misbehave on chosen calls.
type fake struct {
	srv *httptest.Server

	// Set before the first request.
	delay   time.Duration
	noUsage bool
	faults  []fault // faults[i] answers call i when set
	always  fault   // answers every call past len(faults) when set

	calls    atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64

	mu       sync.Mutex
	bodies   []map[string]json.RawMessage
	headers  []http.Header
	embedded [][]string
}

func newFake(t testing.TB, configure func(*fake)) *fake {
	f := &fake{}
	if configure != nil {
		configure(f)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) url() string { return f.srv.URL + "/v1" }

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1) - 1)
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if cur <= p || f.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	body, _ := io.ReadAll(r.Body)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	f.mu.Lock()
	f.bodies = append(f.bodies, m)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()

	switch {
	case n < len(f.faults) && f.faults[n] != nil:
		f.faults[n](w, r)
		return
	case n >= len(f.faults) && f.always != nil:
		f.always(w, r)
		return
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.Unmarshal(body, &req)
		f.mu.Lock()
		f.embedded = append(f.embedded, req.Input)
		f.mu.Unlock()
		type datum struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		data := make([]datum, len(req.Input))
		for j, in := range req.Input {
			// Answer in reverse order: clients must place by index.
			data[len(data)-1-j] = datum{Object: "embedding", Embedding: []float32{float32(len(in)), 1}, Index: j}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "emb",
			"usage": map[string]int{"prompt_tokens": 5 * len(req.Input), "total_tokens": 5 * len(req.Input)}})
		return
	}
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	last := ""
	if len(req.Messages) > 0 {
		last = req.Messages[len(req.Messages)-1].Content
	}
	resp := map[string]any{
		"id": fmt.Sprintf("c%d", n), "object": "chat.completion", "model": "fake-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "echo: " + last}}},
	}
	if !f.noUsage {
		resp["usage"] = map[string]int{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fake) body(i int) map[string]json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fake) header(i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[i]
}

func status(code int, retryAfter string) fault {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"status %d","type":"test"}}`, code)
	}
}

// stall never answers within any test's per-attempt timeout.
func stall(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(10 * time.Second):
	case <-r.Context().Done():
	}
}

func malformed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"choices": [`)
}

// hangUp closes the connection without a response.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// testClient builds a client for f with fast backoff.
func testClient(t testing.TB, role string, cfg RoleConfig, cache *Cache) *Client {
	t.Helper()
	c, err := NewClient(role, cfg, cache)
	if err != nil {
		t.Fatal(err)
	}
	c.retry.Policy.Base, c.retry.Policy.Cap = time.Millisecond, 5*time.Millisecond
	return c
}

func intp(i int) *int { return &i }

func userMsg(s string) []Message { return []Message{{Role: "user", Content: s}} }
