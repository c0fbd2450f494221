// Package rollout runs an agent in an environment, with or without context
// compression, and records each run as a trajectory with its metrics.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
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

// Defaults of ACON D.3 and the issue.
const (
	DefaultStepLimit = 30
	// LastStepNotice is appended to the agent's context before its last
	// step, as agent harnesses do at their step limit, so the agent submits
	// what it has instead of being cut off with nothing submitted.
	LastStepNotice = "Step limit: this is your last action. Submit your final answer now with what you have found; nothing after it will run."
	// malformedRetries is how often a reply with unparsable tool arguments
	// is asked for again before it is passed to the environment as is.
	malformedRetries = 2
)

// Fingerprint identifies what makes two rollouts comparable: a directory
// holding trajectories of another fingerprint is not resumed or reused.
type Fingerprint struct {
	Env string `json:"env"`
	// EnvSettings are the environment's dataset and options that change
	// its tasks or scores (env.Configured).
	EnvSettings          string `json:"env_settings,omitempty"`
	Strategy             string `json:"strategy"`
	HistoryGuideline     string `json:"history_guideline,omitempty"`
	ObservationGuideline string `json:"observation_guideline,omitempty"`
	Params               string `json:"params,omitempty"`
	StepLimit            int    `json:"step_limit"`
	Window               int    `json:"context_window,omitempty"`
	AgentModel           string `json:"agent_model"`
	CompressorModel      string `json:"compressor_model,omitempty"`
	Sample               int    `json:"sample,omitempty"`
	// Models is Agent.Models.
	Models string `json:"models,omitempty"`
}

// Fingerprint returns a's fingerprint.
func (a *Agent) Fingerprint() Fingerprint {
	f := Fingerprint{Env: a.Env.Name(), Strategy: a.strategyName(), StepLimit: a.StepLimit, Window: a.Window, AgentModel: modelName(a.Model), Sample: a.Sample, Models: a.Models}
	if c, ok := a.Env.(env.Configured); ok {
		f.EnvSettings = c.Settings()
	}
	if s := a.Strategy; s != nil {
		f.HistoryGuideline, f.ObservationGuideline = s.HistoryGuidelineID, s.ObservationGuidelineID
		f.Params, f.CompressorModel = s.Params, s.CompressorModel
	}
	return f
}

func (a *Agent) strategyName() string {
	if a.Strategy == nil {
		return string(compress.None)
	}
	return string(a.Strategy.Name)
}

// Agent runs one task at a time; it is safe for concurrent use.
type Agent struct {
	Env       env.Environment
	Model     Completer
	Tokenizer *llm.Tokenizer
	StepLimit int
	// Strategy compresses the agent's context; nil compresses nothing.
	Strategy *compress.Strategy
	// Window is the agent's context window in tokens: a prompt larger than
	// it ends the task as a context overflow, as a server would. 0: none.
	Window int
	// Sample is the index of this run among repeated samples of the same
	// task (optimize eval --samples). Every model request carries it, so
	// at temperature > 0 samples differ, and each is its own cache entry.
	Sample int
	// Models identifies the endpoints behind Model and the strategy's
	// compressor and embedder beyond their model names (addresses,
	// sampling settings, the embedded model's version), as whoever built
	// the agent from a configuration knows them. It is part of the
	// fingerprint, so rollouts of other models are not resumed or reused.
	Models string
}

// run holds the state of one task run.
type run struct {
	a        *Agent
	traj     *Trajectory
	episode  env.Episode
	system   llm.Message
	taskText string
	tools    []llm.Tool
	// own names the strategy's tools (glimpse), answered by the strategy.
	own map[string]bool
	// history is every message after the task, uncompressed; msgs is what
	// the agent sees: system, task (+summary), kept turns.
	history []llm.Message
	msgs    []llm.Message
	summary string
	covered int
	state   any
	step    int
	// lastStep: the agent was told this step is its last.
	lastStep bool
	// tokens of msgs[1:], kept incrementally.
	counter *Counter
}

// Run runs task to the end and returns its trajectory. An endpoint that
// stayed down ends the run as an infra failure (Trajectory.Infra), not an
// error; errors are reserved for what makes every run fail (bad config,
// cancelled context).
func (a *Agent) Run(ctx context.Context, task env.Task) (*Trajectory, error) {
	sys, taskText, err := a.agentPrompts(task)
	if err != nil {
		return nil, err
	}
	traj := &Trajectory{
		TaskID: task.ID, Split: task.Split, Strategy: a.strategyName(),
		Task: strings.TrimSpace(taskText), AgentModel: modelName(a.Model),
	}
	ep, err := a.Env.Reset(ctx, task)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, llm.ErrUnavailable) {
			traj.Infra, traj.InfraErr = true, err.Error()
			return traj, nil
		}
		return nil, fmt.Errorf("reset task %s: %w", task.ID, err)
	}
	defer closeEpisode(ctx, ep, task.ID)
	if o, ok := ep.(opener); ok && o.Opening() != "" {
		taskText = strings.TrimSpace(taskText) + "\n\n" + o.Opening()
		traj.Task = taskText
	}
	r := &run{
		a: a, episode: ep,
		traj:     traj,
		system:   llm.Message{Role: "system", Content: strings.TrimSpace(sys)},
		taskText: strings.TrimSpace(taskText),
		tools:    toolsOf(a.Env),
		counter:  NewCounter(a.Tokenizer),
	}
	if s := a.Strategy; s != nil {
		r.traj.HistoryGuidelineID, r.traj.ObservationGuidelineID = s.HistoryGuidelineID, s.ObservationGuidelineID
		r.traj.CompressorModel = s.CompressorModel
		if s.Tools != nil {
			r.own = map[string]bool{}
			for _, t := range s.Tools.Tools() {
				r.tools = append(r.tools, t)
				r.own[t.Name] = true
			}
		}
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
			r.overflow()
			s, err := finishEpisode(ctx, r.episode)
			if err != nil {
				return r.infraOr(ctx, err)
			}
			r.finish(s, false)
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
		if w := r.a.Window; w > 0 && r.counter.Total() > w {
			// The prompt no longer fits: a server would refuse it.
			r.overflow()
			s, err := finishEpisode(ctx, r.episode)
			if err != nil {
				return fmt.Errorf("score task %s: %w", r.traj.TaskID, err)
			}
			r.finish(s, false)
			return nil
		}
		if r.step == limit-1 {
			r.lastStep = true
			r.append(llm.Message{Role: "user", Content: LastStepNotice})
		}
		reply, err := r.callAgent(ctx)
		if err != nil {
			return err
		}
		r.step++
		// The context is append-only until the next compression replaces it,
		// so the turn shares it, capped so later appends stay out: O(1).
		turn := Turn{Step: r.step, Input: r.msgs[:len(r.msgs):len(r.msgs)], Output: reply.Message, Usage: reply.Usage, Cached: reply.Cached, ContextTokens: r.counter.Total()}
		res, obsMsgs, err := r.act(ctx, reply.Message, &turn)
		if err != nil {
			return err
		}
		switch {
		case r.own[turn.Action.Tool]:
			r.traj.Metrics.StrategyToolCalls++
		case turn.Action.Tool != "":
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
	s, err := finishEpisode(ctx, r.episode)
	if err != nil {
		return fmt.Errorf("score task %s at the step limit: %w", r.traj.TaskID, err)
	}
	r.finish(s, true)
	return nil
}

func (r *run) overflow() {
	r.traj.ContextOverflow = true
	r.traj.OverflowStep = r.step + 1
}

// infraOr records err as an infra failure when an endpoint stayed down,
// else returns it.
func (r *run) infraOr(ctx context.Context, err error) (*Trajectory, error) {
	if ctx.Err() == nil && errors.Is(err, llm.ErrUnavailable) {
		r.traj.Infra, r.traj.InfraErr = true, err.Error()
		return r.traj, nil
	}
	return nil, err
}

func (r *run) finish(s env.Score, stepLimit bool) {
	r.traj.Score = s
	r.traj.Success = s.Success
	// A run that used its last step reached the limit, even when the
	// agent then finished.
	r.traj.StepLimit = stepLimit || r.lastStep
}

// callAgent asks the agent for its next action, asking again (as another
// sample) when the tool arguments do not parse.
func (r *run) callAgent(ctx context.Context) (llm.Response, error) {
	var resp llm.Response
	for retry := 0; retry <= malformedRetries; retry++ {
		// Retries are further samples of the same request, distinct from
		// the retries of other runs' samples.
		req := llm.Request{Purpose: llm.PurposeAgent, Messages: r.msgs, Tools: r.tools, Sample: r.a.Sample*(malformedRetries+1) + retry}
		var err error
		resp, err = r.a.Model.Complete(ctx, req)
		if err != nil {
			r.traj.Metrics.Retries += max(llm.Attempts(err)-1, 0)
			return resp, fmt.Errorf("agent call at step %d: %w", r.step+1, err)
		}
		if retry < malformedRetries && resp.FinishReason != llm.FinishMalformed && len(resp.Message.ToolCalls) > 0 && malformed(resp.Message) {
			r.reasked(resp)
		} else {
			r.account(resp)
		}
		switch {
		case resp.FinishReason == llm.FinishMalformed:
			// The client reported it; the same request gets the same
			// output, so the turn goes on as one without a tool call.
			r.traj.Metrics.MalformedToolCalls++
			return resp, nil
		case len(resp.Message.ToolCalls) == 0:
			llm.Report(r.a.Model, llm.MalformedReply{Purpose: llm.PurposeAgent, Kind: llm.MalformedNoToolCall,
				Detail: fmt.Sprintf("step %d of task %s", r.step+1, r.traj.TaskID), Raw: rawReply(resp.Message)})
			return resp, nil
		case !malformed(resp.Message):
			return resp, nil
		}
		r.traj.Metrics.MalformedToolCalls++
		llm.Report(r.a.Model, llm.MalformedReply{Purpose: llm.PurposeAgent, Kind: llm.MalformedToolArguments,
			Detail: fmt.Sprintf("step %d of task %s, retry %d", r.step+1, r.traj.TaskID, retry), Raw: rawReply(resp.Message)})
	}
	return resp, nil
}

// rawReply is the reply as the model wrote it: content and tool calls.
func rawReply(m llm.Message) string {
	b, err := json.Marshal(m)
	if err != nil {
		return m.Content
	}
	return string(b)
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
// stays valid for OpenAI-format servers. The strategy's own tools are
// answered by the strategy, not the environment.
func (r *run) act(ctx context.Context, reply llm.Message, turn *Turn) (env.StepResult, []llm.Message, error) {
	if len(reply.ToolCalls) == 0 {
		obs := "error: no tool was called; call search or finish."
		turn.Observation = obs
		return env.StepResult{}, []llm.Message{{Role: "user", Content: obs}}, nil
	}
	call := reply.ToolCalls[0]
	turn.Action = env.Action{Tool: call.Name, Arguments: rawArgs(call.Arguments)}
	var res env.StepResult
	if r.own[call.Name] {
		res.Observation = r.a.Strategy.Tools.CallTool(ctx, r.input(), call)
	} else {
		var err error
		if res, err = r.episode.Step(ctx, turn.Action); err != nil {
			return res, nil, fmt.Errorf("step %d of task %s: %w", r.step, r.traj.TaskID, err)
		}
	}
	turn.Observation = res.Observation
	seen := res.Observation
	if !res.Done {
		var err error
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

// plan is the episode's remaining plan, nil when it has none.
func (r *run) plan() []string {
	if p, ok := r.episode.(env.Planner); ok {
		return p.Plan()
	}
	return nil
}

func (r *run) input() compress.Input {
	return compress.Input{
		Step: r.step, MaxSteps: r.a.StepLimit, Task: r.taskText, Plan: r.plan(),
		History: r.history, Summary: r.summary, Covered: r.covered,
		ContextTokens: r.counter.Total(), Window: r.a.Window, State: r.state, Sample: r.a.Sample,
	}
}

// compressHistory lets the strategy choose what the agent sees next.
func (r *run) compressHistory(ctx context.Context) error {
	s := r.a.Strategy
	if s == nil || s.History == nil {
		return nil
	}
	out, err := s.History.CompressHistory(ctx, r.input())
	if err != nil {
		return err
	}
	r.summary, r.covered, r.state = out.Summary, out.Covered, out.State
	r.record(out.Event)
	r.setMessages(append([]llm.Message{r.system}, out.Messages...))
	return nil
}

func (r *run) compressObservation(ctx context.Context, obs string) (string, error) {
	s := r.a.Strategy
	if s == nil || s.Observation == nil {
		return obs, nil
	}
	in := compress.ObservationInput{
		Step: r.step, Task: r.taskText, Plan: r.plan(), Context: r.msgs[1:],
		FirstStep: r.step - countAssistant(r.msgs[2:]), Summary: r.summary, Observation: obs,
		Sample: r.a.Sample,
	}
	seen, ev, err := s.Observation.CompressObservation(ctx, in)
	if err != nil {
		return "", err
	}
	r.record(ev)
	return seen, nil
}

// record keeps a compression event and adds its calls to the metrics.
func (r *run) record(ev *compress.Event) {
	if ev == nil {
		return
	}
	r.traj.Events = append(r.traj.Events, *ev)
	m := &r.traj.Metrics
	m.LLMCalls += ev.Calls + ev.EmbedCalls
	m.CompressorCalls += ev.Calls
	m.CompressorInputTokens += ev.Usage.PromptTokens
	m.CompressorOutputTokens += ev.Usage.CompletionTokens
	m.Retries += ev.Retries
	m.CacheHits += ev.CacheHits
	m.CostUSD += ev.CostUSD
}

// countCall counts one agent call, used or not, and returns the metrics.
func (r *run) countCall(resp llm.Response) *Metrics {
	m := &r.traj.Metrics
	m.LLMCalls++
	m.Retries += resp.Retries
	if resp.Cached {
		m.CacheHits++
	}
	return m
}

// reasked counts an agent reply that is thrown away and asked again: it
// was paid for, but the agent never used it.
func (r *run) reasked(resp llm.Response) {
	m := r.countCall(resp)
	m.ReaskedCalls++
	m.ReaskedInputTokens += resp.Usage.PromptTokens
	m.ReaskedOutputTokens += resp.Usage.CompletionTokens
	m.CostUSD += costOf(r.a.Model, resp.Usage)
}

// account adds one agent call's usage to the trajectory metrics (ACON D.2).
func (r *run) account(resp llm.Response) {
	m := r.countCall(resp)
	u := resp.Usage
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
	r.history = append(r.history, m)
	r.msgs = append(r.msgs, m)
	r.counter.Add(m)
}

func countAssistant(ms []llm.Message) int {
	n := 0
	for _, m := range ms {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
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
