package sim

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/tidwall/gjson"
)

const (
	// maxBody bounds a request body.
	maxBody = 64 << 20
	// maxArrivals bounds the arrival counter; past it the counter starts
	// over, which only changes which retries of old bodies fail.
	maxArrivals = 1 << 16
	// maxChoices bounds the n of a chat request.
	maxChoices = 16
)

var roles = []llm.Purpose{
	llm.PurposeAgent, llm.PurposeCompressor, llm.PurposeAnalyzer,
	llm.PurposeOptimizer, llm.PurposeJudge, llm.PurposeEmbedder,
	llm.PurposeGenerator, llm.PurposeReflector, llm.PurposeCurator,
}

var faultKinds = []string{Fault429, Fault5xx, FaultTimeout, FaultMalformed}

type handler struct {
	cfg    Config
	faulty bool
	tok    *llm.Tokenizer
	quit   chan struct{} // closed by Server.Close

	mu       sync.Mutex
	arrivals map[uint64]uint32

	requests, bad atomic.Int64
	byRole        [9]atomic.Int64 // indexed like roles
	faults        [4]atomic.Int64 // indexed like faultKinds
}

// NewHandler returns the model as an http.Handler serving POST
// /v1/chat/completions (streamed on request), POST /v1/messages (Anthropic
// format), POST /v1/responses (OpenAI Responses format), POST
// /v1/embeddings, GET /v1/models and GET /healthz.
func NewHandler(cfg Config) (http.Handler, error) { return newHandler(cfg) }

func newHandler(cfg Config) (*handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("embedded model config: %w", err)
	}
	tok, err := llm.NewTokenizer("")
	if err != nil {
		return nil, fmt.Errorf("embedded model: %w", err)
	}
	cfg = cfg.withDefaults()
	return &handler{
		cfg:      cfg,
		faulty:   cfg.Rate429 > 0 || cfg.Rate5xx > 0 || cfg.RateTimeout > 0 || cfg.RateMalformed > 0,
		tok:      tok,
		quit:     make(chan struct{}),
		arrivals: map[uint64]uint32{},
	}, nil
}

func (h *handler) stats() Stats {
	s := Stats{Requests: h.requests.Load(), BadRequests: h.bad.Load(), ByRole: map[string]int64{}, Faults: map[string]int64{}}
	for i, r := range roles {
		if n := h.byRole[i].Load(); n > 0 {
			s.ByRole[string(r)] = n
		}
	}
	for i, k := range faultKinds {
		if n := h.faults[i].Load(); n > 0 {
			s.Faults[k] = n
		}
	}
	return s
}

func (h *handler) countRole(p llm.Purpose) {
	if i := slices.Index(roles, p); i >= 0 {
		h.byRole[i].Add(1)
	}
}

func (h *handler) countFault(kind string) {
	if i := slices.Index(faultKinds, kind); i >= 0 {
		h.faults[i].Add(1)
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var method string
	var serve func(http.ResponseWriter, *http.Request)
	switch r.URL.Path {
	case "/v1/chat/completions":
		method, serve = http.MethodPost, h.chat
	case "/v1/embeddings":
		method, serve = http.MethodPost, h.embeddings
	case "/v1/messages":
		method, serve = http.MethodPost, h.messages
	case "/v1/responses":
		method, serve = http.MethodPost, h.responses
	case "/v1/models":
		method, serve = http.MethodGet, h.models
	case LinguaPath:
		method, serve = http.MethodPost, h.lingua
	case "/healthz":
		method, serve = http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
		}
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("no endpoint %s; the embedded model serves /v1/chat/completions, /v1/messages, /v1/responses, /v1/embeddings and /v1/models", r.URL.Path))
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
		return
	}
	serve(w, r)
}

// admission is a request read and let through the faults.
type admission struct {
	body []byte
	// bodyHash keys the request's deterministic choices.
	bodyHash uint64
	// deadline is when the answer is due: arrival plus the latency. The
	// answer is computed first and held until then, so the latency is what
	// clients see even when many requests arrive at once.
	deadline  time.Time
	malformed bool
}

// admitJSON admits a request whose body is one JSON object and decodes
// it into v. It answers the request itself (a fault, a bad body) when it
// returns false.
func (h *handler) admitJSON(w http.ResponseWriter, r *http.Request, v any) (admission, bool) {
	a, ok := h.admit(w, r)
	if !ok {
		return a, false
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		h.badRequest(r.Context(), w, a, "invalid JSON body: "+err.Error())
		return a, false
	}
	return a, true
}

// admit reads the body and injects the transport faults. It returns false
// when the request has been answered already.
func (h *handler) admit(w http.ResponseWriter, r *http.Request) (admission, bool) {
	h.requests.Add(1)
	ctx := r.Context()
	a := admission{deadline: time.Now().Add(h.cfg.Latency)}
	body, err := readBody(w, r)
	if err != nil {
		h.bad.Add(1)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "read request body: "+err.Error())
		return a, false
	}
	a.body, a.bodyHash = body, hashBytes(body)
	if !h.faulty {
		return a, true
	}
	// Each fault kind gets its own draw from (body, arrival count of that
	// body), so a retry of the same request can succeed and a run with the
	// same requests in the same order fails the same way.
	u := mix(a.bodyHash ^ mix(uint64(h.arrival(a.bodyHash))+1))
	draw := func(kind uint64) float64 { return unit(mix(u ^ kind)) }
	switch {
	case draw(1) < h.cfg.RateTimeout:
		h.countFault(FaultTimeout)
		if h.until(ctx, a.deadline.Add(h.cfg.Hang)) != waitGone {
			writeError(w, http.StatusGatewayTimeout, "timeout", "timeout", "the embedded model held this request (injected timeout fault)")
		}
		return a, false
	case draw(2) < h.cfg.Rate429:
		h.countFault(Fault429)
		secs := int(math.Ceil(h.cfg.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(h.cfg.RetryAfter.Milliseconds(), 10))
		h.reply(ctx, w, a, apiError(http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "rate limit reached (injected 429 fault); retry after "+strconv.Itoa(secs)+"s"))
		return a, false
	case draw(3) < h.cfg.Rate5xx:
		h.countFault(Fault5xx)
		if u&(1<<20) != 0 {
			h.reply(ctx, w, a, apiError(http.StatusServiceUnavailable, "server_error", "overloaded", "the embedded model is overloaded (injected 503 fault)"))
		} else {
			h.reply(ctx, w, a, apiError(http.StatusInternalServerError, "server_error", "", "the embedded model failed (injected 500 fault)"))
		}
		return a, false
	}
	a.malformed = draw(4) < h.cfg.RateMalformed
	return a, true
}

// errorReply is an OpenAI-style error answer.
type errorReply struct {
	status         int
	typ, code, msg string
}

func apiError(status int, typ, code, msg string) errorReply {
	return errorReply{status: status, typ: typ, code: code, msg: msg}
}

// reply writes v (an errorReply or a response body) when the request's
// deadline has come.
func (h *handler) reply(ctx context.Context, w http.ResponseWriter, a admission, v any) {
	if h.until(ctx, a.deadline) == waitGone {
		return
	}
	if e, ok := v.(errorReply); ok {
		writeError(w, e.status, e.typ, e.code, e.msg)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// badRequest answers 400 with msg.
func (h *handler) badRequest(ctx context.Context, w http.ResponseWriter, a admission, msg string) {
	h.bad.Add(1)
	h.reply(ctx, w, a, apiError(http.StatusBadRequest, "invalid_request_error", "", msg))
}

type waitResult int

const (
	waitDone waitResult = iota
	waitGone            // the client went away
	waitQuit            // the server is closing
)

// until waits for t, the client to go away or the server to close.
func (h *handler) until(ctx context.Context, t time.Time) waitResult {
	d := time.Until(t)
	if d <= 0 {
		if ctx.Err() != nil {
			return waitGone
		}
		return waitDone
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return waitDone
	case <-ctx.Done():
		return waitGone
	case <-h.quit:
		return waitQuit
	}
}

func (h *handler) arrival(k uint64) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.arrivals) >= maxArrivals {
		clear(h.arrivals)
	}
	n := h.arrivals[k]
	h.arrivals[k] = n + 1
	return n
}

// readBody reads the request body in one allocation when its length is
// known.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(rd)
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// hashBytes keys a request body. CRC-64 is several times faster than FNV on
// long bodies; mix spreads its bits before any draw.
func hashBytes(b []byte) uint64 { return mix(crc64.Checksum(b, crcTable)) }

// parseObject checks that body is a JSON object.
func parseObject(body []byte) (gjson.Result, error) {
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, errors.New("invalid JSON body")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return root, errors.New("invalid JSON body: want an object")
	}
	return root, nil
}

// chatRequest is the part of an OpenAI chat request the model reads.
type chatRequest struct {
	Model     string
	Messages  []llm.Message
	Tools     []llm.Tool
	N         int
	MaxTokens int
	// Temperature and Seed decide the variation of the answers: none at
	// temperature 0 (or absent), else a function of seed and sample.
	Temperature float64
	Seed        int64
	// Stream asks for server-sent events; IncludeUsage for a last chunk
	// with the usage (stream_options.include_usage).
	Stream       bool
	IncludeUsage bool
}

// parseChat reads a chat request. It uses gjson, walking each object once:
// agent requests carry long contexts, and encoding/json's validate-then-
// decode passes were the largest cost of a request.
func parseChat(body []byte) (chatRequest, error) {
	var req chatRequest
	root, err := parseObject(body)
	if err != nil {
		return req, err
	}
	var msgs gjson.Result
	maxCompletion := 0
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			req.Model = v.String()
		case "messages":
			msgs = v
		case "tools":
			v.ForEach(func(_, t gjson.Result) bool {
				f := t.Get("function")
				req.Tools = append(req.Tools, llm.Tool{
					Name: f.Get("name").String(), Description: f.Get("description").String(),
					Parameters: json.RawMessage(f.Get("parameters").Raw),
				})
				return true
			})
		case "n":
			req.N = int(v.Int())
		case "temperature":
			req.Temperature = v.Float()
		case "seed":
			req.Seed = v.Int()
		case "stream":
			req.Stream = v.Bool()
		case "stream_options":
			req.IncludeUsage = v.Get("include_usage").Bool()
		case "max_tokens":
			req.MaxTokens = int(v.Int())
		case "max_completion_tokens":
			maxCompletion = int(v.Int())
		}
		return true
	})
	if req.MaxTokens <= 0 {
		req.MaxTokens = maxCompletion
	}
	if !msgs.IsArray() {
		return req, errors.New("messages: want an array of messages")
	}
	msgs.ForEach(func(_, m gjson.Result) bool {
		var msg llm.Message
		if msg, err = llm.OpenAIMessage(m); err != nil {
			err = fmt.Errorf("messages[%d].%w", len(req.Messages), err)
			return false
		}
		req.Messages = append(req.Messages, msg)
		return true
	})
	if err == nil && len(req.Messages) == 0 {
		err = errors.New("messages: empty; send at least one message")
	}
	return req, err
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      respMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type respMessage struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (h *handler) chat(w http.ResponseWriter, r *http.Request) {
	h.serveChat(w, r, parseChat, func(ctx context.Context, w http.ResponseWriter, a admission, req chatRequest, resp chatResponse) {
		if req.Stream {
			h.streamChat(ctx, w, a, resp, req.IncludeUsage)
			return
		}
		h.reply(ctx, w, a, resp)
	})
}

// serveChat admits a chat request in either wire format, answers it and
// hands the answer to write, which frames it.
func (h *handler) serveChat(w http.ResponseWriter, r *http.Request, parse func([]byte) (chatRequest, error),
	write func(context.Context, http.ResponseWriter, admission, chatRequest, chatResponse)) {
	ctx := r.Context()
	a, ok := h.admit(w, r)
	if !ok {
		return
	}
	req, err := parse(a.body)
	if err != nil {
		h.badRequest(ctx, w, a, err.Error())
		return
	}
	resp, err := h.complete(r, a, req)
	if err != nil {
		h.badRequest(ctx, w, a, err.Error())
		return
	}
	write(ctx, w, a, req, resp)
}

// complete answers a parsed chat request (from either wire format).
func (h *handler) complete(r *http.Request, a admission, req chatRequest) (chatResponse, error) {
	msgs := req.Messages
	role, err := chatRole(r.Header.Get(llm.RoleHeader), len(req.Tools) > 0)
	if err != nil {
		return chatResponse{}, err
	}
	sample := 0
	if v := r.Header.Get(llm.SampleHeader); v != "" {
		if sample, err = strconv.Atoi(v); err != nil || sample < 0 {
			return chatResponse{}, fmt.Errorf("%s header: %q is not a sample index (want an integer >= 0)", llm.SampleHeader, v)
		}
	}
	n := max(1, req.N)
	if n > maxChoices {
		return chatResponse{}, fmt.Errorf("n: %d choices asked, at most %d", n, maxChoices)
	}
	h.countRole(role)
	model := req.Model
	if model == "" {
		model = ModelName
	}
	maxTokens := req.MaxTokens
	key := mix(a.bodyHash ^ mix(uint64(sample)))
	resp := chatResponse{
		ID: "chatcmpl-" + hex16(key), Object: "chat.completion", Model: model,
		SystemFingerprint: "ctxopt-sim",
	}
	prompt := h.tok.CountMessages(msgs)
	for _, t := range req.Tools {
		prompt += h.tok.Count(t.Name) + h.tok.Count(t.Description) + h.tok.Count(string(t.Parameters))
	}
	resp.Usage.PromptTokens = prompt
	for i := range n {
		c, err := h.answer(role, msgs, req.Tools, sample+i, mix(key^uint64(i)), variation(req, sample+i))
		if err != nil {
			return chatResponse{}, err
		}
		if a.malformed && len(c.Message.ToolCalls) > 0 {
			h.countFault(FaultMalformed)
			for j := range c.Message.ToolCalls {
				args := c.Message.ToolCalls[j].Function.Arguments
				c.Message.ToolCalls[j].Function.Arguments = args[:len(args)/2]
			}
		}
		completion := h.tok.Count(c.Message.Content)
		for _, tc := range c.Message.ToolCalls {
			completion += h.tok.Count(tc.Function.Name) + h.tok.Count(tc.Function.Arguments)
		}
		if maxTokens > 0 && completion > maxTokens && len(c.Message.ToolCalls) == 0 {
			c.Message.Content = h.truncate(c.Message.Content, maxTokens)
			c.FinishReason = "length"
			completion = h.tok.Count(c.Message.Content)
		}
		c.Index = i
		resp.Choices = append(resp.Choices, c)
		resp.Usage.CompletionTokens += completion
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	return resp, nil
}

// ChatReply is the whole answer to a plain chat: a request with neither a
// role header nor tools, as a client's hello world sends (documented in
// docs/embedded-model.md, Determinism and roles).
const ChatReply = "Hello from ctxopt's embedded offline model. It is a deterministic test double, not a language model: every plain chat gets this reply."

// purposeChat is the role of a plain chat; no ctxopt client sends it.
const purposeChat llm.Purpose = "chat"

// chatRole reads the role header; without one, a request with tools is the
// agent's and any other a plain chat.
func chatRole(header string, tools bool) (llm.Purpose, error) {
	switch p := llm.Purpose(strings.TrimSpace(header)); p {
	case "":
		if tools {
			return llm.PurposeAgent, nil
		}
		return purposeChat, nil
	case llm.PurposeAgent, llm.PurposeCompressor, llm.PurposeAnalyzer, llm.PurposeOptimizer, llm.PurposeJudge, llm.PurposeGenerator,
		llm.PurposeReflector, llm.PurposeCurator:
		return p, nil
	case llm.PurposeEmbedder:
		return "", fmt.Errorf("%s header: the embedder is served by POST /v1/embeddings, not chat completions", llm.RoleHeader)
	default:
		return "", fmt.Errorf("%s header: unknown role %q; want agent, compressor, analyzer, optimizer, judge, generator, reflector or curator", llm.RoleHeader, header)
	}
}

// variation is what makes the answers of a request at temperature > 0
// differ with its seed and sample index; 0 at temperature 0.
func variation(req chatRequest, sample int) uint64 {
	if req.Temperature <= 0 {
		return 0
	}
	return hashInts(hashStrings("variation"), int(req.Seed), sample) | 1
}

// answer plays role on the conversation.
func (h *handler) answer(role llm.Purpose, msgs []llm.Message, tools []llm.Tool, sample int, key, variation uint64) (chatChoice, error) {
	c := chatChoice{Message: respMessage{Role: "assistant"}, FinishReason: "stop"}
	if role == purposeChat {
		c.Message.Content = ChatReply
		return c, nil
	}
	if role == llm.PurposeAgent {
		t, ok := planReply(msgs)
		if !ok {
			t = toolAgentReply(msgs, tools)
		}
		tc := wireToolCall{ID: "call_" + hex16(key), Type: "function"}
		tc.Function.Name, tc.Function.Arguments = t.Call.Name, t.Call.Args
		c.Message.Content = t.Thought
		c.Message.ToolCalls = []wireToolCall{tc}
		c.FinishReason = "tool_calls"
		return c, nil
	}
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(m.Content)
	}
	prompt := b.String()
	var err error
	switch role {
	case llm.PurposeCompressor:
		var ok bool
		if c.Message.Content, ok = extendedCompress(prompt); !ok {
			c.Message.Content = compress(prompt, h.tok, variation)
		}
	case llm.PurposeAnalyzer:
		c.Message.Content, err = analyze(prompt, variation)
	case llm.PurposeOptimizer:
		c.Message.Content, err = optimize(prompt, sample, variation)
	case llm.PurposeJudge:
		c.Message.Content, err = judge(prompt)
	case llm.PurposeGenerator:
		c.Message.Content, err = generate(prompt, variation)
	case llm.PurposeReflector:
		c.Message.Content, err = reflect(prompt)
	case llm.PurposeCurator:
		c.Message.Content, err = curate(prompt)
	}
	return c, err
}

// truncate cuts s to at most n tokens, as a server stopping at max_tokens.
func (h *handler) truncate(s string, n int) string {
	for h.tok.Count(s) > n && s != "" {
		r := []rune(s)
		s = string(r[:len(r)*n/(h.tok.Count(s)+1)])
	}
	return s
}

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  wireUsage       `json:"usage"`
}

func (h *handler) embeddings(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req embeddingRequest
	a, ok := h.admitJSON(w, r, &req)
	if !ok {
		return
	}
	inputs, err := embeddingInputs(req.Input)
	if err != nil {
		h.badRequest(ctx, w, a, "input: "+err.Error())
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		h.badRequest(ctx, w, a, fmt.Sprintf("encoding_format: %q; want float or base64", req.EncodingFormat))
		return
	}
	h.countRole(llm.PurposeEmbedder)
	resp := embeddingResponse{Object: "list", Model: req.Model}
	if resp.Model == "" {
		resp.Model = ModelName
	}
	for i, in := range inputs {
		v := embed(in)
		d := embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			d.Embedding = embeddingBase64(v)
		}
		resp.Data = append(resp.Data, d)
		resp.Usage.PromptTokens += h.tok.Count(in)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	h.reply(ctx, w, a, resp)
}

// embeddingInputs reads a string, an array of strings, or token arrays
// (whose tokens are embedded as words).
func embeddingInputs(raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		if len(many) == 0 {
			return nil, errors.New("empty list; send at least one text")
		}
		return many, nil
	}
	tokens := func(ts []int) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = "t" + strconv.Itoa(t)
		}
		return strings.Join(s, " ")
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return []string{tokens(ids)}, nil
	}
	var idss [][]int
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		out := make([]string, len(idss))
		for i, ts := range idss {
			out[i] = tokens(ts)
		}
		return out, nil
	}
	return nil, errors.New("want a string, an array of strings or token arrays")
}

func (h *handler) models(w http.ResponseWriter, _ *http.Request) {
	h.requests.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{
			{"id": ModelName, "object": "model", "created": 0, "owned_by": "ctxopt"},
		},
	})
}

func hex16(x uint64) string {
	var b [8]byte
	for i := range b {
		b[i] = byte(x >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError answers with an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": c,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
