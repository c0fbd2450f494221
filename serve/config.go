// Package serve is ctxopt's runtime: a compression API and an OpenAI- and
// Anthropic-compatible proxy that compresses long conversations with the
// promoted guideline, keeps per-conversation summaries, falls back student →
// teacher → truncation, and logs sessions back into the optimization loop.
package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/yamlpos"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
)

// Config is serve.yaml. Every field is a setting that a flag or an
// environment variable can override (see Settings).
type Config struct {
	// Listen is the address of the server.
	Listen   string   `yaml:"listen"`
	Upstream Upstream `yaml:"upstream"`
	// Compression is when and how conversations are compressed.
	Compression Compression `yaml:"compression"`
	Compressor  Compressors `yaml:"compressor"`
	Sessions    Sessions    `yaml:"sessions"`
	Auth        Auth        `yaml:"auth"`
	Limits      Limits      `yaml:"limits"`
	Timeouts    Timeouts    `yaml:"timeouts"`
	SessionLog  SessionLog  `yaml:"session_log"`
	Metrics     Metrics     `yaml:"metrics"`
	// AgentCompaction answers an agent's own compaction requests from the
	// session's summary (compactreq.go).
	AgentCompaction AgentCompaction `yaml:"agent_compaction"`

	// keys holds where each key of the file is, so problems name its line.
	keys yamlpos.Keys
}

// Metrics configures GET /metrics.
type Metrics struct {
	// Auth is none (anyone who reaches the address may scrape; the
	// default, as Prometheus scrapes without credentials) or key (the
	// client keys of the API, as auth checks them).
	Auth string `yaml:"auth"`
}

// Values of metrics.auth.
const (
	MetricsAuthNone = "none"
	MetricsAuthKey  = "key"
)

// Upstream is where the proxy sends requests, per API format. The keys come
// only from the environment variables named here.
type Upstream struct {
	// OpenAI is the root of an OpenAI-compatible API (ending in /v1): chat
	// completions and models go there.
	OpenAI Endpoint `yaml:"openai"`
	// Anthropic is the root of an Anthropic-compatible API (ending in /v1):
	// messages go there. Empty disables POST /v1/messages.
	Anthropic Endpoint `yaml:"anthropic"`
	// Timeout bounds the wait for the upstream's response headers; a
	// streamed body may take longer.
	Timeout time.Duration `yaml:"timeout"`
}

// Endpoint is one upstream API root and the variable holding its key.
type Endpoint struct {
	BaseURL string `yaml:"base_url"`
	KeyEnv  string `yaml:"key_env"`
}

// Compression configures history compression (ACON 3.2).
type Compression struct {
	// Threshold is T_hist: a conversation whose history passes it is sent
	// as system + first user message + summary + the last turns.
	Threshold int `yaml:"threshold"`
	// Trigger is the fraction of Threshold at which the next summary is
	// computed in the background while the conversation's pace is not yet
	// known. Once it is, the lead time starts each summary so that it lands
	// before the threshold is crossed: later than the trigger with a fast
	// summarizer, earlier with a slow one, never below Floor.
	Trigger float64 `yaml:"trigger"`
	// Floor is the fraction of Threshold below which no summary starts,
	// however early the lead time would start one: the history for a
	// conversation's first summary (short conversations pay for none), the
	// summary plus the turns since for the next (each summary folds at
	// least that much, so early starts do not multiply summaries); 0 is
	// Trigger.
	Floor float64 `yaml:"floor"`
	// MaxWait bounds a request's wait for a summary not ready when the
	// threshold is passed; past it (or at once, when the summary is not
	// expected within it) the request goes with the previous summary and
	// the turns since, older tool outputs folded or, if that is not
	// enough, the oldest turns left out.
	MaxWait time.Duration `yaml:"max_wait"`
	// KeepLast is the number of last turns (assistant message and what
	// answers it) sent verbatim; ACON keeps the last pair (1).
	KeepLast int `yaml:"keep_last"`
	// KeepTokens, when set, bounds in tokens the turns a compacted request
	// sends verbatim after its summary: the newest within it, never fewer
	// than the last turn, whose tool results go verbatim. Older turns keep
	// their tool calls, paired with their results, but the outputs are
	// folded: replaced by a note, as the summary covers them or will from
	// the next summary on. Then a request past the threshold does not wait
	// for a late summary unless even folding would leave turns out.
	// 0 is 3/8 of Threshold (see keptTokens); -1 sends every turn
	// verbatim, and a late summary is waited for (at most MaxWait) when
	// expected within it.
	KeepTokens int `yaml:"keep_tokens"`
	// Registry is the guideline registry directory; its promoted history
	// guideline is served.
	Registry string `yaml:"registry"`
	// Reload is how often the registry is checked for a new promotion
	// (SIGHUP reloads at once).
	Reload time.Duration `yaml:"reload"`
	// Encoding is the tokenizer that counts tokens.
	Encoding string `yaml:"encoding"`
}

// keptTokens is keep_tokens in effect. Its default, 3/8 of the threshold,
// leaves room for the head, the summary and the folded older turns under
// the threshold; without a bound a summary that lands late (a real one
// takes seconds) makes the request wait or drop turns. On bench/serve's
// workload (threshold 8,000) it keeps the tokens sent per compacted turn
// under what Context Gateway sends with every tool call still paired.
// 0 means no bound (keep_tokens -1).
func (c Compression) keptTokens() int {
	switch {
	case c.KeepTokens > 0:
		return c.KeepTokens
	case c.KeepTokens < 0:
		return 0
	}
	return c.Threshold * 3 / 8
}

// Compressors are the links of the fallback chain before truncation.
type Compressors struct {
	// Student is a small model (e.g. a LoRA adapter selected by model name
	// on vLLM); empty base_url skips it.
	Student Link `yaml:"student"`
	// Teacher is the large model; empty base_url skips it.
	Teacher Link `yaml:"teacher"`
	// BreakerFailures consecutive failures open a link's breaker for
	// BreakerCooldown.
	BreakerFailures int           `yaml:"breaker_failures"`
	BreakerCooldown time.Duration `yaml:"breaker_cooldown"`
}

// Link is one compressor endpoint of the chain.
type Link struct {
	BaseURL string        `yaml:"base_url"`
	Model   string        `yaml:"model"`
	KeyEnv  string        `yaml:"key_env"`
	Timeout time.Duration `yaml:"timeout"`
	// Latency is the time a summary is expected to take on this link
	// before serve has timed one: the lead time's first estimate, so the
	// first summaries of a fresh server start early enough. Afterwards the
	// moving estimate takes over; both are capped at Timeout, past which
	// the link is abandoned anyway. 0: no estimate before the first
	// summary is timed (it starts at the trigger).
	Latency time.Duration `yaml:"latency"`
	// Concurrency bounds the summaries in flight on this link; a
	// conversation has at most one, so past this many conversations near
	// their threshold at once, summaries queue and land later. 0 is llm's
	// default.
	Concurrency int `yaml:"concurrency"`
	// MaxTokens caps a summary's length; 0 is the server's default. A
	// small model that never stops (make student's LoRA student wrote
	// 3,538 tokens) would otherwise hold the link until its timeout.
	MaxTokens int `yaml:"max_tokens"`
}

// Sessions configures the store of rolling summaries.
type Sessions struct {
	// Path is a bbolt file that keeps summaries across restarts; empty
	// keeps them in memory only.
	Path string        `yaml:"path"`
	TTL  time.Duration `yaml:"ttl"`
	// Max bounds the number of sessions; the least recently used go first.
	Max int `yaml:"max"`
}

// Auth configures client keys. Keys are stored as "sha256:<hex>" of the
// key (optimize serve hash-key prints one).
type Auth struct {
	KeyHashes []string `yaml:"key_hashes"`
	// KeysFile holds more hashes, one a line (# starts a comment).
	KeysFile string `yaml:"keys_file"`
	// Anonymous lets requests without a key through; for local use only.
	Anonymous bool `yaml:"anonymous"`
}

// Limits bound what a client may send.
type Limits struct {
	// BodyBytes bounds a request body.
	BodyBytes int64 `yaml:"body_bytes"`
	// Rate is requests per second per client key, Burst the bucket size;
	// Rate 0 disables the limit.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// TokenBudget is the tokens a client key may use per BudgetWindow
	// (prompt tokens sent upstream plus completion tokens reported); 0
	// disables it.
	TokenBudget  int64         `yaml:"token_budget"`
	BudgetWindow time.Duration `yaml:"budget_window"`
}

// Timeouts of the HTTP server.
type Timeouts struct {
	ReadHeader time.Duration `yaml:"read_header"`
	Read       time.Duration `yaml:"read"`
	// Write bounds a whole response; long streams need a generous value.
	Write time.Duration `yaml:"write"`
	Idle  time.Duration `yaml:"idle"`
	// Drain bounds the wait for in-flight requests on SIGTERM, and then
	// again the wait for the handlers of the requests it had to cut.
	Drain time.Duration `yaml:"drain"`
}

// SessionLog configures the opt-in session logs.
type SessionLog struct {
	// Dir receives trajectories.jsonl; empty disables session logs.
	Dir string `yaml:"dir"`
	// RedactEmails also redacts e-mail addresses (secrets always are).
	RedactEmails bool `yaml:"redact_emails"`
}

// Default returns the configuration used for fields a file leaves out.
func Default() Config {
	return Config{
		Listen:   "127.0.0.1:8787",
		Upstream: Upstream{Timeout: 5 * time.Minute},
		Compression: Compression{
			Threshold: compress.DefaultHistoryThreshold, Trigger: 0.8, KeepLast: 1, MaxWait: 250 * time.Millisecond,
			Reload: 2 * time.Second, Encoding: llm.DefaultEncoding,
		},
		Compressor: Compressors{
			Student:         Link{Timeout: 20 * time.Second, Latency: 2 * time.Second},
			Teacher:         Link{Timeout: 60 * time.Second, Latency: 2 * time.Second},
			BreakerFailures: 3, BreakerCooldown: 30 * time.Second,
		},
		Sessions: Sessions{TTL: 24 * time.Hour, Max: 10000},
		Metrics:  Metrics{Auth: MetricsAuthNone},
		Limits:   Limits{BodyBytes: 8 << 20, Burst: 20, BudgetWindow: 24 * time.Hour},
		Timeouts: Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: 10 * time.Minute, Idle: 2 * time.Minute, Drain: 30 * time.Second},

		// Off by default; the phrases are those of the agents documented.
		AgentCompaction: AgentCompaction{Phrases: DefaultCompactionPhrases},
	}
}

// LoadConfig reads path over the defaults. Unknown fields are errors.
func LoadConfig(path string) (Config, error) {
	cfg := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("serve config: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return cfg, fmt.Errorf("serve config %s is empty; start from serve.example.yaml", path)
	}
	if err := jsonl.CheckText(path, b); err != nil {
		return cfg, fmt.Errorf("serve config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("serve config %s holds only comments; start from serve.example.yaml", path)
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
		msg = yamlTypeRE.ReplaceAllString(msg, "")
		return cfg, fmt.Errorf("serve config %s: %s (see serve.example.yaml for the known keys)", path, msg)
	}
	cfg.keys = yamlpos.Parse(b)
	return cfg, nil
}

var (
	yamlTypeRE = regexp.MustCompile(` in type [\w.]+`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	hashForm   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Validate reports every invalid field by its YAML path, and its line when
// the file sets it.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		if line := c.keys.Line(field); line > 0 {
			field = fmt.Sprintf("line %d: field %s", line, field)
		}
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	endpoint := func(field, base, keyEnv string, required bool) {
		if base == "" {
			if required {
				bad(field+".base_url", "must not be empty (an API root such as http://127.0.0.1:8080/v1)")
			}
			return
		}
		if base == embedded.BaseURL {
			return // started by New; it needs no key
		}
		u, err := url.Parse(base)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			bad(field+".base_url", "is not an http(s) URL with a host")
		case u.User != nil || u.RawQuery != "":
			// The value is not echoed: it may hold a credential.
			bad(field+".base_url", "must carry no credentials or query; put the key in the variable key_env names")
		}
		switch {
		case keyEnv != "" && !envName.MatchString(keyEnv):
			bad(field+".key_env", "must name an environment variable (letters, digits, _), not hold the key")
		case keyEnv != "" && os.Getenv(keyEnv) == "":
			bad(field+".key_env", "variable %s is not set or empty; export it, or leave key_env empty if the server needs no key", keyEnv)
		}
	}
	endpoint("upstream.openai", c.Upstream.OpenAI.BaseURL, c.Upstream.OpenAI.KeyEnv, true)
	endpoint("upstream.anthropic", c.Upstream.Anthropic.BaseURL, c.Upstream.Anthropic.KeyEnv, false)
	positive := func(field string, d time.Duration) {
		if d <= 0 {
			bad(field, "must be a positive duration such as 30s")
		}
	}
	positive("upstream.timeout", c.Upstream.Timeout)
	cp := c.Compression
	if cp.Threshold <= 0 {
		bad("compression.threshold", "must be a positive token count (ACON's default is %d)", compress.DefaultHistoryThreshold)
	}
	if !(cp.Trigger > 0 && cp.Trigger <= 1) {
		bad("compression.trigger", "%v is not a fraction in (0, 1]", cp.Trigger)
	}
	if !(cp.Floor >= 0 && cp.Floor <= 1) {
		bad("compression.floor", "%v is not a fraction in [0, 1] (0 means the trigger)", cp.Floor)
	}
	if cp.MaxWait < 0 {
		bad("compression.max_wait", "must not be negative (0 never waits: a summary not ready means truncation)")
	}
	if cp.KeepLast < 1 {
		bad("compression.keep_last", "must be at least 1 (the last turn is always sent)")
	}
	if cp.KeepTokens < -1 {
		bad("compression.keep_tokens", "must be -1 (every turn verbatim), 0 (3/8 of compression.threshold) or a token count")
	}
	if cp.Registry == "" {
		bad("compression.registry", "must name the guideline registry directory (optimize guideline promote writes to it)")
	}
	positive("compression.reload", cp.Reload)
	if _, err := llm.NewTokenizer(cp.Encoding); err != nil {
		bad("compression.encoding", "%v", err)
	}
	for _, l := range []struct {
		name string
		l    Link
	}{{"compressor.student", c.Compressor.Student}, {"compressor.teacher", c.Compressor.Teacher}} {
		endpoint(l.name, l.l.BaseURL, l.l.KeyEnv, false)
		if l.l.BaseURL != "" && l.l.Model == "" {
			bad(l.name+".model", "must not be empty when base_url is set")
		}
		positive(l.name+".timeout", l.l.Timeout)
		if l.l.Latency < 0 {
			bad(l.name+".latency", "must not be negative (0: no estimate before the first summary is timed)")
		}
		if l.l.Concurrency < 0 {
			bad(l.name+".concurrency", "must not be negative (0 means %d)", llm.DefaultConcurrency)
		}
		if err := llm.CheckMaxTokens(l.l.MaxTokens); err != nil {
			bad(l.name+".max_tokens", "%v", err)
		}
	}
	if c.Compressor.BreakerFailures < 1 {
		bad("compressor.breaker_failures", "must be at least 1")
	}
	positive("compressor.breaker_cooldown", c.Compressor.BreakerCooldown)
	positive("sessions.ttl", c.Sessions.TTL)
	if c.Sessions.Max < 1 {
		bad("sessions.max", "must be at least 1")
	}
	for i, h := range c.Auth.KeyHashes {
		if !hashForm.MatchString(h) {
			// Not echoed: a pasted raw key must not reach the terminal log.
			bad(fmt.Sprintf("auth.key_hashes[%d]", i), "is not sha256:<64 lowercase hex digits>; store the hash (optimize serve hash-key), never the key")
		}
	}
	if len(c.Auth.KeyHashes) == 0 && c.Auth.KeysFile == "" && !c.Auth.Anonymous {
		bad("auth", "no client keys: set key_hashes or keys_file, or anonymous: true for local use")
	}
	if c.Limits.BodyBytes <= 0 {
		bad("limits.body_bytes", "must be positive")
	}
	if c.Limits.Rate < 0 {
		bad("limits.rate", "must not be negative (0 disables the limit)")
	}
	if c.Limits.Rate > 0 && c.Limits.Burst < 1 {
		bad("limits.burst", "must be at least 1 when limits.rate is set")
	}
	if c.Limits.TokenBudget < 0 {
		bad("limits.token_budget", "must not be negative (0 disables the budget)")
	}
	positive("limits.budget_window", c.Limits.BudgetWindow)
	positive("timeouts.read_header", c.Timeouts.ReadHeader)
	positive("timeouts.read", c.Timeouts.Read)
	positive("timeouts.write", c.Timeouts.Write)
	positive("timeouts.idle", c.Timeouts.Idle)
	positive("timeouts.drain", c.Timeouts.Drain)
	if c.Metrics.Auth != MetricsAuthNone && c.Metrics.Auth != MetricsAuthKey {
		bad("metrics.auth", "%q is unknown; want %s (anyone may scrape) or %s (the API's client keys)", c.Metrics.Auth, MetricsAuthNone, MetricsAuthKey)
	}
	c.AgentCompaction.validate(bad)
	return errors.Join(errs...)
}

// Setting is one overridable field of Config: Name is its YAML path
// ("limits.rate"), Flag and Env the names that override it.
type Setting struct {
	Name, Flag, Env, Kind string
	v                     reflect.Value
}

// EnvPrefix starts every environment variable that overrides a setting.
const EnvPrefix = "CTXOPT_SERVE_"

// Settings lists every field of c as a Setting bound to it.
func (c *Config) Settings() []Setting {
	var out []Setting
	var walk func(v reflect.Value, path []string)
	walk = func(v reflect.Value, path []string) {
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			p := append(slices.Clone(path), name)
			f := v.Field(i)
			if f.Kind() == reflect.Struct {
				walk(f, p)
				continue
			}
			kind := f.Kind().String()
			if f.Type() == reflect.TypeFor[time.Duration]() {
				kind = "duration"
			}
			flag := strings.ReplaceAll(strings.Join(p, "-"), "_", "-")
			out = append(out, Setting{
				Name: strings.Join(p, "."), Flag: flag, Kind: kind,
				Env: EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")), v: f,
			})
		}
	}
	walk(reflect.ValueOf(c).Elem(), nil)
	return out
}

// Set parses s into the setting's field. Lists take comma-separated values.
func (s Setting) Set(v string) error {
	var err error
	switch s.v.Kind() {
	case reflect.String:
		s.v.SetString(v)
	case reflect.Bool:
		var b bool
		b, err = strconv.ParseBool(v)
		s.v.SetBool(b)
	case reflect.Int, reflect.Int64:
		if s.Kind == "duration" {
			var d time.Duration
			d, err = time.ParseDuration(v)
			s.v.SetInt(int64(d))
			break
		}
		var n int64
		n, err = strconv.ParseInt(v, 10, 64)
		s.v.SetInt(n)
	case reflect.Float64:
		var f float64
		f, err = strconv.ParseFloat(v, 64)
		s.v.SetFloat(f)
	case reflect.Slice:
		var items []string
		for it := range strings.SplitSeq(v, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		s.v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("%s: unsupported setting type %s", s.Name, s.v.Type())
	}
	if err != nil {
		return fmt.Errorf("%s: %q is not a valid %s", s.Name, v, s.Kind)
	}
	return nil
}
