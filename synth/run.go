package synth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sourcegraph/conc/stream"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/templates"
)

// Files of a run directory (optimize synth run).
const (
	ExecutionsFile  = "executions.jsonl"
	RunSettingsFile = "run.json"
	RunSummaryFile  = "run-summary.json"
)

// The acceptance tests of PAACE section 3, and the reason a workflow line
// is not executed at all; a rejection names the ones that failed.
const (
	TestSimilarity = "similarity" // cosine of the two final outputs below the threshold
	TestRatio      = "ratio"      // a compression ratio outside (0, 1)
	TestJudge      = "judge"      // the judge rated the compressed output worse
	// RejectInvalid (generate.go) marks a workflow line that is not a
	// valid workflow; it is not executed.
)

// DefaultThreshold is the similarity threshold of the acceptance filter.
const DefaultThreshold = 0.9

// AcceptSettings are the job file's synth.accept section.
type AcceptSettings struct {
	// Threshold is the least cosine similarity of the two final outputs.
	Threshold *float64 `yaml:"threshold" json:"threshold"`
}

// Judge verdicts, from the compressed output's side.
const (
	VerdictBetter = "better"
	VerdictSame   = "same"
	VerdictWorse  = "worse"
)

// Embedder embeds texts (an llm.Client).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, llm.Usage, error)
}

// Executor runs workflows twice and applies the acceptance filter.
type Executor struct {
	Agent     rollout.Completer
	Tokenizer *llm.Tokenizer
	// Teacher is the plan-aware strategy the compressed run uses.
	Teacher   *compress.Strategy
	Judge     Completer
	Embedder  Embedder
	StepLimit int
	// Threshold is the similarity threshold (test a).
	Threshold float64
	// Embedded says, by role, whether the embedded offline model answers
	// it; the summary names those among the roles the run called.
	Embedded map[string]bool
	// Models identifies the endpoints behind Agent, Teacher's compressor,
	// Judge and Embedder beyond their model names (addresses, sampling
	// settings, the embedded model's version), as whoever built the
	// executor from a configuration knows them. It is part of run.json, so
	// a directory run with other endpoints is not resumed.
	Models string
}

// RunConfig is what makes two runs' executions comparable; it is run.json.
type RunConfig struct {
	Threshold        float64 `json:"threshold"`
	Strategy         string  `json:"strategy"`
	StrategyParams   string  `json:"strategy_params"`
	TeacherGuideline string  `json:"teacher_guideline"`
	TeacherModel     string  `json:"teacher_model,omitempty"`
	AgentModel       string  `json:"agent_model,omitempty"`
	StepLimit        int     `json:"step_limit"`
	Models           string  `json:"models,omitempty"`
}

// Config returns x's run.json.
func (x *Executor) Config() RunConfig {
	c := RunConfig{Threshold: x.Threshold, StepLimit: x.StepLimit, Models: x.Models}
	if m, ok := x.Agent.(rollout.Modeled); ok {
		c.AgentModel = m.Model()
	}
	if t := x.Teacher; t != nil {
		c.Strategy, c.StrategyParams = string(t.Name), t.Params
		c.TeacherGuideline, c.TeacherModel = t.HistoryGuidelineID, t.CompressorModel
	}
	return c
}

// Execution is one line of executions.jsonl: a workflow's dual execution
// and the acceptance filter's decision, or why the line was not executed.
type Execution struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
	// Digest is the workflow's (Workflow.Digest), or the line's bytes'
	// when it is not a valid workflow; a resumed run reuses the execution
	// only while the line's is the same.
	Digest   string `json:"digest"`
	Domain   string `json:"domain,omitempty"`
	Executed bool   `json:"executed"`
	Accepted bool   `json:"accepted"`
	// Rejections name each failed test; empty when accepted.
	Rejections []Rejection `json:"rejections,omitempty"`
	Full       *Outcome    `json:"full,omitempty"`
	Compressed *Outcome    `json:"compressed,omitempty"`
	Similarity float64     `json:"similarity"`
	Judge      []Verdict   `json:"judge,omitempty"`
	// Steps are the compressed run's compression events.
	Steps []Step `json:"steps,omitempty"`
	// Usage is per role: agent, compressor, judge, embedder.
	Usage map[string]RoleUsage `json:"usage,omitempty"`
}

// Rejection is one failed test.
type Rejection struct {
	Test   string `json:"test"`
	Detail string `json:"detail"`
}

// Outcome is one execution's end.
type Outcome struct {
	Output     string `json:"output"`
	Success    bool   `json:"success"`
	AgentCalls int    `json:"agent_calls"`
	PeakTokens int    `json:"peak_tokens"`
	StepLimit  bool   `json:"step_limit,omitempty"`
}

// Verdict is the judge's answer for one order of the outputs.
type Verdict struct {
	// CandidateFirst says the compressed output was shown as A.
	CandidateFirst bool   `json:"candidate_first"`
	Verdict        string `json:"verdict"`
	Reason         string `json:"reason"`
}

// Step is one teacher compression C_t → C̃_t conditioned on Π_{t:t+k}:
// the training pair's input (the teacher prompt, which holds the plan
// window and C_t) and output, and the sizes of the agent's context before
// and after.
type Step struct {
	Step        int           `json:"step"`
	Plan        []string      `json:"plan"`
	Prompt      []llm.Message `json:"prompt"`
	Output      string        `json:"output"`
	GuidelineID string        `json:"guideline_id"`
	Model       string        `json:"model"`
	// ContextTokens is |C_t| and CompressedTokens |C̃_t| (the agent's
	// context after its system prompt).
	ContextTokens    int     `json:"context_tokens"`
	CompressedTokens int     `json:"compressed_tokens"`
	Ratio            float64 `json:"ratio"`
}

// RoleUsage counts one role's calls.
type RoleUsage struct {
	Calls     int     `json:"calls"`
	TokensIn  int     `json:"tokens_in"`
	TokensOut int     `json:"tokens_out"`
	CostUSD   float64 `json:"cost_usd"`
}

func (u *RoleUsage) add(o RoleUsage) {
	u.Calls += o.Calls
	u.TokensIn += o.TokensIn
	u.TokensOut += o.TokensOut
	u.CostUSD += o.CostUSD
}

// Execute runs w with full memory and with the teacher, and applies the
// acceptance filter. Errors are those that make every workflow fail
// (cancelled context, an endpoint that stayed down).
func (x *Executor) Execute(ctx context.Context, w *Workflow) (Execution, error) {
	ex := Execution{ID: w.ID, Domain: w.Domain, Executed: true, Usage: map[string]RoleUsage{}}
	full, _, err := x.execute(ctx, w, nil, &ex)
	if err != nil {
		return ex, err
	}
	rec := &recorder{tok: x.Tokenizer}
	comp, _, err := x.execute(ctx, w, rec, &ex)
	if err != nil {
		return ex, err
	}
	ex.Full, ex.Compressed, ex.Steps = full, comp, rec.steps
	if err := x.accept(ctx, w, &ex); err != nil {
		return ex, err
	}
	return ex, nil
}

// execute runs w once, compressed through rec's wrapper of the teacher
// when rec is not nil.
func (x *Executor) execute(ctx context.Context, w *Workflow, rec *recorder, ex *Execution) (*Outcome, *rollout.Trajectory, error) {
	e := workflowEnv{w}
	a := &rollout.Agent{Env: e, Model: x.Agent, Tokenizer: x.Tokenizer, StepLimit: x.StepLimit}
	if rec != nil {
		s := *x.Teacher
		rec.inner, s.History = s.History, rec
		a.Strategy = &s
	}
	tr, err := a.Run(ctx, e.task())
	if err != nil {
		return nil, nil, fmt.Errorf("workflow %s: %w", w.ID, err)
	}
	if tr.Infra {
		return nil, nil, fmt.Errorf("workflow %s: %s: %w", w.ID, tr.InfraErr, llm.ErrUnavailable)
	}
	m := tr.Metrics
	agent := ex.Usage[llm.RoleAgent]
	agent.add(RoleUsage{Calls: m.AgentCalls + m.ReaskedCalls, TokensIn: m.AgentInputTokens + m.ReaskedInputTokens, TokensOut: m.AgentOutputTokens + m.ReaskedOutputTokens})
	comp := ex.Usage[llm.RoleCompressor]
	for _, ev := range tr.Events {
		comp.add(RoleUsage{Calls: ev.Calls, TokensIn: ev.Usage.PromptTokens, TokensOut: ev.Usage.CompletionTokens, CostUSD: ev.CostUSD})
	}
	agent.CostUSD += m.CostUSD - sumCost(tr.Events)
	ex.Usage[llm.RoleAgent] = agent
	if comp.Calls > 0 {
		ex.Usage[llm.RoleCompressor] = comp
	}
	return &Outcome{Output: FinalOutput(w, tr.Score), Success: tr.Success, AgentCalls: m.AgentCalls, PeakTokens: m.PeakTokens, StepLimit: tr.StepLimit}, tr, nil
}

func sumCost(evs []compress.Event) float64 {
	var c float64
	for _, ev := range evs {
		c += ev.CostUSD
	}
	return c
}

// recorder wraps the teacher's history compressor and records each
// compression with the sizes of the context before and after. One
// recorder serves one run.
type recorder struct {
	inner compress.History
	tok   *llm.Tokenizer
	steps []Step
}

var _ compress.History = (*recorder)(nil)

func (r *recorder) CompressHistory(ctx context.Context, in compress.Input) (compress.Output, error) {
	out, err := r.inner.CompressHistory(ctx, in)
	if err != nil || out.Event == nil {
		return out, err
	}
	ev := out.Event
	after := r.tok.CountMessages(out.Messages)
	st := Step{
		Step: ev.Step, Plan: ev.Plan, Prompt: ev.Input, Output: ev.Output,
		GuidelineID: ev.GuidelineID, Model: ev.Model,
		ContextTokens: in.ContextTokens, CompressedTokens: after,
	}
	if in.ContextTokens > 0 {
		st.Ratio = float64(after) / float64(in.ContextTokens)
	}
	r.steps = append(r.steps, st)
	return out, nil
}

// accept applies PAACE's three tests to an executed workflow.
func (x *Executor) accept(ctx context.Context, w *Workflow, ex *Execution) error {
	full, comp := ex.Full.Output, ex.Compressed.Output
	vecs, u, err := x.Embedder.Embed(ctx, []string{full, comp})
	if err != nil {
		return fmt.Errorf("workflow %s: embed the outputs: %w", w.ID, err)
	}
	if len(vecs) != 2 || len(vecs[0]) != len(vecs[1]) || len(vecs[0]) == 0 {
		return fmt.Errorf("workflow %s: the embedder returned %d vectors for 2 texts, or vectors of different sizes", w.ID, len(vecs))
	}
	ex.Usage[llm.RoleEmbedder] = RoleUsage{Calls: 1, TokensIn: u.PromptTokens, CostUSD: costOf(x.Embedder, u)}
	ex.Similarity = round6(cosine(vecs[0], vecs[1]))
	if ex.Similarity < x.Threshold {
		ex.Rejections = append(ex.Rejections, Rejection{TestSimilarity, fmt.Sprintf("cosine %.4f < threshold %.4g", ex.Similarity, x.Threshold)})
	}
	for _, st := range ex.Steps {
		if !(st.Ratio > 0 && st.Ratio < 1) {
			ex.Rejections = append(ex.Rejections, Rejection{TestRatio, fmt.Sprintf("step %d: |C̃_t|/|C_t| = %d/%d = %.4f is not in (0, 1)", st.Step, st.CompressedTokens, st.ContextTokens, st.Ratio)})
			break
		}
	}
	score := 0
	for _, candFirst := range []bool{false, true} {
		v, err := x.judge(ctx, w, full, comp, candFirst, ex)
		if err != nil {
			return err
		}
		ex.Judge = append(ex.Judge, v)
		switch v.Verdict {
		case VerdictBetter:
			score++
		case VerdictWorse:
			score--
		}
	}
	// Shown in both orders, a judge biased to one position cancels out;
	// the candidate is worse when the two verdicts lean that way.
	if score < 0 {
		ex.Rejections = append(ex.Rejections, Rejection{TestJudge, fmt.Sprintf("rated worse: %s (reference first), %s (candidate first)", ex.Judge[0].Verdict, ex.Judge[1].Verdict)})
	}
	ex.Accepted = len(ex.Rejections) == 0
	return nil
}

// Judge labels: the prompt says which output is which, and the order
// alternates.
const (
	labelReference = "reference: full memory"
	labelCandidate = "candidate: compressed memory"
)

func (x *Executor) judge(ctx context.Context, w *Workflow, full, comp string, candFirst bool, ex *Execution) (Verdict, error) {
	a, b, la, lb := full, comp, labelReference, labelCandidate
	if candFirst {
		a, b, la, lb = comp, full, labelCandidate, labelReference
	}
	prompt, err := templates.Render("synth_judge.tmpl", map[string]any{
		"steps": workflowEnv{w}.steps(), "spec": oneLine(w.Output.Spec),
		"label_a": la, "label_b": lb, "output_a": a, "output_b": b,
	})
	if err != nil {
		return Verdict{}, err
	}
	resp, err := x.Judge.Complete(ctx, llm.Request{Purpose: llm.PurposeJudge, Messages: []llm.Message{{Role: "user", Content: prompt}}})
	if err != nil {
		return Verdict{}, fmt.Errorf("workflow %s: judge: %w", w.ID, err)
	}
	ju := ex.Usage[llm.RoleJudge]
	ju.add(RoleUsage{Calls: 1, TokensIn: resp.Usage.PromptTokens, TokensOut: resp.Usage.CompletionTokens, CostUSD: costOf(x.Judge, resp.Usage)})
	ex.Usage[llm.RoleJudge] = ju
	v := Verdict{CandidateFirst: candFirst}
	var reply struct {
		Winner string `json:"winner"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(stripFence(resp.Message.Content), &reply); err != nil {
		// An unreadable verdict does not vouch for the candidate.
		v.Verdict, v.Reason = VerdictWorse, "unreadable verdict: "+cut(resp.Message.Content, 200)
		return v, nil
	}
	v.Reason = cut(oneLine(reply.Reason), 500)
	candLabel, refLabel := "B", "A"
	if candFirst {
		candLabel, refLabel = "A", "B"
	}
	switch strings.ToUpper(strings.TrimSpace(reply.Winner)) {
	case candLabel:
		v.Verdict = VerdictBetter
	case refLabel:
		v.Verdict = VerdictWorse
	case "TIE":
		v.Verdict = VerdictSame
	default:
		v.Verdict, v.Reason = VerdictWorse, fmt.Sprintf("unreadable verdict: winner %q", cut(reply.Winner, 50))
	}
	return v, nil
}

type pricedAny interface{ Cost(u llm.Usage) float64 }

func costOf(c any, u llm.Usage) float64 {
	if p, ok := c.(pricedAny); ok {
		return p.Cost(u)
	}
	return 0
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// round6 keeps a figure stable across float formatting in JSON.
func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }

// RunSummary is run-summary.json.
type RunSummary struct {
	// Generated is the generation's count when its summary.json is beside
	// the workflows, else the workflow lines read. Usage then includes the
	// generator's (generate.go, GenerateSummary.Usage).
	Generated  int            `json:"generated"`
	Read       int            `json:"read"`
	Executed   int            `json:"executed"`
	Accepted   int            `json:"accepted"`
	Rejections map[string]int `json:"rejections"`
	// Invalid and Duplicates count the lines not executed: not a valid
	// workflow, or a valid workflow's id already read (the first is).
	Invalid    int `json:"invalid"`
	Duplicates int `json:"duplicates"`
	// AcceptanceRate is Accepted / Executed.
	AcceptanceRate float64 `json:"acceptance_rate"`
	// MeanRatio is the mean |C̃_t|/|C_t| over every compression.
	MeanRatio        float64              `json:"mean_compression_ratio"`
	Compressions     int                  `json:"compressions"`
	TrainingPairs    int                  `json:"training_pairs"`
	FullSuccess      int                  `json:"full_success"`
	CompressedSucc   int                  `json:"compressed_success"`
	MeanSimilarity   float64              `json:"mean_similarity"`
	Usage            map[string]RoleUsage `json:"usage"`
	TeacherGuideline string               `json:"teacher_guideline"`
	// Resumed is the workflow index this invocation started at.
	Resumed int `json:"resumed"`
	// EmbeddedModel is true when the embedded offline model answered every
	// role the run called (Usage, over every invocation); EmbeddedRoles
	// names the roles it answered.
	EmbeddedModel bool     `json:"embedded_model"`
	EmbeddedRoles []string `json:"embedded_roles,omitempty"`
}

// embeddedUse says which of the roles usage shows called the embedded
// model answered (embedded, by role).
func embeddedUse(usage map[string]RoleUsage, embedded map[string]bool) (all bool, roles []string) {
	var uses []report.Use
	for role, u := range usage {
		if u.Calls > 0 {
			uses = append(uses, report.Use{Role: role, Embedded: embedded[role]})
		}
	}
	return report.Embedded(uses)
}

// summarizer accumulates a RunSummary from executions in order.
type summarizer struct {
	s        RunSummary
	ratioSum float64
	simSum   float64
}

func newSummarizer() *summarizer {
	return &summarizer{s: RunSummary{Rejections: map[string]int{}, Usage: map[string]RoleUsage{}}}
}

func (z *summarizer) add(ex *Execution) {
	s := &z.s
	s.Read++
	for _, r := range ex.Rejections {
		s.Rejections[r.Test]++
		switch {
		case ex.Executed:
		case r.Test == RejectInvalid:
			s.Invalid++
		case r.Test == RejectDuplicate:
			s.Duplicates++
		}
	}
	for role, u := range ex.Usage {
		t := s.Usage[role]
		t.add(u)
		s.Usage[role] = t
	}
	if !ex.Executed {
		return
	}
	s.Executed++
	z.simSum += ex.Similarity
	if ex.Full.Success {
		s.FullSuccess++
	}
	if ex.Compressed.Success {
		s.CompressedSucc++
	}
	for _, st := range ex.Steps {
		s.Compressions++
		z.ratioSum += st.Ratio
	}
	if ex.Accepted {
		s.Accepted++
		s.TrainingPairs += len(ex.Steps)
	}
}

func (z *summarizer) finish() RunSummary {
	s := z.s
	if s.Executed > 0 {
		s.AcceptanceRate = round6(float64(s.Accepted) / float64(s.Executed))
		s.MeanSimilarity = round6(z.simSum / float64(s.Executed))
	}
	if s.Compressions > 0 {
		s.MeanRatio = round6(z.ratioSum / float64(s.Compressions))
	}
	return s
}

// RunOptions say where a run reads and writes.
type RunOptions struct {
	// Workflows is a workflows.jsonl (optimize synth generate's output).
	Workflows string
	// Dir receives executions.jsonl, run.json and run-summary.json.
	Dir         string
	Concurrency int
	// Limit executes only the first Limit workflow lines (0: all).
	Limit int
	// Limits bound the file (zero fields: the defaults).
	Limits Limits
}

// Run executes every workflow of opts.Workflows in x and writes one
// execution per line, in the file's order, resuming a directory a previous
// run left: the executions of workflows unchanged since (same line, id and
// Digest) are reused, not run again. A line that is JSON but not a valid
// workflow is recorded as rejected (invalid) and the run goes on; the
// file's lines follow jsonl's rule (a torn last line is left out with a
// warning, a line that is not JSON elsewhere is an error before anything
// runs). Memory stays flat: workflows stream through.
func Run(ctx context.Context, x *Executor, opts RunOptions) (RunSummary, error) {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	f, err := os.Open(opts.Workflows)
	if err != nil {
		return RunSummary{}, fmt.Errorf("synth run: %w", err)
	}
	defer f.Close()
	total, err := countLines(f, opts.Workflows, opts.Limit, opts.Limits)
	if err != nil {
		return RunSummary{}, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return RunSummary{}, fmt.Errorf("synth run: %w", err)
	}
	if err := checkSettings(opts.Dir, RunSettingsFile, x.Config()); err != nil {
		return RunSummary{}, err
	}
	out, z, done, err := openExecutions(opts.Dir)
	if err != nil {
		return RunSummary{}, err
	}
	defer func() { out.Close() }()
	if total < len(done) {
		return RunSummary{}, foreignRun(opts, len(done))
	}
	resumed, err := unchanged(f, opts, done)
	if err != nil {
		return RunSummary{}, err
	}
	if resumed < len(done) {
		// The file stays in the workflows' order, as an uninterrupted run
		// writes it, so the executions from the changed workflow on are
		// dropped; the unchanged ones among them are run again, their
		// calls answered by the LLM cache when the job keeps one.
		slog.Warn("a workflow changed since its execution: running it again, and dropping the executions after it",
			"workflow", done[resumed].id, "file", opts.Workflows, "line", resumed+1, "dropped", len(done)-resumed)
		out.Close()
		if err := os.Truncate(filepath.Join(opts.Dir, ExecutionsFile), done[resumed].offset); err != nil {
			return RunSummary{}, fmt.Errorf("synth run: %w", err)
		}
		if out, z, _, err = openExecutions(opts.Dir); err != nil {
			return RunSummary{}, err
		}
	}

	prog := progress.New("execute workflows", total-resumed)
	defer prog.Finish()
	rd := jsonl.NewReader(f, opts.Workflows, jsonl.Limits{Line: maxWorkflowLine})
	s := stream.New().WithMaxGoroutines(opts.Concurrency)
	// firstErr is the callbacks' (in order); failed lets the reading loop
	// stop early without reading it.
	var firstErr, readErr error
	var failed atomic.Bool
	// seen is the line of each valid workflow id: a later line with the
	// same id is not executed (the first one is), with a warning.
	seen := map[string]int{}
	for i := 0; i < total && ctx.Err() == nil && !failed.Load(); i++ {
		line, err := rd.Next()
		if err != nil {
			// countLines read these lines already: the file changed.
			readErr = changedWhileRead(opts.Workflows, err)
			break
		}
		w, id, sum, perr := identify(line)
		first, dup := seen[id]
		if perr == nil && !dup {
			seen[id] = i + 1
		}
		if i < resumed {
			continue
		}
		s.Go(func() stream.Callback {
			ex := Execution{Index: i}
			var err error
			switch {
			case perr == nil && dup:
				ex.ID, ex.Digest = id, sum
				ex.Rejections = []Rejection{{RejectDuplicate, fmt.Sprintf("%s:%d: workflow id %q is already line %d, which is executed; this line is not", opts.Workflows, i+1, id, first)}}
			case perr != nil:
				var inv *InvalidError
				if !errors.As(perr, &inv) {
					err = perr
					break
				}
				ex.ID, ex.Digest = id, sum
				ex.Rejections = []Rejection{{RejectInvalid, fmt.Sprintf("%s:%d: %s", opts.Workflows, i+1, inv.Error())}}
			case ctx.Err() != nil:
				err = ctx.Err()
			default:
				ex, err = x.Execute(ctx, &w)
				ex.Index, ex.Digest = i, sum
			}
			return func() {
				if firstErr != nil {
					return
				}
				if err == nil {
					err = writeLine(out, &ex)
				}
				if err != nil {
					firstErr = err
					failed.Store(true)
					return
				}
				z.add(&ex)
				prog.Add(1)
				for _, r := range ex.Rejections {
					if !ex.Executed {
						slog.Warn("workflow not executed: "+r.Detail, "file", opts.Workflows, "line", i+1, "reason", r.Test)
					}
				}
			}
		})
	}
	s.Wait()
	firstErr = cmp.Or(firstErr, readErr, ctx.Err())
	if firstErr != nil {
		return z.finish(), firstErr
	}
	sum := z.finish()
	sum.Resumed = resumed
	sum.TeacherGuideline = x.Config().TeacherGuideline
	var gen RoleUsage
	sum.Generated, gen = generation(filepath.Dir(opts.Workflows), sum.Read)
	if gen.Calls > 0 {
		sum.Usage[llm.RoleGenerator] = gen
	}
	sum.EmbeddedModel, sum.EmbeddedRoles = embeddedUse(sum.Usage, x.Embedded)
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return sum, err
	}
	return sum, atomicfile.WriteFile(filepath.Join(opts.Dir, RunSummaryFile), append(b, '\n'), 0o644)
}

// maxWorkflowLine bounds one line of a workflows file.
const maxWorkflowLine = 16 << 20

// executed is what a resumed execution says of the workflow line it
// stands for, and where it begins in executions.jsonl.
type executed struct {
	id, digest string
	offset     int64
}

// openExecutions opens dir's executions.jsonl for appending, with the
// summary of the executions a previous run wrote and what each stands for.
func openExecutions(dir string) (*os.File, *summarizer, []executed, error) {
	z := newSummarizer()
	var done []executed
	var offset int64
	out, err := openResumed(filepath.Join(dir, ExecutionsFile), func(line []byte) error {
		var ex Execution
		if err := json.Unmarshal(line, &ex); err != nil {
			return err
		}
		if ex.Index != z.s.Read {
			return fmt.Errorf("execution of line %d where line %d was due", ex.Index+1, z.s.Read+1)
		}
		done = append(done, executed{ex.ID, ex.Digest, offset})
		offset += int64(len(line)) + 1
		z.add(&ex)
		return nil
	})
	return out, z, done, err
}

// unchanged compares the first len(done) lines of f with the executions
// done and returns how many lead unchanged; it rewinds f. A line under
// another id means the directory holds another file's executions: it is
// refused, not mixed, whatever changed before it.
func unchanged(f *os.File, opts RunOptions, done []executed) (int, error) {
	rd := jsonl.NewReader(f, opts.Workflows, jsonl.Limits{Line: maxWorkflowLine})
	same := len(done)
	for i := range done {
		line, err := rd.Next()
		if err != nil {
			return 0, changedWhileRead(opts.Workflows, err)
		}
		_, id, sum, _ := identify(line)
		if id != done[i].id {
			return 0, foreignRun(opts, len(done))
		}
		if sum != done[i].digest {
			same = min(same, i)
		}
	}
	_, err := f.Seek(0, io.SeekStart)
	return same, err
}

func foreignRun(opts RunOptions, n int) error {
	return fmt.Errorf("%w: %s holds executions of other workflows than the first %d of %s; use another --out", ErrForeignDir, opts.Dir, n, opts.Workflows)
}

// generation is the generation summary's count of workflows and
// generator usage, when its summary.json is beside the workflows; else
// read and nothing.
func generation(dir string, read int) (int, RoleUsage) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return read, RoleUsage{}
	}
	var g GenerateSummary
	if json.Unmarshal(b, &g) != nil {
		return read, RoleUsage{}
	}
	return g.Generated, g.Usage
}

// identify parses a workflow line and names it: a valid workflow by its
// id and Digest; another line by the id it may hold and the digest of its
// bytes (an edit that makes it valid is a change).
func identify(line []byte) (w Workflow, id, sum string, err error) {
	w, err = Parse(line)
	if err != nil {
		return w, lineID(line), digest(line), err
	}
	return w, w.ID, w.Digest(), nil
}

// lineID is the id of a workflow line that failed validation, when it has
// a readable one.
func lineID(line []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil {
		return ""
	}
	if s, ok := v.ID.(string); ok {
		return cut(s, 128)
	}
	return ""
}

// countLines counts the lines of f named name, up to limit (0: all), by
// jsonl's rule: a torn last line is left out with a warning, and a line
// that is not JSON elsewhere is damage, an error naming it, found before
// anything is executed. A file over lim (more workflows, a longer plan) is
// refused as soon as the line that passes it is read. It rewinds f.
func countLines(f *os.File, name string, limit int, lim Limits) (int, error) {
	lim = lim.withDefaults()
	rd := jsonl.NewReader(f, name, jsonl.Limits{Line: maxWorkflowLine})
	refuse := func(format string, args ...any) error {
		return &InvalidError{What: "workflows file", Problems: []Problem{{Message: fmt.Sprintf("%s:%d: ", name, rd.Line()) + fmt.Sprintf(format, args...)}}}
	}
	n := 0
	for line, err := range rd.All() {
		if err != nil {
			return 0, err
		}
		if limit > 0 && n == limit {
			break
		}
		if !json.Valid(line) {
			if rd.SkipTorn(errNotJSON) {
				break
			}
			return 0, refuse("%v (a damaged line: only the last line of a file can be cut short); repair or remove the line", errNotJSON)
		}
		if n == lim.MaxWorkflows {
			return 0, refuse("more than %d workflows, the limit; raise synth.max_workflows in the job file, or execute the first ones with --limit", lim.MaxWorkflows)
		}
		var plan struct {
			Plan []json.RawMessage `json:"plan"`
		}
		if json.Unmarshal(line, &plan) == nil && len(plan.Plan) > lim.MaxPlanSteps {
			return 0, refuse("field plan: %d steps, more than the limit of %d; raise synth.max_plan_steps in the job file", len(plan.Plan), lim.MaxPlanSteps)
		}
		n++
	}
	_, err := f.Seek(0, io.SeekStart)
	return n, err
}

var errNotJSON = errors.New("not JSON")

// changedWhileRead reports a workflows file that ended, or went bad, in
// lines countLines had read whole.
func changedWhileRead(name string, err error) error {
	return fmt.Errorf("%s changed while it was read: %w", name, err)
}

// PrintRunSummary writes the summary's headline figures.
func PrintRunSummary(w io.Writer, s RunSummary) {
	if l := report.ModelsLine(s.EmbeddedModel, s.EmbeddedRoles); l != "" {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "workflows: %d generated, %d read (%d invalid, %d duplicate ids: not executed), %d executed, %d accepted (%.1f%%), %d training pairs\n",
		s.Generated, s.Read, s.Invalid, s.Duplicates, s.Executed, s.Accepted, 100*s.AcceptanceRate, s.TrainingPairs)
	fmt.Fprintf(w, "rejections by test: %s\n", countsLine(s.Rejections))
	fmt.Fprintf(w, "success: full memory %d, compressed %d; mean similarity %.3f; mean compression ratio %.3f over %d compressions\n",
		s.FullSuccess, s.CompressedSucc, s.MeanSimilarity, s.MeanRatio, s.Compressions)
	for _, r := range slices.Sorted(maps.Keys(s.Usage)) {
		u := s.Usage[r]
		fmt.Fprintf(w, "  %-10s %6d calls %9d tokens in %8d out  $%.4f\n", r, u.Calls, u.TokensIn, u.TokensOut, u.CostUSD)
	}
}

// countsLine writes counts as "a 3, b 1", sorted by name; "none" when empty.
func countsLine(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
