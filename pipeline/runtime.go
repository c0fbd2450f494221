package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/embedded"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/templates"
)

// Environment is what a job runs on: an environment that names the
// version of its tasks, so rollouts of another version are not reused.
type Environment interface {
	env.Environment
	env.Configured
	Version() string
}

// openEnv builds the environment the job names.
func openEnv(ctx context.Context, spec EnvSpec) (Environment, error) {
	switch spec.Name {
	case EnvHTTP:
		return env.NewHTTP(ctx, *spec.HTTP, redact.New(false))
	case EnvOffice:
		return env.NewOffice()
	}
	return env.NewQA(env.QAOptions{Dir: spec.Dataset, TopK: spec.TopK, QuestionsPerTask: spec.QuestionsPerTask, SearchBudget: spec.SearchBudget, Limits: spec.DatasetLimits()})
}

// Runtime is what a job runs with: one client per role, the environment,
// the response cache and, when a role asks for it, the embedded model.
type Runtime struct {
	Job        *Job
	Env        Environment
	Agent      *llm.Client
	Compressor *llm.Client
	Optimizer  *llm.Client
	Judge      *llm.Client
	Embedder   *llm.Client
	Generator  *llm.Client
	Reflector  *llm.Client
	Curator    *llm.Client
	Tokenizer  *llm.Tokenizer

	cache     *llm.Cache
	cacheLent bool // the cache is another runtime's (openRuntime)
	sim       *embedded.Server
	malformed *malformedLog
	roles     Roles // the job's, with the embedded model's address filled in
}

// Open prepares a runtime for job. Close releases it. Errors in what the
// job names (dataset, roles) are marked ErrInvalidInput; others (a locked
// cache, a port) are not.
func Open(ctx context.Context, job *Job) (*Runtime, error) {
	return openRuntime(ctx, job, nil)
}

// openRuntime is Open with the response cache given, when cache is not
// nil (a worker opens a runtime per stage of a run, and one process cannot
// open the cache's file twice): Close leaves it open.
func openRuntime(ctx context.Context, job *Job, cache *llm.Cache) (_ *Runtime, err error) {
	rt := &Runtime{Job: job, cache: cache, cacheLent: cache != nil}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	rt.Env, err = openEnv(ctx, job.Env)
	if err != nil {
		if errors.Is(err, llm.ErrUnavailable) {
			return nil, err
		}
		return nil, invalid(err)
	}
	rt.roles = job.Roles
	roles := &rt.roles
	err = roles.each(func(_ string, c *llm.RoleConfig) error { return rt.resolveEmbedded(ctx, c) })
	if err != nil {
		return nil, err
	}
	if !job.Cache.Disabled && rt.cache == nil {
		path := CachePath(job.Cache.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("cache dir: %w", err)
		}
		max, err := job.Cache.MaxBytes()
		if err != nil {
			return nil, invalid(err)
		}
		if rt.cache, err = llm.OpenCache(path, llm.CacheOptions{MaxBytes: max}); err != nil {
			return nil, err
		}
	}
	clients := map[string]**llm.Client{
		llm.RoleAgent: &rt.Agent, llm.RoleCompressor: &rt.Compressor, llm.RoleOptimizer: &rt.Optimizer,
		llm.RoleJudge: &rt.Judge, llm.RoleEmbedder: &rt.Embedder, llm.RoleGenerator: &rt.Generator,
		llm.RoleReflector: &rt.Reflector, llm.RoleCurator: &rt.Curator,
	}
	err = roles.each(func(name string, c *llm.RoleConfig) error {
		cl, err := llm.NewClient(name, *c, rt.cache)
		if err != nil {
			return invalid(fmt.Errorf("roles.%s: %w", name, err))
		}
		*clients[name] = cl
		return nil
	})
	if err != nil {
		return nil, err
	}
	rt.Tokenizer = rt.Agent.Tokenizer()
	return rt, nil
}

// resolveEmbedded points a role that asks for the embedded model at it,
// starting it on first use.
func (rt *Runtime) resolveEmbedded(ctx context.Context, c *llm.RoleConfig) error {
	if c.BaseURL != Embedded {
		return nil
	}
	if rt.sim == nil {
		s, err := embedded.Start(ctx, "127.0.0.1:0", rt.Job.Embedded)
		if err != nil {
			return fmt.Errorf("start embedded model: %w", err)
		}
		rt.sim = s
		slog.Debug("embedded model listening", "url", s.URL())
	}
	c.BaseURL = rt.sim.URL()
	// The version keeps answers cached by an older embedded model from
	// being served as this one's.
	c.CacheEndpoint = Embedded + ":" + embedded.ModelName + "@" + embedded.Version
	// The embedded model runs in this process for nothing: a job's prices
	// are for the real endpoint a role may point at instead.
	c.PriceIn, c.PriceOut = 0, 0
	return nil
}

// EmbeddedVersion is the version of the embedded model when a role uses
// it, else "".
func (rt *Runtime) EmbeddedVersion() string {
	if rt.sim == nil {
		return ""
	}
	return embedded.Version
}

// ModelInputs identify the models the job's roles reach beyond their
// names: each role's answer settings and, when the embedded model answers
// any role, its version and the settings that change its answers. Stage
// inputs use them, and rollout fingerprints (Agent.Models) the part a
// rollout calls, so work a model did is not reused once the model, its
// code or its sampling changed.
func (rt *Runtime) ModelInputs() any {
	return rt.modelInputs(rt.Job.Roles, func(string) bool { return true })
}

// rolloutRoles are the roles a rollout calls: the agent, and the
// compressor and embedder its strategy may call. A rollout does not
// depend on the others (a new optimizer re-runs no baseline).
var rolloutRoles = map[string]bool{llm.RoleAgent: true, llm.RoleCompressor: true, llm.RoleEmbedder: true}

// rolloutModels is Agent.Models of an agent whose compressor is
// configured as compressor (the job's, or an evaluation candidate's).
func (rt *Runtime) rolloutModels(compressor llm.RoleConfig) string {
	roles := rt.Job.Roles
	roles.Compressor = compressor
	return rt.modelsHash(roles, func(name string) bool { return rolloutRoles[name] })
}

// Models identifies the job's endpoints of the named roles beyond their
// model names (addresses, sampling settings, the embedded model's
// version): what a directory that records the settings of its work
// (synth's generate.json and run.json) names, so that work of other
// endpoints is neither resumed nor mixed in.
func (rt *Runtime) Models(roles ...string) string {
	return rt.modelsHash(rt.Job.Roles, func(name string) bool { return slices.Contains(roles, name) })
}

func (rt *Runtime) modelsHash(src Roles, used func(name string) bool) string {
	b, _ := json.Marshal(rt.modelInputs(src, used))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (rt *Runtime) modelInputs(src Roles, used func(name string) bool) any {
	roles := map[string]llm.RoleConfig{}
	_ = src.each(func(name string, c *llm.RoleConfig) error {
		if used(name) {
			roles[name] = c.AnswerSettings()
		}
		return nil
	})
	in := struct {
		Roles    map[string]llm.RoleConfig `json:"roles"`
		Version  string                    `json:"embedded_version,omitempty"`
		Embedded *embedded.Config          `json:"embedded,omitempty"`
	}{Roles: roles}
	if v := rt.EmbeddedVersion(); v != "" {
		a := rt.Job.Embedded.AnswerSettings()
		in.Version, in.Embedded = v, &a
	}
	return in
}

// CompressorAt returns a compressor client configured like the job's but
// pointed at baseURL ("embedded" for the embedded model) and model; empty
// values keep the job's. It shares the response cache.
func (rt *Runtime) CompressorAt(ctx context.Context, baseURL, model string) (*llm.Client, error) {
	c := rt.compressorRole(baseURL, model)
	if err := rt.resolveEmbedded(ctx, &c); err != nil {
		return nil, err
	}
	cl, err := llm.NewClient(llm.RoleCompressor, c, rt.cache)
	if err != nil {
		return nil, invalid(fmt.Errorf("compressor %s: %w", baseURL, err))
	}
	return cl, nil
}

// compressorRole is the job's compressor role pointed at baseURL and
// model (CompressorAt), before the embedded model's address is filled in.
func (rt *Runtime) compressorRole(baseURL, model string) llm.RoleConfig {
	c := rt.Job.Roles.Compressor
	if baseURL != "" {
		c.BaseURL = baseURL
		if baseURL == Embedded && model == "" {
			model = embedded.ModelName
		}
	}
	if model != "" {
		c.Model = model
	}
	return c
}

// CachePath resolves the response cache location: the job's path, else
// $CTXOPT_CACHE, else the user cache directory.
func CachePath(p string) string {
	if p != "" {
		return p
	}
	if p = os.Getenv("CTXOPT_CACHE"); p != "" {
		return p
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "ctxopt", "llm.db")
}

// Close stops the embedded model and closes the cache.
func (rt *Runtime) Close() error {
	var errs []error
	if rt.cache != nil && !rt.cacheLent {
		errs = append(errs, rt.cache.Close())
	}
	if rt.sim != nil {
		errs = append(errs, rt.sim.Close())
	}
	if rt.malformed != nil {
		errs = append(errs, rt.malformed.f.Close())
	}
	return errors.Join(errs...)
}

// Tasks returns the tasks of split, cut to the job's limit.
func (rt *Runtime) Tasks(split string) ([]env.Task, error) {
	ts, err := rt.Env.Tasks(split)
	if err != nil {
		return nil, err
	}
	limit := rt.Job.Env.TrainLimit
	if split == "test" {
		limit = rt.Job.Env.TestLimit
	}
	if limit > 0 && limit < len(ts) {
		ts = ts[:limit]
	}
	return ts, nil
}

// NewAgent returns an agent that compresses with s (nil: not at all).
func (rt *Runtime) NewAgent(s *compress.Strategy) *rollout.Agent {
	return &rollout.Agent{
		Env: rt.Env, Model: rt.Agent, Tokenizer: rt.Tokenizer,
		StepLimit: rt.Job.Env.StepLimit, Strategy: s, Window: rt.Job.Rollout.ContextWindow,
		Models: rt.rolloutModels(rt.Job.Roles.Compressor),
	}
}

// Runner returns a runner of agent (compressing with the job's
// compressor) with the job's concurrency.
func (rt *Runtime) Runner(agent *rollout.Agent, label string) *rollout.Runner {
	r := &rollout.Runner{Agent: agent, Concurrency: rt.Job.Rollout.Concurrency, Label: label}
	r.EmbeddedModel, r.EmbeddedRoles = report.Embedded(rt.agentUses(agent.Strategy, ""))
	return r
}

// Strategy builds strategy name from the job's compression section,
// wiring what its capabilities ask for: hist and obs for strategies that
// use guidelines (a kind the job does not enable stays off), compressor
// and embedder (the models as the caller meters them) for those that call
// them.
func (rt *Runtime) Strategy(name compress.Name, hist, obs *compress.Prompt, compressor compress.Completer, embedder compress.Embedder) (*compress.Strategy, error) {
	m, err := compress.Lookup(string(name))
	if err != nil {
		return nil, invalid(err)
	}
	c := rt.Job.Compression
	d := compress.Deps{
		Tokenizer:        rt.Tokenizer,
		HistoryThreshold: c.History.Threshold, ObservationThreshold: c.Observation.Threshold,
	}
	if m.Caps.Compressor {
		d.Compressor = compressor
	}
	if m.Caps.Embedder {
		d.Embedder = embedder
	}
	if rt.sim != nil {
		d.LinguaURL = rt.sim.LinguaURL()
	}
	if m.UsesGuidelines() {
		if c.History.Enabled {
			d.History = hist
		}
		if c.Observation.Enabled {
			d.Observation = obs
		}
	}
	s, err := compress.New(name, c.For(name), d)
	if err != nil {
		return nil, invalid(err)
	}
	return s, nil
}

// prompts are strategy name's built-in prompts by kind (nil for an
// unknown strategy, which Lookup reports where it is named).
func prompts(name compress.Name) map[string]string {
	m, _ := compress.Lookup(string(name))
	return m.Prompts
}

// takingGuidelines names the strategies that take a given guideline, for
// messages: "guideline or plan-aware".
func takingGuidelines() string {
	var names []string
	for _, m := range compress.Modules() {
		if g := m.Caps.Guideline; g == compress.OptionalGuideline || g == compress.RequiredGuideline {
			names = append(names, string(m.Name))
		}
	}
	return strings.Join(names, " or ")
}

// StrategyGuidelines compiles the guidelines strategy name needs for a
// rollout, as its capabilities say: its built-in prompts, or the given
// files where it takes them; nil for strategies without guidelines.
func StrategyGuidelines(job *Job, name compress.Name, histFile, obsFile string) (hist, obs *compress.Prompt, err error) {
	m, err := compress.Lookup(string(name))
	if err != nil {
		return nil, nil, err
	}
	given := histFile != "" || obsFile != ""
	switch m.Caps.Guideline {
	case compress.NoGuideline, compress.BuiltinGuideline:
		if given {
			return nil, nil, fmt.Errorf("--guideline goes with --strategy %s, not %s", takingGuidelines(), name)
		}
	case compress.RequiredGuideline:
		if !given {
			return nil, nil, fmt.Errorf("--strategy %s needs --guideline FILE or --observation-guideline FILE", name)
		}
	}
	if !m.UsesGuidelines() {
		return nil, nil, nil
	}
	if given {
		job.Compression.History.Guideline = histFile
		job.Compression.History.Enabled = histFile != ""
		job.Compression.Observation.Guideline = obsFile
		job.Compression.Observation.Enabled = obsFile != ""
	}
	if !job.Compression.History.Enabled && !job.Compression.Observation.Enabled {
		return nil, nil, fmt.Errorf("strategy %s compresses nothing: the job enables neither compression.history nor compression.observation", name)
	}
	if hist, err = startingCompiled(job, guideline.KindHistory, m.Prompts); err != nil {
		return nil, nil, err
	}
	if obs, err = startingCompiled(job, guideline.KindObservation, m.Prompts); err != nil {
		return nil, nil, err
	}
	return hist, obs, nil
}

// StartingGuideline returns the guideline a job starts from for kind: the
// file the job names, else the built-in naive prompt.
func StartingGuideline(job *Job, kind guideline.Kind) (src, origin string, err error) {
	return startingGuideline(job, kind, prompts(compress.Prompting))
}

func startingGuideline(job *Job, kind guideline.Kind, builtin map[string]string) (src, origin string, err error) {
	file := job.Compression.History.Guideline
	if kind == guideline.KindObservation {
		file = job.Compression.Observation.Guideline
	}
	if file != "" {
		b, err := guideline.ReadSource(file)
		if err != nil {
			return "", "", fmt.Errorf("compression.%s.guideline: %w", kind, err)
		}
		return string(b), "file:" + file, nil
	}
	name := builtin[string(kind)]
	src, err = templates.Source(name)
	return src, "builtin:" + strings.TrimSuffix(name, ".tmpl"), err
}

// Compile validates a guideline source of kind and returns it compiled. A
// guideline that fails validation is an error naming its problems.
func Compile(kind guideline.Kind, src, origin string) (*guideline.Template, error) {
	t, rep := guideline.Validate(kind, src)
	if !rep.OK {
		return nil, fmt.Errorf("%s guideline %s is not valid: %s", kind, origin, strings.Join(rep.Problems, "; "))
	}
	return t, nil
}

// promptOf is a compiled guideline as the compressors take it.
func promptOf(t *guideline.Template) *compress.Prompt {
	return &compress.Prompt{ID: t.ID(), Template: t}
}

// StartingCompiled compiles the starting guideline of kind, or returns nil
// when the job does not compress that kind.
func StartingCompiled(job *Job, kind guideline.Kind) (*compress.Prompt, error) {
	return startingCompiled(job, kind, prompts(compress.Prompting))
}

func startingCompiled(job *Job, kind guideline.Kind, builtin map[string]string) (*compress.Prompt, error) {
	enabled := job.Compression.History.Enabled
	if kind == guideline.KindObservation {
		enabled = job.Compression.Observation.Enabled
	}
	if !enabled {
		return nil, nil
	}
	src, origin, err := startingGuideline(job, kind, builtin)
	if err != nil {
		return nil, err
	}
	t, err := Compile(kind, src, origin)
	if err != nil {
		return nil, err
	}
	return promptOf(t), nil
}

// WithPatience runs fn again while it fails because an endpoint is
// unavailable (llm.ErrUnavailable), waiting 0.5 s, 1 s, 2 s ... (at most
// 30 s) between tries, until it has failed the same way for patience. A
// failure that differs from the last (fewer tasks unfinished, a later
// stage) is progress and starts the patience and the back-off again, so a
// long run is not cut short by faults it keeps getting past. fn must
// resume rather than redo: runs and rollouts skip what they finished.
func WithPatience(ctx context.Context, patience time.Duration, fn func() error) error {
	var deadline time.Time
	var wait time.Duration
	last := ""
	for {
		err := fn()
		if err == nil || !errors.Is(err, llm.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if err.Error() != last {
			last, deadline, wait = err.Error(), time.Now().Add(patience), 500*time.Millisecond
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		slog.Warn("an endpoint is unavailable; retrying the unfinished work", "in", wait, "patience_left", time.Until(deadline).Round(time.Second), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// unfinished reports tasks that an unavailable endpoint left unfinished
// after the job's patience; it wraps llm.ErrUnavailable.
func unfinished(n, of int) error {
	return fmt.Errorf("%d of %d tasks unfinished: %w; raise rollout.patience or run the same command again to retry them", n, of, llm.ErrUnavailable)
}

// RolloutWithPatience runs tasks into dir with runner, running the tasks an
// unavailable endpoint stopped again (RunDir keeps the finished ones) until
// none is left or the job's patience has passed. Tasks still unfinished
// are an error wrapping llm.ErrUnavailable, returned with the result.
func (rt *Runtime) RolloutWithPatience(ctx context.Context, runner *rollout.Runner, tasks []env.Task, dir string) (*rollout.Result, error) {
	var res *rollout.Result
	err := WithPatience(ctx, rt.Job.Rollout.Patience, func() error {
		var err error
		if res, err = runner.RunDir(ctx, tasks, dir); err != nil {
			return err
		}
		if n := res.Summary.InfraFailures; n > 0 {
			return unfinished(n, res.Summary.Tasks)
		}
		return nil
	})
	return res, err
}
