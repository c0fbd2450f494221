package compress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

// LinguaRequest is the body POSTed to an LLMLingua-2 service. Its fields
// are the arguments of llmlingua's PromptCompressor.compress_prompt, as
// HTTP wrappers of LLMLingua-2 take them (docs/llmlingua.md):
//
//	{"context": "text", "rate": 0.3, "target_token": -1, "force_tokens": ["\n", "?"]}
type LinguaRequest struct {
	Context     string   `json:"context"`
	Rate        float64  `json:"rate"`
	TargetToken int      `json:"target_token"`
	ForceTokens []string `json:"force_tokens,omitempty"`
}

// LinguaResponse is the service's answer: compress_prompt's result dict.
// Only compressed_prompt is required.
type LinguaResponse struct {
	CompressedPrompt string `json:"compressed_prompt"`
	OriginTokens     int    `json:"origin_tokens"`
	CompressedTokens int    `json:"compressed_tokens"`
}

// linguaForce are kept by the service whatever their score: line breaks
// keep the step structure readable.
var linguaForce = []string{"\n", "?"}

// maxLinguaCache bounds the compressed-text cache; when full it starts over.
const maxLinguaCache = 1 << 16

// lingua compresses text with an LLMLingua-2 service, caching by content
// so a turn is sent once per rollout set, not once per step.
type lingua struct {
	url     string
	rate    float64
	timeout time.Duration
	retries int
	http    *http.Client
	tok     *llm.Tokenizer
	// backoff is the first retry wait, doubled each time.
	backoff time.Duration

	mu    sync.Mutex
	cache map[[32]byte]string
}

func newLingua(p LLMLinguaParams, d Deps) (*lingua, error) {
	url := p.URL
	if url == EmbeddedURL {
		if d.LinguaURL == "" {
			return nil, errors.New("strategy llmlingua: compression.llmlingua.url is \"embedded\" but no embedded model runs; set it to the service's URL")
		}
		url = d.LinguaURL
	}
	hc := d.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	return &lingua{url: url, rate: p.Rate, timeout: p.Timeout, retries: p.MaxRetries, http: hc, tok: d.Tokenizer,
		backoff: 200 * time.Millisecond, cache: map[[32]byte]string{}}, nil
}

// compress returns text compressed at the configured rate; calls counts the
// service requests made (0 when cached), retries the failed attempts.
func (l *lingua) compress(ctx context.Context, text string) (out string, calls, retries int, err error) {
	key := sha256.Sum256([]byte(text))
	l.mu.Lock()
	out, ok := l.cache[key]
	l.mu.Unlock()
	if ok {
		return out, 0, 0, nil
	}
	body, _ := json.Marshal(LinguaRequest{Context: text, Rate: l.rate, TargetToken: -1, ForceTokens: linguaForce})
	for n := 0; ; n++ {
		var wait time.Duration
		out, wait, err = l.attempt(ctx, body)
		if err == nil {
			break
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return "", n + 1, n, fmt.Errorf("llmlingua %s: %w", l.url, err)
		}
		if ctx.Err() != nil {
			return "", n + 1, n, ctx.Err()
		}
		if n >= l.retries {
			return "", n + 1, n, fmt.Errorf("llmlingua: %w: %s after %d attempts: %w", llm.ErrUnavailable, l.url, n+1, err)
		}
		if wait == 0 {
			wait = l.backoff << n
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", n + 1, n, ctx.Err()
		}
		retries++
	}
	l.mu.Lock()
	if len(l.cache) >= maxLinguaCache {
		clear(l.cache)
	}
	l.cache[key] = out
	l.mu.Unlock()
	return out, 1 + retries, retries, nil
}

// permanentError is an answer a retry would get again (4xx but 408/429, a
// body that is not the documented shape).
type permanentError struct{ error }

// attempt makes one request; wait is the server's Retry-After.
func (l *lingua) attempt(ctx context.Context, body []byte) (string, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return "", 0, permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", 0, err
	}
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
		var wait time.Duration
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			wait = time.Duration(min(secs, 60)) * time.Second
		}
		return "", wait, fmt.Errorf("status %d", s)
	case s != http.StatusOK:
		return "", 0, permanentError{fmt.Errorf("status %d: %s", s, strings.TrimSpace(string(b[:min(len(b), 300)])))}
	}
	var lr LinguaResponse
	if err := json.Unmarshal(b, &lr); err != nil {
		return "", 0, permanentError{fmt.Errorf("answer is not an LLMLingua response: %w", err)}
	}
	return lr.CompressedPrompt, 0, nil
}

// linguaHistory replaces every turn but the last by its LLMLingua-2
// compression once the context passes the threshold.
type linguaHistory struct {
	l         *lingua
	threshold int
}

var _ History = (*linguaHistory)(nil)

func (h *linguaHistory) CompressHistory(ctx context.Context, in Input) (Output, error) {
	last := lastTurnsStart(in.History, 1)
	if in.ContextTokens <= h.threshold || last <= 0 {
		return Unchanged(Input{Task: in.Task, History: in.History})
	}
	start := time.Now()
	ev := &Event{Kind: KindHistory, Step: in.Step, Strategy: LLMLingua, Model: "llmlingua-2"}
	var b strings.Builder
	b.WriteString("Earlier steps (compressed):\n")
	var kept []int
	for _, t := range turnsOf(in.History[:last], 1) {
		text := FormatHistory(in.History[t.Start:t.End], t.Step)
		out, calls, retries, err := h.l.compress(ctx, text)
		ev.Calls += calls
		ev.Retries += retries
		if err != nil {
			return Output{}, fmt.Errorf("history compression at step %d: %w", in.Step, err)
		}
		ev.TokensIn += h.l.tok.Count(text)
		b.WriteString(strings.TrimSpace(out))
		b.WriteByte('\n')
		kept = append(kept, t.Step)
	}
	summary := llm.Message{Role: "user", Content: strings.TrimRight(b.String(), "\n")}
	ev.TokensOut = h.l.tok.Count(summary.Content)
	ev.Output = summary.Content
	ev.Levels = map[string][]int{"compressed": kept, "kept": {in.Step}}
	ev.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	return Output{Messages: withTask(in.Task, []llm.Message{summary}, in.History[last:]), Event: ev}, nil
}

// linguaObservation compresses an observation longer than the threshold.
type linguaObservation struct {
	l         *lingua
	threshold int
}

var _ Observation = (*linguaObservation)(nil)

func (o *linguaObservation) CompressObservation(ctx context.Context, in ObservationInput) (string, *Event, error) {
	n := o.l.tok.Count(in.Observation)
	if n <= o.threshold {
		return in.Observation, nil, nil
	}
	start := time.Now()
	out, calls, retries, err := o.l.compress(ctx, in.Observation)
	if err != nil {
		return "", nil, fmt.Errorf("observation compression at step %d: %w", in.Step, err)
	}
	ev := &Event{
		Kind: KindObservation, Step: in.Step, Strategy: LLMLingua, Model: "llmlingua-2", Output: out,
		Calls: calls, Retries: retries, TokensIn: n, TokensOut: o.l.tok.Count(out),
		LatencyMS: float64(time.Since(start).Microseconds()) / 1000,
	}
	return out, ev, nil
}

// LLMLingua compresses with an LLMLingua-2 service (ACON's baseline).
const LLMLingua Name = "llmlingua"

// LLMLinguaParams configure the LLMLingua-2 service (ACON D.3: keep 30%).
type LLMLinguaParams struct {
	// URL is the service's compress endpoint; EmbeddedURL is the embedded
	// model's stand-in.
	URL string `yaml:"url" json:"url"`
	// Rate is the share of tokens kept.
	Rate float64 `yaml:"rate" json:"rate"`
	// Timeout bounds one attempt; MaxRetries retries transient failures.
	Timeout    time.Duration `yaml:"timeout" json:"timeout"`
	MaxRetries int           `yaml:"max_retries" json:"max_retries"`
}

// Defaults of the LLMLingua strategy.
const (
	DefaultLinguaRate    = 0.3
	DefaultLinguaTimeout = 30 * time.Second
	DefaultLinguaRetries = 3
	// EmbeddedURL selects the embedded model's LLMLingua stand-in.
	EmbeddedURL = "embedded"
)

func (p *LLMLinguaParams) Validate() error {
	f := fieldErrors{prefix: Section + ".llmlingua"}
	f.check(p.Rate > 0 && p.Rate <= 1, "rate", "%v is not a keep rate; want more than 0 and at most 1", p.Rate)
	f.check(p.Timeout > 0, "timeout", "must be positive")
	f.check(p.MaxRetries >= 0, "max_retries", "must not be negative")
	if p.URL != EmbeddedURL {
		f.check(isHTTPURL(p.URL), "url", "%q is not an http(s) URL; want the service's compress endpoint or %q", p.URL, EmbeddedURL)
	}
	return f.err()
}

func init() {
	Register(Module{
		Name: LLMLingua, Rank: 40, Doc: "token pruning by an LLMLingua-2 service (compression.llmlingua.url)",
		Key: "llmlingua",
		Params: func() ModuleParams {
			return &LLMLinguaParams{URL: EmbeddedURL, Rate: DefaultLinguaRate, Timeout: DefaultLinguaTimeout, MaxRetries: DefaultLinguaRetries}
		},
		New: func(mp ModuleParams, d Deps) (*Strategy, error) {
			p := *mp.(*LLMLinguaParams)
			l, err := newLingua(p, d)
			if err != nil {
				return nil, err
			}
			return &Strategy{
				History:     &linguaHistory{l: l, threshold: d.HistoryThreshold},
				Observation: &linguaObservation{l: l, threshold: d.ObservationThreshold},
				Params: fingerprint(map[string]any{"rate": p.Rate, "url": p.URL,
					"history_threshold": d.HistoryThreshold, "observation_threshold": d.ObservationThreshold}),
			}, nil
		},
	})
}
