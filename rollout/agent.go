// Package rollout runs an agent in an environment, with or without context
// compression, and records each run as a trajectory with its metrics.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// Completer answers chat requests (an llm.Client, or a fake in tests).
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Priced is implemented by completers that know their price.
type Priced interface {
	Cost(u llm.Usage) float64
}

// Modeled is implemented by completers that know their model name.
type Modeled interface {
	Model() string
}

// Strategy names a compression strategy.
type Strategy string

const (
	StrategyNone      Strategy = "none"
	StrategyFIFO      Strategy = "fifo"
	StrategyPrompting Strategy = "prompting"
	StrategyGuideline Strategy = "guideline"
)

// ParseStrategy checks a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case StrategyNone, StrategyFIFO, StrategyPrompting, StrategyGuideline:
		return st, nil
	}
	return "", fmt.Errorf("unknown strategy %q: want none, fifo, prompting or guideline", s)
}

// Template renders a compression guideline with its variables.
type Template interface {
	Render(vars map[string]string) (string, error)
}

// Guideline is a compression guideline ready to use.
type Guideline struct {
	ID       string
	Template Template
}

// Compression configures how the agent's context is compressed.
type Compression struct {
	Strategy Strategy
	// History compresses the history once it passes HistoryThreshold tokens
	// (ACON eq. 3); nil disables it.
	History          *Guideline
	HistoryThreshold int
	// Observation compresses an observation longer than
	// ObservationThreshold tokens (ACON eq. 4); nil disables it.
	Observation          *Guideline
	ObservationThreshold int
	// FIFOKeep is the number of last turns FIFO keeps.
	FIFOKeep int
}

// Defaults of ACON D.3 and the issue.
const (
	DefaultHistoryThreshold     = 4096
	DefaultObservationThreshold = 1024
	DefaultFIFOKeep             = 5
	DefaultStepLimit            = 30
	// malformedRetries is how often a reply with unparsable tool arguments
	// is asked for again before it is passed to the environment as is.
	malformedRetries = 2
)

// Fingerprint identifies what makes two rollouts comparable: a directory
// holding trajectories of another fingerprint is not resumed or reused.
type Fingerprint struct {
	Env                  string `json:"env"`
	Strategy             string `json:"strategy"`
	HistoryGuideline     string `json:"history_guideline,omitempty"`
	HistoryThreshold     int    `json:"history_threshold,omitempty"`
	ObservationGuideline string `json:"observation_guideline,omitempty"`
	ObservationThreshold int    `json:"observation_threshold,omitempty"`
	FIFOKeep             int    `json:"fifo_keep,omitempty"`
	StepLimit            int    `json:"step_limit"`
	AgentModel           string `json:"agent_model"`
	CompressorModel      string `json:"compressor_model,omitempty"`
}

// Fingerprint returns a's fingerprint.
func (a *Agent) Fingerprint() Fingerprint {
	c := a.Compress
	f := Fingerprint{Env: a.Env.Name(), Strategy: string(c.Strategy), StepLimit: a.StepLimit, AgentModel: modelName(a.Model)}
	if c.Strategy == StrategyFIFO {
		f.FIFOKeep = c.FIFOKeep
	}
	if c.History != nil {
		f.HistoryGuideline, f.HistoryThreshold = c.History.ID, c.HistoryThreshold
	}
	if c.Observation != nil {
		f.ObservationGuideline, f.ObservationThreshold = c.Observation.ID, c.ObservationThreshold
	}
	if a.Compressor != nil && (c.History != nil || c.Observation != nil) {
		f.CompressorModel = modelName(a.Compressor)
	}
	return f
}

// Agent runs one task at a time; it is safe for concurrent use.
type Agent struct {
	Env        env.Environment
	Model      Completer
	Compressor Completer // may be nil when nothing is compressed
	Tokenizer  *llm.Tokenizer
	StepLimit  int
	Compress   Compression
}

// run holds the state of one task run.
type run struct {
	a        *Agent
	traj     *Trajectory
	episode  env.Episode
	system   llm.Message
	taskText string
	tools    []llm.Tool
	// msgs is what the agent sees: system, task(+summary), turns.
	msgs    []llm.Message
	summary string
	// firstStep is the step number of msgs[2].
	firstStep int
	step      int
	// tokens of msgs[1:], kept incrementally.
	counter *Counter
}

// Run runs task to the end and returns its trajectory. An endpoint that
// stayed down ends the run as an infra failure (Trajectory.Infra), not an
// error; errors are reserved for what makes every run fail (bad config,
// cancelled context).
func (a *Agent) Run(ctx context.Context, task env.Task) (*Trajectory, error) {
	sys, err := templates.Render("agent_system.tmpl", nil)
	if err != nil {
		return nil, err
	}
	taskText, err := templates.Render("agent_task.tmpl", map[string]any{
		"count": len(task.Questions), "questions": task.Prompt,
	})
	if err != nil {
		return nil, err
	}
	ep, err := a.Env.Reset(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("reset task %s: %w", task.ID, err)
	}
	r := &run{
		a: a, episode: ep,
		traj: &Trajectory{
			TaskID: task.ID, Split: task.Split, Strategy: string(a.Compress.Strategy),
			Task: strings.TrimSpace(taskText), AgentModel: modelName(a.Model),
		},
		system:    llm.Message{Role: "system", Content: strings.TrimSpace(sys)},
		taskText:  strings.TrimSpace(taskText),
		tools:     toolsOf(a.Env),
		firstStep: 1,
		counter:   NewCounter(a.Tokenizer),
	}
	if g := a.Compress.History; g != nil {
		r.traj.HistoryGuidelineID = g.ID
	}
	if g := a.Compress.Observation; g != nil {
		r.traj.ObservationGuidelineID = g.ID
	}
	if a.Compressor != nil && (a.Compress.History != nil || a.Compress.Observation != nil) {
		r.traj.CompressorModel = modelName(a.Compressor)
	}
	r.setMessages([]llm.Message{r.system, {Role: "user", Content: r.taskText}})
	if err := r.loop(ctx); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, err
		case errors.Is(err, llm.ErrUnavailable):
			r.traj.Infra = true
			r.traj.InfraErr = err.Error()
		case llm.IsContextOverflow(err):
			r.traj.ContextOverflow = true
			r.finish(r.episode.Finish(ctx), false)
		default:
			return nil, err
		}
	}
	return r.traj, nil
}

func (r *run) loop(ctx context.Context) error {
	limit := r.a.StepLimit
	if limit <= 0 {
		limit = DefaultStepLimit
	}
	for r.step < limit {
		if err := r.compressHistory(ctx); err != nil {
			return err
		}
		reply, err := r.callAgent(ctx)
		if err != nil {
			return err
		}
		r.step++
		turn := Turn{Step: r.step, Input: cloneMessages(r.msgs), Output: reply.Message, Usage: reply.Usage, Cached: reply.Cached}
		res, obsMsgs, err := r.act(ctx, reply.Message, &turn)
		if err != nil {
			return err
		}
		if turn.Action.Tool != "" {
			r.traj.Metrics.Steps++ // environment steps only (ACON D.2)
		}
		r.traj.Turns = append(r.traj.Turns, turn)
		r.append(reply.Message)
		for _, m := range obsMsgs {
			r.append(m)
		}
		if res.Done {
			r.finish(*res.Score, false)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	r.finish(r.episode.Finish(ctx), true)
	return nil
}

func (r *run) finish(s env.Score, stepLimit bool) {
	r.traj.Score = s
	r.traj.Success = s.Success
	r.traj.StepLimit = stepLimit
}

// callAgent asks the agent for its next action, asking again (as another
// sample) when the tool arguments do not parse.
func (r *run) callAgent(ctx context.Context) (llm.Response, error) {
	var resp llm.Response
	for sample := 0; sample <= malformedRetries; sample++ {
		req := llm.Request{Purpose: llm.PurposeAgent, Messages: r.msgs, Tools: r.tools, Sample: sample}
		var err error
		resp, err = r.a.Model.Complete(ctx, req)
		if err != nil {
			return resp, fmt.Errorf("agent call at step %d: %w", r.step+1, err)
		}
		r.account(resp, true)
		if !malformed(resp.Message) {
			return resp, nil
		}
		r.traj.Metrics.MalformedToolCalls++
	}
	return resp, nil
}

func malformed(m llm.Message) bool {
	for _, c := range m.ToolCalls {
		if !json.Valid([]byte(c.Arguments)) {
			return true
		}
	}
	return false
}

// act executes the reply's first tool call and returns the messages that
// answer it. Extra tool calls are answered with an error so the transcript
// stays valid for OpenAI-format servers.
func (r *run) act(ctx context.Context, reply llm.Message, turn *Turn) (env.StepResult, []llm.Message, error) {
	if len(reply.ToolCalls) == 0 {
		obs := "error: no tool was called; call search or finish."
		turn.Observation = obs
		return env.StepResult{}, []llm.Message{{Role: "user", Content: obs}}, nil
	}
	call := reply.ToolCalls[0]
	turn.Action = env.Action{Tool: call.Name, Arguments: rawArgs(call.Arguments)}
	res, err := r.episode.Step(ctx, turn.Action)
	if err != nil {
		return res, nil, fmt.Errorf("step %d of task %s: %w", r.step, r.traj.TaskID, err)
	}
	turn.Observation = res.Observation
	seen := res.Observation
	if !res.Done {
		if seen, err = r.compressObservation(ctx, res.Observation); err != nil {
			return res, nil, err
		}
		if seen != res.Observation {
			turn.CompressedObservation = seen
		}
	}
	out := []llm.Message{{Role: "tool", ToolCallID: call.ID, Name: call.Name, Content: seen}}
	for _, extra := range reply.ToolCalls[1:] {
		out = append(out, llm.Message{Role: "tool", ToolCallID: extra.ID, Name: extra.Name,
			Content: "error: only one tool call is executed per step; this one was ignored."})
	}
	return res, out, nil
}

// rawArgs keeps invalid JSON visible to the environment (which answers with
// an error observation) without breaking the JSON record of the action.
func rawArgs(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// compressHistory replaces everything but the last action–observation pair
// with the compressor's summary once the history passes the threshold.
func (r *run) compressHistory(ctx context.Context) error {
	c := r.a.Compress
	turns := r.msgs[2:]
	switch {
	case c.Strategy == StrategyFIFO:
		r.fifo()
		return nil
	case c.History == nil:
		return nil
	}
	th := c.HistoryThreshold
	if th <= 0 {
		th = DefaultHistoryThreshold
	}
	last := lastPairStart(turns)
	if r.counter.Total() <= th || last <= 0 {
		return nil
	}
	vars := map[string]string{
		"task":         r.taskText,
		"prev_summary": r.summary,
		"history":      FormatHistory(turns[:last], r.firstStep),
	}
	out, err := r.compress(ctx, "history", c.History, vars)
	if err != nil {
		return err
	}
	r.summary = strings.TrimSpace(out)
	user, err := templates.Render("agent_summary.tmpl", map[string]any{"task": r.taskText, "summary": r.summary})
	if err != nil {
		return err
	}
	r.firstStep += countAssistant(turns[:last])
	kept := append([]llm.Message{r.system, {Role: "user", Content: strings.TrimSpace(user)}}, turns[last:]...)
	r.setMessages(kept)
	return nil
}

// fifo keeps the system prompt, the task and the last FIFOKeep turns.
func (r *run) fifo() {
	keep := r.a.Compress.FIFOKeep
	if keep <= 0 {
		keep = DefaultFIFOKeep
	}
	turns := r.msgs[2:]
	starts := turnStarts(turns)
	if len(starts) <= keep {
		return
	}
	cut := starts[len(starts)-keep]
	r.firstStep += countAssistant(turns[:cut])
	r.setMessages(append([]llm.Message{r.msgs[0], r.msgs[1]}, turns[cut:]...))
}

func (r *run) compressObservation(ctx context.Context, obs string) (string, error) {
	c := r.a.Compress
	if c.Observation == nil {
		return obs, nil
	}
	th := c.ObservationThreshold
	if th <= 0 {
		th = DefaultObservationThreshold
	}
	if r.a.Tokenizer.Count(obs) <= th {
		return obs, nil
	}
	hist := FormatHistory(r.msgs[2:], r.firstStep)
	if r.summary != "" {
		hist = r.summary + "\n" + hist
	}
	vars := map[string]string{"task": r.taskText, "history": hist, "observation": obs}
	out, err := r.compress(ctx, "observation", c.Observation, vars)
	if err != nil {
		return "", err
	}
	return RefinedObservation(out), nil
}

func (r *run) compress(ctx context.Context, kind string, g *Guideline, vars map[string]string) (string, error) {
	if r.a.Compressor == nil {
		return "", errors.New("compression is configured but no compressor model is")
	}
	prompt, err := g.Template.Render(vars)
	if err != nil {
		return "", fmt.Errorf("render %s guideline %s: %w", kind, g.ID, err)
	}
	in := []llm.Message{{Role: "user", Content: prompt}}
	resp, err := r.a.Compressor.Complete(ctx, llm.Request{Purpose: llm.PurposeCompressor, Messages: in})
	if err != nil {
		return "", fmt.Errorf("%s compression at step %d: %w", kind, r.step, err)
	}
	r.account(resp, false)
	r.traj.Events = append(r.traj.Events, CompressionEvent{
		Kind: kind, Step: r.step, Vars: vars, GuidelineID: g.ID,
		Input: in, Output: resp.Message.Content, Usage: resp.Usage, Model: resp.Model,
	})
	return resp.Message.Content, nil
}

// account adds one call's usage to the trajectory metrics (ACON D.2).
func (r *run) account(resp llm.Response, agent bool) {
	m := &r.traj.Metrics
	m.LLMCalls++
	m.Retries += resp.Retries
	if resp.Cached {
		m.CacheHits++
	}
	u := resp.Usage
	if agent {
		m.AgentCalls++
		m.AgentInputTokens += u.PromptTokens
		m.AgentOutputTokens += u.CompletionTokens
		nIn, nOut := float64(u.PromptTokens), float64(u.CompletionTokens)
		m.Dependency += (nIn + 2*nOut) * nOut / 2
		// Peak excludes the system prompt; counted locally so it does not
		// depend on how a server frames its usage.
		if p := r.counter.Total(); p > m.PeakTokens {
			m.PeakTokens = p
		}
		m.CostUSD += costOf(r.a.Model, u)
		return
	}
	m.CompressorCalls++
	m.CompressorInputTokens += u.PromptTokens
	m.CompressorOutputTokens += u.CompletionTokens
	m.CostUSD += costOf(r.a.Compressor, u)
}

func costOf(c Completer, u llm.Usage) float64 {
	if p, ok := c.(Priced); ok {
		return p.Cost(u)
	}
	return 0
}

func modelName(c Completer) string {
	if m, ok := c.(Modeled); ok {
		return m.Model()
	}
	return ""
}

// setMessages replaces the context and recounts it (messages already seen
// are memoized by the tokenizer, so this is cheap).
func (r *run) setMessages(ms []llm.Message) {
	r.msgs = ms
	r.counter.Reset()
	for _, m := range ms[1:] {
		r.counter.Add(m)
	}
}

func (r *run) append(m llm.Message) {
	r.msgs = append(r.msgs, m)
	r.counter.Add(m)
}

// turnStarts returns the indexes of the assistant messages that open turns.
func turnStarts(turns []llm.Message) []int {
	var s []int
	for i, m := range turns {
		if m.Role == "assistant" {
			s = append(s, i)
		}
	}
	return s
}

// lastPairStart is the index of the last turn, or -1 without one.
func lastPairStart(turns []llm.Message) int {
	s := turnStarts(turns)
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1]
}

func countAssistant(ms []llm.Message) int { return len(turnStarts(ms)) }

func cloneMessages(ms []llm.Message) []llm.Message {
	return append([]llm.Message(nil), ms...)
}

func toolsOf(e env.Environment) []llm.Tool {
	specs := e.Tools()
	out := make([]llm.Tool, len(specs))
	for i, s := range specs {
		out[i] = llm.Tool{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
	}
	return out
}

// Counter keeps the token count of a growing conversation incrementally:
// adding a message costs only that message.
type Counter struct {
	tok   *llm.Tokenizer
	total int
}

// NewCounter returns an empty counter.
func NewCounter(tok *llm.Tokenizer) *Counter { return &Counter{tok: tok} }

// Add counts one more message.
func (c *Counter) Add(m llm.Message) { c.total += c.tok.CountMessage(m) }

// Reset forgets every message.
func (c *Counter) Reset() { c.total = 0 }

// Total is the count so far.
func (c *Counter) Total() int { return c.total }
