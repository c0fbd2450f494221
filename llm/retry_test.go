package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// answer is what a scripted transport does for one attempt.
type answer struct {
	status     int
	retryAfter string
	body       string
	err        error
	cut        bool // the body breaks off midway
	block      bool // no answer until the attempt's context ends
}

// script is a transport answering attempts in order, the last answer
// repeating; it records the body each attempt sent.
type script struct {
	answers []answer
	mu      sync.Mutex
	bodies  []string
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	a := s.answers[min(len(s.bodies), len(s.answers))-1]
	s.mu.Unlock()
	switch {
	case a.block:
		<-r.Context().Done()
		return nil, r.Context().Err()
	case a.err != nil:
		return nil, a.err
	}
	var rd io.Reader = strings.NewReader(a.body)
	if a.cut {
		rd = io.MultiReader(rd, errReader{io.ErrUnexpectedEOF})
	}
	h := http.Header{}
	if a.retryAfter != "" {
		h.Set("Retry-After", a.retryAfter)
	}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(rd), Request: r}, nil
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var (
	ok200   = answer{status: 200, body: `{"ok":true}`}
	refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errJSON = errors.New("not JSON")
)

// jsonCheck marks a 2xx answer that is not JSON unusable, and a 500
// saying "final" as one a retry would get again.
func jsonCheck(_ *http.Request, status int, body []byte) error {
	switch {
	case status/100 == 2 && !strings.HasPrefix(string(body), "{"):
		return errJSON
	case status == 500 && strings.Contains(string(body), "final"):
		return errors.New("final")
	}
	return nil
}

// TestRetrier: which failures are retried, how often, and what the caller
// gets back.
func TestRetrier(t *testing.T) {
	tests := []struct {
		name       string
		answers    []answer
		maxRetries int
		noGetBody  bool
		attempts   int
		status     int // of the response handed back; 0: an error
		gaveUp     bool
		timedOut   bool
	}{
		{name: "429 then ok", answers: []answer{{status: 429}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "408 then ok", answers: []answer{{status: 408}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "500, 502, 503, 504 then ok", answers: []answer{{status: 500}, {status: 502}, {status: 503}, {status: 504}, ok200}, maxRetries: 5, attempts: 5, status: 200},
		{name: "400 not retried", answers: []answer{{status: 400}, ok200}, maxRetries: 3, attempts: 1, status: 400},
		{name: "401 not retried", answers: []answer{{status: 401}, ok200}, maxRetries: 3, attempts: 1, status: 401},
		{name: "404 not retried", answers: []answer{{status: 404}, ok200}, maxRetries: 3, attempts: 1, status: 404},
		{name: "422 not retried", answers: []answer{{status: 422}, ok200}, maxRetries: 3, attempts: 1, status: 422},
		{name: "attempts bounded", answers: []answer{{status: 503}}, maxRetries: 2, attempts: 3, status: 503, gaveUp: true},
		{name: "retries disabled", answers: []answer{{status: 503}}, maxRetries: -1, attempts: 1, status: 503, gaveUp: true},
		{name: "refused connection retried", answers: []answer{{err: refused}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "refused to the end", answers: []answer{{err: refused}}, maxRetries: 1, attempts: 2, gaveUp: true},
		{name: "other transport error not retried", answers: []answer{{err: errors.New("tls: bad certificate")}, ok200}, maxRetries: 3, attempts: 1},
		{name: "body cut off retried", answers: []answer{{status: 200, body: `{"o`, cut: true}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "4xx body cut off not retried", answers: []answer{{status: 400, body: `{"e`, cut: true}, ok200}, maxRetries: 3, attempts: 1},
		{name: "unusable 2xx retried", answers: []answer{{status: 200, body: "oops"}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "unusable 2xx to the end is an error", answers: []answer{{status: 200, body: "oops"}}, maxRetries: 1, attempts: 2, gaveUp: true},
		{name: "5xx the check calls final", answers: []answer{{status: 500, body: "final"}, ok200}, maxRetries: 3, attempts: 1, status: 500},
		{name: "attempt timeout retried", answers: []answer{{block: true}, ok200}, maxRetries: 3, attempts: 2, status: 200},
		{name: "timed out to the end", answers: []answer{{block: true}}, maxRetries: 1, attempts: 2, gaveUp: true, timedOut: true},
		{name: "body without GetBody sent once", answers: []answer{{status: 503}, ok200}, maxRetries: 3, noGetBody: true, attempts: 1, status: 503, gaveUp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{answers: tt.answers}
			rt := &Retrier{Policy: RetryPolicy{MaxRetries: tt.maxRetries, Timeout: 50 * time.Millisecond, Base: time.Millisecond, Cap: 2 * time.Millisecond}, Next: s, Check: jsonCheck}
			ctx, try := WithTry(context.Background())
			const sent = `{"q":"the same body every time"}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/v1/op", strings.NewReader(sent))
			if tt.noGetBody {
				req.GetBody = nil
			}
			resp, err := rt.RoundTrip(req)
			if got := s.attempts(); got != tt.attempts || try.N != tt.attempts {
				t.Errorf("server saw %d attempts, Try.N %d; want %d", got, try.N, tt.attempts)
			}
			for i, b := range s.bodies {
				if b != sent {
					t.Errorf("attempt %d sent %q, want %q", i+1, b, sent)
				}
			}
			switch {
			case tt.status == 0 && err == nil:
				t.Fatalf("status %d, want an error", resp.StatusCode)
			case tt.status != 0 && err != nil:
				t.Fatalf("err %v, want status %d", err, tt.status)
			case tt.status != 0 && resp.StatusCode != tt.status:
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if try.GaveUp != tt.gaveUp || try.TimedOut != tt.timedOut {
				t.Errorf("Try %+v, want GaveUp %v, TimedOut %v", *try, tt.gaveUp, tt.timedOut)
			}
		})
	}
}

// TestRetrierBodyReadable: the answer handed back is readable after
// RoundTrip, though the attempt's context and connection are gone.
func TestRetrierBodyReadable(t *testing.T) {
	rt := &Retrier{Policy: RetryPolicy{Timeout: time.Second}, Next: &script{answers: []answer{{status: 404, body: "no such op"}}}}
	req, _ := http.NewRequest(http.MethodGet, "http://x/op", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "no such op" {
		t.Fatalf("body %q, %v", b, err)
	}
}

// TestRetrierWait: the wait before a retry is the server's Retry-After in
// seconds or as an HTTP date (at most a minute), else the jittered
// backoff under the cap. The test reads the wait from Log and cancels.
func TestRetrierWait(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		retryAfter string
		lo, hi     time.Duration
	}{
		{"seconds", "7", 7 * time.Second, 7 * time.Second},
		{"HTTP date", date, 28 * time.Second, 30 * time.Second},
		{"past date", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0},
		{"seconds capped", "3600", maxRetryAfter, maxRetryAfter},
		{"date capped", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), maxRetryAfter, maxRetryAfter},
		{"none: jittered backoff", "", 0, 3 * time.Second},
		{"unreadable: jittered backoff", "soon", 0, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wait time.Duration
			rt := &Retrier{
				Policy: RetryPolicy{MaxRetries: 1, Base: 3 * time.Second, Cap: 10 * time.Second},
				Next:   &script{answers: []answer{{status: 429, retryAfter: tt.retryAfter}}},
				Log: func(_ *http.Request, t Try, w time.Duration) {
					if t.N == 1 {
						wait = w
						cancel() // a wait of 0 may still win the race
					}
				},
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/op", nil)
			rt.RoundTrip(req)
			if wait < tt.lo || wait > tt.hi {
				t.Errorf("wait %v, want within [%v, %v]", wait, tt.lo, tt.hi)
			}
		})
	}
}

// TestRetrierStops: a cancelled context, or the stop context of
// RetryUntil, ends the wait at once; an attempt in flight under
// RetryUntil still completes.
func TestRetrierStops(t *testing.T) {
	slow := answer{status: 429, retryAfter: "30"}
	t.Run("ctx cancelled mid-sleep", func(t *testing.T) {
		s := &script{answers: []answer{slow}}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		ctx, try := WithTry(ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/op", nil)
		start := time.Now()
		_, err := (&Retrier{Policy: RetryPolicy{MaxRetries: 5}, Next: s}).RoundTrip(req)
		if !errors.Is(err, context.DeadlineExceeded) || try.GaveUp {
			t.Fatalf("err %v, Try %+v; want the deadline, not given up", err, *try)
		}
		if d := time.Since(start); d > 2*time.Second || s.attempts() != 1 {
			t.Errorf("returned after %v and %d attempts", d, s.attempts())
		}
	})
	t.Run("stop mid-sleep", func(t *testing.T) {
		s := &script{answers: []answer{slow}}
		stop, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(RetryUntil(context.Background(), stop), http.MethodGet, "http://x/op", nil)
		start := time.Now()
		_, err := (&Retrier{Policy: RetryPolicy{MaxRetries: 5}, Next: s}).RoundTrip(req)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second || s.attempts() != 1 {
			t.Fatalf("err %v after %v and %d attempts", err, time.Since(start), s.attempts())
		}
	})
	t.Run("stop during the attempt", func(t *testing.T) {
		stop, cancel := context.WithCancel(context.Background())
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			cancel() // the caller gives up while the server answers
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy"))}, nil
		})
		ctx, try := WithTry(RetryUntil(context.Background(), stop))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/op", nil)
		resp, err := (&Retrier{Policy: RetryPolicy{MaxRetries: 5}, Next: next}).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || try.N != 1 || try.GaveUp {
			t.Fatalf("resp %v, err %v, Try %+v; want the attempt's answer and no retry", resp, err, *try)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRetrierFreesSlotWhileWaiting: an endpoint's concurrency slot is not
// held through a retry's wait.
func TestRetrierFreesSlotWhileWaiting(t *testing.T) {
	l := &limiter{}
	l.raise(1)
	var mu sync.Mutex
	var done []string
	var aTried bool
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		status := 200
		mu.Lock()
		if r.URL.Path == "/a" && !aTried {
			aTried, status = true, 429
			h.Set("Retry-After", "1")
		}
		mu.Unlock()
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
	})
	rt := &Retrier{Policy: RetryPolicy{MaxRetries: 1}, Next: next, limit: l}
	var wg sync.WaitGroup
	for i, path := range []string{"/a", "/b"} {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 200 * time.Millisecond) // a goes first
			req, _ := http.NewRequest(http.MethodGet, "http://x"+path, nil)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Error(err)
			}
			mu.Lock()
			done = append(done, path)
			mu.Unlock()
		})
	}
	wg.Wait()
	if fmt.Sprint(done) != "[/b /a]" {
		t.Errorf("finished in order %v, want b during a's wait", done)
	}
}

// TestRetriesAccounted: a call's retries count in its response, its
// stats and, when it fails, its error's Attempts, which the spend ledger
// counts as requests; a reply the server could not parse after a retry
// is billed (the model ran) and not retried again.
func TestRetriesAccounted(t *testing.T) {
	t.Run("unparsed after a retry is billed", func(t *testing.T) {
		f := newFake(t, func(f *fake) {
			f.faults = []fault{status(503, ""), serverError(500, "Failed to parse tool call arguments as JSON")}
		})
		c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", PriceIn: 1e6}, nil)
		resp, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")})
		if err != nil || resp.FinishReason != FinishMalformed || resp.Retries != 1 {
			t.Fatalf("resp %+v, err %v; want a malformed reply after 1 retry", resp, err)
		}
		st := c.Stats()
		if f.calls.Load() != 2 || st.Retries != 1 || st.Malformed != 1 || st.PromptTokens == 0 || st.CostUSD == 0 {
			t.Errorf("server saw %d calls; stats %+v: want 2 calls, 1 retry, the prompt billed", f.calls.Load(), st)
		}
	})
	t.Run("failed call counts its attempts", func(t *testing.T) {
		f := newFake(t, func(f *fake) { f.always = status(503, "") })
		c := testClient(t, "agent", RoleConfig{BaseURL: f.url(), Model: "m", MaxRetries: 2}, nil)
		_, err := c.Complete(context.Background(), Request{Messages: userMsg("hi")})
		if !errors.Is(err, ErrUnavailable) || Attempts(err) != 3 || c.Stats().Retries != 2 {
			t.Errorf("err %v, Attempts %d, stats %+v; want unavailable after 3 attempts", err, Attempts(err), c.Stats())
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"1", time.Second, true},
		{"0", 0, true},
		{"3600", maxRetryAfter, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackoffFullJitter(t *testing.T) {
	c := RetryPolicy{Base: 250 * time.Millisecond, Cap: 20 * time.Second}
	now := time.Now()
	for n, ceil := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		var maxSeen time.Duration
		for range 200 {
			d := c.backoff(n, "", now)
			if d < 0 || d > ceil {
				t.Fatalf("backoff(%d) = %v, outside [0, %v]", n, d, ceil)
			}
			maxSeen = max(maxSeen, d)
		}
		if maxSeen < ceil/2 {
			t.Errorf("backoff(%d) never above %v in 200 draws: not jittered over [0, %v]", n, maxSeen, ceil)
		}
	}
	for _, n := range []int{7, 40, 100} {
		if d := c.backoff(n, "", now); d > c.Cap {
			t.Errorf("backoff(%d) = %v above cap", n, d)
		}
	}
	if d := c.backoff(0, "120", now); d != maxRetryAfter {
		t.Errorf("Retry-After 120 gave %v, want the %v cap", d, maxRetryAfter)
	}
}
