package compress

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

// Template renders a compression guideline with its variables.
type Template interface {
	Render(vars map[string]string) (string, error)
}

// Prompt is a compression guideline ready to use.
type Prompt struct {
	ID       string
	Template Template
}

// Deps are what strategies call and read besides their parameters.
type Deps struct {
	// Compressor is the compressor model (guideline, prompting, plan-aware,
	// pace summaries).
	Compressor Completer
	// Embedder scores turns for pace, and for retrieval when its params ask
	// for embeddings.
	Embedder  Embedder
	Tokenizer *llm.Tokenizer
	// HTTP calls the LLMLingua service (nil: a default client).
	HTTP *http.Client
	// LinguaURL replaces the "embedded" LLMLingua URL by the embedded
	// model's stand-in endpoint.
	LinguaURL string
	// History and Observation are the guidelines of the guideline,
	// prompting and plan-aware strategies; nil turns that kind off.
	History, Observation *Prompt
	// Thresholds in tokens above which history and observation are
	// compressed (ACON D.3 defaults when 0).
	HistoryThreshold, ObservationThreshold int
}

// Defaults of ACON D.3: the thresholds in tokens above which history and
// observation are compressed. The job file and serve take them from here.
const (
	DefaultHistoryThreshold     = 4096
	DefaultObservationThreshold = 1024
)

// New builds strategy name from its parameters p (nil: its defaults;
// else of the type its Module.Params returns) and d.
func New(name Name, p ModuleParams, d Deps) (*Strategy, error) {
	m, err := Lookup(string(name))
	if err != nil {
		return nil, err
	}
	if m.Params != nil {
		want := m.Params()
		if p == nil {
			p = want
		}
		if reflect.TypeOf(p) != reflect.TypeOf(want) {
			return nil, fmt.Errorf("strategy %s: parameters of type %T, want %T", name, p, want)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	if d.Tokenizer == nil {
		return nil, fmt.Errorf("strategy %s: no tokenizer", name)
	}
	if d.HistoryThreshold <= 0 {
		d.HistoryThreshold = DefaultHistoryThreshold
	}
	if d.ObservationThreshold <= 0 {
		d.ObservationThreshold = DefaultObservationThreshold
	}
	s, err := m.New(p, d)
	if err != nil {
		return nil, err
	}
	s.Name = name
	if c, ok := d.Compressor.(modeled); ok && m.Caps.Compressor {
		s.CompressorModel = c.Model()
	}
	return s, nil
}

// guidelineStrategy builds a strategy that compresses with d's guidelines
// (prompting, guideline, plan-aware): planK >= 0 shows the compressor the
// plan's next planK steps (PAACE eq. 2), -1 no plan.
func guidelineStrategy(name Name, d Deps, planK int) (*Strategy, error) {
	if d.History == nil && d.Observation == nil {
		return nil, fmt.Errorf("strategy %s compresses nothing: enable compression.history or compression.observation", name)
	}
	if d.Compressor == nil {
		return nil, fmt.Errorf("strategy %s needs a compressor model", name)
	}
	s := &Strategy{CallsCompressor: true}
	if d.History != nil {
		s.HistoryGuidelineID = d.History.ID
		s.History = &summarizer{name: name, prompt: d.History, threshold: d.HistoryThreshold, tok: d.Tokenizer, llm: d.Compressor, planK: planK}
	}
	if d.Observation != nil {
		s.ObservationGuidelineID = d.Observation.ID
		s.Observation = &guidelineObservation{name: name, prompt: d.Observation, threshold: d.ObservationThreshold, tok: d.Tokenizer, llm: d.Compressor, planK: planK}
	}
	params := map[string]int{"history_threshold": d.HistoryThreshold, "observation_threshold": d.ObservationThreshold}
	if planK >= 0 {
		params["k"] = planK
	}
	s.Params = fingerprint(params)
	return s, nil
}

// stepAt is the step number of the turn opening at History[i]: History
// holds Step turns, so it counts from the end (cost: the tail only).
func (in Input) stepAt(i int) int { return in.Step - len(turnStarts(in.History[i:])) + 1 }

// summarizer replaces everything but the last turn by the compressor's
// summary once the context passes the threshold (ACON eq. 3); with planK
// >= 0 the compressor also sees the plan's next planK steps (PAACE eq. 2).
type summarizer struct {
	name      Name
	prompt    *Prompt
	threshold int
	tok       *llm.Tokenizer
	llm       Completer
	planK     int
}

var _ History = (*summarizer)(nil)

func (s *summarizer) CompressHistory(ctx context.Context, in Input) (Output, error) {
	turns := in.History[in.Covered:]
	last := lastTurnsStart(turns, 1)
	if in.ContextTokens <= s.threshold || last <= 0 {
		return Unchanged(in)
	}
	first := in.stepAt(in.Covered)
	vars := map[string]string{
		VarTask:        in.Task,
		VarPrevSummary: in.Summary,
		VarHistory:     FormatHistory(turns[:last], first),
	}
	var window []string
	if s.planK >= 0 {
		window = planWindow(in.Plan, s.planK)
		vars[VarPlan] = FormatPlan(window)
	}
	covered := in.Covered + last
	valid := func(text string) error {
		return CheckSummary(s.tok, in, Output{Summary: text, Covered: covered}, ContractOf(s.prompt))
	}
	text, ev, err := callCompressor(ctx, s.llm, KindHistory, s.name, in.Step, in.Sample, s.prompt, vars, valid)
	if err != nil {
		return Output{}, err
	}
	summary := strings.TrimSpace(text)
	tm, err := taskMessage(in.Task, summary)
	if err != nil {
		return Output{}, err
	}
	ev.Plan = window
	ev.TokensIn = s.tok.CountMessages(turns[:last])
	ev.TokensOut = s.tok.Count(summary)
	summarized := make([]int, len(turnStarts(turns[:last])))
	for i := range summarized {
		summarized[i] = first + i
	}
	ev.Levels = map[string][]int{"summarized": summarized, "kept": {in.Step}}
	msgs := make([]llm.Message, 0, 1+len(turns)-last)
	msgs = append(append(msgs, tm), turns[last:]...)
	return Output{Messages: msgs, Summary: summary, Covered: covered, Event: ev}, nil
}

// guidelineObservation refines an observation longer than the threshold
// (ACON eq. 4).
type guidelineObservation struct {
	name      Name
	prompt    *Prompt
	threshold int
	tok       *llm.Tokenizer
	llm       Completer
	planK     int // -1: no plan
}

var _ Observation = (*guidelineObservation)(nil)

func (o *guidelineObservation) CompressObservation(ctx context.Context, in ObservationInput) (string, *Event, error) {
	if o.tok.Count(in.Observation) <= o.threshold {
		return in.Observation, nil, nil
	}
	hist := FormatHistory(in.Context[min(1, len(in.Context)):], in.FirstStep)
	if in.Summary != "" {
		hist = in.Summary + "\n" + hist
	}
	vars := map[string]string{VarTask: in.Task, VarHistory: hist, VarObservation: in.Observation}
	var window []string
	if o.planK >= 0 {
		window = planWindow(in.Plan, o.planK)
		vars[VarPlan] = FormatPlan(window)
	}
	valid := func(text string) error { return CheckRefined(o.tok, in.Observation, RefinedObservation(text)) }
	out, ev, err := callCompressor(ctx, o.llm, KindObservation, o.name, in.Step, in.Sample, o.prompt, vars, valid)
	if err != nil {
		return "", nil, err
	}
	refined := RefinedObservation(out)
	ev.Plan = window
	ev.TokensIn, ev.TokensOut = o.tok.Count(in.Observation), o.tok.Count(refined)
	return refined, ev, nil
}

// callCompressor renders the guideline and asks the compressor. An answer
// valid rejects is reported as malformed and still returned: a rollout
// measures the compressor as it is, and the agent living with a bad summary
// is what contrastive mining learns from (serve, instead, falls back).
func callCompressor(ctx context.Context, c Completer, kind string, name Name, step, sample int, p *Prompt, vars map[string]string, valid func(text string) error) (string, *Event, error) {
	prompt, err := p.Template.Render(vars)
	if err != nil {
		return "", nil, fmt.Errorf("render %s guideline %s: %w", kind, p.ID, err)
	}
	in := []llm.Message{{Role: "user", Content: prompt}}
	start := time.Now()
	resp, err := c.Complete(ctx, llm.Request{Purpose: llm.PurposeCompressor, Messages: in, Sample: sample})
	if err != nil {
		return "", nil, fmt.Errorf("%s compression at step %d: %w", kind, step, err)
	}
	if err := valid(resp.Message.Content); err != nil {
		mk := llm.MalformedInvalidSummary
		if strings.TrimSpace(resp.Message.Content) == "" {
			mk = llm.MalformedEmptySummary
		}
		llm.Report(c, llm.MalformedReply{Purpose: llm.PurposeCompressor, Kind: mk,
			Detail: fmt.Sprintf("%s compression at step %d (finish reason %q): %v", kind, step, resp.FinishReason, err),
			Raw:    resp.Message.Content})
	}
	ev := &Event{
		Kind: kind, Step: step, Vars: vars, GuidelineID: p.ID,
		Input: in, Output: resp.Message.Content, Usage: resp.Usage, Model: resp.Model,
		Strategy: name, Calls: 1, Retries: resp.Retries, CostUSD: costOf(c, resp.Usage),
		LatencyMS: float64(time.Since(start).Microseconds()) / 1000,
	}
	if resp.Cached {
		ev.CacheHits = 1
	}
	return resp.Message.Content, ev, nil
}

// planWindow is the plan's next k steps.
func planWindow(plan []string, k int) []string {
	if k < len(plan) {
		plan = plan[:k]
	}
	return plan
}

// FormatPlan renders plan steps as the `plan` variable: one numbered line
// each, "(none)" when empty.
func FormatPlan(steps []string) string {
	if len(steps) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, s)
	}
	return strings.TrimRight(b.String(), "\n")
}
