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

// maxLinguaAnswer bounds an answer of the service.
const maxLinguaAnswer = 64 << 20

// lingua compresses text with an LLMLingua-2 service, caching by content
// so a turn is sent once per rollout set, not once per step.
type lingua struct {
	url  string
	rate float64
	http *http.Client
	tok  *llm.Tokenizer

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
	hc := &http.Client{}
	if d.HTTP != nil {
		*hc = *d.HTTP
	}
	hc.Transport = &llm.Retrier{Policy: llm.RetryPolicy{MaxRetries: p.MaxRetries, Timeout: p.Timeout},
		Next: hc.Transport, MaxBody: maxLinguaAnswer, Check: checkLingua}
	return &lingua{url: url, rate: p.Rate, http: hc, tok: d.Tokenizer, cache: map[[32]byte]string{}}, nil
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
	tctx, try := llm.WithTry(ctx)
	out, err = l.post(tctx, body)
	calls, retries = try.N, max(try.N-1, 0)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", calls, retries, ctx.Err()
	case try.GaveUp:
		return "", calls, retries, fmt.Errorf("llmlingua: %w: %s after %d attempts: %w", llm.ErrUnavailable, l.url, calls, err)
	default:
		return "", calls, retries, fmt.Errorf("llmlingua %s: %w", l.url, err)
	}
	l.mu.Lock()
	if len(l.cache) >= maxLinguaCache {
		clear(l.cache)
	}
	l.cache[key] = out
	l.mu.Unlock()
	return out, calls, retries, nil
}

// post makes the request, with its retries.
func (l *lingua) post(ctx context.Context, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body) // buffered by the Retrier
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b[:min(len(b), 300)])))
	}
	lr, err := decodeLingua(b)
	return lr.CompressedPrompt, err
}

// checkLingua is the retry policy's Check: a 2xx answer that is not an
// LLMLingua response is garbled, and retried like any other.
func checkLingua(_ *http.Request, status int, body []byte) error {
	if status/100 != 2 {
		return nil
	}
	_, err := decodeLingua(body)
	return err
}

func decodeLingua(b []byte) (LinguaResponse, error) {
	var lr LinguaResponse
	if err := json.Unmarshal(b, &lr); err != nil {
		return lr, fmt.Errorf("answer is not an LLMLingua response: %w", err)
	}
	return lr, nil
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
