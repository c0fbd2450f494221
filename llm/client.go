package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/sashabaranov/go-openai"
)

// Client calls one role's OpenAI-compatible endpoint. It is safe for
// concurrent use.
type Client struct {
	role  string
	cfg   RoleConfig
	host  string
	key   string // only to scrub it from errors; never logged or stored
	oa    *openai.Client
	cache *Cache
	tok   *Tokenizer
	retry *Retrier
	stats stats
	sink  func(MalformedReply)
}

// NewClient builds the client of role from cfg (defaults applied). The API
// key is read from the environment variable cfg.KeyEnv now. cache may be nil.
func NewClient(role string, cfg RoleConfig, cache *Cache) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate("roles." + role); err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(cfg.Encoding)
	if err != nil {
		return nil, fmt.Errorf("roles.%s.encoding: %w", role, err)
	}
	var key string
	if cfg.KeyEnv != "" {
		key = os.Getenv(cfg.KeyEnv)
		if key == "" {
			slog.Warn("llm API key variable is empty; sending no key", "role", role, "key_env", cfg.KeyEnv)
		}
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("roles.%s.base_url: %w", role, err)
	}
	c := &Client{role: role, cfg: cfg, host: u.Host, key: key, cache: cache, tok: tok}
	// go-openai never retries: the doer's client does.
	c.retry = &Retrier{
		Policy: RetryPolicy{MaxRetries: cfg.MaxRetries, Timeout: cfg.Timeout},
		Next:   sharedTransport, MaxBody: MaxAnswerBytes + 1, Check: checkAnswer, Log: c.logAttempt,
		limit: endpointLimiter(cfg.BaseURL, cfg.Concurrency),
	}
	d, err := newDoer(cfg, c.retry)
	if err != nil {
		return nil, fmt.Errorf("roles.%s: %w", role, err)
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = normURL(cfg.BaseURL)
	oc.HTTPClient = d
	c.oa = openai.NewClientWithConfig(oc)
	return c, nil
}

// Role is the role name the client was built for.
func (c *Client) Role() string { return c.role }

// BaseURL is the endpoint's base URL, without a trailing slash: the
// requests of the client go to paths under it.
func (c *Client) BaseURL() string { return normURL(c.cfg.BaseURL) }

// Model is the model the client asks for.
func (c *Client) Model() string { return c.cfg.Model }

// Tokenizer counts tokens with the role's encoding.
func (c *Client) Tokenizer() *Tokenizer { return c.tok }

// Stats returns the totals so far.
func (c *Client) Stats() Stats { return c.stats.snapshot(c.Cost) }

// Cost prices u at the role's rates. It is linear in the tokens, so the
// cost of a sum of calls is the cost of their summed usage.
func (c *Client) Cost(u Usage) float64 {
	return (float64(u.PromptTokens)*c.cfg.PriceIn + float64(u.CompletionTokens)*c.cfg.PriceOut) / 1e6
}

// Complete answers req from the cache or the endpoint.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	purpose := string(req.Purpose)
	if purpose == "" {
		purpose = c.role
	}
	maxTokens := c.cfg.MaxTokens
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	var key []byte
	if c.cache != nil {
		var err error
		key, err = hashKey(chatKey{
			Version: cacheVersion, BaseURL: c.cacheEndpoint(), Model: c.cfg.Model, Purpose: purpose,
			Messages: req.Messages, Tools: req.Tools, ToolChoice: c.toolChoice(req), Temperature: c.cfg.Temperature,
			Seed: c.cfg.Seed, MaxTokens: maxTokens, Sample: req.Sample,
		})
		if err != nil {
			c.stats.failed(err, 0)
			return Response{}, fmt.Errorf("llm %s: %w", c.role, err)
		}
		if resp, ok := c.cachedChat(key); ok {
			c.stats.answered(resp.Usage, Usage{}, true, 0)
			return resp, nil
		}
	}

	msgs, fill := toOpenAIMessages(req.Messages)
	oreq := openai.ChatCompletionRequest{
		Model:    c.cfg.Model,
		Messages: msgs,
		Tools:    toOpenAITools(req.Tools),
		//lint:ignore SA1019 llama.cpp, Ollama and older vLLM read max_tokens only
		MaxTokens:   maxTokens,
		Temperature: float32(c.cfg.Temperature), // the doer writes the exact value
		Seed:        c.cfg.Seed,
	}
	if tc := c.toolChoice(req); tc != "" {
		oreq.ToolChoice = tc
	}
	var oresp openai.ChatCompletionResponse
	retries, err := c.send(ctx, &attempt{purpose: purpose, sample: req.Sample, fillContent: fill}, func(ctx context.Context) error {
		var err error
		oresp, err = c.oa.CreateChatCompletion(ctx, oreq)
		return err
	})
	if errors.Is(err, errUnparsed) {
		// Not cached: another sample or a later server build may parse.
		c.ReportMalformed(MalformedReply{Purpose: Purpose(purpose), Kind: MalformedUnparsed, Detail: "the server answered an error instead of the reply", Raw: err.Error()})
		u := Usage{PromptTokens: c.tok.CountMessages(req.Messages)}
		c.stats.answered(u, u, false, retries)
		return Response{
			Message: Message{Role: openai.ChatMessageRoleAssistant}, Usage: u,
			FinishReason: FinishMalformed, Model: c.cfg.Model, Retries: retries,
		}, nil
	}
	if err != nil {
		c.stats.failed(err, retries)
		return Response{}, &attemptsError{err: err, attempts: retries + 1}
	}

	resp := c.fromOpenAI(oresp, req.Messages)
	c.recoverTextToolCall(&resp, req)
	if key != nil {
		if b, err := json.Marshal(resp); err != nil {
			slog.Warn("llm cache encode failed", "role", c.role, "err", err)
		} else {
			c.cache.put(chatBucket, key, b)
		}
	}
	resp.Retries = retries
	c.stats.answered(resp.Usage, resp.Usage, false, retries)
	return resp, nil
}

// recoverTextToolCall makes a tool call the model wrote as text (when req
// offered tools and the server found no call in the reply) the reply's
// call, and reports the reply as malformed with its raw text.
func (c *Client) recoverTextToolCall(resp *Response, req Request) {
	if len(req.Tools) == 0 || len(resp.Message.ToolCalls) > 0 || c.toolChoice(req) == ToolChoiceNone {
		return
	}
	call, ok := textToolCall(resp.Message.Content, req.Tools)
	if !ok {
		return
	}
	c.ReportMalformed(MalformedReply{Purpose: req.Purpose, Kind: MalformedToolCallInText,
		Detail: "the tool call was written as text, not as a tool call; its first call is used", Raw: resp.Message.Content})
	resp.Message.Content = ""
	resp.Message.ToolCalls = []ToolCall{call}
}

// toolChoice is the tool_choice to send with req: the role's, only when
// req offers tools (OpenAI rejects a tool_choice without tools).
func (c *Client) toolChoice(req Request) string {
	if len(req.Tools) == 0 {
		return ""
	}
	return c.cfg.ToolChoice
}

// attemptsError is a failed call with the requests it sent.
type attemptsError struct {
	err      error
	attempts int
}

func (e *attemptsError) Error() string { return e.err.Error() }
func (e *attemptsError) Unwrap() error { return e.err }

// Attempts reports how many requests a failed Complete or Embeddings sent to the endpoint
// (each retry is one), 0 when err is not from Complete. Spend and retry
// counts include them: a call that ends in an error still cost requests.
func Attempts(err error) int {
	var a *attemptsError
	if errors.As(err, &a) {
		return a.attempts
	}
	return 0
}

func (c *Client) cachedChat(key []byte) (Response, bool) {
	b, ok := c.cache.get(chatBucket, key)
	if !ok {
		return Response{}, false
	}
	var resp Response
	if err := json.Unmarshal(b, &resp); err != nil {
		slog.Warn("llm cache entry unreadable; asking the endpoint", "role", c.role, "err", err)
		return Response{}, false
	}
	resp.Cached = true
	resp.Retries = 0
	return resp, true
}

// Embed returns one vector per text, in order, and the tokens of every
// text (cached ones included).
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, Usage, error) {
	e, err := c.Embeddings(ctx, texts)
	return e.Vectors, e.Usage, err
}

// Embeddings is the answer to one embedding call.
type Embeddings struct {
	Vectors [][]float32
	Usage   Usage // the tokens of every text, cached ones included
	Fresh   Usage // the tokens of the texts the endpoint embedded
	// Cached is true when every text came from the cache: the call cost
	// nothing.
	Cached  bool
	Retries int
}

// Embeddings embeds texts like Embed and says what the call cost. Texts are
// cached one by one, so only those never seen before go to the endpoint,
// in one request. A failed call's error carries its attempts (Attempts).
func (c *Client) Embeddings(ctx context.Context, texts []string) (Embeddings, error) {
	if len(texts) == 0 {
		return Embeddings{}, nil
	}
	out := make([][]float32, len(texts))
	var usage Usage
	var missing []int
	keys := make([][]byte, len(texts))
	for i, t := range texts {
		if c.cache != nil {
			k, err := hashKey(embedKey{Version: cacheVersion, BaseURL: c.cacheEndpoint(), Model: c.cfg.Model, Input: t})
			if err != nil {
				c.stats.failed(err, 0)
				return Embeddings{}, fmt.Errorf("llm %s: %w", c.role, err)
			}
			keys[i] = k
			if b, ok := c.cache.get(embedBucket, k); ok {
				if v, n, ok := decodeEmbedding(b); ok {
					out[i] = v
					usage.PromptTokens += n
					continue
				}
			}
		}
		missing = append(missing, i)
	}
	if len(missing) == 0 {
		c.stats.answered(usage, Usage{}, true, 0)
		return Embeddings{Vectors: out, Usage: usage, Cached: true}, nil
	}

	input := make([]string, len(missing))
	for j, i := range missing {
		input[j] = texts[i]
	}
	var oresp openai.EmbeddingResponse
	retries, err := c.send(ctx, &attempt{purpose: c.role, inputs: len(input)}, func(ctx context.Context) error {
		var err error
		oresp, err = c.oa.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{Input: input, Model: openai.EmbeddingModel(c.cfg.Model)})
		return err
	})
	if err != nil {
		c.stats.failed(err, retries)
		return Embeddings{}, &attemptsError{err: err, attempts: retries + 1}
	}

	counts := make([]int, len(input))
	local := 0
	for j, t := range input {
		counts[j] = c.tok.Count(t)
		local += counts[j]
	}
	fresh := Usage{PromptTokens: oresp.Usage.PromptTokens}
	if fresh.PromptTokens == 0 {
		fresh.PromptTokens = local
	}
	for _, d := range oresp.Data {
		i := missing[d.Index]
		out[i] = d.Embedding
		if keys[i] != nil {
			c.cache.put(embedBucket, keys[i], encodeEmbedding(d.Embedding, counts[d.Index]))
		}
	}
	usage.PromptTokens += fresh.PromptTokens
	c.stats.answered(usage, fresh, false, retries)
	return Embeddings{Vectors: out, Usage: usage, Fresh: fresh, Retries: retries}, nil
}

// redact scrubs the API key from err's text, in case a server echoes the
// request's headers in its error message.
func (c *Client) redact(err error) error {
	if err == nil || c.key == "" || !strings.Contains(err.Error(), c.key) {
		return err
	}
	return redacted{err: err, msg: strings.ReplaceAll(err.Error(), c.key, "[REDACTED]")}
}

type redacted struct {
	err error
	msg string
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

func toOpenAIMessages(ms []Message) ([]openai.ChatCompletionMessage, bool) {
	out := make([]openai.ChatCompletionMessage, len(ms))
	fill := false
	for i, m := range ms {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		// An assistant turn that only calls tools may omit content; any
		// other empty content must still be sent.
		if m.Content == "" && len(m.ToolCalls) == 0 {
			fill = true
		}
		out[i] = om
	}
	return out, fill
}

// emptySchema stands in for a tool without parameters: servers want an object.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func toOpenAITools(ts []Tool) []openai.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]openai.Tool, len(ts))
	for i, t := range ts {
		params := t.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		out[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}}
	}
	return out
}

// fromOpenAI converts the first choice, counting tokens locally when the
// server reports no usage (several local servers do not).
func (c *Client) fromOpenAI(r openai.ChatCompletionResponse, prompt []Message) Response {
	ch := r.Choices[0]
	msg := Message{Role: ch.Message.Role, Content: ch.Message.Content, Name: ch.Message.Name}
	if msg.Role == "" {
		msg.Role = openai.ChatMessageRoleAssistant
	}
	for _, tc := range ch.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	u := Usage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = c.tok.CountMessages(prompt)
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = c.tok.Count(msg.Content)
		for _, tc := range msg.ToolCalls {
			u.CompletionTokens += c.tok.Count(tc.Arguments)
		}
	}
	model := r.Model
	if model == "" {
		model = c.cfg.Model
	}
	return Response{Message: msg, Usage: u, FinishReason: string(ch.FinishReason), Model: model}
}

// cacheEndpoint names the endpoint in cache keys.
func (c *Client) cacheEndpoint() string {
	if c.cfg.CacheEndpoint != "" {
		return c.cfg.CacheEndpoint
	}
	return normURL(c.cfg.BaseURL)
}
