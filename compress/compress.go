// Package compress holds every context compression strategy of ctxopt behind
// two small interfaces, so the rollout's agent loop and the serve runtime run
// exactly the same compressors.
//
// # History compression
//
// A History compressor is called before every agent call with an Input: the
// task text, the plan's next steps when the environment has a plan (nil
// otherwise), the whole history as OpenAI-shaped messages (every message
// after the task message: assistant turns with their tool calls, followed by
// the tool results), the previous summary and how much of the history it
// covers, and the token counts. It returns an Output: the messages the agent
// will see after its system prompt (the task message first, possibly with a
// summary folded in, then the kept turns), the new summary state and, when it
// compressed anything, an Event saying what went in, what came out, the
// tokens, calls, latency, model and guideline id.
//
// A turn is an assistant message together with the tool results (or the
// nudge) that answer it. Every strategy keeps or drops whole turns: an
// assistant tool call is never separated from its tool results, so the
// output is always a valid OpenAI conversation.
//
// # Observation compression
//
// An Observation compressor is called with one fresh tool result before the
// agent sees it and returns the text the agent sees instead, with an Event
// when it changed anything.
//
// # Strategies
//
// Each strategy registers itself in its file's init (Register): its name,
// parameters type with defaults and Validate, capabilities, built-in prompts
// and constructor. New builds a registered strategy by Name from its
// parameters (Params holds them for the job's `compression:` section) and
// Deps (the compressor model, the embedder, the tokenizer, guidelines). Strategies are safe for concurrent use: per-conversation state
// travels in Input and Output, and what a strategy caches (chunk summaries,
// embeddings, compressed turns) is keyed by content.
package compress

import (
	"context"

	"github.com/ctxopt/ctxopt/llm"
)

// What a compression event compressed (Event.Kind).
const (
	KindHistory     = "history"
	KindObservation = "observation"
)

// Template variable names of the compression prompts. Guideline templates
// must render the required ones of their kind; VarPlan is optional and
// filled by the plan-aware strategy.
const (
	VarTask        = "task"
	VarPrevSummary = "prev_summary"
	VarHistory     = "history"
	VarObservation = "observation"
	VarPlan        = "plan"
)

// Input is what a history compressor sees before an agent call.
type Input struct {
	// Step is the number of agent calls made so far, which is the number of
	// turns (assistant messages) in History; the call about to be made is
	// Step+1.
	Step int
	// MaxSteps is the episode's step limit (0 when unknown).
	MaxSteps int
	// Task is the task text (the first user message).
	Task string
	// Plan holds the plan's next steps in order, nil when the environment
	// has no plan.
	Plan []string
	// History is every message after the task message, uncompressed,
	// oldest first. Callers append to it; strategies never modify it.
	History []llm.Message
	// Summary is the previous summary; History[:Covered] is folded into it.
	Summary string
	Covered int
	// ContextTokens is the size of the context the agent would see now
	// without compressing: the previous context plus the turns added since
	// (system prompt excluded).
	ContextTokens int
	// Window is the agent model's context window in tokens, 0 when unknown.
	Window int
	// State is the strategy's own per-conversation state, as its previous
	// Output returned it (nil at first). Callers keep it without looking.
	State any
	// Sample is the run's index among repeated samples of a task; model
	// requests carry it so samples differ at temperature > 0.
	Sample int
}

// Output is what the agent sees next.
type Output struct {
	// Messages follow the system prompt: the task message (with the summary
	// when there is one), then the kept turns in order.
	Messages []llm.Message
	// Summary and Covered are the new summary state, passed back in the
	// next Input.
	Summary string
	Covered int
	// State is passed back in the next Input.
	State any
	// Event describes the compression; nil when nothing was compressed.
	Event *Event
}

// History compresses the history before each agent call.
type History interface {
	CompressHistory(ctx context.Context, in Input) (Output, error)
}

// ObservationInput is what an observation compressor sees.
type ObservationInput struct {
	Step int
	Task string
	Plan []string
	// Context is what the agent saw at this step after its system prompt
	// (task message first), and Summary the current summary.
	Context []llm.Message
	// FirstStep is the step number of the first turn in Context[1:].
	FirstStep   int
	Summary     string
	Observation string
	// Sample is as in Input.
	Sample int
}

// Observation compresses one fresh observation before the agent sees it.
type Observation interface {
	CompressObservation(ctx context.Context, in ObservationInput) (string, *Event, error)
}

// Tools is implemented by strategies that give the agent tools of their own
// (PACE's glimpse). The rollout offers them beside the environment's and
// routes their calls here instead of to the environment.
type Tools interface {
	Tools() []llm.Tool
	// CallTool answers one call of the strategy's tool against the history.
	CallTool(ctx context.Context, in Input, call llm.ToolCall) string
}

// Event is one compression, recorded in the trajectory. The fields up to
// Model are those of ACON-style guideline compression and are read by the
// contrastive and distill stages.
type Event struct {
	Kind string `json:"kind"`
	Step int    `json:"step"`
	// Vars are the template variables the guideline was rendered with, so
	// the input can be re-rendered with another guideline.
	Vars        map[string]string `json:"vars"`
	GuidelineID string            `json:"guideline_id"`
	// Input is the compressor prompt, when a model was called.
	Input  []llm.Message `json:"input"`
	Output string        `json:"output"`
	Usage  llm.Usage     `json:"usage"`
	Model  string        `json:"model"`

	Strategy Name `json:"strategy,omitempty"`
	// Calls counts the compressor calls (chat or LLMLingua service) and
	// EmbedCalls the embedding requests of this event.
	Calls      int `json:"calls,omitempty"`
	EmbedCalls int `json:"embed_calls,omitempty"`
	Retries    int `json:"retries,omitempty"`
	CacheHits  int `json:"cache_hits,omitempty"`
	// TokensIn and TokensOut are the sizes of what was compressed and of
	// what replaced it.
	TokensIn  int     `json:"tokens_in,omitempty"`
	TokensOut int     `json:"tokens_out,omitempty"`
	LatencyMS float64 `json:"latency_ms,omitempty"`
	CostUSD   float64 `json:"cost_usd,omitempty"`
	// Levels maps what happened to each older turn (kept, dropped, full,
	// detailed, brief, placeholder) to the step numbers it happened to.
	Levels map[string][]int `json:"levels,omitempty"`
	// Plan is the plan window the compressor was conditioned on.
	Plan []string `json:"plan,omitempty"`
	// Pressure is PACE's compression pressure P_t.
	Pressure float64 `json:"pressure,omitempty"`
}

// Completer answers chat requests (an llm.Client, or a wrapper of one).
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Embedder embeds texts, one vector per text, in order (an llm.Client).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, llm.Usage, error)
}

// priced is implemented by completers that know their price.
type priced interface {
	Cost(u llm.Usage) float64
}

func costOf(c any, u llm.Usage) float64 {
	if p, ok := c.(priced); ok {
		return p.Cost(u)
	}
	return 0
}

// Strategy is a built strategy: its history and observation compressors
// (nil when it has none), and its own agent tools when it has some.
type Strategy struct {
	Name        Name
	History     History
	Observation Observation
	Tools       Tools
	// Params is the canonical text of the parameters that change what the
	// strategy does; rollouts compare it to resume only like with like.
	Params string
	// HistoryGuidelineID and ObservationGuidelineID name the guidelines
	// used, when any.
	HistoryGuidelineID     string
	ObservationGuidelineID string
	// CompressorModel names the compressor model when the strategy calls
	// one.
	CompressorModel string
	// CallsCompressor and CallsEmbedder say which models besides the
	// agent's the strategy calls, so reports name the roles a run used.
	CallsCompressor, CallsEmbedder bool
}

// modeled is implemented by completers that know their model name.
type modeled interface {
	Model() string
}
