package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/templates"
)

// EvalOptions configures `optimize eval`.
type EvalOptions struct {
	Specs   []eval.Spec
	Split   string
	Samples int
	// Reference is the candidate the others are compared with (default:
	// the first).
	Reference string
	// Registry resolves guideline=ID; empty allows files only.
	Registry string
	// Run is an `optimize run` directory: its registry resolves
	// guideline=ID, and guideline=selected names the guideline it selected.
	Run string
	// Replace redoes rollouts of outDir made with another configuration
	// instead of refusing them (eval.Options.Replace).
	Replace bool
	// Replay is a session log directory (serve's session_log.dir, or an
	// import's output): ReplaySample of its logged requests are replayed
	// for every candidate (eval.MetricAgreement). Empty: no replay.
	Replay       string
	ReplaySample int
}

// Selected is the guideline reference, in a candidate spec, to the
// guideline a run selected (EvalOptions.Run).
const Selected = "selected"

// SelectedGuideline reads the id of the guideline the run in dir selected
// ("" before it finished a round).
func SelectedGuideline(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return "", invalid(fmt.Errorf("--run %s: %w; give the directory of an optimize run", dir, err))
	}
	var sum RunSummary
	if err := json.Unmarshal(b, &sum); err != nil {
		return "", invalid(fmt.Errorf("--run %s: %s: %w", dir, SummaryFile, err))
	}
	return sum.SelectedGuideline, nil
}

// withRun resolves opt.Run: the run's registry, and its selected
// guideline wherever a spec names Selected.
func withRun(opt EvalOptions) (EvalOptions, error) {
	if opt.Run == "" {
		return opt, nil
	}
	if opt.Registry != "" {
		return opt, invalid(fmt.Errorf("--run %s and --registry %s: give one (a run's registry is its guidelines directory)", opt.Run, opt.Registry))
	}
	selected, err := SelectedGuideline(opt.Run)
	if err != nil {
		return opt, err
	}
	specs := slices.Clone(opt.Specs)
	for i, sp := range specs {
		if sp.Guideline != Selected {
			continue
		}
		if selected == "" {
			return opt, invalid(fmt.Errorf("candidate %s: the run in %s has selected no guideline yet (it finished no round)", sp.Name, opt.Run))
		}
		specs[i].Guideline = selected
	}
	opt.Specs, opt.Registry = specs, filepath.Join(opt.Run, GuidelinesDir)
	return opt, nil
}

// Evaluate runs `optimize eval`: every candidate on the same tasks of the
// split, samples times, into outDir. Everything the candidates name is
// checked before the first call.
func Evaluate(ctx context.Context, job *Job, opt EvalOptions, outDir string) (*eval.Result, error) {
	if opt.Samples < 1 || opt.Samples > 100 {
		return nil, invalid(fmt.Errorf("--samples %d: must be 1 to 100", opt.Samples))
	}
	if opt.Split != "train" && opt.Split != "test" {
		return nil, invalid(fmt.Errorf("--split %q: want train or test", opt.Split))
	}
	opt, err := withRun(opt)
	if err != nil {
		return nil, err
	}
	rt, err := Open(ctx, job)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	tasks, err := rt.Tasks(opt.Split)
	if err != nil {
		return nil, invalid(err)
	}
	var reg *guideline.Registry
	if opt.Registry != "" {
		if fi, err := os.Stat(opt.Registry); err != nil || !fi.IsDir() {
			return nil, invalid(fmt.Errorf("--registry %s: not a directory", opt.Registry))
		}
		if reg, err = guideline.OpenRegistry(opt.Registry); err != nil {
			return nil, err
		}
	}
	meter, err := NewMeter(job.Budget, "")
	if err != nil {
		return nil, err
	}
	agentModel := meter.Wrap(rt.Agent)
	cands := make([]eval.Candidate, 0, len(opt.Specs))
	compressed := make([]bool, 0, len(opt.Specs))
	var uses []report.Use
	for _, sp := range opt.Specs {
		c, err := rt.candidate(ctx, sp, reg, agentModel, meter)
		if err != nil {
			return nil, err
		}
		u := rt.agentUses(c.Agent.Strategy, sp.CompressorURL)
		c.EmbeddedModel, c.EmbeddedRoles = report.Embedded(u)
		cands = append(cands, c)
		uses = append(uses, u...)
		compressed = append(compressed, c.Agent.Strategy != nil && c.Agent.Strategy.CompressorModel != "")
	}
	if opt.Reference != "" && !containsSpec(opt.Specs, opt.Reference) {
		return nil, invalid(fmt.Errorf("--reference %q is not one of the candidates", opt.Reference))
	}
	proj := ProjectEval(job, len(tasks), opt.Samples, compressed)
	proj.Log()
	if err := proj.Check(job.Budget); err != nil {
		fmt.Fprintln(os.Stderr, "warning:", err, "(the evaluation stops cleanly when the budget is reached)")
	}
	eo := eval.Options{
		Split: opt.Split, Samples: opt.Samples, Seed: job.Seed, Reference: opt.Reference,
		Concurrency: job.Rollout.Concurrency, TaskSet: rt.taskSet(opt.Split, tasks), Replace: opt.Replace,
	}
	eo.EmbeddedModel, eo.EmbeddedRoles = report.Embedded(uses)
	if opt.Replay != "" {
		if eo.Replay, err = rt.replay(opt, meter); err != nil {
			return nil, err
		}
	}
	return eval.Run(ctx, cands, tasks, outDir, eo)
}

// replay samples the requests of opt.Replay to replay, with the job's
// agent system prompt (session logs keep no client's) and its judge for
// free-text replies when the job has one.
func (rt *Runtime) replay(opt EvalOptions, meter *Meter) (*eval.Replay, error) {
	n := opt.ReplaySample
	if n == 0 {
		n = eval.DefaultReplaySample
	}
	if n < 1 || n > 100000 {
		return nil, invalid(fmt.Errorf("replay sample %d: must be 1 to 100000", n))
	}
	path := filepath.Join(opt.Replay, rollout.TrajectoriesFile)
	if fi, err := os.Stat(opt.Replay); err == nil && !fi.IsDir() {
		path = opt.Replay
	}
	reqs, err := eval.SampleReplay(path, n, uint64(rt.Job.Seed))
	if err != nil {
		return nil, invalid(fmt.Errorf("--replay %s: %w", opt.Replay, err))
	}
	sys, err := templates.Render("agent_system.tmpl", nil)
	if err != nil {
		return nil, err
	}
	rp := &eval.Replay{Sessions: path, Requests: reqs, System: strings.TrimSpace(sys)}
	if rt.Job.Roles.Judge.BaseURL != "" {
		rp.Judge = meter.Wrap(rt.Judge)
	}
	return rp, nil
}

func containsSpec(specs []eval.Spec, name string) bool {
	for _, s := range specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

// taskSet identifies the tasks of an evaluation: the dataset's version and
// the tasks' content.
func (rt *Runtime) taskSet(split string, tasks []env.Task) string {
	return fmt.Sprintf("%s/%s/%s", rt.Env.Version(), split, tasksHash(tasks)[:16])
}

// candidate resolves a spec into an agent: its strategy with the job's
// parameters, its guideline (file or registry id, validated) or the job's
// starting ones (the built-in plan-aware prompts for plan-aware), and its
// compressor endpoint.
func (rt *Runtime) candidate(ctx context.Context, sp eval.Spec, reg *guideline.Registry, agentModel *Metered, meter *Meter) (eval.Candidate, error) {
	m, err := compress.Lookup(string(sp.Strategy))
	if err != nil {
		return eval.Candidate{}, invalid(fmt.Errorf("candidate %s: %w", sp.Name, err))
	}
	var hist, obs *compress.Prompt
	if m.UsesGuidelines() {
		if hist, err = startingCompiled(rt.Job, guideline.KindHistory, m.Prompts); err != nil {
			return eval.Candidate{}, invalid(err)
		}
		if obs, err = startingCompiled(rt.Job, guideline.KindObservation, m.Prompts); err != nil {
			return eval.Candidate{}, invalid(err)
		}
	}
	if sp.Guideline != "" {
		g, kind, err := loadGuideline(sp.Guideline, reg, rt.Job.onlyKind())
		if err != nil {
			return eval.Candidate{}, invalid(fmt.Errorf("candidate %s: %w", sp.Name, err))
		}
		enabled := rt.Job.Compression.History.Enabled
		if kind == guideline.KindObservation {
			enabled = rt.Job.Compression.Observation.Enabled
		}
		if !enabled {
			return eval.Candidate{}, invalid(fmt.Errorf("candidate %s: %s is a %s guideline but the job disables compression.%s", sp.Name, sp.Guideline, kind, kind))
		}
		if kind == guideline.KindHistory {
			hist = g
		} else {
			obs = g
		}
	}
	comp := meter.Wrap(rt.Compressor)
	if sp.CompressorURL != "" || sp.CompressorModel != "" {
		cl, err := rt.CompressorAt(ctx, sp.CompressorURL, sp.CompressorModel)
		if err != nil {
			return eval.Candidate{}, fmt.Errorf("candidate %s: %w", sp.Name, err)
		}
		comp = meter.Wrap(cl)
	}
	strategy, err := rt.Strategy(sp.Strategy, hist, obs, comp, meter.Wrap(rt.Embedder))
	if err != nil {
		return eval.Candidate{}, fmt.Errorf("candidate %s: %w", sp.Name, err)
	}
	agent := rt.NewAgent(strategy)
	agent.Model = agentModel
	// The candidate's compressor endpoint is part of its fingerprint.
	agent.Models = rt.rolloutModels(rt.compressorRole(sp.CompressorURL, sp.CompressorModel))
	g := hist
	if !rt.Job.Compression.History.Enabled {
		g = obs
	}
	return eval.Candidate{Spec: sp, Agent: agent, GuidelineTokens: rt.promptTokens(g)}, nil
}

// promptTokens counts the tokens of a guideline's source, which every
// compressor call carries (0 for none).
func (rt *Runtime) promptTokens(g *compress.Prompt) int {
	if g == nil {
		return 0
	}
	if src, ok := g.Template.(interface{ Source() string }); ok {
		return rt.Tokenizer.Count(src.Source())
	}
	return 0
}

// onlyKind is the one kind of compression the job enables, or "".
func (j *Job) onlyKind() guideline.Kind {
	h, o := j.Compression.History.Enabled, j.Compression.Observation.Enabled
	switch {
	case h && !o:
		return guideline.KindHistory
	case o && !h:
		return guideline.KindObservation
	}
	return ""
}

// loadGuideline reads a guideline file, or a registry id when no such file
// exists, and validates it. A file's kind is inferred from its variables,
// else it is the job's only kind (validation then names what is missing).
func loadGuideline(ref string, reg *guideline.Registry, only guideline.Kind) (*compress.Prompt, guideline.Kind, error) {
	var src, origin string
	var kind guideline.Kind
	b, err := guideline.ReadSource(ref)
	switch {
	case err == nil:
		src, origin = string(b), "file "+ref
		k, kerr := guideline.InferKind(src)
		switch {
		case kerr == nil:
			kind = k
		case only != "":
			kind = only
		default:
			return nil, "", fmt.Errorf("guideline file %s: %w", ref, kerr)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, "", fmt.Errorf("guideline %s: %w", ref, err)
	case reg == nil:
		hint := ""
		switch {
		case ref == Selected:
			hint = "; to take the guideline a run selected give --run DIR"
		case !strings.ContainsAny(ref, `/\.`):
			hint = "; to use a registry id give --registry DIR or --run DIR"
		}
		return nil, "", fmt.Errorf("guideline %s: no such file%s", ref, hint)
	default:
		rec, s, err := reg.Get(ref)
		if err != nil {
			return nil, "", fmt.Errorf("guideline %s: no such file, and in registry %s: %w", ref, reg.Dir(), err)
		}
		src, origin, kind = s, "registry id "+rec.ID, rec.Kind
	}
	t, err := Compile(kind, src, origin)
	if err != nil {
		return nil, "", err
	}
	return promptOf(t), kind, nil
}
