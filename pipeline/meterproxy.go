package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/llm"
)

// The metering proxy (optimize meter) records each LLM request of a
// worker in the run's spend ledger where the request meets the endpoint:
// a worker killed mid-call cannot part the record from the request, as a
// worker that records its own requests can (Meter.traced). Both ends of
// its protocol live here: the headers a worker sends (meterRoute) and the
// proxy that reads them (MeterProxy).

// The headers of a metered request: the endpoint it is for, and the
// ledger entry it makes (LedgerKey and request number). The proxy strips
// them before forwarding.
const (
	MeterUpstreamHeader = "X-Ctxopt-Upstream"
	MeterStoreHeader    = "X-Ctxopt-Ledger-Store"
	MeterWorkflowHeader = "X-Ctxopt-Ledger-Workflow"
	MeterActivityHeader = "X-Ctxopt-Ledger-Activity"
	MeterAttemptHeader  = "X-Ctxopt-Ledger-Attempt"
	MeterRequestHeader  = "X-Ctxopt-Ledger-Request"
)

// Bounds of the metering proxy: what it reads of a request and of an
// answer (a long agent conversation is well under a MiB), and the header
// values it accepts.
const (
	MaxMeterRequest  = 32 << 20
	MaxMeterResponse = llm.MaxAnswerBytes // what a worker's client would read
	maxMeterURL      = 2048
	maxMeterName     = 512
	maxMeterAttempt  = 1_000_000
	maxMeterIndex    = 99_999_999 // the ledger names entries with 8 digits
	// DefaultMeterTimeout bounds an upstream's answer: longer than any
	// role's attempt timeout is likely to be.
	DefaultMeterTimeout = 10 * time.Minute
)

// ParseMeterURL checks the URL of a metering proxy, as workers are given
// it: http(s)://host:port, the root of the proxy's paths (a request's
// path there is its path under the endpoint's base URL).
func ParseMeterURL(raw string) (*url.URL, error) {
	u, err := parseBaseURL(raw)
	if err == nil && u.Path != "" {
		err = fmt.Errorf("%q has a path; the meter serves at the root: http(s)://host:port", raw)
	}
	return u, err
}

// parseBaseURL checks an http(s) base URL, without a trailing slash, as
// the endpoints' base_url and --upstream give it.
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an http(s)://host[:port][/path] URL", raw)
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), ""
	return u, nil
}

// meterRoute sends each attempt of a request to base through the proxy,
// naming w's attempt and a request number of its own.
func meterRoute(proxy *url.URL, base string, w *LedgerWriter) llm.Proxy {
	bu, perr := url.Parse(base)
	return func(r *http.Request) (*http.Request, error) {
		if perr != nil {
			return nil, fmt.Errorf("endpoint %s: %w", base, perr)
		}
		rest, ok := strings.CutPrefix(r.URL.Path, bu.Path)
		if r.URL.Scheme != bu.Scheme || r.URL.Host != bu.Host || !ok || (rest != "" && rest[0] != '/') {
			return nil, fmt.Errorf("request %s is not under the endpoint %s", r.URL.Redacted(), base)
		}
		out := r.Clone(r.Context())
		u := *proxy
		u.Path, u.RawPath, u.RawQuery = rest, "", r.URL.RawQuery
		out.URL, out.Host = &u, ""
		h := out.Header
		h.Set(MeterUpstreamHeader, base)
		h.Set(MeterStoreHeader, w.s.URL())
		h.Set(MeterWorkflowHeader, w.key.Workflow)
		h.Set(MeterActivityHeader, w.key.Activity)
		h.Set(MeterAttemptHeader, strconv.Itoa(w.key.Attempt))
		h.Set(MeterRequestHeader, strconv.Itoa(w.reserve()))
		return out, nil
	}
}

// MeterProxyConfig configures a MeterProxy.
type MeterProxyConfig struct {
	// Upstreams are the endpoints' base URLs requests may go to; a
	// request naming another is refused: the proxy is never open.
	Upstreams []string
	// Stores are the run stores' URL prefixes whose ledgers the proxy
	// writes (a bucket URL with a prefix parameter, or a file:// path).
	Stores []string
	// Timeout bounds an upstream's answer; 0 means DefaultMeterTimeout.
	Timeout time.Duration
	// Transport sends the requests upstream; nil means a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// MeterProxy is the metering proxy: an http.Handler that forwards each
// metered request to its endpoint, reads the whole answer, writes the
// ledger entry, then relays the answer. An answer is recorded even when
// the client has gone (a worker killed mid-call): the endpoint served it.
// A request the endpoint never answered is not recorded.
type MeterProxy struct {
	upstreams map[string]bool
	stores    []*url.URL
	timeout   time.Duration
	client    *http.Client
	mu        sync.Mutex
	// open holds the run stores written so far, up to maxMeterStores:
	// opening a bucket per request would cost more than the write.
	open map[string]*RunStore
}

// maxMeterStores bounds the run stores a proxy keeps open; others are
// opened for each request.
const maxMeterStores = 64

// NewMeterProxy checks cfg and returns its proxy.
func NewMeterProxy(cfg MeterProxyConfig) (*MeterProxy, error) {
	p := &MeterProxy{upstreams: map[string]bool{}, timeout: cfg.Timeout, open: map[string]*RunStore{}}
	if p.timeout <= 0 {
		p.timeout = DefaultMeterTimeout
	}
	for _, raw := range cfg.Upstreams {
		u, err := parseBaseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("--upstream: %w", err)
		}
		p.upstreams[u.String()] = true
	}
	for _, raw := range cfg.Stores {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.User != nil || u.Fragment != "" || (u.Scheme != "file" && u.Host == "") {
			return nil, fmt.Errorf("--store: %q is not a bucket URL (file:///dir/, s3://bucket?prefix=p/, gs://…, azblob://…)", raw)
		}
		if traverses(u.Path) || traverses(u.Query().Get("prefix")) {
			return nil, fmt.Errorf("--store: %q has a . or .. segment", raw)
		}
		p.stores = append(p.stores, u)
	}
	if len(p.upstreams) == 0 || len(p.stores) == 0 {
		return nil, errors.New("the proxy needs at least one --upstream and one --store")
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	// No redirects: an answer is relayed as the endpoint gave it.
	p.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return p, nil
}

// Serve serves the proxy on ln until ctx is done, then stops taking
// requests and lets those in flight finish (each is bounded by the
// upstream timeout), so every answer relayed is recorded.
func (p *MeterProxy) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), p.timeout+time.Minute)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return errors.Join(err, p.Close())
}

// Close closes the run stores the proxy holds open.
func (p *MeterProxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for k, s := range p.open {
		errs = append(errs, s.Close())
		delete(p.open, k)
	}
	return errors.Join(errs...)
}

// meterError is a request the proxy refuses, with the header at fault.
type meterError struct {
	status int
	header string
	msg    string
}

func (p *MeterProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	up, entry, store, merr := p.admit(r)
	if merr != nil {
		writeMeterError(w, merr)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMeterRequest))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeMeterError(w, &meterError{http.StatusRequestEntityTooLarge, "", fmt.Sprintf("request body over the proxy's %d bytes", MaxMeterRequest)})
			return
		}
		writeMeterError(w, &meterError{http.StatusBadRequest, "", "read request body: " + err.Error()})
		return
	}
	// The client going away does not stop the exchange: the endpoint's
	// answer is recorded all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	defer cancel()
	resp, answer, err := p.forward(ctx, r, up, body)
	if resp == nil {
		slog.Warn("meter: the upstream did not answer; nothing recorded", "upstream", up, "path", r.URL.Path, "err", err)
		writeMeterError(w, &meterError{http.StatusBadGateway, "", fmt.Sprintf("the upstream %s did not answer: %v", up, err)})
		return
	}
	entry.Spend = answerSpend(resp.StatusCode, answer)
	if rerr := p.record(ctx, store, entry); rerr != nil {
		// Fail closed: an answer the ledger does not hold is not handed out.
		slog.Error("meter: could not record an answered request", "upstream", up, "workflow", entry.Workflow, "activity", entry.Activity, "request", entry.Request, "err", rerr)
		writeMeterError(w, &meterError{http.StatusBadGateway, "", "the meter could not record the request in the spend ledger: " + rerr.Error()})
		return
	}
	slog.Debug("meter: recorded", "upstream", up, "path", r.URL.Path, "status", resp.StatusCode, "workflow", entry.Workflow,
		"activity", entry.Activity, "attempt", entry.Attempt, "request", entry.Request, "tokens", entry.Tokens, "took", time.Since(start))
	if err != nil { // the answer was over the bound: recorded, not relayed
		writeMeterError(w, &meterError{http.StatusBadGateway, "", err.Error()})
		return
	}
	relay(w, resp, answer)
}

// forward sends r's request to the upstream up and reads its answer. A
// nil response means the upstream never answered; an answer over
// MaxMeterResponse comes back with its status and an error.
func (p *MeterProxy) forward(ctx context.Context, r *http.Request, up string, body []byte) (*http.Response, []byte, error) {
	target := up + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range r.Header {
		if !forwarded(k) {
			continue
		}
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxMeterResponse+1))
	switch {
	case err != nil:
		// Cut off midway: the endpoint answered (and may bill it); the
		// client gets a 502 and retries.
		return resp, nil, fmt.Errorf("the upstream's answer was cut off: %w", err)
	case len(answer) > MaxMeterResponse:
		return resp, nil, fmt.Errorf("the upstream's answer is over the proxy's %d bytes", MaxMeterResponse)
	}
	return resp, answer, nil
}

// forwarded says whether the request header k goes upstream: not the
// meter's own, not the hop-by-hop ones, not Accept-Encoding (the proxy's
// transport asks for, and undoes, its own compression, so that it reads
// the usage of a plain body).
func forwarded(k string) bool {
	switch k = http.CanonicalHeaderKey(k); k {
	case MeterUpstreamHeader, MeterStoreHeader, MeterWorkflowHeader, MeterActivityHeader, MeterAttemptHeader, MeterRequestHeader,
		"Accept-Encoding", "Proxy-Authorization":
		return false
	}
	return !hopByHop(k)
}

// hopByHop says whether the header k concerns one connection only, so a
// proxy neither forwards nor relays it (Content-Length is set anew).
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
		return true
	}
	return false
}

// relay writes the upstream's answer to the client.
func relay(w http.ResponseWriter, resp *http.Response, answer []byte) {
	for k, vs := range resp.Header {
		if !hopByHop(k) {
			w.Header()[k] = vs
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer) // a client gone is no error of the proxy's
}

// answerSpend is the spend of an answer, as a worker counts it: one request
// whatever its status (as the endpoint counts those it served), and for a
// 2xx answer the tokens its OpenAI usage reports (chat and embeddings:
// prompt_tokens and completion_tokens; responses: input_tokens and
// output_tokens).
func answerSpend(status int, body []byte) Spend {
	s := Spend{Requests: 1}
	if status/100 != 2 {
		return s
	}
	u := gjson.GetBytes(body, "usage")
	if u.Get("prompt_tokens").Exists() || u.Get("completion_tokens").Exists() {
		s.Tokens = int(u.Get("prompt_tokens").Int() + u.Get("completion_tokens").Int())
	} else {
		s.Tokens = int(u.Get("input_tokens").Int() + u.Get("output_tokens").Int())
	}
	return s
}

// record writes e in the ledger of the run store at store.
func (p *MeterProxy) record(ctx context.Context, store string, e LedgerEntry) error {
	p.mu.Lock()
	s := p.open[store]
	p.mu.Unlock()
	if s == nil {
		var err error
		if s, err = OpenRunStore(ctx, store); err != nil {
			return err
		}
		p.mu.Lock()
		switch kept := p.open[store]; {
		case kept != nil: // another request opened it meanwhile
			defer s.Close()
			s = kept
		case len(p.open) < maxMeterStores:
			p.open[store] = s
		default:
			defer s.Close()
		}
		p.mu.Unlock()
	}
	return OpenLedger(s).Writer(e.LedgerKey).put(ctx, e.Request, e.Spend)
}

// admit reads a metered request's headers: its upstream, which must be
// one of the proxy's, and its ledger entry, in a store under one of the
// proxy's prefixes, and its path, which must stay under the upstream's.
func (p *MeterProxy) admit(r *http.Request) (up string, e LedgerEntry, store string, _ *meterError) {
	up, merr := header(r, MeterUpstreamHeader, maxMeterURL)
	if merr != nil {
		return "", e, "", merr
	}
	if !p.upstreams[up] {
		return "", e, "", &meterError{http.StatusForbidden, MeterUpstreamHeader, fmt.Sprintf("%s is not an upstream of this meter (its --upstream flags); it forwards to those only", up)}
	}
	if p := r.URL.Path; !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", e, "", &meterError{http.StatusBadRequest, "", fmt.Sprintf("path %q is not a clean path under the upstream", p)}
	}
	if store, merr = header(r, MeterStoreHeader, maxMeterURL); merr != nil {
		return "", e, "", merr
	}
	if e.Workflow, merr = header(r, MeterWorkflowHeader, maxMeterName); merr != nil {
		return "", e, "", merr
	}
	if e.Activity, merr = header(r, MeterActivityHeader, maxMeterName); merr != nil {
		return "", e, "", merr
	}
	if e.Attempt, merr = intHeader(r, MeterAttemptHeader, maxMeterAttempt); merr != nil {
		return "", e, "", merr
	}
	if e.Request, merr = intHeader(r, MeterRequestHeader, maxMeterIndex); merr != nil {
		return "", e, "", merr
	}
	if err := p.storeAllowed(store); err != nil {
		return "", e, "", &meterError{http.StatusForbidden, MeterStoreHeader, err.Error()}
	}
	return up, e, store, nil
}

// header returns r's header k: one value, 1 to max printable ASCII bytes.
func header(r *http.Request, k string, max int) (string, *meterError) {
	vs := r.Header.Values(k)
	if len(vs) != 1 || vs[0] == "" {
		return "", &meterError{http.StatusBadRequest, k, fmt.Sprintf("want one %s header, got %d", k, len(vs))}
	}
	v := vs[0]
	if len(v) > max {
		return "", &meterError{http.StatusBadRequest, k, fmt.Sprintf("%s is %d bytes; at most %d", k, len(v), max)}
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", &meterError{http.StatusBadRequest, k, fmt.Sprintf("%s holds a byte 0x%02x at %d; want printable ASCII", k, v[i], i)}
		}
	}
	return v, nil
}

// intHeader returns r's header k as a decimal integer in [0, max].
func intHeader(r *http.Request, k string, max int) (int, *meterError) {
	v, merr := header(r, k, 10)
	if merr != nil {
		return 0, merr
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max || strconv.Itoa(n) != v {
		return 0, &meterError{http.StatusBadRequest, k, fmt.Sprintf("%s %q is not a decimal integer in [0, %d]", k, v, max)}
	}
	return n, nil
}

// storeAllowed checks that the run store URL raw lies under one of the
// proxy's store prefixes: the same scheme, bucket and parameters (an
// endpoint or region the proxy was not given is refused), and a path and
// prefix parameter that extend the allowed ones at a '/' with no . or ..
// segment.
func (p *MeterProxy) storeAllowed(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("run store URL: %w", err)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" || traverses(u.Path) || traverses(u.Query().Get("prefix")) {
		return errors.New("the run store URL has credentials, a fragment, or a . or .. segment")
	}
	for _, a := range p.stores {
		if u.Scheme == a.Scheme && u.Host == a.Host && under(u.Path, a.Path) &&
			under(u.Query().Get("prefix"), a.Query().Get("prefix")) && sameParams(u, a) {
			return nil
		}
	}
	return errors.New("the run store is not under any of this meter's --store prefixes")
}

// under says whether the slash-separated p is within dir.
func under(p, dir string) bool {
	switch {
	case dir == "" || p == dir:
		return true
	case strings.HasSuffix(dir, "/"):
		return strings.HasPrefix(p, dir)
	}
	return strings.HasPrefix(p, dir+"/")
}

// traverses says whether the slash-separated p has a . or .. segment.
func traverses(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return strings.Contains(p, "\\")
}

// sameParams says whether u and a have the same query parameters but
// for prefix, and for a file:// store's metadata=skip (RunStoreURL adds
// it).
func sameParams(u, a *url.URL) bool {
	strip := func(x *url.URL) url.Values {
		q := x.Query()
		q.Del("prefix")
		if x.Scheme == "file" && q.Get("metadata") == "skip" {
			q.Del("metadata")
		}
		return q
	}
	return strip(u).Encode() == strip(a).Encode()
}

// writeMeterError answers with an OpenAI-style error naming the header
// at fault, so the worker's error says what to fix.
func writeMeterError(w http.ResponseWriter, e *meterError) {
	msg := e.msg
	if e.header != "" && !strings.Contains(msg, e.header) {
		msg = e.header + ": " + msg
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "ctxopt meter: " + msg, "type": "ctxopt_meter", "param": e.header}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(e.status)
	_, _ = w.Write(append(b, '\n'))
}
