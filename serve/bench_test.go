package serve

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/cputime"
	"github.com/ctxopt/ctxopt/llm"
)

// BenchmarkPassThrough is a chat request that needs no compression through
// serve to a canned upstream over loopback: serve's own cost per request
// (go test -bench PassThrough -cpuprofile cpu.out -memprofile mem.out).
func BenchmarkPassThrough(b *testing.B) {
	answer := []byte(`{"id":"c1","object":"chat.completion","model":"ctxopt-sim","choices":[{"index":0,"message":{"role":"assistant","content":"The river of Ostrel is the Vella."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":9,"total_tokens":49}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer up.Close()
	cfg := Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream.OpenAI.BaseURL = up.URL + "/v1"
	cfg.Compression.Registry = b.TempDir()
	cfg.Auth.Anonymous = true
	_, url, stop := launch(b, cfg)
	defer func() { _ = stop() }()
	body := []byte(`{"model":"ctxopt-sim","messages":[{"role":"system","content":"You answer questions by searching."},{"role":"user","content":"Q1: What is the river of Ostrel?"}],"tools":[{"type":"function","function":{"name":"search","description":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	cpu0, _ := cputime.Process()
	defer func() {
		// CPU time of client, serve and upstream together, every thread's.
		if cpu1, ok := cputime.Process(); ok {
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkShortRequest is what serve does to a chat request too short to
// compress before passing it on: read it and decide (go test -bench
// ShortRequest).
func BenchmarkShortRequest(b *testing.B) {
	tok, err := llm.NewTokenizer("")
	if err != nil {
		b.Fatal(err)
	}
	c := &compactor{cfg: Default().Compression, tok: tok, framing: tok.CountMessage(llm.Message{Role: "tool"})}
	for _, bc := range []struct {
		name string
		f    apiFormat
		body []byte
	}{
		{"openai first call", formatOpenAI, []byte(`{"model":"ctxopt-sim","messages":[{"role":"system","content":"You answer questions by searching."},{"role":"user","content":"Q1: What is the river of Ostrel?"}],"tools":` + string(searchTool) + `}`)},
		{"openai three turns", formatOpenAI, toolTurns(3, 120)},
		{"anthropic three turns", formatAnthropic, []byte(`{"model":"m","max_tokens":512,"system":"You answer questions by searching.","messages":[{"role":"user","content":"Q1: What is the river of Ostrel?"},` +
			`{"role":"assistant","content":[{"type":"text","text":"I search."},{"type":"tool_use","id":"t1","name":"search","input":{"query":"Ostrel river"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + strings.Repeat("Ostrel lies on the Vella. ", 20) + `"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"search","input":{"query":"Vella"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"` + strings.Repeat("The Vella runs north. ", 20) + `"}]}]}]}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			conv, err := parseConversation(bc.f, bc.body, c.uncounted)
			if err != nil || !conv.uncounted {
				b.Fatalf("not a short request (%d bytes): %v", len(bc.body), err)
			}
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			cpu0, _ := cputime.Process()
			for b.Loop() {
				conv, err := parseConversation(bc.f, bc.body, c.uncounted)
				if err != nil {
					b.Fatal(err)
				}
				if out, err := c.prepare(b.Context(), conv, "tenant"); err != nil || !out.uncounted {
					b.Fatalf("counted: %v", err)
				}
			}
			// CPU time, every thread's: the figure a busy machine inflates least.
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// toolTurns is an OpenAI request of turns search calls with results of
// about size bytes each.
func toolTurns(turns, size int) []byte {
	msgs := []string{`{"role":"system","content":"You answer questions by searching."}`, `{"role":"user","content":"Q1: What is the river of Ostrel?"}`}
	for i := range turns {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"search","arguments":"{\"query\":\"river %d\"}"}}]}`, id, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, id, strings.Repeat("Ostrel fact. ", size/13)))
	}
	return []byte(`{"model":"ctxopt-sim","messages":[` + strings.Join(msgs, ",") + `],"tools":` + string(searchTool) + `}`)
}
