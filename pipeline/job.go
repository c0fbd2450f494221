// Package pipeline reads job specs, prepares what a job needs (models,
// environment, cache) and runs the stages of a job in its run directory.
package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/bytesize"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/yamlpos"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/synth"
)

// Embedded is the base_url value that selects the embedded offline model.
const Embedded = embedded.BaseURL

// Job is the job spec (YAML). Unknown keys are errors.
type Job struct {
	Name        string          `yaml:"name" json:"name"`
	Seed        int             `yaml:"seed" json:"seed"`
	Env         EnvSpec         `yaml:"env" json:"env"`
	Embedded    embedded.Config `yaml:"embedded" json:"embedded"`
	Roles       Roles           `yaml:"roles" json:"roles"`
	Compression CompressionSpec `yaml:"compression" json:"compression"`
	Rollout     RolloutSpec     `yaml:"rollout" json:"rollout"`
	Optimize    OptimizeSpec    `yaml:"optimize" json:"optimize"`
	// Optimizer chooses ACON (the default) or ACE; ACE reads the ace
	// section.
	Optimizer string      `yaml:"optimizer" json:"optimizer"`
	ACE       ACESpec     `yaml:"ace,omitempty" json:"ace"`
	Budget    Budget      `yaml:"budget" json:"budget"`
	Cache     CacheSpec   `yaml:"cache" json:"cache"`
	Eval      EvalSpec    `yaml:"eval" json:"eval"`
	Distill   DistillSpec `yaml:"distill" json:"distill"`
	// Synth configures PAACE-Syn (optimize synth).
	Synth  synth.Settings    `yaml:"synth" json:"synth"`
	Labels map[string]string `yaml:"labels" json:"labels,omitempty"`
	// Sources are rollout directories of imported logs (optimize import)
	// mined for feedback alongside the job's own rollouts.
	Sources []string `yaml:"sources" json:"sources,omitempty"`
	// Engine is where the rollouts run (engine.go); left out, in process.
	Engine EngineSpec `yaml:"engine,omitempty" json:"engine,omitzero"`

	// keys holds where each key of the job file is, so that problems name
	// their line and an explicit 0 is told from a key left out.
	keys yamlpos.Keys
}

// EnvSpec selects and configures the environment.
type EnvSpec struct {
	Name string `yaml:"name" json:"name"`
	// Dataset is a directory with the environment's files; empty uses the
	// bundled dataset.
	Dataset    string `yaml:"dataset" json:"dataset"`
	TopK       int    `yaml:"top_k" json:"top_k"`
	StepLimit  int    `yaml:"step_limit" json:"step_limit"`
	TrainLimit int    `yaml:"train_limit" json:"train_limit"`
	TestLimit  int    `yaml:"test_limit" json:"test_limit"`
	// HTTP configures the external environment (name http).
	HTTP *env.HTTPConfig `yaml:"http" json:"http,omitempty"`
	// QuestionsPerTask > 0 selects qa's long-horizon variant: tasks of this
	// many questions answered one at a time (e.g. 64, with a step limit in
	// the hundreds).
	QuestionsPerTask int `yaml:"questions_per_task" json:"questions_per_task,omitempty"`
	// SearchBudget > 0 caps qa's searches per task, as a metered search API
	// does, so re-finding a fact the context lost costs something.
	SearchBudget int `yaml:"search_budget" json:"search_budget,omitempty"`
	// MaxLineBytes and MaxFileBytes bound each dataset line and file
	// (0: env.DefaultLimits), so a broken file fails fast instead of
	// exhausting memory.
	MaxLineBytes int64 `yaml:"max_line_bytes" json:"max_line_bytes,omitempty"`
	MaxFileBytes int64 `yaml:"max_file_bytes" json:"max_file_bytes,omitempty"`
}

// DatasetLimits are the limits the job puts on its dataset's files.
func (e EnvSpec) DatasetLimits() jsonl.Limits {
	return jsonl.Limits{Line: e.MaxLineBytes, File: e.MaxFileBytes, LineSetting: "env.max_line_bytes in the job file", FileSetting: "env.max_file_bytes in the job file"}
}

// Environment names.
const (
	EnvQA     = "qa"
	EnvOffice = "office"
	EnvHTTP   = "http"
)

// Roles configures one endpoint per role.
type Roles struct {
	Agent      llm.RoleConfig `yaml:"agent" json:"agent"`
	Compressor llm.RoleConfig `yaml:"compressor" json:"compressor"`
	Optimizer  llm.RoleConfig `yaml:"optimizer" json:"optimizer"`
	Judge      llm.RoleConfig `yaml:"judge" json:"judge"`
	Embedder   llm.RoleConfig `yaml:"embedder" json:"embedder"`
	// Generator writes synthetic workflows (optimize synth generate).
	Generator llm.RoleConfig `yaml:"generator" json:"generator"`
	// Reflector and Curator play the ACE optimizer's roles; unset, they
	// take the optimizer's endpoint (llm.FallbackRole).
	Reflector llm.RoleConfig `yaml:"reflector" json:"reflector"`
	Curator   llm.RoleConfig `yaml:"curator" json:"curator"`
}

// each calls f with every role's name and configuration, in llm.Roles'
// order.
func (r *Roles) each(f func(name string, c *llm.RoleConfig) error) error {
	for _, name := range llm.Roles() {
		if err := f(name, r.get(name)); err != nil {
			return err
		}
	}
	return nil
}

// get returns the role named name: the field whose YAML key it is (a test
// checks every role has one).
func (r *Roles) get(name string) *llm.RoleConfig {
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); key == name {
			return v.Field(i).Addr().Interface().(*llm.RoleConfig)
		}
	}
	return nil
}

// CompressionSpec says what is compressed and when (ACON 3.2, D.3).
type CompressionSpec struct {
	History     Threshold
	Observation Threshold
	// Params are the default strategy and the registered strategies' own
	// parameters, each under its key (fifo_keep, retrieval, pace, ...).
	compress.Params
}

// thresholds are the keys of the compression section that the job owns.
type thresholds struct {
	History     Threshold `yaml:"history"`
	Observation Threshold `yaml:"observation"`
}

// UnmarshalYAML decodes the thresholds here and the strategies' keys
// through compress's registry, with the job decoder's strictness.
func (c *CompressionSpec) UnmarshalYAML(unmarshal func(any) error) error {
	var own thresholds
	if err := c.Params.Decode(unmarshal, &own); err != nil {
		return err
	}
	c.History, c.Observation = own.History, own.Observation
	return nil
}

// MarshalYAML writes the section under the keys it is read from.
func (c CompressionSpec) MarshalYAML() (any, error) {
	return c.Params.Encode(thresholds{c.History, c.Observation}), nil
}

// Threshold enables one kind of compression above a token threshold.
type Threshold struct {
	Enabled   bool `yaml:"enabled" json:"enabled"`
	Threshold int  `yaml:"threshold" json:"threshold"`
	// Guideline is the starting guideline file; empty uses the built-in
	// naive prompt (ACON G.5 / G.8, in our words).
	Guideline string `yaml:"guideline" json:"guideline,omitempty"`
}

// RolloutSpec tunes rollouts.
type RolloutSpec struct {
	Concurrency int `yaml:"concurrency" json:"concurrency"`
	// ContextWindow is the agent's context window in tokens: a prompt
	// larger than it ends the task as a context overflow. 0: unlimited.
	ContextWindow int `yaml:"context_window" json:"context_window,omitempty"`
	// Patience is how long a command keeps retrying the work an unavailable
	// endpoint left unfinished, with growing back-off, without getting any
	// further, before it gives up (exit 4). 0 gives up at once.
	Patience time.Duration `yaml:"patience" json:"patience"`
}

// DefaultPatience rides out an endpoint's restart or a burst of rate
// limits without holding a nightly job for long.
const DefaultPatience = 2 * time.Minute

// OptimizeSpec holds Algorithm 1's hyper-parameters.
type OptimizeSpec struct {
	Rounds     int     `yaml:"rounds" json:"rounds"`
	Candidates int     `yaml:"candidates" json:"candidates"`
	StepRatio  float64 `yaml:"step_ratio" json:"step_ratio"`
	Lambda     float64 `yaml:"lambda" json:"lambda"`
	// FeedbackSample is how many feedback records each candidate sees.
	FeedbackSample int `yaml:"feedback_sample" json:"feedback_sample"`
	// SelectionTasks caps the tasks each candidate is rolled out on (0: all).
	SelectionTasks int `yaml:"selection_tasks" json:"selection_tasks"`
	// COHoldout is the share of the train split held out to select CO
	// candidates.
	COHoldout float64 `yaml:"co_holdout" json:"co_holdout"`
	// UTHoldout is the share of the baseline's successes held out to
	// select UT candidates; UT's feedback comes from the rest only.
	UTHoldout float64 `yaml:"ut_holdout" json:"ut_holdout"`
	// Selection says what a step takes when no candidate beats its
	// parent: keep-parent keeps the parent, argmax takes the best
	// candidate anyway (ACON's Algorithm 1).
	Selection string `yaml:"selection" json:"selection"`
	// SkipFIFO leaves the FIFO baseline out of the train split's
	// rollouts. It is a reference row in the report and no step reads it,
	// so a job on a slow or paid endpoint can spare its calls.
	SkipFIFO bool `yaml:"skip_fifo" json:"skip_fifo,omitempty"`
}

// Budget stops a job cleanly when reached; zero means unlimited.
type Budget struct {
	LLMCalls int     `yaml:"llm_calls" json:"llm_calls"`
	Tokens   int     `yaml:"tokens" json:"tokens"`
	USD      float64 `yaml:"usd" json:"usd"`
}

// CacheSpec places the response cache.
type CacheSpec struct {
	// Path of the cache file; empty uses $CTXOPT_CACHE or the user cache dir.
	Path     string `yaml:"path" json:"path"`
	Disabled bool   `yaml:"disabled" json:"disabled"`
	// MaxSize bounds the cache file ("2GB", "10MB"); least recently used
	// entries are evicted. Empty: 2 GiB; "0": no bound.
	MaxSize string `yaml:"max_size" json:"max_size"`
	// StagesMaxSize bounds the stage store beside the cache file; at the
	// end of a run the least recently used entries the run did not use are
	// evicted. Empty: 10 GiB; "0": no bound.
	StagesMaxSize string `yaml:"stages_max_size" json:"stages_max_size"`
}

// DefaultStagesMaxBytes bounds the stage store when the job names no size.
const DefaultStagesMaxBytes = 10 << 30

// MaxBytes is the cache file's size bound in bytes (< 0: none).
func (c CacheSpec) MaxBytes() (int64, error) { return sizeBound(c.MaxSize, llm.DefaultCacheMaxBytes) }

// StagesMaxBytes is the stage store's size bound in bytes (< 0: none).
func (c CacheSpec) StagesMaxBytes() (int64, error) {
	return sizeBound(c.StagesMaxSize, DefaultStagesMaxBytes)
}

// sizeBound reads a size field: empty is def, "0" is no bound (-1).
func sizeBound(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	n, err := bytesize.Parse(s)
	if n == 0 && err == nil {
		return -1, nil
	}
	return n, err
}

// EvalSpec configures the final evaluation on the test split, which no
// selection ever sees.
type EvalSpec struct {
	Disabled bool `yaml:"disabled" json:"disabled"`
	// Gate are the rules (eval.ParseRule) the report's verdict judges the
	// selected guideline by, as optimize gate would; none: eval.DefaultRules.
	Gate []string `yaml:"gate" json:"gate,omitempty"`
}

// Rules parses Gate (checked by Validate).
func (e EvalSpec) Rules() []eval.Rule {
	out := make([]eval.Rule, 0, len(e.Gate))
	for _, s := range e.Gate {
		if r, err := eval.ParseRule(s); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// DistillSpec configures the dataset export stage.
type DistillSpec struct {
	Enabled            bool    `yaml:"enabled" json:"enabled"`
	ValidationFraction float64 `yaml:"validation_fraction" json:"validation_fraction"`
	MaxLength          int     `yaml:"max_length" json:"max_length"`
	RedactEmails       bool    `yaml:"redact_emails" json:"redact_emails"`
	// Synth are PAACE-Syn runs (directories written by optimize synth run,
	// or evolve's DIR/run) whose accepted workflows' compressions join the
	// export as rows of kind paace, as with optimize distill --synth.
	// Empty: the export holds the run's own rows only.
	Synth []string `yaml:"synth" json:"synth,omitempty"`
}

// ErrInvalidInput marks errors caused by what the user gave (job file,
// dataset, guideline files), as opposed to failures while running.
var ErrInvalidInput = errors.New("invalid input")

type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{ErrInvalidInput, e.err} }

// invalid marks err as the user's input's fault; its message is unchanged.
func invalid(err error) error { return inputError{err} }

// LoadJob reads and validates a job file.
func LoadJob(path string) (*Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	return ParseJob(path, b)
}

var yamlTypeRE = regexp.MustCompile(` in type (struct \{.*\}|[\w.]+)`)

// ParseJob decodes a job strictly (unknown keys are errors), applies the
// defaults and validates it. Each problem is one line naming the file, the
// line and the field.
func ParseJob(path string, data []byte) (*Job, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the job file is empty; start from jobs/demo.yaml", path)
	}
	if err := jsonl.CheckText(path, data); err != nil {
		return nil, invalid(err)
	}
	j := &Job{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(j); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the job file holds only comments; start from jobs/demo.yaml", path)
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
		msg = yamlTypeRE.ReplaceAllString(msg, "")
		return nil, fmt.Errorf("%s: %s (see jobs/demo.yaml for the known keys)", path, msg)
	}
	j.keys = yamlpos.Parse(data)
	j.applyDefaults()
	if errs := j.problems(); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, e := range errs {
			lines[i] = path + ": " + e.String()
		}
		return nil, invalid(errors.New(strings.Join(lines, "\n")))
	}
	return j, nil
}

func (j *Job) applyDefaults() {
	if j.Engine.Kind == EngineTemporal {
		j.Engine = j.Engine.WithDefaults()
	}
	if j.Name == "" {
		j.Name = "job"
	}
	if j.Seed == 0 {
		j.Seed = 42
	}
	if j.Env.Name == "" {
		j.Env.Name = EnvQA
	}
	if j.Env.TopK == 0 {
		j.Env.TopK = 3
	}
	if j.Env.StepLimit == 0 {
		j.Env.StepLimit = rollout.DefaultStepLimit
	}
	seed := j.Seed
	_ = j.Roles.each(func(name string, c *llm.RoleConfig) error {
		if from := llm.FallbackRole(name); from != "" && *c == (llm.RoleConfig{}) {
			*c = *j.Roles.get(from) // defaulted already: Roles lists it first
			return nil
		}
		if c.BaseURL == "" {
			c.BaseURL = Embedded
		}
		if c.Model == "" && c.BaseURL == Embedded {
			c.Model = "ctxopt-sim"
		}
		if c.Seed == nil {
			c.Seed = &seed
		}
		return nil
	})
	if j.Compression.History.Threshold == 0 {
		j.Compression.History.Threshold = compress.DefaultHistoryThreshold
	}
	if j.Compression.Observation.Threshold == 0 {
		j.Compression.Observation.Threshold = compress.DefaultObservationThreshold
	}
	if j.Rollout.Concurrency == 0 {
		j.Rollout.Concurrency = 8
	}
	if !j.has("rollout.patience") {
		j.Rollout.Patience = DefaultPatience
	}
	o := &j.Optimize
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Candidates == 0 {
		o.Candidates = 5
	}
	if o.StepRatio == 0 {
		o.StepRatio = 1.5
	}
	if o.FeedbackSample == 0 {
		o.FeedbackSample = 4
	}
	if o.COHoldout == 0 {
		o.COHoldout = 0.5
	}
	if o.UTHoldout == 0 {
		o.UTHoldout = 0.5
	}
	if o.Selection == "" {
		o.Selection = guideline.SelectKeepParent
	}
	if !j.has("distill.validation_fraction") {
		j.Distill.ValidationFraction = distill.DefaultValidationFraction
	}
	if j.Distill.MaxLength == 0 {
		j.Distill.MaxLength = 10000
	}
	j.Synth = j.Synth.WithDefaults()
	if j.Optimizer == "" {
		j.Optimizer = OptimizerACON
	}
	if j.ACE.Dedup == "" && !j.has("roles.embedder") {
		// No embedder configured: de-duplicate by word overlap.
		j.ACE.Dedup = DedupLexical
	}
	j.ACE = j.ACE.WithDefaults()
}

// Validate checks the values; each problem names its field, and its line
// when the job came from a file.
func (j *Job) Validate() error {
	var errs []error
	for _, p := range j.problems() {
		errs = append(errs, errors.New(p.String()))
	}
	return errors.Join(errs...)
}

// fieldProblem is one invalid value of a job.
type fieldProblem struct {
	line  int // 0 when unknown
	field string
	msg   string
}

func (p fieldProblem) String() string {
	if p.line > 0 {
		return fmt.Sprintf("line %d: field %s: %s", p.line, p.field, p.msg)
	}
	return fmt.Sprintf("field %s: %s", p.field, p.msg)
}

// line returns the line of field in the job file, or of its closest parent
// that is there.
func (j *Job) line(field string) int { return j.keys.Line(field) }

// has reports whether the job file sets field.
// Resolved is the job as `optimize run` records it in the run directory
// (JobFile), with every default filled in; ParseJob reads it back as the
// same job (workers and resumes read it). The ace section is left out of
// an ACON job, where it would be refused as misplaced.
func (j *Job) Resolved() ([]byte, error) {
	out := *j
	if out.Optimizer != OptimizerACE {
		out.ACE = ACESpec{}
	}
	b, err := yaml.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	return b, nil
}

func (j *Job) has(field string) bool { return j.keys.Has(field) }

// explicitZero reports whether the job file sets field to zero, which the
// defaults would otherwise hide.
func (j *Job) explicitZero(field string) bool { return j.keys.Zero(field) }

// requiredRoles are the roles a job file with a roles section must name:
// those optimize run calls whatever its settings (the agent acts, the
// compressor compresses, the optimizer writes guideline candidates). It
// only checks job files; reports name the roles a piece of work really
// called (roles.go).
var requiredRoles = []string{llm.RoleAgent, llm.RoleCompressor, llm.RoleOptimizer}

// Limits on counts: beyond them a job is a typo, not a plan.
const (
	maxTopK        = 100
	maxStepLimit   = 1000
	maxThreshold   = 1 << 20
	maxConcurrency = 1024
	maxRounds      = 20
	maxCandidates  = 50
	maxFeedback    = 1000
	maxLength      = 1 << 24
)

// httpProblems reports the external environment's configuration problems
// under their own fields.
func (j *Job) httpProblems(add func(field, format string, args ...any)) {
	if j.Env.HTTP == nil {
		add("env.http", "missing: env.name http needs the server's configuration (see docs/http-environment.md)")
		return
	}
	c, err := j.Env.HTTP.WithPreset()
	if err == nil {
		err = c.Validate()
	}
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		field, msg, ok := strings.Cut(strings.TrimPrefix(line, "field "), ": ")
		if !ok {
			field, msg = "env.http", line
		}
		add(field, "%s", msg)
	}
}

func (j *Job) problems() []fieldProblem {
	var out []fieldProblem
	add := func(field, format string, args ...any) {
		out = append(out, fieldProblem{j.line(field), field, fmt.Sprintf(format, args...)})
	}
	// count checks an integer that must lie in [lo, hi]; an explicit 0 is
	// reported even where 0 would otherwise mean the default.
	count := func(field string, v, lo, hi int) {
		if j.explicitZero(field) {
			v = 0
		}
		if v < lo || v > hi {
			add(field, "%d is out of range; want %d to %d", v, lo, hi)
		}
	}
	fraction := func(field string, v float64) {
		if j.explicitZero(field) {
			v = 0
		}
		if !(v > 0 && v < 1) {
			add(field, "%g is out of range; want a fraction between 0 and 1, exclusive", v)
		}
	}
	notNegative := func(field string, v float64) {
		if v < 0 {
			add(field, "%g is negative; want 0 or more", v)
		}
	}
	switch j.Env.Name {
	case EnvQA, EnvOffice:
		if j.Env.HTTP != nil {
			add("env.http", "goes with env.name http")
		}
	case EnvHTTP:
		j.httpProblems(add)
	default:
		add("env.name", "unknown environment %q; want qa or office (built in) or http (an environment server)", j.Env.Name)
	}
	for i, src := range j.Sources {
		if _, err := os.Stat(filepath.Join(src, rollout.TrajectoriesFile)); err != nil {
			add(fmt.Sprintf("sources[%d]", i), "%s holds no %s; give a directory written by optimize import", src, rollout.TrajectoriesFile)
		}
	}
	count("env.top_k", j.Env.TopK, 1, maxTopK)
	count("env.step_limit", j.Env.StepLimit, 1, maxStepLimit)
	notNegative("env.train_limit", float64(j.Env.TrainLimit))
	notNegative("env.test_limit", float64(j.Env.TestLimit))
	notNegative("env.questions_per_task", float64(j.Env.QuestionsPerTask))
	notNegative("env.search_budget", float64(j.Env.SearchBudget))
	notNegative("env.max_line_bytes", float64(j.Env.MaxLineBytes))
	notNegative("env.max_file_bytes", float64(j.Env.MaxFileBytes))
	count("compression.history.threshold", j.Compression.History.Threshold, 1, maxThreshold)
	count("compression.observation.threshold", j.Compression.Observation.Threshold, 1, maxThreshold)
	out = append(out, j.compressionProblems()...)
	count("rollout.concurrency", j.Rollout.Concurrency, 1, maxConcurrency)
	notNegative("rollout.context_window", float64(j.Rollout.ContextWindow))
	if j.Rollout.Patience < 0 {
		add("rollout.patience", "%s is negative; want a duration such as 5m (0 gives up at once)", j.Rollout.Patience)
	}
	o := j.Optimize
	count("optimize.rounds", o.Rounds, 1, maxRounds)
	count("optimize.candidates", o.Candidates, 1, maxCandidates)
	stepRatio := o.StepRatio
	if j.explicitZero("optimize.step_ratio") {
		stepRatio = 0
	}
	if stepRatio < 1 || stepRatio > 100 {
		add("optimize.step_ratio", "%g is out of range; want 1 to 100", stepRatio)
	}
	notNegative("optimize.lambda", o.Lambda)
	count("optimize.feedback_sample", o.FeedbackSample, 1, maxFeedback)
	notNegative("optimize.selection_tasks", float64(o.SelectionTasks))
	fraction("optimize.co_holdout", o.COHoldout)
	fraction("optimize.ut_holdout", o.UTHoldout)
	if o.Selection != guideline.SelectKeepParent && o.Selection != guideline.SelectArgmax {
		add("optimize.selection", "unknown rule %q; want %s or %s", o.Selection, guideline.SelectKeepParent, guideline.SelectArgmax)
	}
	notNegative("budget.llm_calls", float64(j.Budget.LLMCalls))
	notNegative("budget.tokens", float64(j.Budget.Tokens))
	notNegative("budget.usd", j.Budget.USD)
	if err := distill.CheckValidationFraction(j.Distill.ValidationFraction); err != nil {
		add("distill.validation_fraction", "%v", err)
	}
	if len(j.Distill.Synth) > 0 && !j.Distill.Enabled {
		add("distill.synth", "goes with distill.enabled: true (the export reads it)")
	}
	for i, dir := range j.Distill.Synth {
		if _, err := os.Stat(filepath.Join(dir, synth.ExecutionsFile)); err != nil {
			add(fmt.Sprintf("distill.synth[%d]", i), "%s holds no %s; give a directory written by optimize synth run (or evolve's DIR/run)", dir, synth.ExecutionsFile)
		}
	}
	count("distill.max_length", j.Distill.MaxLength, 1, maxLength)
	for i, r := range j.Eval.Gate {
		if _, err := eval.ParseRule(r); err != nil {
			add(fmt.Sprintf("eval.gate[%d]", i), "%v", err)
		}
	}
	if err := j.Embedded.Validate(); err != nil {
		add("embedded", "%v", err)
	}
	for _, b := range []struct {
		field, value string
		bytes        func() (int64, error)
	}{
		{"cache.max_size", j.Cache.MaxSize, j.Cache.MaxBytes},
		{"cache.stages_max_size", j.Cache.StagesMaxSize, j.Cache.StagesMaxBytes},
	} {
		if n, err := b.bytes(); err != nil {
			add(b.field, "%v", err)
		} else if n >= 0 && n < 1<<20 {
			add(b.field, "%s is under 1MB; want at least 1MB, or 0 for no bound", b.value)
		}
	}
	if p := j.Cache.Path; p != "" && !j.Cache.Disabled {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			add("cache.path", "%s is a directory; want the path of the cache file, e.g. %s", p, filepath.Join(p, "llm.db"))
		}
	}
	switch j.Optimizer {
	case OptimizerACON:
		if j.has("ace") {
			add("ace", "goes with optimizer: %s", OptimizerACE)
		}
	case OptimizerACE:
		for _, p := range j.ACE.Problems() {
			add("ace."+p.Field, "%s", p.Message)
		}
	default:
		add("optimizer", "unknown optimizer %q; want %s (whole-guideline rewrites) or %s (playbooks grown by delta operations)", j.Optimizer, OptimizerACON, OptimizerACE)
	}
	for _, p := range j.Engine.Problems() {
		add("engine."+p.Field, "%s", p.Message)
	}
	for _, p := range j.Synth.Problems() {
		field := "synth." + p.Field
		add(field, "%s", p.Message)
	}
	out = append(out, j.roleProblems()...)
	return out
}

// compressionProblems are the strategies' parameter problems: compress
// owns their rules and names each field; the job adds its line.
func (j *Job) compressionProblems() []fieldProblem {
	var out []fieldProblem
	var walk func(err error)
	walk = func(err error) {
		var fe *compress.FieldError
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				walk(e)
			}
		default:
			if !errors.As(err, &fe) {
				fe = &compress.FieldError{Field: compress.Section, Msg: err.Error()}
			}
			out = append(out, fieldProblem{j.line(fe.Field), fe.Field, fe.Msg})
		}
	}
	walk(j.Compression.Params.Validate())
	return out
}

func (j *Job) roleProblems() []fieldProblem {
	var out []fieldProblem
	add := func(field, format string, args ...any) {
		out = append(out, fieldProblem{j.line(field), field, fmt.Sprintf(format, args...)})
	}
	used := map[string]bool{}
	for _, r := range requiredRoles {
		used[r] = true
	}
	_ = j.Roles.each(func(name string, c *llm.RoleConfig) error {
		field := "roles." + name
		// Without a roles section every role is the embedded model; with
		// one, a role left out would silently fall back to it.
		if j.has("roles") && used[name] {
			switch {
			case !j.has(field):
				add(field, "missing; the job uses the %s role: give its base_url (embedded for the offline model) and model", name)
				return nil
			case !j.has(field + ".base_url"):
				add(field+".base_url", "missing; give an OpenAI-compatible API root, or embedded for the offline model")
				return nil
			}
		}
		v := *c
		if v.BaseURL == Embedded {
			v.BaseURL = "http://127.0.0.1/v1" // replaced by the server's address at start
		}
		for _, p := range v.Problems(field) {
			add(p.Field, "%s", p.Msg)
		}
		if w := j.Rollout.ContextWindow; w > 0 && name == llm.RoleAgent && c.MaxTokens >= w {
			add(field+".max_tokens", "%d is not below rollout.context_window (%d), the agent's context: lower max_tokens or raise rollout.context_window", c.MaxTokens, w)
		}
		if c.BaseURL == Embedded || !used[name] {
			return nil
		}
		switch {
		case c.NoKey && c.KeyEnv != "":
			add(field+".no_key", "true contradicts key_env %s; keep one", c.KeyEnv)
		case c.NoKey:
		case c.KeyEnv == "":
			add(field+".key_env", "missing; the endpoint would get no API key: set key_env to the variable that holds it, or no_key: true if the server needs none")
		case os.Getenv(c.KeyEnv) == "":
			add(field+".key_env", "variable %s is not set or empty; export it, or set no_key: true (and drop key_env) if the server needs no key", c.KeyEnv)
		}
		return nil
	})
	return out
}
