// Package llm talks to OpenAI-compatible chat and embedding endpoints, one
// client per role, with retries, a concurrency limit, a response cache, token
// counting and cost accounting.
package llm

import (
	"encoding/json"
	"errors"
)

// Purpose tells the server which job a request does. It is sent in the
// RoleHeader so the embedded model knows what to play; real servers ignore it.
type Purpose string

const (
	PurposeAgent      Purpose = RoleAgent
	PurposeCompressor Purpose = RoleCompressor
	// PurposeAnalyzer asks the optimizer role for an analysis.
	PurposeAnalyzer  Purpose = "analyzer"
	PurposeOptimizer Purpose = RoleOptimizer
	PurposeJudge     Purpose = RoleJudge
	PurposeEmbedder  Purpose = RoleEmbedder
	// PurposeGenerator writes synthetic workflows (PAACE-Syn).
	PurposeGenerator Purpose = RoleGenerator
	PurposeReflector Purpose = RoleReflector
	PurposeCurator   Purpose = RoleCurator
)

// RoleHeader carries the Purpose of a request.
const RoleHeader = "X-Ctxopt-Role"

// Message is one chat message in the OpenAI format.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a function call requested by the model. Arguments is the raw
// JSON text the model wrote: it is untrusted and may not parse.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool describes a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one chat completion call. Zero values take the role's defaults.
type Request struct {
	Purpose  Purpose   `json:"purpose"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// Sample distinguishes repeated samples of the same request, so K
	// candidates from one prompt are K cache entries, not one.
	Sample int `json:"sample,omitempty"`
	// MaxTokens overrides the role's max tokens when > 0.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Response is the model's answer to a Request.
type Response struct {
	Message      Message `json:"message"`
	Usage        Usage   `json:"usage"`
	FinishReason string  `json:"finish_reason"`
	Model        string  `json:"model"`
	// Cached is true when the answer came from the response cache.
	Cached bool `json:"cached"`
	// Retries counts the failed attempts before this answer.
	Retries int `json:"retries"`
}

// ErrUnavailable marks infrastructure failures: the endpoint stayed down,
// kept rate limiting or timing out after every retry. Callers record these
// as infra failures, never as task failures.
var ErrUnavailable = errors.New("llm endpoint unavailable")
