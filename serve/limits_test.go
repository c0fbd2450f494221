package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm/sim"
)

func TestLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := newLimiter(Limits{Rate: 2, Burst: 2, TokenBudget: 100, BudgetWindow: time.Hour})
	l.now = func() time.Time { return now }
	steps := []struct {
		advance time.Duration
		spend   int64
		want    string
	}{
		{0, 0, ""}, {0, 0, ""}, {0, 0, "rate"}, // burst of 2, then empty
		{500 * time.Millisecond, 0, ""}, // 2/s refills one in 0.5 s
		{0, 0, "rate"},
		{time.Second, 100, ""},     // refilled; the budget is spent after this one
		{time.Second, 0, "budget"}, // tokens are back, the budget is not
		{time.Hour, 0, ""},         // a new window
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		got, wait := l.admit("k")
		if got != s.want {
			t.Fatalf("step %d: %q, want %q", i, got, s.want)
		}
		if got != "" && wait <= 0 {
			t.Errorf("step %d: refused with no wait", i)
		}
		l.spend("k", s.spend)
	}
	if got, _ := l.admit("other"); got != "" {
		t.Errorf("another key is limited by k's use: %q", got)
	}
}

func TestUsageReader(t *testing.T) {
	var got int64
	body := `data: {"usage":{"prompt_tokens":5,"completion_tokens":1` + `2}}` + "\n\n" + `data: {"type":"message_delta","usage":{"output_tokens": 7}}`
	u := &usageReader{rc: nopCloser{strings.NewReader(body)}, spend: func(n int64) { got = n }}
	buf := make([]byte, 3) // numbers straddle reads
	for {
		if _, err := u.Read(buf); err != nil {
			break
		}
	}
	_ = u.Close()
	if got != 12 {
		t.Errorf("charged %d completion tokens, want 12", got)
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func TestModelsAndUpstreamErrors(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	failing := newRecUpstream(t, sim.Config{Rate5xx: 1})
	dir, _, _ := registry(t)
	cfg := testConfig(t, up.url(), up.url(), dir)
	cfg.Upstream.Anthropic.BaseURL = failing.url()
	_, url := start(t, cfg)

	resp, err := client.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("models: status %d", resp.StatusCode)
	}
	// An Anthropic client's request goes to the Anthropic upstream, which
	// fails: the status and body pass through.
	r, b := post(t, url+"/v1/messages", []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`), nil)
	if r.StatusCode != http.StatusInternalServerError && r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("upstream error: status %d: %s", r.StatusCode, b)
	}
	if !strings.Contains(gjson.GetBytes(b, "error.message").Str, "injected") {
		t.Errorf("upstream error body not passed through: %s", b)
	}
	code := "500"
	if r.StatusCode == http.StatusServiceUnavailable {
		code = "503"
	}
	if n := metric(t, url, `ctxopt_serve_upstream_errors_total{code="`+code+`",endpoint="anthropic"}`); n != 1 {
		t.Errorf("upstream errors counted %v, want 1", n)
	}
	if r, b := post(t, url+"/v1/chat/completions", []byte(`{"messages": 3}`), nil); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: status %d: %s", r.StatusCode, b)
	}
}

func TestInvalidPromotionKeepsGuideline(t *testing.T) {
	up := newRecUpstream(t, sim.Config{})
	dir, promoted, _ := registry(t)
	srv, url := start(t, testConfig(t, up.url(), up.url(), dir))
	// A promotion file that is not a valid history guideline (it reads no
	// history) is refused; the guideline in service stays.
	if err := os.WriteFile(filepath.Join(dir, guideline.PromotedFile(guideline.KindHistory)), []byte("Summarize {{ task }}."), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Error("an invalid promotion was accepted")
	}
	resp, _ := post(t, url+"/v1/chat/completions", toolConversation(4, "invalid"), nil)
	if got := resp.Header.Get(HeaderGuideline); got != promoted {
		t.Errorf("guideline %q after an invalid promotion, want %s", got, promoted)
	}
	if n := metric(t, url, `ctxopt_serve_guideline_reloads_total{result="invalid"}`); n != 1 {
		t.Errorf("invalid reloads counted %v", n)
	}
}
