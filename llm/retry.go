package llm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Backoff bounds of the retry policy. Retry-After is obeyed up to
// maxRetryAfter so a server asking for an hour does not stall a nightly job
// silently.
const (
	defaultBackoffBase = 250 * time.Millisecond
	defaultBackoffCap  = 20 * time.Second
	maxRetryAfter      = 60 * time.Second
)

// RetryPolicy is the one retry policy of ctxopt's HTTP clients (the LLM
// roles, the external HTTP environment, the LLMLingua service), applied by
// a Retrier. Transient failures are retried: 408, 429 and 5xx, a 2xx
// answer that was cut off or is unusable (Retrier.Check), an attempt that
// timed out, a refused, reset or dropped connection. Other 4xx are not.
// The wait before a retry is the server's Retry-After (seconds or an HTTP
// date, at most a minute), else exponential backoff with full jitter.
// Each client's config owns its knobs' defaults (a RoleConfig's
// max_retries, env.http's timeout) and maps them onto a policy.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt;
	// negative means none.
	MaxRetries int
	// Timeout bounds one attempt, not the call with its retries; 0: none.
	Timeout time.Duration
	// Base is the backoff ceiling of the first retry, doubled with each
	// retry up to Cap; 0 means 250ms and 20s.
	Base, Cap time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxRetries = max(p.MaxRetries, 0)
	p.Base = cmp.Or(p.Base, defaultBackoffBase)
	p.Cap = cmp.Or(p.Cap, defaultBackoffCap)
	return p
}

// Retrier is an http.RoundTripper that sends a request again under its
// Policy. A request body is replayed with GetBody (http.NewRequest sets it
// for byte and string readers); a body without one is sent once. Every
// answer's body is read, and buffered, before RoundTrip returns, so an
// answer cut off midway is retried too. RoundTrip hands back the last
// attempt's answer or error, as one request would; a caller that needs to
// know how many attempts it took, or that the policy gave up, sends the
// request with a context from WithTry.
type Retrier struct {
	Policy RetryPolicy
	// Next sends each attempt; nil means http.DefaultTransport.
	Next http.RoundTripper
	// MaxBody bounds the bytes of an answer read (the rest is dropped);
	// 0 means no bound.
	MaxBody int64
	// Check, when set, judges an answer by its body where its status
	// misleads. Its error marks a 2xx answer unusable: it is retried, and
	// if it is the last, RoundTrip returns the error. For any other status
	// it marks a failure that a retry would get again: it is not retried.
	Check func(r *http.Request, status int, body []byte) error
	// Log, when set, is told of every attempt, and of the wait before the
	// next (0 after the last).
	Log func(r *http.Request, t Try, wait time.Duration)

	// limit, when set, is held for each attempt and released during the
	// wait, so a sleeping retry does not take an endpoint's slot.
	limit *limiter
}

// Try is the last attempt a Retrier made for a request.
type Try struct {
	// N counts the attempts sent, the last included.
	N int
	// Status is the last answer's status; 0 when none came.
	Status int
	// TimedOut says the last attempt ran out of the policy's Timeout.
	TimedOut bool
	// Err is why the last attempt failed when its status does not say it:
	// the transport's error, or Check's.
	Err error
	// GaveUp says the last attempt failed as the policy retries, with no
	// retry left: the endpoint is unavailable.
	GaveUp bool
	// Took is how long the last attempt took.
	Took time.Duration
}

type (
	tryKey   struct{}
	stopKey  struct{}
	proxyKey struct{}
)

// Proxy routes one attempt of a request elsewhere: it returns the request
// to send in its place (a metering proxy's URL, with headers naming the
// endpoint and the attempt), whose answer is taken as the endpoint's. It
// is called once per attempt, so each retry is routed, and named, anew.
type Proxy func(*http.Request) (*http.Request, error)

// WithProxy returns ctx whose requests a Retrier sends through p.
func WithProxy(ctx context.Context, p Proxy) context.Context {
	return context.WithValue(ctx, proxyKey{}, p)
}

// WithTry returns ctx carrying a Try that a Retrier fills in for a request
// sent with it. A Try serves one request at a time.
func WithTry(ctx context.Context) (context.Context, *Try) {
	t := new(Try)
	return context.WithValue(ctx, tryKey{}, t), t
}

// RetryUntil returns ctx with stop ending the retries of requests sent
// with it: the attempt in flight runs on under ctx. A caller that must see
// an attempt's answer (a session the server opened) sends it under a
// context that is not cancelled, and stops the retries with its own.
func RetryUntil(ctx, stop context.Context) context.Context {
	return context.WithValue(ctx, stopKey{}, stop)
}

// RoundTrip implements http.RoundTripper.
func (rt *Retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	t, _ := ctx.Value(tryKey{}).(*Try)
	if t == nil {
		t = new(Try)
	}
	*t = Try{}
	stop, _ := ctx.Value(stopKey{}).(context.Context)
	if stop == nil {
		stop = ctx
	}
	p := rt.Policy.withDefaults()
	if req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		p.MaxRetries = 0 // the body cannot be sent again
	} else if req.Body != nil {
		req.Body.Close() // each attempt gets its own copy
	}
	for n := 0; ; n++ {
		resp, retry, err := rt.attempt(req, p.Timeout, t)
		t.GaveUp = retry && n >= p.MaxRetries && stop.Err() == nil
		if !retry || t.GaveUp || stop.Err() != nil {
			rt.log(req, *t, 0)
			return resp, err
		}
		var after string
		if resp != nil {
			after = resp.Header.Get("Retry-After")
		}
		wait := p.backoff(n, after, time.Now())
		rt.log(req, *t, wait)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-stop.Done():
			timer.Stop()
			return nil, stop.Err()
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

func (rt *Retrier) log(r *http.Request, t Try, wait time.Duration) {
	if rt.Log != nil {
		rt.Log(r, t, wait)
	}
}

// attempt sends req once, under the endpoint's limit and the timeout, and
// reads the answer. retry says it failed as the policy retries; an
// unusable 2xx answer comes back as Check's error.
func (rt *Retrier) attempt(req *http.Request, timeout time.Duration, t *Try) (_ *http.Response, retry bool, _ error) {
	ctx := req.Context()
	r := req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, false, fmt.Errorf("replay request body: %w", err)
		}
		r = req.WithContext(ctx) // a shallow copy, to give it the body
		r.Body = body
	}
	if rt.limit != nil {
		if err := rt.limit.acquire(ctx); err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, false, err
		}
		defer rt.limit.release()
	}
	if p, _ := ctx.Value(proxyKey{}).(Proxy); p != nil {
		pr, err := p(r)
		if err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, false, fmt.Errorf("route through the proxy: %w", err)
		}
		r = pr
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := time.Now()
	t.N++
	t.Status, t.TimedOut, t.Err = 0, false, nil
	resp, body, err := rt.send(r.WithContext(actx))
	t.Took = time.Since(start)
	if resp != nil {
		t.Status = resp.StatusCode
	}
	if err != nil {
		t.Err = err
		if ctx.Err() != nil {
			return nil, false, err // the caller gave up; err is a consequence
		}
		t.TimedOut = errors.Is(actx.Err(), context.DeadlineExceeded)
		return nil, t.TimedOut || retryable(err, t.Status), err
	}
	retry = retryableStatus(resp.StatusCode)
	if rt.Check != nil {
		if err := rt.Check(req, resp.StatusCode, body); err != nil {
			t.Err = err
			if resp.StatusCode/100 == 2 {
				return nil, true, err
			}
			retry = false
		}
	}
	return resp, retry, nil
}

// send makes one attempt and reads its answer's body, which it puts back
// buffered. On a read error resp still tells the status.
func (rt *Retrier) send(r *http.Request) (resp *http.Response, body []byte, err error) {
	next := rt.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err = next.RoundTrip(r)
	if err != nil {
		return nil, nil, err
	}
	var rd io.Reader = resp.Body
	if rt.MaxBody > 0 {
		rd = io.LimitReader(rd, rt.MaxBody)
	}
	body, err = io.ReadAll(rd)
	resp.Body.Close()
	if err != nil {
		return resp, nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, body, nil
}

func retryableStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

// retryable tells transient failures of an exchange (broken connections,
// an answer cut off) from those that would happen again. status is the
// answer's when its body could not be read, else 0.
func retryable(err error, status int) bool {
	switch {
	case retryableStatus(status):
		return true
	case status >= 400:
		return false
	case status >= 200:
		return true // the answer was cut off
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// backoff is the wait before retry n+1: the server's Retry-After when it
// gave one, else exponential backoff with full jitter under the cap.
func (p RetryPolicy) backoff(n int, retryAfter string, now time.Time) time.Duration {
	if d, ok := parseRetryAfter(retryAfter, now); ok {
		return min(d, maxRetryAfter)
	}
	ceil := p.Cap
	if n < 32 && p.Base<<n > 0 && p.Base<<n < ceil {
		ceil = p.Base << n
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil + 1)
}

// parseRetryAfter reads delta-seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int(maxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
