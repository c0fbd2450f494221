package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
)

// Response headers that say what the proxy did.
const (
	HeaderCompressed  = "X-Ctxopt-Compressed" // "true" or "false"
	HeaderTokensIn    = "X-Ctxopt-Tokens-Original"
	HeaderTokensSent  = "X-Ctxopt-Tokens-Sent"
	HeaderTokensSaved = "X-Ctxopt-Tokens-Saved"
	HeaderGuideline   = "X-Ctxopt-Guideline"
	HeaderBackend     = "X-Ctxopt-Backend" // the link that made the summary
	HeaderSession     = "X-Ctxopt-Session"
	HeaderRequestID   = "X-Request-Id"
)

// Server is the runtime. Build it with New, run it with Serve.
type Server struct {
	cfg   Config
	m     *metrics
	keys  *keyring
	lim   *limiter
	gl    *guidelines
	store *store
	comp  *compactor
	slog  *sessionLog
	tok   *llm.Tokenizer
	// model is the embedded model the endpoints set to embedded use.
	model *embedded.Server
	// detect finds agents' compaction requests (nil: agent_compaction off).
	detect *compactionDetector

	openai, anthropic *upstream

	bgCancel context.CancelFunc
	draining atomic.Bool
	handler  http.Handler
	// busy counts the requests in the instrumented handlers, the ones that
	// write the stores, so they close only once none runs.
	busy inflight
}

// inflight counts running handlers; wait blocks until none runs. A
// WaitGroup would not do: a connection accepted just before the cut may
// still enter a handler while wait runs. The count is atomic so a request
// takes the lock only when it leaves the server idle.
type inflight struct {
	n    atomic.Int64
	mu   sync.Mutex
	idle chan struct{} // closed when n drops to 0 while a wait runs
}

func (f *inflight) enter() { f.n.Add(1) }

func (f *inflight) exit() {
	if f.n.Add(-1) != 0 {
		return
	}
	f.mu.Lock()
	if f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

func (f *inflight) count() int64 { return f.n.Load() }

// wait returns true once no handler runs, false when d passes first.
func (f *inflight) wait(d time.Duration) bool {
	f.mu.Lock()
	if f.n.Load() == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// upstream is one API root the proxy forwards to.
type upstream struct {
	base  *url.URL
	proxy *httputil.ReverseProxy
}

// New builds a server from a validated cfg: it opens the session store and
// the session log, reads the client keys and loads the promoted guideline
// (a missing one leaves the server unready, not failed).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tok, err := llm.NewTokenizer(cfg.Compression.Encoding)
	if err != nil {
		return nil, err
	}
	keys, err := loadKeyring(cfg.Auth)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg.Sessions.Path, cfg.Sessions.TTL, cfg.Sessions.Max)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, keys: keys, lim: newLimiter(cfg.Limits), store: st, tok: tok}
	s.m = newMetrics(func() float64 { return float64(st.len()) })
	if s.gl, err = newGuidelines(cfg.Compression.Registry, s.m); err != nil {
		_ = st.close()
		return nil, err
	}
	if err := s.gl.reload(); err != nil {
		slog.Warn("no guideline in service; compression falls back to truncation until one is promoted", "err", err)
	}
	if cfg.SessionLog.Dir != "" {
		if s.slog, err = openSessionLog(cfg.SessionLog, cfg.Sessions.TTL); err != nil {
			_ = st.close()
			return nil, err
		}
	}
	if s.model, err = startEmbedded(&cfg); err != nil {
		_ = s.closeStores()
		return nil, err
	}
	links, err := buildLinks(cfg.Compressor, tok)
	if err != nil {
		_ = s.closeStores()
		return nil, err
	}
	s.m.watchBreakers(links)
	trunc, err := compress.New(compress.FIFO, &compress.FIFOParams{Keep: 1}, compress.Deps{Tokenizer: tok})
	if err != nil {
		_ = s.closeStores()
		return nil, err
	}
	s.comp = &compactor{
		cfg: cfg.Compression, tok: tok, store: st, gl: s.gl, m: s.m, log: s.slog,
		chain:   &chain{links: links, truncation: trunc.History, tok: tok, m: s.m},
		pending: map[string]*pending{},
		pace:    newPace(time.Now, cfg.Sessions.TTL, cfg.Sessions.Max, linkPriors(cfg.Compressor)...),
		// A message's framing and the longest role not in its bytes.
		framing:  tok.CountMessage(llm.Message{Role: "tool"}),
		countAll: cfg.Limits.TokenBudget > 0,
	}
	if s.openai, err = newUpstream(cfg.Upstream.OpenAI, cfg.Upstream.Timeout, s.m, s.lim, "openai"); err != nil {
		_ = s.closeStores()
		return nil, err
	}
	if cfg.Upstream.Anthropic.BaseURL != "" {
		if s.anthropic, err = newUpstream(cfg.Upstream.Anthropic, cfg.Upstream.Timeout, s.m, s.lim, "anthropic"); err != nil {
			_ = s.closeStores()
			return nil, err
		}
	}
	s.detect = newCompactionDetector(cfg.AgentCompaction)
	s.handler = s.routes()
	return s, nil
}

// buildLinks makes the student and teacher links that are configured.
// Their clients do not retry: the chain's next link is the retry.
func buildLinks(c Compressors, tok *llm.Tokenizer) ([]*link, error) {
	var out []*link
	for _, l := range []struct {
		name string
		cfg  Link
	}{{LinkStudent, c.Student}, {LinkTeacher, c.Teacher}} {
		if l.cfg.BaseURL == "" {
			continue
		}
		cl, err := llm.NewClient(l.name, llm.RoleConfig{
			BaseURL: l.cfg.BaseURL, Model: l.cfg.Model, KeyEnv: l.cfg.KeyEnv, Timeout: l.cfg.Timeout, MaxRetries: -1,
			Concurrency: l.cfg.Concurrency, MaxTokens: l.cfg.MaxTokens,
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("compressor.%s: %w", l.name, err)
		}
		out = append(out, newLink(l.name, cl, tok, l.cfg.Timeout, newBreaker(c.BreakerFailures, c.BreakerCooldown)))
	}
	return out, nil
}

// Handler is the server's HTTP handler (for tests).
func (s *Server) Handler() http.Handler { return s.handler }

// Reload re-reads the promoted guideline (SIGHUP).
func (s *Server) Reload() error { return s.gl.reload() }

// Serve serves on ln until ctx ends, then drains in-flight requests for up
// to timeouts.drain, stops background summaries and closes the stores.
// Past the drain it cuts the connections left and waits, again up to
// timeouts.drain, for their handlers to return before the stores close.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.bgCancel = cancel
	s.comp.bg = bg
	go s.gl.watch(bg, s.cfg.Compression.Reload)
	go s.sweep(bg)
	t := s.cfg.Timeouts
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("serving", "addr", ln.Addr().String(), "upstream_openai", s.cfg.Upstream.OpenAI.BaseURL,
		"upstream_anthropic", s.cfg.Upstream.Anthropic.BaseURL, "registry", s.cfg.Compression.Registry)
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		s.draining.Store(true)
		slog.Info("draining", "timeout", t.Drain)
		dctx, dcancel := context.WithTimeout(context.Background(), t.Drain)
		err = srv.Shutdown(dctx)
		dcancel()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.cut(srv, t.Drain)
	}
	cancel()
	s.comp.close()
	if cerr := s.closeStores(); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	slog.Info("stopped")
	return err
}

// cut closes the connections Shutdown left open (the drain ran out, or
// serving failed), which ends their requests' contexts, and waits up to
// grace for the handlers to return: a late summary would otherwise write
// to a store or log already closed.
func (s *Server) cut(srv *http.Server, grace time.Duration) {
	n := s.busy.count()
	if err := srv.Close(); err != nil {
		slog.Warn("closing the connections", "err", err)
	}
	if n > 0 {
		slog.Warn("drain ran out: cut the requests still in flight", "requests", n)
	}
	if !s.busy.wait(grace) {
		slog.Error("requests still running after their connections were cut; closing the stores anyway",
			"requests", s.busy.count(), "waited", grace)
	}
}

func (s *Server) closeStores() error {
	var errs []error
	if s.slog != nil {
		errs = append(errs, s.slog.close())
	}
	errs = append(errs, s.store.close())
	if s.model != nil {
		errs = append(errs, s.model.Close())
	}
	return errors.Join(errs...)
}

func (s *Server) sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.store.sweep()
		}
	}
}

// routes registers every API route both under /v1 and without it (a base
// URL given without /v1). What no route serves is a JSON error in the
// API's shape (apierror.go).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(method, path, endpoint string, h http.Handler) {
		h = s.instrument(endpoint, h)
		mux.Handle(method+" /v1"+path, h)
		mux.Handle(method+" "+path, h)
	}
	api("POST", "/chat/completions", "chat_completions", s.proxyChat(formatOpenAI))
	api("POST", "/responses", "responses", s.proxyChat(formatResponses))
	api("POST", "/responses/compact", "responses_compact", s.passthrough())
	api("POST", "/embeddings", "embeddings", s.passthrough())
	api("POST", "/completions", "completions", s.passthrough())
	api("POST", "/messages", "messages", s.proxyChat(formatAnthropic))
	api("POST", "/messages/count_tokens", "count_tokens", http.HandlerFunc(s.countTokens))
	api("GET", "/models", "models", http.HandlerFunc(s.models))
	api("POST", "/compress", "compress", http.HandlerFunc(s.compressAPI))
	api("POST", "/sessions/{id}/outcome", "outcome", http.HandlerFunc(s.outcome))
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("/", s.instrument("unrouted", s.noRoute(mux)))
	return mux
}

// metricsHandler serves the metrics, behind the client keys when
// metrics.auth is key.
func (s *Server) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})
	if s.cfg.Metrics.Auth != MetricsAuthKey {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.keys.check(r); !ok {
			s.m.rejected.WithLabelValues("auth").Inc()
			apiError(w, formatOpenAI, http.StatusUnauthorized, "authentication_error", "missing or unknown API key (metrics.auth: key)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	g := s.gl.current()
	switch {
	case s.draining.Load():
		apiError(w, formatOpenAI, http.StatusServiceUnavailable, "server_error", "draining")
	case g == nil:
		apiError(w, formatOpenAI, http.StatusServiceUnavailable, "server_error", "no promoted history guideline loaded")
	default:
		// Degraded still routes (200): with a breaker open, compression
		// falls back to the next link or to truncation, and requests are
		// answered; the body says which links are out.
		if open := s.comp.chain.open(); len(open) > 0 {
			fmt.Fprintf(w, "degraded guideline=%s breaker_open=%s\n", g.id, strings.Join(open, ","))
			return
		}
		fmt.Fprintf(w, "ready guideline=%s\n", g.id)
	}
}

// exchange is one request's state: its id and tenant for logs, metrics
// and the proxy, and its status. It is the ResponseWriter the handlers get
// (Unwrap lets the proxy flush streamed responses through it), so a
// request costs one allocation for all of it.
type exchange struct {
	http.ResponseWriter
	status int
	id     string
	// tenant is set once the client key is checked.
	tenant string
}

func (x *exchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

type ctxKey struct{}

// exchangeOf returns the exchange of a request that went through
// instrument (nil for one that did not).
func exchangeOf(ctx context.Context) *exchange { x, _ := ctx.Value(ctxKey{}).(*exchange); return x }

var requestIDForm = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestIDs numbers the requests that come without a usable id from a
// random start, so ids are unique within the process and across restarts
// in practice, without reading the system's randomness per request.
var requestIDs = func() *atomic.Uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var n atomic.Uint64
	n.Store(binary.BigEndian.Uint64(b[:]))
	return &n
}()

func newRequestID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], requestIDs.Add(1))
	return hex.EncodeToString(b[:])
}

// instrument gives each request an id (the client's X-Request-Id when it
// is sane), counts and times it and logs it.
func (s *Server) instrument(endpoint string, h http.Handler) http.Handler {
	requests := s.m.requestsOf(endpoint)
	latency := s.m.latency.WithLabelValues(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.busy.enter()
		defer s.busy.exit()
		t0 := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if id == "" || !requestIDForm.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		x := &exchange{ResponseWriter: w, id: id}
		h.ServeHTTP(x, r.WithContext(context.WithValue(r.Context(), ctxKey{}, x)))
		if x.status == 0 {
			x.status = http.StatusOK
		}
		d := time.Since(t0)
		requests.inc(x.status)
		latency.Observe(d.Seconds())
		if slog.Default().Enabled(r.Context(), slog.LevelDebug) {
			slog.Debug("request", "request_id", id, "endpoint", endpoint, "status", x.status, "took", d,
				"compressed", w.Header().Get(HeaderCompressed), "tokens_saved", w.Header().Get(HeaderTokensSaved))
		}
	})
}

func requestID(r *http.Request) string {
	if x := exchangeOf(r.Context()); x != nil {
		return x.id
	}
	return ""
}

// apiError writes an error in the client's format.
func apiError(w http.ResponseWriter, f apiFormat, status int, typ, msg string) {
	var body any
	if f == formatAnthropic {
		body = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	} else {
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// admit checks the client key, rate and budget; it answers and returns
// false when the request may not go on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, f apiFormat) (string, bool) {
	tenant, ok := s.keys.check(r)
	if !ok {
		s.m.rejected.WithLabelValues("auth").Inc()
		apiError(w, f, http.StatusUnauthorized, "authentication_error", "missing or unknown API key")
		return "", false
	}
	if reason, wait := s.lim.admit(tenant); reason != "" {
		s.m.rejected.WithLabelValues(reason).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
		msg := "request rate limit reached"
		if reason == "budget" {
			msg = "token budget of this API key is used up for the current window"
		}
		apiError(w, f, http.StatusTooManyRequests, "rate_limit_error", msg)
		return "", false
	}
	return tenant, true
}

// accept admits r and reads its body; it answers and returns false when
// the request may not go on.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, f apiFormat) (tenant string, body []byte, ok bool) {
	if tenant, ok = s.admit(w, r, f); !ok {
		return "", nil, false
	}
	body, ok = s.readBody(w, r, f)
	return tenant, body, ok
}

// readBody reads a bounded body; it answers 413 past the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, f apiFormat) ([]byte, bool) {
	b, err := readAll(http.MaxBytesReader(w, r.Body, s.cfg.Limits.BodyBytes), r.ContentLength, s.cfg.Limits.BodyBytes)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		s.m.rejected.WithLabelValues("body_size").Inc()
		apiError(w, f, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("body is larger than %d bytes", mbe.Limit))
		return nil, false
	case err != nil:
		apiError(w, f, http.StatusBadRequest, "invalid_request_error", "could not read the body")
		return nil, false
	}
	// JSON is UTF-8: invalid bytes would reach the upstream, or be
	// replaced silently by a decoder.
	if off := jsonl.InvalidUTF8(b); off >= 0 {
		s.m.rejected.WithLabelValues("encoding").Inc()
		apiError(w, f, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("body is not valid UTF-8: invalid byte at offset %d", off))
		return nil, false
	}
	return b, true
}

// readAll is io.ReadAll with the buffer sized from the declared length
// (up to limit), so a large body is not copied over and over as it grows.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	size := 512
	if declared > 0 && declared < limit {
		size = int(declared) + 1 // room to read the EOF without growing
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

func (s *Server) proxyChat(f apiFormat) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, body, ok := s.accept(w, r, f)
		if !ok {
			return
		}
		up := s.openai
		if f == formatAnthropic {
			up = s.anthropic
		}
		if up == nil {
			apiError(w, f, http.StatusNotFound, "not_found_error", "this server has no Anthropic upstream (set upstream.anthropic.base_url)")
			return
		}
		conv, err := parseConversation(f, body, s.comp.uncounted)
		if err != nil {
			apiError(w, f, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if s.detect != nil && s.answerCompaction(w, r, conv, tenant) {
			return
		}
		out, err := s.comp.prepare(r.Context(), conv, tenant)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			// Compression never fails a request: it goes as sent.
			slog.Warn("compression skipped", "request_id", requestID(r), "session", out.session, "err", err)
			out = outcome{session: out.session, original: out.original, sent: out.original}
		}
		if out.body != nil {
			body = out.body
		}
		h := w.Header()
		h.Set(HeaderCompressed, strconv.FormatBool(out.compressed))
		h.Set(HeaderSession, out.session)
		if !out.uncounted {
			// A conversation too short to pass the trigger is not counted.
			h.Set(HeaderTokensIn, strconv.Itoa(out.original))
			h.Set(HeaderTokensSent, strconv.Itoa(out.sent))
		}
		h.Set(HeaderTokensSaved, strconv.Itoa(out.original-out.sent))
		if out.compressed {
			h.Set(HeaderGuideline, out.guidelineID)
			h.Set(HeaderBackend, out.link)
		}
		if out.compressed || out.waited {
			slog.Info("compressed", "request_id", requestID(r), "session", out.session, "tokens_original", out.original,
				"tokens_sent", out.sent, "guideline", out.guidelineID, "link", out.link, "waited", out.waited, "bypassed", out.bypassed)
		}
		s.lim.spend(tenant, int64(out.sent))
		s.forward(w, r, up, tenant, body)
	}
}

// forward sends body to up and copies the answer back as it comes. The
// proxy copies r (headers included) before it changes anything.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, up *upstream, tenant string, body []byte) {
	if x := exchangeOf(r.Context()); x != nil {
		x.tenant = tenant
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	// The body is in memory, so the transport can send it again when a
	// kept-alive upstream connection turns out closed (see newUpstream).
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	up.proxy.ServeHTTP(w, r)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	f, up := formatOpenAI, s.openai
	if r.Header.Get("Anthropic-Version") != "" && s.anthropic != nil {
		f, up = formatAnthropic, s.anthropic
	}
	tenant, ok := s.admit(w, r, f)
	if !ok {
		return
	}
	s.forward(w, r, up, tenant, nil)
}

func (s *Server) outcome(w http.ResponseWriter, r *http.Request) {
	_, body, ok := s.accept(w, r, formatOpenAI)
	if !ok {
		return
	}
	var req struct {
		Success *bool `json:"success"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Success == nil {
		apiError(w, formatOpenAI, http.StatusBadRequest, "invalid_request_error", `body: want {"success": true|false}`)
		return
	}
	if s.slog == nil || !s.slog.outcome(r.PathValue("id"), *req.Success) {
		apiError(w, formatOpenAI, http.StatusNotFound, "not_found_error", "no logged session with this id (session logs off, or nothing compressed yet)")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// bufferPool recycles the proxy's copy buffers (allocated per response
// without one: half of a request's allocations). 8 KiB holds a whole
// chat answer or many stream events; more only costs memory per request
// in flight.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 8<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

var copyBuffers = &bufferPool{}

// newUpstream builds the reverse proxy to e. The client's credentials are
// replaced by the upstream key read from e.KeyEnv, which is never logged.
func newUpstream(e Endpoint, timeout time.Duration, m *metrics, lim *limiter, name string) (*upstream, error) {
	base, err := url.Parse(strings.TrimRight(e.BaseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("upstream.%s.base_url: %w", name, err)
	}
	var key string
	if e.KeyEnv != "" {
		if key = os.Getenv(e.KeyEnv); key == "" {
			slog.Warn("upstream key variable is empty; sending no key", "upstream", name, "key_env", e.KeyEnv)
		}
	}
	tr := &http.Transport{
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// Connections opened in a burst are not all kept: each idle one
		// holds two goroutines and their buffers, so the pool's high-water
		// mark would be the server's memory.
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     true,
	}
	endpoint := name
	up := &upstream{base: base}
	up.proxy = &httputil.ReverseProxy{
		Transport:  tr,
		BufferPool: copyBuffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *base
			u.Path = base.Path + strings.TrimPrefix(pr.In.URL.Path, "/v1")
			u.RawQuery = pr.In.URL.RawQuery
			pr.Out.URL = &u
			pr.Out.Host = ""
			if pr.In.ContentLength > 0 {
				// The body is forward's in-memory reader. Handed over as it
				// is, not in the proxy's close guard, the transport sees it
				// cannot block and sends headers and body in one write,
				// not two (one packet and one upstream wake-up less).
				pr.Out.Body = pr.In.Body
			}
			h := pr.Out.Header
			if pr.Out.Method == http.MethodPost && h["Idempotency-Key"] == nil && h["X-Idempotency-Key"] == nil {
				// A chat request has no effect upstream but its cost, so
				// it may be sent again when a reused connection fails
				// before any answer (an upstream closing an idle
				// keep-alive connection as the request goes out): the
				// transport retries only idempotent requests, and an
				// empty key marks one without sending the header.
				h["Idempotency-Key"] = []string{}
			}
			h.Del("Authorization")
			h.Del("X-Api-Key")
			// The transport then asks for gzip itself and decompresses, so
			// the usage of a response can be read for the token budget.
			h.Del("Accept-Encoding")
			if key != "" {
				if name == "anthropic" {
					h.Set("X-Api-Key", key)
				} else {
					h.Set("Authorization", "Bearer "+key)
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode >= 400 {
				m.upstreamErrors.WithLabelValues(endpoint, strconv.Itoa(resp.StatusCode)).Inc()
			}
			if x := exchangeOf(resp.Request.Context()); x != nil && lim.budget > 0 {
				tenant := x.tenant
				resp.Body = &usageReader{rc: resp.Body, spend: func(n int64) { lim.spend(tenant, n) }}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			m.upstreamErrors.WithLabelValues(endpoint, "0").Inc()
			// err may name the upstream address but never carries the key.
			slog.Warn("upstream unreachable", "request_id", requestID(r), "upstream", endpoint, "err", err)
			f := formatOpenAI
			if name == "anthropic" {
				f = formatAnthropic
			}
			apiError(w, f, http.StatusBadGateway, "api_error", "upstream did not answer")
		},
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	return up, nil
}
