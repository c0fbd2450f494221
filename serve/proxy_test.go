package serve

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm/sim"
)

func TestCompressesLongToolConversation(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, promoted, _ := registry(t)
	_, url := start(t, testConfig(t, up.url(), up.url(), dir))
	hdrs, _ := agentConversation(t, url, 8, nil, 0)
	compressed := 0
	for i, h := range hdrs {
		if h.Get(HeaderCompressed) != "true" {
			continue
		}
		compressed++
		saved, _ := strconv.Atoi(h.Get(HeaderTokensSaved))
		if saved <= 0 {
			t.Errorf("step %d: compressed but saved %q tokens", i+1, h.Get(HeaderTokensSaved))
		}
		if g := h.Get(HeaderGuideline); g != promoted {
			t.Errorf("step %d: guideline %q, want %s", i+1, g, promoted)
		}
		if b := h.Get(HeaderBackend); b != LinkTeacher {
			t.Errorf("step %d: backend %q, want teacher", i+1, b)
		}
	}
	if compressed == 0 {
		t.Fatal("no step was compressed")
	}
	body, _ := up.last()
	checkPairs(t, body)
	msgs := gjson.GetBytes(body, "messages").Array()
	if msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" || msgs[2].Get("role").Str != "user" || msgs[3].Get("role").Str != "assistant" {
		t.Errorf("layout is not system, task, summary, last turns: %s", gjson.GetBytes(body, "messages.#.role").Raw)
	}
	t.Logf("%d of %d steps compressed; last request had %d messages", compressed, len(hdrs), len(msgs))
}

// TestRetriesClosedKeepAlive runs requests against upstreams that close a
// connection when a request arrives on it unanswered: on a kept-alive
// connection (what a keep-alive timeout firing as the request goes out
// looks like to the proxy) the request is sent again, body and all, on a
// new connection; on a new connection it is not (the upstream refuses it).
func TestRetriesClosedKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answered is how many requests the upstream answers per connection.
		answered int32
		// want is the status of each request; retried, whether the
		// upstream gets the last one twice.
		want    []int
		retried bool
	}{
		{"reused connection closed", 1, []int{http.StatusOK, http.StatusOK}, true},
		{"new connection closed", 0, []int{http.StatusBadGateway}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type connKey struct{}
			var mu sync.Mutex
			var bodies []string
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				if r.Header.Get("Idempotency-Key") != "" {
					t.Errorf("the retry marker went on the wire: %q", r.Header.Get("Idempotency-Key"))
				}
				if r.Context().Value(connKey{}).(*atomic.Int32).Add(1) > tc.answered {
					c, _, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					c.Close()
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
			}))
			up.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, new(atomic.Int32))
			}
			up.Start()
			t.Cleanup(up.Close)
			dir, _, _ := registry(t)
			_, url := start(t, testConfig(t, up.URL+"/v1", up.URL+"/v1", dir))
			var want []string
			for i, code := range tc.want {
				body := `{"model":"m","messages":[{"role":"user","content":"question ` + strconv.Itoa(i) + `"}]}`
				want = append(want, body)
				if resp, b := post(t, url+"/v1/chat/completions", []byte(body), nil); resp.StatusCode != code {
					t.Fatalf("request %d: status %d, want %d: %s", i+1, resp.StatusCode, code, b)
				}
			}
			if tc.retried {
				want = append(want, want[len(want)-1])
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(bodies, want) {
				t.Errorf("the upstream got %d requests %q, want %q", len(bodies), bodies, want)
			}
		})
	}
}
