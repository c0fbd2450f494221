// Package sim is ctxopt's embedded offline model: a deterministic set of
// literal readers and writers served over HTTP in the OpenAI format, so the
// whole pipeline runs and is tested with no network and no key. It plays the
// agent, compressor, analyzer, optimizer, judge and embedder roles of
// docs/embedded-model.md and can inject faults for reliability tests.
package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config configures the model's latency and fault injection. Rates are in
// [0,1]; zero values mean no latency and no faults.
type Config struct {
	// Latency is slept before every answer.
	Latency time.Duration `yaml:"latency" json:"latency"`
	// Rate429 answers 429 with Retry-After.
	Rate429 float64 `yaml:"rate_429" json:"rate_429"`
	// Rate5xx answers 500 or 503.
	Rate5xx float64 `yaml:"rate_5xx" json:"rate_5xx"`
	// RateTimeout holds the request for Hang or until the client goes away.
	RateTimeout float64 `yaml:"rate_timeout" json:"rate_timeout"`
	// RateMalformed truncates the agent's tool-call arguments.
	RateMalformed float64 `yaml:"rate_malformed" json:"rate_malformed"`
	// RetryAfter is the Retry-After of 429 answers (default 1s).
	RetryAfter time.Duration `yaml:"retry_after" json:"retry_after"`
	// Hang is how long a timeout fault holds a request (default 30s).
	Hang time.Duration `yaml:"hang" json:"hang"`
}

// Defaults of Config.
const (
	DefaultRetryAfter = time.Second
	DefaultHang       = 30 * time.Second
	// DefaultAddr listens on a free loopback port.
	DefaultAddr = "127.0.0.1:0"
	// ModelName is the model the server lists and answers as when a request
	// names none.
	ModelName = "ctxopt-sim"
)

// AnswerSettings keeps the settings that change what the model answers,
// not only when or whether it answers: the malformed-reply rate. Latency
// and the transient faults the client retries change no result.
func (c Config) AnswerSettings() Config {
	return Config{RateMalformed: c.RateMalformed}
}

// withDefaults fills the zero durations.
func (c Config) withDefaults() Config {
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Hang == 0 {
		c.Hang = DefaultHang
	}
	return c
}

// Validate reports every invalid field by its YAML name.
func (c Config) Validate() error {
	var errs []error
	rate := func(name string, v float64) {
		if !(v >= 0 && v <= 1) {
			errs = append(errs, fmt.Errorf("%s: %v is not a rate; want a number from 0 to 1", name, v))
		}
	}
	rate("rate_429", c.Rate429)
	rate("rate_5xx", c.Rate5xx)
	rate("rate_timeout", c.RateTimeout)
	rate("rate_malformed", c.RateMalformed)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", c.Latency}, {"retry_after", c.RetryAfter}, {"hang", c.Hang}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %v is negative; want 0 or a positive duration", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// Fault kinds counted in Stats.Faults.
const (
	Fault429       = "429"
	Fault5xx       = "5xx"
	FaultTimeout   = "timeout"
	FaultMalformed = "malformed"
)

// Stats counts what the server did.
type Stats struct {
	// Requests counts every request to a /v1 endpoint.
	Requests int64 `json:"requests"`
	// ByRole counts the chat requests per role, and "embedder" for
	// embeddings.
	ByRole map[string]int64 `json:"by_role"`
	// Faults counts injected faults by kind (Fault429, ...).
	Faults map[string]int64 `json:"faults"`
	// BadRequests counts the requests answered 400.
	BadRequests int64 `json:"bad_requests"`
}

// Server is the model listening on a loopback (or given) address.
type Server struct {
	h   *handler
	srv *http.Server
	url string

	served   chan struct{} // closed when Serve has returned
	serveErr error         // set before served is closed
	stop     chan struct{} // closed by Close

	closeOnce sync.Once
	closeErr  error
}

// Start serves the model on addr (DefaultAddr when empty) until ctx is
// cancelled or Close is called.
func Start(ctx context.Context, addr string, cfg Config) (*Server, error) {
	h, err := newHandler(cfg)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded model: listen on %s: %w", addr, err)
	}
	s := &Server{
		h: h,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       2 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			// No WriteTimeout: latency and hang faults hold answers on
			// purpose; they end when the client goes away or at Close.
			BaseContext: func(net.Listener) context.Context { return ctx },
		},
		url:    "http://" + ln.Addr().String() + "/v1",
		served: make(chan struct{}),
		stop:   make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = fmt.Errorf("embedded model: serve: %w", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.stop:
		}
	}()
	return s, nil
}

// URL is the API root, ending in /v1, to use as a role's base_url.
func (s *Server) URL() string { return s.url }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { return s.h.stats() }

// Close stops the server. Requests held by latency or a timeout fault are
// answered at once; other in-flight requests get a short grace period.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		close(s.h.quit)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.served
		s.closeErr = s.serveErr
	})
	return s.closeErr
}
