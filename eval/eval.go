package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// Metric names: the keys of summary.json, comparisons.json and gate rules.
const (
	MetricSuccess          = "success"
	MetricEM               = "em"
	MetricF1               = "f1"
	MetricSteps            = "steps"
	MetricPeakTokens       = "peak_tokens"
	MetricDependency       = "dependency"
	MetricAgentTokens      = "agent_tokens"
	MetricCompressorTokens = "compressor_tokens"
	MetricCostUSD          = "cost_usd"
)

// Metrics lists every metric of the task rollouts in report order; an
// evaluation with a replay adds MetricAgreement (Result.MetricNames).
var Metrics = []string{
	MetricSuccess, MetricEM, MetricF1, MetricSteps, MetricPeakTokens, MetricDependency,
	MetricAgentTokens, MetricCompressorTokens, MetricCostUSD,
}

// AllMetrics are the metrics a gate rule may name.
var AllMetrics = append(slices.Clone(Metrics), MetricAgreement)

// Files of an evaluation directory.
const (
	SummaryFile     = "summary.json"
	ComparisonsFile = "comparisons.json"
	OutcomesFile    = "outcomes.jsonl"
	rolloutsDir     = "rollouts"
)

// Candidate is one arm of an evaluation, ready to run.
type Candidate struct {
	Spec  Spec
	Agent *rollout.Agent
	// EmbeddedModel and EmbeddedRoles say which roles its agent calls the
	// embedded model plays; its rollouts' summaries carry them.
	EmbeddedModel bool
	EmbeddedRoles []string
	// GuidelineTokens are the tokens of the guideline it compresses with
	// (0: none), which every compressor call carries.
	GuidelineTokens int
}

// Options configures an evaluation.
type Options struct {
	Split   string
	Samples int
	Seed    int
	// Reference is the candidate the others are compared with; empty
	// means the first.
	Reference   string
	Concurrency int
	// TaskSet identifies the tasks (dataset version and task contents), so
	// results from another task set are never paired.
	TaskSet string
	// EmbeddedModel is true when the embedded offline model played every
	// role the candidates call; EmbeddedRoles names the roles it played.
	EmbeddedModel bool
	EmbeddedRoles []string
	// Replace redoes a candidate's rollouts that dir holds from another
	// configuration (another guideline, settings or model version)
	// instead of refusing them (rollout.Runner.Replace). How the
	// evaluation is run, not what it computes: no part of a stage's inputs.
	Replace bool `json:"-"`
	// Replay, when set, also replays logged production requests for every
	// candidate and scores MetricAgreement.
	Replay *Replay `json:"-"`
}

// Outcome is what an evaluation keeps of one run of one task.
type Outcome struct {
	Candidate string             `json:"candidate"`
	Task      string             `json:"task"`
	Sample    int                `json:"sample"`
	Success   bool               `json:"success"`
	Values    map[string]float64 `json:"values"`
	// Context is the agent's context size (tokens, system prompt
	// excluded) at each agent call.
	Context   []int `json:"context_tokens"`
	LLMCalls  int   `json:"llm_calls"`
	CacheHits int   `json:"cache_hits"`
	// Summary is the compressor's last output and Dropped the sentences of
	// its input that carried a fact the output lost.
	Summary string   `json:"summary,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	Answer  string   `json:"answer,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	Split         string   `json:"split"`
	Samples       int      `json:"samples"`
	Seed          int      `json:"seed"`
	TaskSet       string   `json:"task_set"`
	Tasks         []string `json:"tasks"`
	Reference     string   `json:"reference"`
	EmbeddedModel bool     `json:"embedded_model"`
	EmbeddedRoles []string `json:"embedded_roles,omitempty"`
	Resamples     int      `json:"bootstrap_resamples"`
	Candidates    []Arm    `json:"candidates"`
	// Replay says what was replayed, when the evaluation had session logs.
	Replay *ReplaySummary `json:"replay,omitempty"`
}

// ReplaySummary names the session log and the requests replayed, the
// units MetricAgreement's intervals resample.
type ReplaySummary struct {
	Sessions string   `json:"sessions"`
	Requests []string `json:"requests"`
}

// Arm is one candidate's results: each metric's mean over tasks with its
// 95% bootstrap interval (tasks resampled; a task's samples averaged).
type Arm struct {
	Spec
	HistoryGuidelineID     string              `json:"history_guideline_id,omitempty"`
	ObservationGuidelineID string              `json:"observation_guideline_id,omitempty"`
	CompressorModelName    string              `json:"compressor_model_name,omitempty"`
	GuidelineTokens        int                 `json:"guideline_tokens,omitempty"`
	Runs                   int                 `json:"runs"`
	Metrics                map[string]Interval `json:"metrics"`
	// TaskSD is the mean over tasks of the standard deviation across a
	// task's samples, per metric (samples > 1 only).
	TaskSD    map[string]float64 `json:"task_sd,omitempty"`
	LLMCalls  int                `json:"llm_calls"`
	CacheHits int                `json:"cache_hits"`
	// ParetoPeak and ParetoCost: no other candidate has success at least as
	// high at lower or equal peak tokens (money), one strictly.
	ParetoPeak bool `json:"pareto_peak_tokens"`
	ParetoCost bool `json:"pareto_cost"`
}

// Comparison pairs a candidate with the reference on the same tasks.
type Comparison struct {
	Candidate string            `json:"candidate"`
	Reference string            `json:"reference"`
	Tasks     int               `json:"tasks"`
	Metrics   map[string]Paired `json:"metrics"`
	McNemar   McNemar           `json:"mcnemar_success"`
	Wins      int               `json:"wins"`
	Losses    int               `json:"losses"`
	Ties      int               `json:"ties"`
}

// Result is a finished evaluation.
type Result struct {
	Dir         string
	Summary     Summary
	Comparisons []Comparison
	Outcomes    []Outcome // candidate order, then task order, then sample
	// Replay holds each candidate's agreement per replayed request
	// (candidate order, then Summary.Replay.Requests order).
	Replay []ReplayOutcome
}

// Run rolls every candidate out on the same tasks, opt.Samples times each,
// into dir/rollouts/NAME/sample-K (finished rollouts are reused, cut-off
// ones resume), then writes summary.json, comparisons.json and
// outcomes.jsonl into dir.
func Run(ctx context.Context, cands []Candidate, tasks []env.Task, dir string, opt Options) (*Result, error) {
	if opt.Samples <= 0 {
		opt.Samples = 1
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("split %s has no tasks", opt.Split)
	}
	if opt.Reference == "" {
		opt.Reference = cands[0].Spec.Name
	}
	if !slices.ContainsFunc(cands, func(c Candidate) bool { return c.Spec.Name == opt.Reference }) {
		return nil, fmt.Errorf("reference %q is not one of the candidates", opt.Reference)
	}
	sum := Summary{
		Split: opt.Split, Samples: opt.Samples, Seed: opt.Seed, TaskSet: opt.TaskSet,
		Reference: opt.Reference, EmbeddedModel: opt.EmbeddedModel, EmbeddedRoles: opt.EmbeddedRoles, Resamples: Resamples,
	}
	for _, t := range tasks {
		sum.Tasks = append(sum.Tasks, t.ID)
	}
	var outs []Outcome
	var err error
	// One report over every candidate's tasks × samples (a log line per
	// evaluation, not per candidate); work a rollout reuses or resumes
	// counts as done at once.
	prog := progress.New("eval", len(cands)*len(tasks)*opt.Samples)
	defer prog.Finish()
	for _, c := range cands {
		arm := Arm{Spec: c.Spec, GuidelineTokens: c.GuidelineTokens}
		for s := range opt.Samples {
			// Each sample is the same agent with its own sample index, which
			// reaches the models (at temperature > 0 samples differ).
			agent := *c.Agent
			agent.Sample = s
			r := &rollout.Runner{Agent: &agent, Concurrency: opt.Concurrency, EmbeddedModel: c.EmbeddedModel, EmbeddedRoles: c.EmbeddedRoles, Progress: prog, Replace: opt.Replace}
			res, err := r.RunDir(ctx, tasks, filepath.Join(dir, rolloutsDir, c.Spec.Name, fmt.Sprintf("sample-%d", s)))
			if err != nil {
				return nil, fmt.Errorf("candidate %s: %w", c.Spec.Name, err)
			}
			switch {
			case res.Reused:
				prog.Add(len(tasks))
			case res.Summary.ResumedTasks > 0:
				prog.Add(res.Summary.ResumedTasks)
			}
			if n := res.Summary.InfraFailures; n > 0 {
				return nil, fmt.Errorf("candidate %s: %d of %d tasks stopped on an unavailable endpoint (%w); run the same command again to retry them", c.Spec.Name, n, len(tasks), llm.ErrUnavailable)
			}
			arm.HistoryGuidelineID = res.Summary.HistoryGuidelineID
			arm.ObservationGuidelineID = res.Summary.ObservationGuidelineID
			// One record in memory at a time: the rollout's reader streams them.
			for t, err := range rollout.Records(res.Path) {
				if err != nil {
					return nil, fmt.Errorf("candidate %s: %w", c.Spec.Name, err)
				}
				if arm.CompressorModelName == "" {
					arm.CompressorModelName = t.CompressorModel
				}
				outs = append(outs, outcomeOf(c.Spec.Name, s, t))
			}
		}
		sum.Candidates = append(sum.Candidates, arm)
	}
	res := &Result{Dir: dir, Summary: sum, Outcomes: outs}
	if rp := opt.Replay; rp != nil {
		if res.Replay, err = runReplay(ctx, rp, cands); err != nil {
			return nil, err
		}
		res.Summary.Replay = &ReplaySummary{Sessions: rp.Sessions}
		for _, q := range rp.Requests {
			res.Summary.Replay.Requests = append(res.Summary.Replay.Requests, q.ID)
		}
	}
	if err := res.Save(); err != nil {
		return nil, err
	}
	return res, nil
}

// Save computes the statistics of the outcomes and writes the evaluation
// into r.Dir.
func (r *Result) Save() error {
	r.compute()
	return r.write()
}

// outcomeOf extracts what the evaluation keeps of a trajectory.
func outcomeOf(cand string, sample int, t *rollout.Trajectory) Outcome {
	m := t.Metrics
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	o := Outcome{
		Candidate: cand, Task: t.TaskID, Sample: sample, Success: t.Success,
		Values: map[string]float64{
			MetricSuccess: b2f(t.Success), MetricEM: t.Score.EM, MetricF1: t.Score.F1,
			MetricSteps: float64(m.Steps), MetricPeakTokens: float64(m.PeakTokens), MetricDependency: m.Dependency,
			MetricAgentTokens:      float64(m.AgentInputTokens + m.AgentOutputTokens),
			MetricCompressorTokens: float64(m.CompressorInputTokens + m.CompressorOutputTokens),
			MetricCostUSD:          m.CostUSD,
		},
		LLMCalls: m.LLMCalls, CacheHits: m.CacheHits,
	}
	for _, tu := range t.Turns {
		n := tu.ContextTokens // system prompt excluded, as peak tokens
		if n == 0 {
			n = tu.Usage.PromptTokens // records that predate ContextTokens
		}
		o.Context = append(o.Context, n)
	}
	if n := len(t.Turns); n > 0 {
		o.Answer = finalAnswer(t.Turns[n-1])
	}
	if n := len(t.Events); n > 0 {
		ev := t.Events[n-1]
		o.Summary = strings.TrimSpace(ev.Output)
		in := ev.Vars[compress.VarHistory]
		if ev.Kind == compress.KindObservation {
			in = ev.Vars[compress.VarObservation]
		}
		o.Dropped = Dropped(in, o.Summary)
	}
	return o
}

// finalAnswer is the arguments of the last action, when it ended the task.
func finalAnswer(t rollout.Turn) string {
	if t.Action.Tool == "" {
		return ""
	}
	return t.Action.Tool + " " + string(t.Action.Arguments)
}

// factRE finds the tokens that carry facts in a sentence: numbers and
// capitalized words (a sentence's first word, capitalized anyway, is not
// one unless it has a digit).
var factRE = regexp.MustCompile(`\b(?:[0-9][0-9.,:%-]*|[A-Z][A-Za-z0-9-]+)\b`)

// leadRE matches a sentence's opening: a "label:" prefix and its first word.
var leadRE = regexp.MustCompile(`^(?:[a-z_]+:\s*)?[A-Za-z-]+`)

// maxDropped bounds what an outcome keeps of what the compressor dropped.
const maxDropped = 12

// Dropped returns the sentences of in with a fact token (number or
// capitalized word) that out does not contain: what the compression lost.
func Dropped(in, out string) []string {
	var lost []string
	seen := map[string]bool{}
	for _, line := range strings.Split(in, "\n") {
		for _, s := range strings.SplitAfter(line, ". ") {
			s = strings.TrimSpace(s)
			if s == "" || seen[s] {
				continue
			}
			lead := 0
			if m := leadRE.FindStringIndex(s); m != nil {
				lead = m[1]
			}
			for _, m := range factRE.FindAllStringIndex(s, -1) {
				f := s[m[0]:m[1]]
				if m[1] <= lead || len(f) < 2 || strings.Contains(out, f) {
					continue
				}
				seen[s] = true
				lost = append(lost, s)
				break
			}
			if len(lost) == maxDropped {
				return lost
			}
		}
	}
	return lost
}

// MetricNames are the metrics this evaluation has, in report order.
func (r *Result) MetricNames() []string {
	if r.Summary.Replay == nil {
		return Metrics
	}
	return AllMetrics
}

// taskValues returns, per task in order, the mean of metric over its
// samples, and the standard deviation across samples; for agreement, per
// replayed request in order, the candidate's agreement (no spread).
func (r *Result) taskValues(cand, metric string) (means, sds []float64) {
	if metric == MetricAgreement {
		by := map[string]float64{}
		for _, o := range r.Replay {
			if o.Candidate == cand {
				by[o.Request] = o.Agreement
			}
		}
		for _, q := range r.Summary.Replay.Requests {
			means = append(means, by[q])
			sds = append(sds, 0)
		}
		return means, sds
	}
	by := map[string][]float64{}
	for _, o := range r.Outcomes {
		if o.Candidate == cand {
			by[o.Task] = append(by[o.Task], o.Values[metric])
		}
	}
	for _, t := range r.Summary.Tasks {
		xs := by[t]
		means = append(means, Mean(xs))
		sds = append(sds, SD(xs))
	}
	return means, sds
}

// compute fills the per-candidate intervals, the Pareto fronts and the
// comparisons with the reference.
func (r *Result) compute() {
	bs := Bootstrap{Resamples: Resamples, Seed: uint64(r.Summary.Seed)}
	s := &r.Summary
	s.Resamples = Resamples
	for i := range s.Candidates {
		a := &s.Candidates[i]
		a.Metrics = map[string]Interval{}
		a.Runs, a.LLMCalls, a.CacheHits = 0, 0, 0
		for _, o := range r.Outcomes {
			if o.Candidate == a.Name {
				a.Runs++
				a.LLMCalls += o.LLMCalls
				a.CacheHits += o.CacheHits
			}
		}
		if s.Samples > 1 {
			a.TaskSD = map[string]float64{}
		}
		names := r.MetricNames()
		values := make([][]float64, len(names))
		for j, m := range names {
			xs, sds := r.taskValues(a.Name, m)
			values[j] = xs
			if a.TaskSD != nil {
				a.TaskSD[m] = Mean(sds)
			}
		}
		for _, g := range byLength(values) {
			for k, iv := range bs.Means(pick(values, g)) {
				a.Metrics[names[g[k]]] = iv
			}
		}
	}
	succ := make([]float64, len(s.Candidates))
	peak := make([]float64, len(s.Candidates))
	cost := make([]float64, len(s.Candidates))
	for i, a := range s.Candidates {
		succ[i], peak[i], cost[i] = a.Metrics[MetricSuccess].Point, a.Metrics[MetricPeakTokens].Point, a.Metrics[MetricCostUSD].Point
	}
	onPeak, onCost := Pareto(succ, peak), Pareto(succ, cost)
	for i := range s.Candidates {
		s.Candidates[i].ParetoPeak, s.Candidates[i].ParetoCost = onPeak[i], onCost[i]
	}
	r.Comparisons = nil
	for _, a := range s.Candidates {
		if a.Name != s.Reference {
			r.Comparisons = append(r.Comparisons, r.Compare(a.Name, s.Reference))
		}
	}
	ps := make([]float64, len(r.Comparisons))
	for i, c := range r.Comparisons {
		ps[i] = c.McNemar.P
	}
	for i, p := range Holm(ps) {
		r.Comparisons[i].McNemar.PHolm = p
	}
}

// Compare pairs cand with ref on every task: a paired bootstrap interval
// for every metric, the exact McNemar test on success over (task, sample)
// pairs, and per-task wins, losses and ties on success. PHolm is left to
// the caller, which knows the family of comparisons.
func (r *Result) Compare(cand, ref string) Comparison {
	bs := Bootstrap{Resamples: Resamples, Seed: uint64(r.Summary.Seed)}
	c := Comparison{Candidate: cand, Reference: ref, Tasks: len(r.Summary.Tasks), Metrics: map[string]Paired{}}
	names := r.MetricNames()
	as, refs := make([][]float64, len(names)), make([][]float64, len(names))
	for j, m := range names {
		as[j], _ = r.taskValues(cand, m)
		refs[j], _ = r.taskValues(ref, m)
	}
	for _, g := range byLength(as) {
		for k, p := range bs.PairedAll(pick(as, g), pick(refs, g)) {
			c.Metrics[names[g[k]]] = p
		}
	}
	if j := slices.Index(names, MetricSuccess); j >= 0 {
		a, b := as[j], refs[j]
		for i := range a {
			switch {
			case a[i] > b[i]:
				c.Wins++
			case a[i] < b[i]:
				c.Losses++
			default:
				c.Ties++
			}
		}
	}
	type key struct {
		task   string
		sample int
	}
	refOK := map[key]bool{}
	for _, o := range r.Outcomes {
		if o.Candidate == ref {
			refOK[key{o.Task, o.Sample}] = o.Success
		}
	}
	for _, o := range r.Outcomes {
		if o.Candidate != cand {
			continue
		}
		switch rs := refOK[key{o.Task, o.Sample}]; {
		case o.Success && !rs:
			c.McNemar.B++
		case !o.Success && rs:
			c.McNemar.C++
		}
	}
	c.McNemar.P = McNemarExact(c.McNemar.B, c.McNemar.C)
	c.McNemar.PHolm = c.McNemar.P
	return c
}

// byLength groups the indexes of xss by the length of their slice, in
// order of first appearance: the metrics one bootstrap draw can serve
// (agreement has a value per replayed request, the others per task).
func byLength(xss [][]float64) [][]int {
	var groups [][]int
	at := map[int]int{}
	for i, xs := range xss {
		g, ok := at[len(xs)]
		if !ok {
			g = len(groups)
			at[len(xs)] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// pick returns xss at the indexes of g.
func pick(xss [][]float64, g []int) [][]float64 {
	out := make([][]float64, len(g))
	for k, i := range g {
		out[k] = xss[i]
	}
	return out
}

// Arm returns the named candidate's results.
func (s Summary) Arm(name string) (Arm, bool) {
	for _, a := range s.Candidates {
		if a.Name == name {
			return a, true
		}
	}
	return Arm{}, false
}

// Arm returns the named candidate's results.
func (r *Result) Arm(name string) (Arm, bool) { return r.Summary.Arm(name) }

func (r *Result) write() error {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("eval dir: %w", err)
	}
	var b strings.Builder
	for _, o := range r.Outcomes {
		line, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode outcome: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := atomicfile.WriteFile(filepath.Join(r.Dir, OutcomesFile), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := rollout.WriteJSON(filepath.Join(r.Dir, ComparisonsFile), r.Comparisons); err != nil {
		return err
	}
	if r.Summary.Replay != nil {
		if err := writeReplay(r.Dir, r.Replay); err != nil {
			return err
		}
	}
	// summary.json last: its presence marks a complete evaluation.
	return rollout.WriteJSON(filepath.Join(r.Dir, SummaryFile), r.Summary)
}

// ErrNotEval marks a directory that holds no finished evaluation.
var ErrNotEval = errors.New("not an evaluation directory")

// Load reads a finished evaluation back from dir. Errors name the file
// and, for outcomes, the line.
func Load(dir string) (*Result, error) {
	r := &Result{Dir: dir}
	path := filepath.Join(dir, SummaryFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (no %s; run optimize eval --out %s first)", dir, ErrNotEval, SummaryFile, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &r.Summary); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Summary.Tasks) == 0 || len(r.Summary.Candidates) == 0 {
		return nil, fmt.Errorf("%s: %w (no tasks or no candidates)", path, ErrNotEval)
	}
	path = filepath.Join(dir, OutcomesFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotEval, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	tasks := map[string]bool{}
	for _, t := range r.Summary.Tasks {
		tasks[t] = true
	}
	for n := 1; sc.Scan(); n++ {
		var o Outcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if _, ok := r.Arm(o.Candidate); !ok || !tasks[o.Task] {
			return nil, fmt.Errorf("%s:%d: outcome of candidate %q, task %q is not in %s", path, n, o.Candidate, o.Task, SummaryFile)
		}
		r.Outcomes = append(r.Outcomes, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if want := len(r.Summary.Tasks) * len(r.Summary.Candidates) * max(r.Summary.Samples, 1); len(r.Outcomes) != want {
		return nil, fmt.Errorf("%s holds %d outcomes, want %d (tasks × candidates × samples); the evaluation is incomplete", path, len(r.Outcomes), want)
	}
	b, err = os.ReadFile(filepath.Join(dir, ComparisonsFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ComparisonsFile, err)
	}
	if err := json.Unmarshal(b, &r.Comparisons); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ComparisonsFile), err)
	}
	if r.Summary.Replay != nil {
		if r.Replay, err = readReplay(dir); err != nil {
			return nil, err
		}
	}
	return r, nil
}
