package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

const meterSecret = "Bearer sk-meter-test-secret"

// fakeUpstream is an endpoint that answers every request with status and
// a chat body reporting 7+5 tokens, and counts what it served.
type fakeUpstream struct {
	*httptest.Server
	served atomic.Int64
	mu     sync.Mutex
	last   http.Header
}

func newFakeUpstream(t *testing.T, status int) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.served.Add(1)
		u.mu.Lock()
		u.last = r.Header.Clone()
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":7,"completion_tokens":5}}`)
	}))
	t.Cleanup(u.Close)
	return u
}

// meterFixture is a proxy in front of an upstream, with a file run store
// under its one --store prefix.
type meterFixture struct {
	proxy *MeterProxy
	up    *fakeUpstream
	root  string // the --store prefix's directory
	store string // a run store URL under it
}

func newMeterFixture(t *testing.T, status int) *meterFixture {
	t.Helper()
	f := &meterFixture{up: newFakeUpstream(t, status), root: t.TempDir()}
	var err error
	if err := os.Mkdir(filepath.Join(f.root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f.store, err = RunStoreURL("", filepath.Join(f.root, "run")); err != nil {
		t.Fatal(err)
	}
	f.proxy, err = NewMeterProxy(MeterProxyConfig{Upstreams: []string{f.up.URL + "/v1/"}, Stores: []string{"file://" + filepath.ToSlash(f.root) + "/"}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.proxy.Close() })
	return f
}

// request is a metered chat request to the fixture's upstream, as a
// worker sends it.
func (f *meterFixture) request(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://meter/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", meterSecret)
	r.Header.Set(MeterUpstreamHeader, f.up.URL+"/v1")
	r.Header.Set(MeterStoreHeader, f.store)
	r.Header.Set(MeterWorkflowHeader, "wf/run-1")
	r.Header.Set(MeterActivityHeader, "7")
	r.Header.Set(MeterAttemptHeader, "2")
	r.Header.Set(MeterRequestHeader, "3")
	return r
}

// ledger sums the run store's ledger and lists its objects.
func (f *meterFixture) ledger(t *testing.T) (Spend, []string) {
	t.Helper()
	s, err := OpenRunStore(context.Background(), f.store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, err := s.List(context.Background(), LedgerDir+"/")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := OpenLedger(s).Sum(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sum, keys
}

func TestMeterProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int                 // the upstream's
		edit   func(*http.Request) // the request as sent
		times  int                 // sent this many times (0: once)
		code   int                 // the proxy's answer
		header string              // the header its error names
		want   Spend               // the ledger's sum after
		served int64               // requests the upstream served
	}{
		{name: "forwards and records once", status: 200, code: 200, want: Spend{Requests: 1, Tokens: 12}, served: 1},
		{name: "a retried (key, request) is one object", status: 200, times: 3, code: 200, want: Spend{Requests: 1, Tokens: 12}, served: 3},
		{name: "an error answer is a request without tokens", status: 500, code: 500, want: Spend{Requests: 1}, served: 1},
		{name: "unknown upstream", edit: set(MeterUpstreamHeader, "http://127.0.0.1:1/v1"), code: 403, header: MeterUpstreamHeader},
		{name: "upstream missing", edit: del(MeterUpstreamHeader), code: 400, header: MeterUpstreamHeader},
		{name: "workflow missing", edit: del(MeterWorkflowHeader), code: 400, header: MeterWorkflowHeader},
		{name: "activity oversized", edit: set(MeterActivityHeader, strings.Repeat("a", maxMeterName+1)), code: 400, header: MeterActivityHeader},
		{name: "attempt not a number", edit: set(MeterAttemptHeader, "2x"), code: 400, header: MeterAttemptHeader},
		{name: "request negative", edit: set(MeterRequestHeader, "-1"), code: 400, header: MeterRequestHeader},
		{name: "request with a leading zero", edit: set(MeterRequestHeader, "03"), code: 400, header: MeterRequestHeader},
		{name: "request twice", edit: func(r *http.Request) { r.Header.Add(MeterRequestHeader, "4") }, code: 400, header: MeterRequestHeader},
		{name: "store missing", edit: del(MeterStoreHeader), code: 400, header: MeterStoreHeader},
		{name: "store outside the prefixes", edit: set(MeterStoreHeader, "file:///tmp/elsewhere/run?metadata=skip"), code: 403, header: MeterStoreHeader},
		{name: "store traversing out", edit: func(r *http.Request) {
			r.Header.Set(MeterStoreHeader, strings.Replace(r.Header.Get(MeterStoreHeader), "/run?", "/../../etc?", 1))
		}, code: 403, header: MeterStoreHeader},
		{name: "store with a sibling's name", edit: func(r *http.Request) {
			u, _ := url.Parse(r.Header.Get(MeterStoreHeader))
			u.Path = strings.TrimSuffix(filepath.Dir(u.Path), "/") + "-evil/run"
			r.Header.Set(MeterStoreHeader, u.String())
		}, code: 403, header: MeterStoreHeader},
		{name: "store with another endpoint", edit: func(r *http.Request) {
			r.Header.Set(MeterStoreHeader, r.Header.Get(MeterStoreHeader)+"&endpoint=http://evil")
		}, code: 403, header: MeterStoreHeader},
		{name: "path out of the upstream", edit: func(r *http.Request) { r.URL.Path = "/v1/../admin" }, code: 400},
		{name: "body oversized", edit: func(r *http.Request) {
			r.Body = io.NopCloser(bytes.NewReader(make([]byte, MaxMeterRequest+1)))
		}, code: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMeterFixture(t, max(tc.status, 200))
			var rec *httptest.ResponseRecorder
			for range max(tc.times, 1) {
				r := f.request(`{"model":"m"}`)
				if tc.edit != nil {
					tc.edit(r)
				}
				rec = httptest.NewRecorder()
				f.proxy.ServeHTTP(rec, r)
			}
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code >= 400 && tc.code != tc.status {
				var e struct {
					Error struct{ Message, Param string }
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.HasPrefix(e.Error.Message, "ctxopt meter: ") || e.Error.Param != tc.header {
					t.Fatalf("error body %s (%v): want a ctxopt meter message naming %q", rec.Body, err, tc.header)
				}
				if tc.header != "" && !strings.Contains(e.Error.Message, tc.header) {
					t.Fatalf("error %q does not name %s", e.Error.Message, tc.header)
				}
			}
			if got, keys := f.ledger(t); got != tc.want || (tc.want == Spend{}) != (len(keys) == 0) {
				t.Fatalf("ledger sums %+v in %v, want %+v", got, keys, tc.want)
			}
			if n := f.up.served.Load(); n != tc.served {
				t.Fatalf("the upstream served %d, want %d", n, tc.served)
			}
			if tc.served > 0 {
				f.up.mu.Lock()
				h := f.up.last
				f.up.mu.Unlock()
				if h.Get("Authorization") != meterSecret || h.Get(MeterStoreHeader) != "" || h.Get(MeterUpstreamHeader) != "" {
					t.Fatalf("the upstream got headers %v: want Authorization, no ledger headers", h)
				}
			}
		})
	}
}

func set(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }
func del(k string) func(*http.Request)    { return func(r *http.Request) { r.Header.Del(k) } }

// TestMeterProxyUpstreamDown: a request the upstream never answered is
// a 502 and no record.
func TestMeterProxyUpstreamDown(t *testing.T) {
	f := newMeterFixture(t, 200)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	p, err := NewMeterProxy(MeterProxyConfig{Upstreams: []string{down.URL + "/v1"}, Stores: []string{"file://" + filepath.ToSlash(f.root)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := f.request("{}")
	r.Header.Set(MeterUpstreamHeader, down.URL+"/v1")
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, r)
	if rec.Code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", rec.Code, rec.Body)
	}
	if got, keys := f.ledger(t); len(keys) != 0 {
		t.Fatalf("ledger %+v in %v, want none", got, keys)
	}
}

// TestMeterProxyClientGone: a client that goes away after the upstream
// took its request (a worker killed with SIGKILL mid-call) still has the
// request recorded: the upstream served it. Nothing logged holds the
// request's Authorization, and neither does the ledger.
func TestMeterProxyClientGone(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	f := newMeterFixture(t, 200)
	took, release := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(took)
		<-release
		_, _ = io.WriteString(w, `{"usage":{"prompt_tokens":3,"completion_tokens":4}}`)
	}))
	defer slow.Close()
	p, err := NewMeterProxy(MeterProxyConfig{Upstreams: []string{slow.URL + "/v1"}, Stores: []string{"file://" + filepath.ToSlash(f.root) + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(p) // on 127.0.0.1
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r := f.request("{}").WithContext(ctx)
	r.RequestURI, r.URL = "", mustURL(t, srv.URL+"/chat/completions")
	r.Header.Set(MeterUpstreamHeader, slow.URL+"/v1")
	go func() {
		<-took
		cancel() // the worker dies with the request at the upstream
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	if _, err := http.DefaultClient.Do(r); err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	var got Spend
	for deadline := time.Now().Add(10 * time.Second); got.Requests == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, _ = f.ledger(t)
	}
	if want := (Spend{Requests: 1, Tokens: 7}); got != want {
		t.Fatalf("ledger %+v, want %+v", got, want)
	}
	ledgerFiles, _ := filepath.Glob(filepath.Join(f.root, "run", LedgerDir, "*", "*.json"))
	for _, p := range ledgerFiles {
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("sk-meter")) {
			t.Fatalf("%s holds the Authorization: %s", p, b)
		}
	}
	if !strings.Contains(logs.String(), "meter: recorded") || strings.Contains(logs.String(), "sk-meter") {
		t.Fatalf("logs (want a record, no secret):\n%s", logs.String())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestMeterThroughProxy: the same calls recorded by a worker's own meter
// (its trace) and through the metering proxy sum to the same spend, and
// through the proxy the requests are the ones the endpoint served.
func TestMeterThroughProxy(t *testing.T) {
	ctx := context.Background()
	model, err := sim.Start(ctx, "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	root := t.TempDir()
	proxy, err := NewMeterProxy(MeterProxyConfig{Upstreams: []string{model.URL()}, Stores: []string{"file://" + filepath.ToSlash(root) + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	c, err := llm.NewClient("agent", llm.RoleConfig{BaseURL: model.URL(), Model: sim.ModelName, NoKey: true, PriceIn: 1, PriceOut: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sums [2]Spend
	for i, via := range []string{"", srv.URL} {
		dir := filepath.Join(root, fmt.Sprintf("run%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		url, err := RunStoreURL("", dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenRunStore(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		l := OpenLedger(s)
		m := NewAttemptMeter(l, LedgerKey{Workflow: "wf", Activity: "1", Attempt: 1})
		if via != "" {
			m.ledger.proxy, _ = ParseMeterURL(via)
		}
		before := model.Stats().Requests
		mc := m.Wrap(c)
		for _, q := range []string{"list the files", "read a.txt", "list the files"} {
			if _, err := mc.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: q}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := mc.Embed(ctx, []string{"one", "two"}); err != nil {
			t.Fatal(err)
		}
		if sums[i], err = l.Sum(ctx); err != nil {
			t.Fatal(err)
		}
		served := model.Stats().Requests - before
		if int64(sums[i].Requests) != served || sums[i].Calls != 4 || sums[i].Tokens == 0 || sums[i] != m.Snapshot() {
			t.Fatalf("via %q: ledger %+v, the meter counted %+v, the endpoint served %d", via, sums[i], m.Snapshot(), served)
		}
	}
	if sums[0] != sums[1] {
		t.Fatalf("the worker's ledger %+v, the proxy's %+v: want the same", sums[0], sums[1])
	}
}
