package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/templates"
)

// recorder of upstream bodies: an httptest server in front of the
// embedded model that keeps what the proxy sent.
type upstreamRec struct {
	srv *httptest.Server
	mu  sync.Mutex
	// got is signalled as each proxied request arrives.
	got *sync.Cond
	// bodies of the proxied requests, oldest first
	bodies [][]byte
	hdrs   []http.Header
	paths  []string
}

func newRecUpstream(t *testing.T, cfg sim.Config) *upstreamRec {
	t.Helper()
	h, err := sim.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamRec{}
	u.got = sync.NewCond(&u.mu)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get(llm.RoleHeader) == "" { // not a compressor call
			u.mu.Lock()
			u.bodies = append(u.bodies, b)
			u.hdrs = append(u.hdrs, r.Header.Clone())
			u.paths = append(u.paths, r.URL.Path)
			u.got.Broadcast()
			u.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamRec) url() string { return u.srv.URL + "/v1" }

// await blocks until n requests have reached the upstream.
func (u *upstreamRec) await(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.bodies) < n {
		u.got.Wait()
	}
}

// arrived is closed once n requests have reached the upstream, for a
// select that also watches the client's outcome.
func (u *upstreamRec) arrived(n int) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		u.await(n)
		close(c)
	}()
	return c
}

func (u *upstreamRec) last() ([]byte, http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1], u.hdrs[len(u.hdrs)-1]
}

// registry makes a registry holding the prompting guideline (promoted) and
// a second valid one, and returns its dir and both ids.
func registry(t *testing.T) (dir, promoted, other string) {
	t.Helper()
	dir = t.TempDir()
	promoted = putBuiltin(t, dir, guideline.KindHistory, "", true)
	other = putBuiltin(t, dir, guideline.KindHistory, "\nKeep every answer verbatim: copy each fact exactly.\n", false)
	return dir, promoted, other
}

// putBuiltin stores the built-in prompting guideline of kind, plus extra,
// in the registry dir, promoted or not, and returns its id.
func putBuiltin(t *testing.T, dir string, kind guideline.Kind, extra string, promote bool) string {
	t.Helper()
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := templates.Source(string(kind) + "_prompting.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := reg.Put(guideline.Record{Kind: kind, Source: "test"}, src+extra)
	if err != nil {
		t.Fatal(err)
	}
	if promote {
		if _, err := reg.Promote(rec.ID); err != nil {
			t.Fatal(err)
		}
	}
	return rec.ID
}

// testConfig is a config for a server in front of up with the embedded
// model as teacher.
func testConfig(t *testing.T, up, teacher, regDir string) Config {
	cfg := Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream.OpenAI.BaseURL = up
	cfg.Upstream.Anthropic.BaseURL = up
	cfg.Compression.Registry = regDir
	cfg.Compression.Threshold = 600
	cfg.Compression.Trigger = 0.8
	cfg.Compression.Reload = 50 * time.Millisecond
	// Every turn verbatim: these tests follow one request to its summary,
	// which it waits for; the default folding is fold_test's and lead_test's.
	cfg.Compression.KeepTokens = -1
	cfg.Compressor.Teacher = Link{BaseURL: teacher, Model: sim.ModelName, Timeout: 5 * time.Second}
	cfg.Auth.Anonymous = true
	cfg.Timeouts.Drain = 5 * time.Second
	return cfg
}

// start runs a server with cfg until the test ends.
func start(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	srv, url, stop := launch(t, cfg)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, url
}

// client is the tests' HTTP client. Its transport is their own, so stop
// can close every connection they opened and nothing else reopens one.
var client = &http.Client{Transport: &pathCheck{inner: &http.Transport{Proxy: nil}}}

// launch runs a server with cfg until stop, which cancels its context
// (what SIGTERM does) and returns what Serve returned.
func launch(t testing.TB, cfg Config) (srv *Server, url string, stop func() error) {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return srv, "http://" + ln.Addr().String(), func() error {
		// A connection the transport dialed in a burst and kept idle
		// without sending a request on it is "new" to the server, which
		// Shutdown counts as busy until it is 5 s old (net/http issue
		// 22682), as long as the tests' drain. The client hangs up first,
		// so the drain waits only for requests in flight; a connection
		// dialed or freed after this is closed, not kept.
		client.CloseIdleConnections()
		cancel()
		return <-done
	}
}

// post sends body to url with the headers and returns the response and
// its body; it fails the test on a transport error, so call it from the
// test's goroutine only (others call send).
func post(t *testing.T, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := send(url, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// send is post for any goroutine: it returns the transport's error.
func send(url string, body []byte, hdr map[string]string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, b, nil
}

var searchTool = json.RawMessage(`[{"type":"function","function":{"name":"search","description":"search the corpus","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}},{"type":"function","function":{"name":"finish","description":"give the answers","parameters":{"type":"object","properties":{"answers":{"type":"array","items":{"type":"string"}}},"required":["answers"]}}}]`)

// observation is a long, fact-bearing tool result for step i.
func observation(i int) string {
	var b strings.Builder
	for j := range 8 {
		b.WriteString("[" + string(rune('1'+j)) + "] (doc d" + string(rune('a'+i%26)) + ") The river of Ostrel" + string(rune('a'+j)) + " is the Vell" + string(rune('a'+i%26)) + ". It floods every spring and feeds the valley farms.\n")
	}
	return b.String()
}

// agentConversation drives an OpenAI-format tool-using agent through url
// for steps steps, pausing between them (the agent's tool time): each
// reply's tool calls get a long observation. It returns the response
// headers and latency of each step.
func agentConversation(t *testing.T, url string, steps int, hdr map[string]string, pause time.Duration) ([]http.Header, []time.Duration) {
	t.Helper()
	msgs := []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"You answer questions by searching."}`),
		json.RawMessage(`{"role":"user","content":"Answer: Q1: What is the river of Ostrela?"}`),
	}
	var hdrs []http.Header
	var took []time.Duration
	for range steps {
		body, _ := json.Marshal(map[string]any{"model": sim.ModelName, "messages": msgs, "tools": searchTool})
		t0 := time.Now()
		resp, b := post(t, url+"/v1/chat/completions", body, hdr)
		took = append(took, time.Since(t0))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("step %d: status %d: %s", len(hdrs)+1, resp.StatusCode, b)
		}
		hdrs = append(hdrs, resp.Header)
		m := gjson.GetBytes(b, "choices.0.message")
		if !m.IsObject() {
			t.Fatalf("step %d: no message: %s", len(hdrs), b)
		}
		msgs = append(msgs, json.RawMessage(m.Raw))
		for _, c := range m.Get("tool_calls").Array() {
			r, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.Get("id").Str, "content": observation(len(hdrs))})
			msgs = append(msgs, r)
		}
		time.Sleep(pause)
	}
	return hdrs, took
}

// checkPairs fails unless every tool result in the OpenAI messages of body
// answers a call of the assistant message before it, and every call has
// its result.
func checkPairs(t *testing.T, body []byte) {
	t.Helper()
	checkPairsIn(t, formatOpenAI, body)
}

// checkPairsIn is checkPairs for a body in format f.
func checkPairsIn(t *testing.T, f apiFormat, body []byte) {
	t.Helper()
	conv, err := parseConversation(f, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := conv.flat(0, len(conv.raw))
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case "assistant":
			for id := range open {
				t.Errorf("message %d: call %s has no result before the next assistant message", i, id)
			}
			clear(open)
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				t.Errorf("message %d: tool result %s answers no call of the assistant message before it", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	for id := range open {
		t.Errorf("call %s has no result", id)
	}
}

// metric returns the value of the series whose line starts with series
// (name and labels as exposed), 0 when absent.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return 0
}

// toolConversation is an OpenAI request body of a finished-looking agent
// conversation with steps tool-call/result pairs; tag makes it distinct.
func toolConversation(steps int, tag string) []byte {
	msgs := []map[string]any{
		{"role": "system", "content": "You answer questions by searching."},
		{"role": "user", "content": "Answer: Q1: What is the river of Ostrel? (" + tag + ")"},
	}
	for i := range steps {
		id := "call_" + tag + "_" + strconv.Itoa(i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "I search step " + strconv.Itoa(i), "tool_calls": []map[string]any{
				{"id": id, "type": "function", "function": map[string]any{"name": "search", "arguments": `{"query":"river ` + strconv.Itoa(i) + `"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": observation(i)},
		)
	}
	b, _ := json.Marshal(map[string]any{"model": sim.ModelName, "messages": msgs, "tools": searchTool})
	return b
}
