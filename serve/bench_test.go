package serve

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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
