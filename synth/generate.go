package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sourcegraph/conc/stream"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/internal/splitmix"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// Domain is a kind of work workflows are generated in.
type Domain struct {
	Name string
	// Description tells the generator what workflows of the domain are.
	Description string
}

// Domains are the built-in domains (PAACE's OfficeBench-like office work,
// multi-objective QA, and report extraction).
var Domains = []Domain{
	{"office", "office work over email, calendar and files: the input is a mailbox, calendar entries and file listings; the steps find meetings, rooms, people, files and deadlines"},
	{"research-qa", "research question answering: the input is a set of retrieved passages; each step answers one sub-question whose answer a later step or the final answer needs"},
	{"report-extraction", "extracting a report from records: the input is a dump of business records; the steps pick out the fields of the records the report is about"},
}

// DomainNames lists the names of Domains.
func DomainNames() []string {
	out := make([]string, len(Domains))
	for i, d := range Domains {
		out[i] = d.Name
	}
	return out
}

func domainByName(name string) (Domain, bool) {
	for _, d := range Domains {
		if d.Name == name {
			return d, true
		}
	}
	return Domain{}, false
}

// Range is a closed interval a setting is drawn from.
type Range[T int | float64] struct {
	Min T `yaml:"min" json:"min"`
	Max T `yaml:"max" json:"max"`
}

// Settings are the job file's synth section.
type Settings struct {
	// Domains are drawn from uniformly; empty: all of Domains.
	Domains []string `yaml:"domains" json:"domains"`
	// Steps is the plan length |Π|.
	Steps Range[int] `yaml:"steps" json:"steps"`
	// Noise is the share of the input's lines that are irrelevant or
	// redundant.
	Noise Range[float64] `yaml:"noise" json:"noise"`
	// Accept and Evolve configure optimize synth run and evolve; they are
	// no generation settings, so generate.json leaves them out.
	Accept AcceptSettings `yaml:"accept" json:"-"`
	Evolve EvolveSettings `yaml:"evolve" json:"-"`
	// Limits bound what optimize synth run and evolve read.
	Limits `yaml:",inline" json:"-"`
}

// Limits bound a workflows file (README's Limits): beyond them run and
// evolve refuse it (exit 2) before executing anything.
type Limits struct {
	// MaxPlanSteps bounds one workflow's plan.
	MaxPlanSteps int `yaml:"max_plan_steps"`
	// MaxWorkflows bounds the workflows of one file (run's --limit reads
	// fewer).
	MaxWorkflows int `yaml:"max_workflows"`
}

// Default limits of a workflows file.
const (
	DefaultMaxPlanSteps = 256
	DefaultMaxWorkflows = 1_000_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxPlanSteps == 0 {
		l.MaxPlanSteps = DefaultMaxPlanSteps
	}
	if l.MaxWorkflows == 0 {
		l.MaxWorkflows = DefaultMaxWorkflows
	}
	return l
}

// Defaults of Settings.
var (
	DefaultSteps = Range[int]{Min: 3, Max: 6}
	DefaultNoise = Range[float64]{Min: 0.3, Max: 0.7}
)

// WithDefaults fills the settings left out.
func (s Settings) WithDefaults() Settings {
	if len(s.Domains) == 0 {
		s.Domains = DomainNames()
	}
	if s.Steps == (Range[int]{}) {
		s.Steps = DefaultSteps
	}
	if s.Noise == (Range[float64]{}) {
		s.Noise = DefaultNoise
	}
	if s.Accept.Threshold == nil {
		v := DefaultThreshold
		s.Accept.Threshold = &v
	}
	s.Evolve = s.Evolve.withDefaults()
	s.Limits = s.Limits.withDefaults()
	return s
}

// maxSteps bounds a plan's length: beyond it a setting is a typo.
const maxSteps = 64

// Problems lists the invalid settings, by their job-file names under synth.
func (s Settings) Problems() []Problem {
	var ps []Problem
	if s.Steps.Min < 1 || s.Steps.Min > maxSteps {
		ps = append(ps, Problem{"steps.min", fmt.Sprintf("%d is out of range; want 1 to %d", s.Steps.Min, maxSteps)})
	}
	if s.Steps.Max < s.Steps.Min || s.Steps.Max > maxSteps {
		ps = append(ps, Problem{"steps.max", fmt.Sprintf("%d is out of range; want steps.min (%d) to %d", s.Steps.Max, s.Steps.Min, maxSteps)})
	}
	if !(s.Noise.Min >= 0 && s.Noise.Min < 1) {
		ps = append(ps, Problem{"noise.min", fmt.Sprintf("%v is not a share; want 0 ≤ min < 1", s.Noise.Min)})
	}
	if !(s.Noise.Max >= s.Noise.Min && s.Noise.Max < 1) {
		ps = append(ps, Problem{"noise.max", fmt.Sprintf("%v is out of range; want noise.min (%v) ≤ max < 1", s.Noise.Max, s.Noise.Min)})
	}
	if len(s.Domains) == 0 {
		ps = append(ps, Problem{"domains", "empty; want some of " + strings.Join(DomainNames(), ", ")})
	}
	if t := s.Accept.Threshold; t != nil && !(*t >= 0) {
		ps = append(ps, Problem{"accept.threshold", fmt.Sprintf("%v: want a cosine similarity of at least 0 (above 1 accepts nothing)", *t)})
	}
	ps = append(ps, s.Evolve.problems()...)
	if s.MaxPlanSteps < 0 {
		ps = append(ps, Problem{"max_plan_steps", fmt.Sprintf("%d is negative; want a positive limit (0: %d)", s.MaxPlanSteps, DefaultMaxPlanSteps)})
	}
	if s.MaxWorkflows < 0 {
		ps = append(ps, Problem{"max_workflows", fmt.Sprintf("%d is negative; want a positive limit (0: %d)", s.MaxWorkflows, DefaultMaxWorkflows)})
	}
	for i, d := range s.Domains {
		if _, ok := domainByName(d); !ok {
			ps = append(ps, Problem{fmt.Sprintf("domains[%d]", i), fmt.Sprintf("unknown domain %q; want one of %s", d, strings.Join(DomainNames(), ", "))})
		}
	}
	return ps
}

// GenerateConfig says what to generate. Each workflow's domain, plan length
// and noise level are drawn from Seed and its index alone, so a resumed run
// asks for what an uninterrupted one would have.
type GenerateConfig struct {
	// Count is left out of generate.json: a re-run may ask for more.
	Count    int `json:"-"`
	Seed     int `json:"seed"`
	Settings `json:"settings"`
	// Models identifies the generator's endpoint (model, address,
	// sampling settings, the embedded model's version), as whoever built
	// the generator from a configuration knows it: a directory generated
	// by another is not resumed.
	Models string `json:"models,omitempty"`
	// Concurrency bounds the workflows generated at once.
	Concurrency int `json:"-"`
}

// Files of a generation directory.
const (
	WorkflowsFile = "workflows.jsonl"
	RejectedFile  = "rejected.jsonl"
	SettingsFile  = "generate.json"
	SummaryFile   = "summary.json"
)

// Rejection reasons.
const (
	RejectInvalid   = "invalid"   // failed the schema or the plan check, after one repair
	RejectDuplicate = "duplicate" // same plan and input as an earlier workflow, up to whitespace
)

// ErrForeignDir marks an output directory that holds something other
// than a generation with the same settings.
var ErrForeignDir = errors.New("output directory holds another generation")

// Rejected is one line of rejected.jsonl.
type Rejected struct {
	Index  int    `json:"index"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Reply is the generator's last reply, cut to a few KB.
	Reply string `json:"reply,omitempty"`
}

// GenerateSummary counts what a generation directory holds.
type GenerateSummary struct {
	Requested int            `json:"requested"`
	Generated int            `json:"generated"`
	Rejected  map[string]int `json:"rejected"`
	ByDomain  map[string]int `json:"by_domain"`
	// Resumed is the index this invocation started at.
	Resumed int `json:"resumed"`
	// ThisRun counts the work of this invocation only.
	ThisRun RunStats `json:"this_run"`
	// Usage is the generator's calls, tokens and cost over every
	// invocation that finished (an invocation killed part way writes no
	// summary, so its calls are not counted).
	Usage RoleUsage `json:"generator_usage"`
}

// RunStats counts one invocation's generator calls.
type RunStats struct {
	// Repaired counts the workflows that needed the repair call.
	Repaired  int `json:"repaired"`
	Calls     int `json:"generator_calls"`
	TokensIn  int `json:"generator_tokens_in"`
	TokensOut int `json:"generator_tokens_out"`
}

// Completer is the generator role's endpoint (an llm.Client).
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Template variables of the generation and repair prompts.
const (
	VarID          = "id"
	VarDomain      = "domain"
	VarDescription = "description"
	VarSteps       = "steps"
	VarNoise       = "noise"
	VarSchema      = "schema"
	VarReply       = "reply"
	VarProblems    = "problems"
)

// Prompt templates.
const (
	generateTemplate = "synth_generate.tmpl"
	repairTemplate   = "synth_repair.tmpl"
)

// replyLimit bounds the reply kept with a rejection.
const replyLimit = 4 << 10

// Validate reports the problems of cfg, naming the settings.
func (c GenerateConfig) Validate() error {
	ps := c.Problems()
	if c.Count < 1 {
		ps = append([]Problem{{"count", fmt.Sprintf("%d: want at least 1", c.Count)}}, ps...)
	}
	if len(ps) == 0 {
		return nil
	}
	return &InvalidError{What: "generation settings", Problems: ps}
}

// request is what workflow index asks the generator for.
type request struct {
	index  int
	id     string
	domain Domain
	steps  int
	noise  float64
}

func (c GenerateConfig) request(i int) request {
	r := splitmix.New(uint64(c.Seed)*0x9e3779b97f4a7c15 ^ uint64(i))
	d, _ := domainByName(c.Domains[r.Intn(len(c.Domains))])
	noise := c.Noise.Min + (c.Noise.Max-c.Noise.Min)*float64(r.Intn(1001))/1000
	return request{
		index:  i,
		id:     fmt.Sprintf("wf-%06d", i),
		domain: d,
		steps:  r.Between(c.Steps.Min, c.Steps.Max),
		// Two decimals keep the prompt, and so the cache key, short and stable.
		noise: float64(int(noise*100+0.5)) / 100,
	}
}

// outcome is the result of one index: a workflow or a rejection.
type outcome struct {
	w        *Workflow
	repaired bool
	rej      *Rejected
	usage    llm.Usage
	cost     float64
	calls    int
	err      error
}

// Generate writes cfg.Count workflows' outcomes into dir: valid ones to
// workflows.jsonl, the others to rejected.jsonl with their reason. It
// resumes a directory a previous run left, continuing after the last
// complete line. Memory stays flat: only a hash per kept workflow is held.
func Generate(ctx context.Context, gen Completer, cfg GenerateConfig, dir string) (GenerateSummary, error) {
	if err := cfg.Validate(); err != nil {
		return GenerateSummary{}, err
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return GenerateSummary{}, fmt.Errorf("generate: %w", err)
	}
	if err := checkSettings(dir, SettingsFile, cfg); err != nil {
		return GenerateSummary{}, err
	}
	sum := GenerateSummary{Requested: cfg.Count, Rejected: map[string]int{}, ByDomain: map[string]int{}}
	seen := map[uint64]string{}
	next := 0
	wf, err := openResumed(filepath.Join(dir, WorkflowsFile), func(line []byte) error {
		w, err := Parse(line)
		if err != nil {
			return err
		}
		i, err := strconv.Atoi(strings.TrimPrefix(w.ID, "wf-"))
		if err != nil {
			return fmt.Errorf("id %q is not one this command writes", w.ID)
		}
		next = max(next, i+1)
		seen[dedupKey(&w)] = w.ID
		sum.Generated++
		sum.ByDomain[w.Domain]++
		return nil
	})
	if err != nil {
		return sum, err
	}
	defer wf.Close()
	rf, err := openResumed(filepath.Join(dir, RejectedFile), func(line []byte) error {
		var r Rejected
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		next = max(next, r.Index+1)
		sum.Rejected[r.Reason]++
		return nil
	})
	if err != nil {
		return sum, err
	}
	defer rf.Close()
	sum.Resumed = next
	var prev GenerateSummary
	if b, err := os.ReadFile(filepath.Join(dir, SummaryFile)); err == nil && json.Unmarshal(b, &prev) == nil {
		sum.Usage = prev.Usage
	}

	prog := progress.New("generate workflows", max(cfg.Count-next, 0))
	defer prog.Finish()
	s := stream.New().WithMaxGoroutines(cfg.Concurrency)
	var firstErr error
	for i := next; i < cfg.Count; i++ {
		req := cfg.request(i)
		s.Go(func() stream.Callback {
			var o outcome
			if ctx.Err() == nil {
				o = generateOne(ctx, gen, req)
			} else {
				o.err = ctx.Err()
			}
			return func() {
				if firstErr != nil {
					return
				}
				if o.err != nil {
					firstErr = o.err
					return
				}
				firstErr = record(wf, rf, &o, seen, &sum, req)
				prog.Add(1)
			}
		})
	}
	s.Wait()
	if firstErr != nil {
		return sum, firstErr
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return sum, err
	}
	return sum, atomicfile.WriteFile(filepath.Join(dir, SummaryFile), append(b, '\n'), 0o644)
}

// record writes one outcome, in index order, dropping duplicates.
func record(wf, rf *os.File, o *outcome, seen map[uint64]string, sum *GenerateSummary, req request) error {
	sum.ThisRun.Calls += o.calls
	sum.ThisRun.TokensIn += o.usage.PromptTokens
	sum.ThisRun.TokensOut += o.usage.CompletionTokens
	sum.Usage.add(RoleUsage{Calls: o.calls, TokensIn: o.usage.PromptTokens, TokensOut: o.usage.CompletionTokens, CostUSD: o.cost})
	if o.w != nil {
		k := dedupKey(o.w)
		if first, dup := seen[k]; dup {
			o.rej = &Rejected{Index: req.index, ID: req.id, Reason: RejectDuplicate, Detail: "same plan and input as " + first}
		} else {
			seen[k] = o.w.ID
			if err := writeLine(wf, o.w); err != nil {
				return err
			}
			sum.Generated++
			sum.ByDomain[o.w.Domain]++
			if o.repaired {
				sum.ThisRun.Repaired++
			}
			return nil
		}
	}
	sum.Rejected[o.rej.Reason]++
	return writeLine(rf, o.rej)
}

// generateOne asks for workflow req, and once more with the problems when
// the reply is not a valid workflow.
func generateOne(ctx context.Context, gen Completer, req request) outcome {
	var o outcome
	vars := map[string]any{
		VarID: req.id, VarDomain: req.domain.Name, VarDescription: req.domain.Description,
		VarSteps: req.steps, VarNoise: strconv.FormatFloat(req.noise, 'f', 2, 64), VarSchema: string(SchemaJSON),
	}
	prompt, err := templates.Render(generateTemplate, vars)
	if err != nil {
		o.err = err
		return o
	}
	msgs := []llm.Message{{Role: "user", Content: prompt}}
	for attempt := 0; ; attempt++ {
		resp, err := gen.Complete(ctx, llm.Request{Purpose: llm.PurposeGenerator, Messages: msgs})
		if err != nil {
			o.err = fmt.Errorf("generate %s: %w", req.id, err)
			return o
		}
		o.calls++
		o.usage.PromptTokens += resp.Usage.PromptTokens
		o.usage.CompletionTokens += resp.Usage.CompletionTokens
		o.cost += costOf(gen, resp.Usage)
		reply := resp.Message.Content
		w, err := Parse(stripFence(reply))
		var inv *InvalidError
		switch {
		case err == nil:
			// The id and domain are assigned, not generated.
			w.ID, w.Domain = req.id, req.domain.Name
			o.w, o.repaired = &w, attempt > 0
			return o
		case !errors.As(err, &inv):
			o.err = fmt.Errorf("generate %s: %w", req.id, err)
			return o
		case attempt > 0:
			o.rej = &Rejected{Index: req.index, ID: req.id, Reason: RejectInvalid, Detail: inv.Error(), Reply: cut(reply, replyLimit)}
			return o
		}
		vars[VarReply], vars[VarProblems] = reply, problemLines(inv)
		repair, err := templates.Render(repairTemplate, vars)
		if err != nil {
			o.err = err
			return o
		}
		msgs = []llm.Message{{Role: "user", Content: repair}}
	}
}

func problemLines(inv *InvalidError) []string {
	out := make([]string, len(inv.Problems))
	for i, p := range inv.Problems {
		out[i] = p.String()
	}
	return out
}

// stripFence removes a Markdown code fence around a reply, which chat
// models add although told not to.
func stripFence(s string) []byte {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSuffix(t, "```")
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		} else {
			t = strings.TrimPrefix(t, "```")
		}
	}
	return []byte(t)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// dedupKey hashes the plan (its instructions in order) and the input, with
// runs of white space made one blank.
func dedupKey(w *Workflow) uint64 {
	h := fnv.New64a()
	for i := range w.Plan {
		h.Write([]byte(strings.Join(strings.Fields(w.Instruction(i).Text), " ")))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	h.Write([]byte(strings.Join(strings.Fields(w.Input), " ")))
	return h.Sum64()
}

func writeLine(f *os.File, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// One write per line: a kill leaves at most a torn last line, which the
	// next run cuts off (openResumed).
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return nil
}

// openResumed opens path for appending after reading each line of what a
// previous run wrote through read. A torn last line (the previous run was
// killed mid-write; jsonl.Torn) is left out with a warning and cut off; a
// last line that is whole but lacks its newline is read and ended.
func openResumed(path string, read func(line []byte) error) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := readResumed(f, path, read); err != nil {
		f.Close()
		return nil, err
	}
	// Mend leaves the offset at the end, where appends go.
	if _, _, err := jsonl.Mend(f, jsonl.Limits{}); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func readResumed(f *os.File, path string, read func(line []byte) error) error {
	rd := jsonl.NewReader(f, path, jsonl.Limits{})
	for line, err := range rd.All() {
		if err != nil {
			return err
		}
		if err := read(line); err != nil {
			if rd.SkipTorn(err) {
				return nil
			}
			return fmt.Errorf("%w: %s:%d: %w (the file was not written by optimize synth; use another --out)", ErrForeignDir, path, rd.Line(), err)
		}
	}
	return nil
}

// checkSettings records cfg in dir's file on the first run and refuses to
// resume a directory made with other settings.
func checkSettings(dir, file string, cfg any) error {
	path := filepath.Join(dir, file)
	want, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	want = append(want, '\n')
	got, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return atomicfile.WriteFile(path, want, 0o644)
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	case !bytes.Equal(got, want):
		return fmt.Errorf("%w: %s was made with other settings (see its %s); use another --out or the same job", ErrForeignDir, dir, file)
	}
	return nil
}
