package llm

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Defaults applied by WithDefaults to zero fields of a RoleConfig.
const (
	DefaultConcurrency = 8
	DefaultTimeout     = 120 * time.Second
	DefaultMaxRetries  = 5
)

// The roles of a job, each with its own endpoint (a RoleConfig) and
// client. Their names are the keys of a job's roles section and name the
// roles in statistics, usage tables, reports and error messages; the
// requests of each role carry the Purpose of the same name (the optimizer
// also sends PurposeAnalyzer requests).
const (
	RoleAgent      = "agent"
	RoleCompressor = "compressor"
	RoleOptimizer  = "optimizer"
	RoleJudge      = "judge"
	RoleEmbedder   = "embedder"
	// RoleGenerator writes synthetic workflows (PAACE-Syn).
	RoleGenerator = "generator"
	// RoleReflector tags playbook bullets helpful or harmful and
	// RoleCurator proposes delta operations (the ACE optimizer).
	RoleReflector = "reflector"
	RoleCurator   = "curator"
)

// Roles returns every role, in the order configurations, statistics and
// tables list them.
func Roles() []string {
	return []string{RoleAgent, RoleCompressor, RoleOptimizer, RoleJudge, RoleEmbedder, RoleGenerator, RoleReflector, RoleCurator}
}

// FallbackRole names the role whose endpoint a role takes when a job
// leaves it unset, "" for none: the reflector reads feedback as the
// analyzer does (the optimizer role's endpoint), the curator edits the
// guideline as the optimizer does.
func FallbackRole(role string) string {
	switch role {
	case RoleReflector, RoleCurator:
		return RoleOptimizer
	}
	return ""
}

// RoleConfig configures the endpoint and sampling of one role (agent,
// compressor, ...). The API key never appears here: KeyEnv names the
// environment variable that holds it.
type RoleConfig struct {
	// BaseURL is the OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1.
	BaseURL string `yaml:"base_url" json:"base_url"`
	Model   string `yaml:"model" json:"model"`
	// KeyEnv is the name of the environment variable holding the API key.
	// Empty means no key, as for most local servers.
	KeyEnv string `yaml:"key_env,omitempty" json:"key_env,omitempty"`
	// NoKey says the endpoint needs no key (most local servers), so a job
	// need not name a key variable for it.
	NoKey       bool    `yaml:"no_key,omitempty" json:"no_key,omitempty"`
	Temperature float64 `yaml:"temperature" json:"temperature"`
	Seed        *int    `yaml:"seed,omitempty" json:"seed,omitempty"`
	MaxTokens   int     `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	// PriceIn and PriceOut are USD per million prompt and completion tokens.
	PriceIn  float64 `yaml:"price_in,omitempty" json:"price_in,omitempty"`
	PriceOut float64 `yaml:"price_out,omitempty" json:"price_out,omitempty"`
	// Concurrency bounds the requests in flight to BaseURL, shared by every
	// role that uses the same BaseURL (the largest value wins).
	Concurrency int `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	// Timeout bounds one attempt, not the whole call with its retries.
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxRetries is the number of retries after the first attempt; 0 means
	// the default and a negative value disables retries.
	MaxRetries int `yaml:"max_retries,omitempty" json:"max_retries,omitempty"`
	// CacheEndpoint, when set, stands for BaseURL in response-cache keys: a
	// server whose address changes from run to run (the embedded model on a
	// free port) keeps its cache entries. Not part of the job file.
	CacheEndpoint string `yaml:"-" json:"-"`
	// Encoding is the tiktoken encoding used to count tokens locally.
	Encoding string `yaml:"encoding,omitempty" json:"encoding,omitempty"`
	// ToolChoice is sent as tool_choice with requests that offer tools:
	// auto, required or none; empty sends none and the server decides
	// (auto). llama.cpp constrains the output to a tool call under
	// required, and may answer 500 under auto when a small model's output
	// does not fit its tool-call parser.
	ToolChoice string `yaml:"tool_choice,omitempty" json:"tool_choice,omitempty"`
}

// MaxMaxTokens bounds max_tokens: no model's context holds a completion
// longer than this, so a larger value is a typo (1e15).
const MaxMaxTokens = 1 << 21

// CheckMaxTokens holds a max_tokens setting (a role's, serve's links') to
// 0, the server's default, through MaxMaxTokens.
func CheckMaxTokens(n int) error {
	if n < 0 || n > MaxMaxTokens {
		return fmt.Errorf("%d is out of range; want 0 (the server's default) to %d, the largest completion any model's context holds", n, MaxMaxTokens)
	}
	return nil
}

// Tool choices a RoleConfig accepts.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
)

// AnswerSettings returns c without the settings that change only how a
// request is made (concurrency, timeout, retries, key), so two configs
// with the same answer settings get the same answers at the same prices.
// Fingerprints of finished work use it: raising a timeout resumes work
// instead of redoing it.
func (c RoleConfig) AnswerSettings() RoleConfig {
	c.Concurrency, c.Timeout, c.MaxRetries, c.KeyEnv, c.NoKey = 0, 0, 0, "", false
	return c
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RoleConfig) WithDefaults() RoleConfig {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.Encoding == "" {
		c.Encoding = DefaultEncoding
	}
	return c
}

// secretQuery reports whether a query string carries something that looks
// like a credential.
func secretQuery(q url.Values) bool {
	for k := range q {
		k = strings.ToLower(k)
		for _, w := range []string{"key", "token", "secret", "password", "sig"} {
			if strings.Contains(k, w) {
				return true
			}
		}
	}
	return false
}

// envName is what a shell accepts as a variable name. Anything else in
// key_env is most likely the key itself pasted by mistake.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// encodings are the BPEs the offline loader ships.
var encodings = map[string]bool{"o200k_base": true, "cl100k_base": true, "p50k_base": true, "r50k_base": true}

// Problem is one invalid field of a RoleConfig.
type Problem struct {
	Field string // the full path, e.g. roles.agent.base_url
	Msg   string
}

// Validate reports every invalid field, each prefixed by field (the path of
// c in the job spec, e.g. "roles.agent").
func (c RoleConfig) Validate(field string) error {
	var errs []error
	for _, p := range c.Problems(field) {
		errs = append(errs, fmt.Errorf("%s: %s", p.Field, p.Msg))
	}
	return errors.Join(errs...)
}

// Problems lists every invalid field; field is the path of c in the job
// spec, e.g. "roles.agent".
func (c RoleConfig) Problems(field string) []Problem {
	var errs []Problem
	bad := func(name, format string, args ...any) {
		errs = append(errs, Problem{field + "." + name, fmt.Sprintf(format, args...)})
	}
	if c.BaseURL == "" {
		bad("base_url", "must not be empty (an OpenAI-compatible API root such as http://127.0.0.1:8080/v1)")
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base_url", "is not an http(s) URL with a host")
	} else if u.User != nil || secretQuery(u.Query()) {
		// Job files and run manifests record base_url: credentials in it
		// would be written to disk. The value is not echoed.
		bad("base_url", "must not carry credentials (user:password@ or a key in the query); put the key in the variable key_env names")
	}
	if c.Model == "" {
		bad("model", "must not be empty")
	}
	if c.KeyEnv != "" && !envName.MatchString(c.KeyEnv) {
		// The value is not echoed: it may be the secret itself.
		bad("key_env", "must be the name of an environment variable holding the key (letters, digits, _), not the key")
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature", "%g is outside [0, 2]", c.Temperature)
	}
	if err := CheckMaxTokens(c.MaxTokens); err != nil {
		bad("max_tokens", "%v", err)
	}
	if c.PriceIn < 0 {
		bad("price_in", "must not be negative")
	}
	if c.PriceOut < 0 {
		bad("price_out", "must not be negative")
	}
	if c.Concurrency < 0 {
		bad("concurrency", "must not be negative (0 means %d)", DefaultConcurrency)
	}
	if c.Timeout < 0 {
		bad("timeout", "must not be negative (0 means %s)", DefaultTimeout)
	}
	switch c.ToolChoice {
	case "", ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
	default:
		bad("tool_choice", "%q is unknown; use auto, required or none (leave it out to let the server decide)", c.ToolChoice)
	}
	if c.Encoding != "" && !encodings[c.Encoding] {
		bad("encoding", "%q is unknown; use o200k_base, cl100k_base, p50k_base or r50k_base", c.Encoding)
	}
	return errs
}
