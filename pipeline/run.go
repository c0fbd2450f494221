package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
	"github.com/ctxopt/ctxopt/synth"
)

// StageSummary is a rollout summary with the guideline it used.
type StageSummary struct {
	rollout.Summary
	GuidelineID string `json:"guideline_id"`
}

// RunSummary is DIR/summary.json of `optimize run`.
type RunSummary struct {
	Job           string   `json:"job"`
	EmbeddedModel bool     `json:"embedded_model"`
	EmbeddedRoles []string `json:"embedded_roles,omitempty"`
	Kind          string   `json:"kind"`
	// Baseline runs without compression, Prompting with the starting
	// guideline, FIFO keeps the last turns; UT and UTCO are the last round's.
	Baseline          StageSummary `json:"baseline"`
	Prompting         StageSummary `json:"prompting"`
	FIFO              StageSummary `json:"fifo"`
	UT                StageSummary `json:"ut"`
	UTCO              StageSummary `json:"utco"`
	SelectedGuideline string       `json:"selected_guideline"`
	StartingGuideline string       `json:"starting_guideline"`
	Rounds            []Round      `json:"rounds"`
	StoppedEarly      bool         `json:"stopped_early"`
	// Eval compares the selected guideline with the baselines on the test
	// split, when enabled.
	Eval *FinalEval `json:"eval,omitempty"`
	// Dataset is the distillation export (DIR/datasets), when enabled.
	Dataset   *DatasetSummary `json:"dataset,omitempty"`
	Projected Projection      `json:"projected"`
	// Spent counts every invocation of this run; SpentThisRun the last.
	// Roles counts each role's calls of this invocation, malformed
	// replies among them (recorded in malformed.jsonl).
	Roles        map[string]llm.Stats `json:"roles"`
	Spent        Spend                `json:"spent"`
	SpentThisRun Spend                `json:"spent_this_run"`
}

// Round records one UT→CO round.
type Round struct {
	N  int      `json:"round"`
	UT Decision `json:"ut"`
	CO Decision `json:"co"`
}

// Decision records a candidate selection: every candidate, its validation
// and scores, the paired comparison with the parent, and the choice.
type Decision struct {
	Step       string `json:"step"`
	Parent     string `json:"parent"`
	Chosen     string `json:"chosen"`
	KeptParent bool   `json:"kept_parent"`
	// Rule is the selection rule (OptimizeSpec.Selection).
	Rule  string   `json:"selection_rule"`
	Tasks []string `json:"selection_tasks"`
	// FeedbackTasks are the tasks the analysed items came from; they never
	// overlap Tasks.
	FeedbackTasks []string    `json:"feedback_tasks"`
	Feedback      int         `json:"feedback_ok"`
	Rejected      int         `json:"feedback_rejected"`
	Parent0       Score       `json:"parent_score"`
	Candidates    []Candidate `json:"candidates"`
	Spread        *Spread     `json:"candidate_spread,omitempty"`
	Reason        string      `json:"reason"`
}

// Candidate is one optimizer proposal.
type Candidate struct {
	K           int      `json:"k"`
	ID          string   `json:"id,omitempty"`
	Valid       bool     `json:"valid"`
	Rejected    string   `json:"rejected,omitempty"`
	Repairs     []string `json:"repairs,omitempty"`
	FeedbackIDs []string `json:"feedback_ids,omitempty"`
	Score       *Score   `json:"score,omitempty"`
	Paired      *Paired  `json:"paired,omitempty"`
}

// Score is how a guideline did on the selection tasks.
type Score struct {
	Success float64 `json:"success"`
	// ContextTokens is the mean agent input per task: the context cost
	// C(H') of ACON eq. 5; NormCost divides it by the parent's.
	ContextTokens float64 `json:"context_tokens_mean"`
	NormCost      float64 `json:"norm_cost"`
	// TotalTokens (agent and compressor) breaks ties.
	TotalTokens float64 `json:"total_tokens_mean"`
	Objective   float64 `json:"objective"`
}

// RunOptions adjust how Run uses what earlier runs left.
type RunOptions struct {
	// NoReuse runs every stage not finished in outDir, instead of taking
	// it from the stage store beside the cache.
	NoReuse bool
	// Replace removes an outDir that holds a run of another job and starts
	// over; without it such a directory is refused.
	Replace bool
}

// Run executes Algorithm 1 of ACON for job into outDir and returns the
// summary. It is resumable: finished stages with unchanged inputs are
// skipped, interrupted ones resume, and stages an earlier run finished with
// the same inputs are taken from the stage store (unless opts.NoReuse).
func Run(ctx context.Context, job *Job, outDir string, opts RunOptions) (*RunSummary, error) {
	p, err := newRunner(ctx, job, outDir, opts)
	if err != nil {
		return nil, err
	}
	defer p.rt.Close()
	var sum *RunSummary
	err = WithPatience(ctx, job.Rollout.Patience, func() error {
		// Finished stages are skipped and interrupted ones resume, so
		// running again redoes only what the endpoint left unfinished.
		sum, err = p.run()
		return err
	})
	if perr := p.meter.Persist(); err == nil {
		err = perr
	}
	p.boundStore()
	if sum != nil {
		p.account(sum)
	}
	return sum, err
}

// newRunner checks everything the job names, then prepares the run
// directory. The caller closes p.rt.
func newRunner(ctx context.Context, job *Job, outDir string, opts RunOptions) (p *runner, err error) {
	started := time.Now()
	if !job.Compression.History.Enabled && !job.Compression.Observation.Enabled {
		return nil, invalid(errors.New("the job enables neither compression.history nor compression.observation: nothing to optimize"))
	}
	// Everything the job names is checked before the run directory exists.
	rt, err := Open(ctx, job)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	train, err := rt.Tasks("train")
	if err != nil {
		return nil, invalid(err)
	}
	kind, otherKind := guideline.KindHistory, guideline.KindObservation
	if !job.Compression.History.Enabled {
		kind, otherKind = otherKind, kind
	}
	seedSrc, seedOrigin, err := StartingGuideline(job, kind)
	if err != nil {
		return nil, invalid(err)
	}
	start, err := Compile(kind, seedSrc, seedOrigin)
	if err != nil {
		return nil, invalid(err)
	}
	// The kind not being optimized keeps its starting guideline throughout.
	other, err := StartingCompiled(job, otherKind)
	if err != nil {
		return nil, invalid(err)
	}
	if err := claimRunDir(outDir, job.Name, opts.Replace); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	// Temporary files of a run killed mid-write would otherwise stay.
	if n, err := atomicfile.SweepStale(outDir, atomicfile.StaleAfter); err != nil {
		slog.Warn("could not remove stale temporary files", "dir", outDir, "err", err)
	} else if n > 0 {
		slog.Info("removed temporary files left by an interrupted run", "dir", outDir, "count", n)
	}
	resolved, err := yaml.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(outDir, JobFile), resolved, 0o644); err != nil {
		return nil, err
	}
	reg, err := guideline.OpenRegistry(filepath.Join(outDir, "guidelines"))
	if err != nil {
		return nil, err
	}
	if err := rt.RecordMalformed(filepath.Join(outDir, MalformedFile)); err != nil {
		return nil, err
	}
	meter, err := NewMeter(job.Budget, filepath.Join(outDir, "spent.json"))
	if err != nil {
		return nil, err
	}
	p = &runner{ctx: ctx, job: job, rt: rt, dir: outDir, reg: reg, meter: meter, kind: kind, train: train, other: other, started: started,
		seedSrc: seedSrc, seedOrigin: seedOrigin, tmpls: map[string]*guideline.Template{}}
	p.keep(seedSrc, start)
	if !opts.NoReuse && !job.Cache.Disabled {
		p.store = &StageStore{dir: StageStoreDir(CachePath(job.Cache.Path))}
	}
	p.agent, p.compressor, p.optimizer, p.embedder = p.meter.Wrap(rt.Agent), p.meter.Wrap(rt.Compressor), p.meter.Wrap(rt.Optimizer), p.meter.Wrap(rt.Embedder)
	return p, nil
}

// claimRunDir refuses an outDir whose job.yaml names another job: its
// stages, registry, spending and reports would mix with this job's. With
// replace it removes such a directory instead. A run of the same job is
// resumed, whatever changed: stages whose inputs changed run again.
func claimRunDir(outDir, name string, replace bool) error {
	path := filepath.Join(outDir, JobFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	var other struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(b, &other); err == nil && other.Name == name {
		return nil
	}
	if !replace {
		return invalid(fmt.Errorf("%s holds a run of another job (%s names %q, this job is %q); choose another --out, or pass --replace to remove it and start over", outDir, path, other.Name, name))
	}
	slog.Info("replacing the run of another job", "dir", outDir, "job", other.Name)
	if err := os.RemoveAll(outDir); err != nil {
		return fmt.Errorf("replace %s: %w", outDir, err)
	}
	return nil
}

type runner struct {
	ctx   context.Context
	job   *Job
	rt    *Runtime
	dir   string
	reg   *guideline.Registry
	meter *Meter
	kind  guideline.Kind
	store *StageStore // nil: no reuse across runs
	// started is before the run looked anything up in the store: bounding
	// the store keeps the entries used since.
	started time.Time

	agent, compressor, optimizer, embedder *Metered
	train                                  []env.Task
	other                                  *compress.Prompt // the kind not optimized, fixed
	seedSrc, seedOrigin                    string           // the starting guideline of the kind optimized
	// tmpls holds every guideline compiled in this invocation by content
	// id, of the source as given and as repaired, so a winner is parsed
	// and validated once: when proposed, not again when scored, chosen or
	// used as the next parent. Steps run one at a time, so no lock.
	tmpls map[string]*guideline.Template
	// uses are the roles of the work built so far (steps run one at a
	// time, so no lock).
	uses []report.Use
}

// keep remembers t, compiled from src.
func (p *runner) keep(src string, t *guideline.Template) {
	p.tmpls[guideline.ID(p.kind, src)] = t
	p.tmpls[t.ID()] = t
}

func (p *runner) run() (*RunSummary, error) {
	job := p.job
	sum := &RunSummary{Job: job.Name, Kind: string(p.kind)}
	p.uses = nil // a retry builds its agents again
	if job.Optimize.Rounds > 0 {
		p.uses = append(p.uses, p.rt.use(llm.RoleOptimizer))
	}
	sum.Projected = Project(job, len(p.train))
	sum.Projected.Log()
	if err := sum.Projected.Check(job.Budget); err != nil {
		slog.Warn("the budget is smaller than the projected cost; the run will stop cleanly when it is reached", "reason", err)
	}

	seed, err := p.registerSeed()
	if err != nil {
		return nil, err
	}
	sum.StartingGuideline = seed.rec.ID

	base, err := p.rollout("baseline", compress.None, nil, p.train)
	if err != nil {
		return nil, err
	}
	sum.Baseline = StageSummary{Summary: base.Summary}
	fifo, err := p.rollout("fifo", compress.FIFO, nil, p.train)
	if err != nil {
		return nil, err
	}
	sum.FIFO = StageSummary{Summary: fifo.Summary}
	cur, err := p.rollout("prompting", compress.Prompting, seed.g, p.train)
	if err != nil {
		return nil, err
	}
	sum.Prompting = StageSummary{Summary: cur.Summary, GuidelineID: seed.rec.ID}
	parent := seed

	for r := 1; r <= job.Optimize.Rounds; r++ {
		round := Round{N: r}
		// UT: contrast baseline successes with compressed failures.
		ut, utDec, err := p.step(r, "ut", parent, base, cur)
		if err != nil {
			return sum, err
		}
		round.UT = utDec
		utRun := cur // the parent kept: its train rollout is the UT one
		if !utDec.KeptParent {
			if utRun, err = p.rollout(fmt.Sprintf("r%d-ut-train", r), compress.Guideline, ut.g, p.train); err != nil {
				return sum, err
			}
		}
		sum.UT = StageSummary{Summary: utRun.Summary, GuidelineID: ut.rec.ID}
		// CO: what the successful compressed runs carried but never used.
		co, coDec, err := p.step(r, "co", ut, base, utRun)
		if err != nil {
			return sum, err
		}
		round.CO = coDec
		coRun := utRun
		if !coDec.KeptParent {
			if coRun, err = p.rollout(fmt.Sprintf("r%d-utco-train", r), compress.Guideline, co.g, p.train); err != nil {
				return sum, err
			}
		}
		sum.UTCO = StageSummary{Summary: coRun.Summary, GuidelineID: co.rec.ID}
		sum.SelectedGuideline = co.rec.ID
		sum.Rounds = append(sum.Rounds, round)
		if err := p.writeSummary(sum); err != nil {
			return sum, err
		}
		if utDec.KeptParent && coDec.KeptParent {
			slog.Info("round gained nothing; stopping early", "round", r)
			sum.StoppedEarly = true
			break
		}
		parent, cur = co, coRun
	}
	if !job.Eval.Disabled {
		ev, err := p.evaluate(seed, parent)
		if err != nil {
			return sum, err
		}
		sum.Eval = ev
	}
	if job.Distill.Enabled {
		d, err := p.distill(sum, cur)
		if err != nil {
			return sum, err
		}
		sum.Dataset = d
	}
	return sum, p.writeSummary(sum)
}

// FinalEval is the held-out evaluation (DESIGN step 7) in DIR/eval: the
// test split, never used for selection, through the same eval package as
// `optimize eval`.
type FinalEval struct {
	Dir string `json:"dir"`
	eval.Summary
	Comparisons []eval.Comparison `json:"comparisons"`
}

// Names of the final evaluation's candidates; the selected guideline is
// compared with the starting one (the reference) and no compression.
const (
	evalNone      = "none"
	evalPrompting = "prompting"
	evalSelected  = "selected"
)

// evaluate rolls no compression, the starting and the selected guideline
// out on the test split.
func (p *runner) evaluate(seed, selected compiled) (*FinalEval, error) {
	test, err := p.rt.Tasks("test")
	if err != nil {
		return nil, err
	}
	cands := make([]eval.Candidate, 0, 3)
	for _, c := range []struct {
		name, spec string
		s          compress.Name
		g          *compress.Prompt
	}{
		{evalNone, string(compress.None), compress.None, nil},
		{evalPrompting, string(compress.Prompting), compress.Prompting, seed.g},
		{evalSelected, fmt.Sprintf("%s,guideline=%s", compress.Guideline, selected.rec.ID), compress.Guideline, selected.g},
	} {
		agent, err := p.newAgent(c.s, c.g)
		if err != nil {
			return nil, err
		}
		cands = append(cands, eval.Candidate{Spec: eval.Spec{Name: c.name, Text: c.spec, Strategy: c.s}, Agent: agent})
	}
	fps := make([]rollout.Fingerprint, len(cands))
	var uses []report.Use
	for i := range cands {
		c := &cands[i]
		fps[i] = c.Agent.Fingerprint()
		u := p.rt.agentUses(c.Agent.Strategy, "")
		c.EmbeddedModel, c.EmbeddedRoles = report.Embedded(u)
		uses = append(uses, u...)
	}
	dir := evalDir(p.dir)
	opt := eval.Options{
		Split: "test", Samples: 1, Seed: p.job.Seed, Reference: evalPrompting, Concurrency: p.job.Rollout.Concurrency,
		TaskSet: p.rt.taskSet("test", test),
	}
	opt.EmbeddedModel, opt.EmbeddedRoles = report.Embedded(uses)
	// The agents' fingerprints name the environment's settings and the
	// models (rollout.Fingerprint), so they are not listed again; the
	// concurrency changes no result.
	key := opt
	key.Concurrency = 0
	inputs := map[string]any{"agents": fps, "tasks": tasksHash(test), "options": key}
	res, err := stage(p.dir, p.meter, stageSpec[*eval.Result]{
		name: "eval", inputs: inputs, store: p.store, owned: []string{evalDirName},
		run: func(string) (*eval.Result, map[string]float64, error) {
			r, err := eval.Run(p.ctx, cands, test, dir, opt)
			if err != nil {
				return nil, nil, err
			}
			return r, map[string]float64{"tasks": float64(len(test)), "candidates": float64(len(cands))}, nil
		},
		// The evaluation keeps its own files in DIR/eval.
		load: func(string) (*eval.Result, error) { return eval.Load(dir) },
	})
	if err != nil {
		return nil, err
	}
	return &FinalEval{Dir: dir, Summary: res.Summary, Comparisons: res.Comparisons}, nil
}

// DatasetSummary reports the distillation export.
type DatasetSummary struct {
	Dir        string         `json:"dir"`
	Rows       map[string]int `json:"rows"`
	Redactions map[string]int `json:"redactions"`
	// Workflows count the PAACE-Syn executions read (distill.synth).
	Workflows *distill.WorkflowCounts `json:"workflows,omitempty"`
	Skipped   string                  `json:"skipped,omitempty"`
}

// distill exports the teacher's compressions of the selected guideline's
// successful train runs (ACON's D⁺_train) and the job's PAACE-Syn runs'
// accepted pairs as training sets.
func (p *runner) distill(sum *RunSummary, final *stagedRollout) (*DatasetSummary, error) {
	out := filepath.Join(p.dir, "datasets")
	inputs := map[string]any{"guideline": sum.SelectedGuideline, "trajectories": final.name(), "distill": p.job.Distill, "seed": p.job.Seed,
		// The dataset card names the job.
		"job": p.job.Name}
	if len(p.job.Distill.Synth) > 0 {
		// A synth run resumed or redone since changes the export.
		hashes, err := fileHashes("distill.synth", p.job.Distill.Synth, synth.ExecutionsFile)
		if err != nil {
			return nil, err
		}
		inputs["synth"] = hashes
	}
	d, err := stage(p.dir, p.meter, stageSpec[*DatasetSummary]{name: "distill", inputs: inputs, store: p.store, owned: []string{"datasets"}, run: func(string) (*DatasetSummary, map[string]float64, error) {
		d := &DatasetSummary{}
		m, err := distill.Build(p.ctx, p.dir, out, distill.Options{
			Seed: p.job.Seed, ValidationFraction: &p.job.Distill.ValidationFraction, MaxLength: p.job.Distill.MaxLength,
			RedactEmails: p.job.Distill.RedactEmails, Guideline: sum.SelectedGuideline, JobName: p.job.Name,
			Trajectories: []string{final.Path}, Synth: p.job.Distill.Synth,
		})
		if errors.Is(err, distill.ErrNoData) {
			slog.Warn("no dataset exported", "reason", err)
			// A dataset of an earlier run would not match this summary.
			if err := os.RemoveAll(out); err != nil {
				return nil, nil, err
			}
			d.Skipped = err.Error()
			return d, map[string]float64{"rows": 0}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		d.Rows = map[string]int{}
		for split, st := range m.Splits {
			d.Rows[split] = st.Rows
		}
		d.Redactions = m.Redactions
		counts := map[string]float64{"rows": float64(m.Rows.Kept)}
		if w := m.Workflows; w != nil {
			d.Workflows = w
			counts["synth_workflows"], counts["synth_accepted"] = float64(w.Read), float64(w.Accepted)
		}
		return d, counts, nil
	}})
	if err != nil {
		return nil, err
	}
	// A result taken from the stage store was saved by another run.
	d.Dir = out
	return d, nil
}

// fileHashes name each of dirs (the job's field) with the SHA-256 of its
// file called name, so a directory whose file changed since is another
// input.
func fileHashes(field string, dirs []string, name string) ([]string, error) {
	out := make([]string, len(dirs))
	for i, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, invalid(fmt.Errorf("%s[%d]: %w", field, i, err))
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out[i] = dir + " " + hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

func (p *runner) writeSummary(sum *RunSummary) error {
	p.account(sum)
	sum.Roles = p.rt.RoleStats()
	return rollout.WriteJSON(filepath.Join(p.dir, SummaryFile), sum)
}

// account fills in what the run spent so far and which roles the embedded
// model played in the work it has run.
func (p *runner) account(sum *RunSummary) {
	sum.Spent, sum.SpentThisRun = p.meter.Snapshot(), p.meter.ThisRun()
	sum.EmbeddedModel, sum.EmbeddedRoles = report.Embedded(p.uses)
}

// compiled is a registered guideline; src and g are empty when it failed
// validation.
type compiled struct {
	rec guideline.Record
	src string
	g   *compress.Prompt
}

// registerSeed registers the job's starting guideline of the kind
// optimized.
// optimized, compiled by newRunner.
func (p *runner) registerSeed() (compiled, error) {
	return p.register(p.seedSrc, guideline.Record{Kind: p.kind, Step: guideline.StepSeed, Source: p.seedOrigin})
}

// register stores src in the registry with rec's lineage. A source this
// invocation compiled before is stored as it is; any other is validated,
// repaired and compiled by the registry, once.
func (p *runner) register(src string, rec guideline.Record) (compiled, error) {
	t := p.tmpls[guideline.ID(p.kind, src)]
	var err error
	if t != nil {
		rec, err = p.reg.PutTemplate(rec, t)
	} else if rec, t, err = p.reg.Put(rec, src); t != nil {
		p.keep(src, t)
	}
	if err != nil {
		return compiled{}, err
	}
	c := compiled{rec: rec}
	if t != nil {
		c.src, c.g = t.Source(), promptOf(t)
	}
	return c, nil
}

// stagedRollout is a rollout of the run with its stage's inputs.
type stagedRollout struct {
	*rollout.Result
	inputs rolloutInputs
}

// rolloutInputs are a rollout stage's inputs. The agent's fingerprint names
// the environment's settings, the strategy with its parameters and
// guidelines, the limits and the models; the tasks are named by content.
type rolloutInputs struct {
	Agent rollout.Fingerprint `json:"agent"`
	Tasks string              `json:"tasks"`
}

// rolloutName names a rollout in the inputs of a stage that reads its
// trajectories: what it was made from (its stage's inputs, so a change of
// environment, strategy, model or task that leaves the outcomes alone
// still changes the trajectories' name) and what happened in it.
type rolloutName struct {
	Inputs  rolloutInputs `json:"inputs"`
	Outcome string        `json:"outcome"`
}

func (r *stagedRollout) name() rolloutName {
	return rolloutName{Inputs: r.inputs, Outcome: outcomeHash(r.Result)}
}

// rollout runs tasks with a strategy as a stage, or reuses it.
func (p *runner) rollout(name string, s compress.Name, g *compress.Prompt, tasks []env.Task) (*stagedRollout, error) {
	agent, err := p.newAgent(s, g)
	if err != nil {
		return nil, err
	}
	runner := p.rt.Runner(agent, name)
	inputs := rolloutInputs{Agent: agent.Fingerprint(), Tasks: tasksHash(tasks)}
	res, err := stage(p.dir, p.meter, stageSpec[*rollout.Result]{
		name: name, inputs: inputs, store: p.store,
		run: func(dir string) (*rollout.Result, map[string]float64, error) {
			r, err := runner.RunDir(p.ctx, tasks, filepath.Join(dir, "rollout"))
			if err != nil {
				return nil, nil, err
			}
			if n := r.Summary.InfraFailures; n > 0 {
				// Not done: a re-run retries these tasks and keeps the rest.
				return nil, nil, unfinished(n, len(tasks))
			}
			return r, map[string]float64{"tasks": float64(r.Summary.Tasks), "success_rate": r.Summary.SuccessRate}, nil
		},
		// The rollout's own files are its saved result: the runner reads a
		// finished rollout back after checking its fingerprint and tasks.
		load: func(dir string) (*rollout.Result, error) {
			return runner.RunDir(p.ctx, tasks, filepath.Join(dir, "rollout"))
		},
	})
	if err != nil {
		return nil, err
	}
	return &stagedRollout{Result: res, inputs: inputs}, nil
}

// newAgent returns a metered agent compressing the optimized kind with g
// and the other kind with its fixed starting guideline.
func (p *runner) newAgent(s compress.Name, g *compress.Prompt) (*rollout.Agent, error) {
	hist, obs := g, p.other
	if p.kind != guideline.KindHistory {
		hist, obs = p.other, g
	}
	strategy, err := p.rt.Strategy(s, hist, obs, p.compressor, p.embedder)
	if err != nil {
		return nil, err
	}
	agent := p.rt.NewAgent(strategy)
	agent.Model = p.agent
	p.uses = append(p.uses, p.rt.agentUses(strategy, "")...)
	return agent, nil
}

// boundStore evicts the least recently used entries of the stage store
// beyond the job's bound, keeping every entry this run used or stored.
func (p *runner) boundStore() {
	if p.store == nil {
		return
	}
	limit, err := p.job.Cache.StagesMaxBytes()
	if err != nil || limit < 0 {
		return // invalid bounds are rejected with the job
	}
	res, err := PruneStageStore(p.store.dir, 0, limit, p.started)
	if err != nil {
		slog.Warn("stage store not bounded", "dir", p.store.dir, "err", err)
	}
	if res.Removed > 0 || res.Temps > 0 {
		slog.Info("stage store bounded", "dir", p.store.dir, "evicted", res.Removed, "stale_temps", res.Temps, "bytes", res.BytesAfter, "limit", limit)
	}
}

// tasksHash identifies tasks by content, so an edited dataset with the same
// task ids does not reuse stale stages.
func tasksHash(ts []env.Task) string {
	b, _ := json.Marshal(ts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func taskIDs(ts []env.Task) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// step runs one UT or CO step: analysis, K candidates, selection.
func (p *runner) step(round int, step string, parent compiled, base, cur *stagedRollout) (compiled, Decision, error) {
	name := fmt.Sprintf("r%d-%s", round, step)
	inputs, err := p.stepInputs(step, parent, base, cur)
	if err != nil {
		return compiled{}, Decision{}, err
	}
	dec, err := stage(p.dir, p.meter, stageSpec[Decision]{name: name, inputs: inputs, store: p.store, shared: []string{"guidelines"}, run: func(dir string) (Decision, map[string]float64, error) {
		d, err := p.runStep(round, step, dir, parent, base, cur)
		if err != nil {
			return d, nil, err
		}
		return d, map[string]float64{"candidates": float64(len(d.Candidates)), "feedback": float64(d.Feedback)}, nil
	}})
	if err != nil {
		return compiled{}, dec, err
	}
	if dec.KeptParent {
		return parent, dec, nil
	}
	rec, src, err := p.reg.Get(dec.Chosen)
	if err != nil {
		return compiled{}, dec, err
	}
	if t := p.tmpls[rec.ID]; t != nil {
		return compiled{rec: rec, src: t.Source(), g: promptOf(t)}, dec, nil
	}
	// The step was skipped: its winner was compiled by an earlier run.
	c, err := p.register(src, rec)
	return c, dec, err
}

// stepInputs are what a step's decision depends on.
func (p *runner) stepInputs(step string, parent compiled, base, cur *stagedRollout) (map[string]any, error) {
	inputs := map[string]any{
		// The analyses read both rollouts' trajectories, and the candidates
		// roll out like cur with their own guideline: cur's inputs name the
		// environment's settings, the strategy's parameters, the other
		// kind's guideline, the limits and the train tasks.
		"parent": parent.rec.ID, "baseline": base.name(), "current": cur.name(),
		"optimize": stepSettings(step, p.job.Optimize), "seed": p.job.Seed,
		// Every role's model: the analyzer and the optimizer's too.
		"models": p.rt.ModelInputs(),
	}
	if len(p.job.Sources) > 0 {
		// Trajectories imported again since are other feedback.
		hashes, err := fileHashes("sources", p.job.Sources, rollout.TrajectoriesFile)
		if err != nil {
			return nil, err
		}
		inputs["sources"] = hashes
	}
	return inputs, nil
}

// stepSettings are the optimize settings a step depends on: UT reads
// neither the CO weight nor the CO holdout, CO not the UT holdout, and no
// step depends on the number of rounds, so changing one of those re-runs
// only what uses it.
func stepSettings(step string, o OptimizeSpec) OptimizeSpec {
	o.Rounds = 0
	if step == guideline.StepUT {
		o.Lambda, o.COHoldout = 0, 0
	} else {
		o.UTHoldout = 0
	}
	return o
}

// outcomeHash identifies a rollout by what happened in it, not by how it
// was obtained (cache hits, retries and resumes do not change it).
func outcomeHash(r *rollout.Result) string {
	h := sha256.New()
	for _, t := range r.Outcomes {
		m := t.Metrics
		fmt.Fprintf(h, "%s %v %d %d %d %d\n", t.TaskID, t.Success, m.Steps, m.AgentInputTokens, m.CompressorOutputTokens, t.Events)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// runStep runs one UT or CO step: analyse, propose, select.
func (p *runner) runStep(round int, step, dir string, parent compiled, base, cur *stagedRollout) (Decision, error) {
	dec := Decision{Step: step, Parent: parent.rec.ID, Rule: p.job.Optimize.Selection}
	tasks, items, err := p.split(step, base, cur)
	if err != nil {
		return dec, err
	}
	dec.Tasks = taskIDs(tasks)
	for _, it := range items {
		dec.FeedbackTasks = append(dec.FeedbackTasks, it.Compressed.TaskID)
	}
	ok, err := p.analyse(round, step, dir, items, &dec)
	if err != nil {
		return dec, err
	}
	if len(ok) == 0 {
		dec.Chosen, dec.KeptParent = parent.rec.ID, true
		dec.Reason = fmt.Sprintf("no usable feedback (%d items analyzed, %d rejected): the parent is kept", len(items), dec.Rejected)
		return dec, nil
	}
	cands, err := p.propose(round, step, parent, ok, &dec)
	if err != nil {
		return dec, err
	}
	if err := p.score(round, step, cur, tasks, cands, &dec); err != nil {
		return dec, err
	}
	decide(&dec)
	slog.Info("selected", "step", step, "round", round, "chosen", dec.Chosen, "kept_parent", dec.KeptParent, "reason", dec.Reason)
	return dec, nil
}

// split returns a step's selection tasks and the items its feedback comes
// from, which never share a task. UT selects on a held-out part of the
// tasks the baseline solves (ACON's I⁺) and analyses the contrastive pairs
// of the rest; CO selects on a held-out part of the train split and
// analyses the successful compressed runs of the rest.
func (p *runner) split(step string, base, cur *stagedRollout) ([]env.Task, []contrastive.Pair, error) {
	opt := p.job.Optimize
	var tasks []env.Task
	if step == contrastive.StepUT {
		tasks = holdout(baselineSuccesses(p.train, base.Result), opt.UTHoldout, p.job.Seed)
	} else {
		tasks = holdout(p.train, opt.COHoldout, p.job.Seed)
	}
	held := map[string]bool{}
	for _, t := range tasks {
		held[t.ID] = true
	}
	if opt.SelectionTasks > 0 && len(tasks) > opt.SelectionTasks {
		tasks = tasks[:opt.SelectionTasks]
	}
	// The records are read here, for mining, and dropped with the step.
	baseTr, err := base.Load()
	if err != nil {
		return nil, nil, err
	}
	curTr, err := cur.Load()
	if err != nil {
		return nil, nil, err
	}
	srcBase, srcCur, err := loadSources(p.job.Sources)
	if err != nil {
		return nil, nil, err
	}
	items := contrastive.Mine(append(baseTr, srcBase...), append(curTr, srcCur...), opt.StepRatio).Items(step)
	items = slices.DeleteFunc(items, func(it contrastive.Pair) bool { return held[it.Compressed.TaskID] })
	return tasks, items, nil
}

// analyse asks the analyzer about every item and returns the usable
// feedback; all of it is kept in dir/feedback.jsonl.
func (p *runner) analyse(round int, step, dir string, items []contrastive.Pair, dec *Decision) ([]contrastive.Feedback, error) {
	opt := p.job.Optimize
	fb, err := contrastive.Analyze(p.ctx, p.optimizer, step, items, contrastive.Options{
		Round: round, Kind: string(p.kind), StepRatio: opt.StepRatio, Concurrency: p.job.Rollout.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	if err := contrastive.WriteFeedback(filepath.Join(dir, "feedback.jsonl"), fb); err != nil {
		return nil, err
	}
	var ok []contrastive.Feedback
	infra := 0
	for _, f := range fb {
		switch {
		case f.Status == contrastive.StatusOK:
			ok = append(ok, f)
		case f.Infra:
			infra++
		default:
			dec.Rejected++
		}
	}
	if infra > 0 {
		// Not done: the analyses that went through are cached, and a re-run
		// retries the others instead of deciding on partial feedback.
		return nil, fmt.Errorf("%d of %d analyses failed on an unavailable endpoint (%w); run the same command again to retry them", infra, len(fb), llm.ErrUnavailable)
	}
	dec.Feedback = len(ok)
	return ok, nil
}

// propose asks the optimizer for K candidates, each from its own seeded
// sample of the feedback, and registers them. cands[k] is candidate k,
// zero when it was rejected (dec.Candidates says why).
func (p *runner) propose(round int, step string, parent compiled, ok []contrastive.Feedback, dec *Decision) ([]compiled, error) {
	opt := p.job.Optimize
	cands := make([]compiled, opt.Candidates)
	for k := range opt.Candidates {
		sample := contrastive.Sample(ok, opt.FeedbackSample, int64(p.job.Seed), k)
		c := Candidate{K: k}
		for _, f := range sample {
			c.FeedbackIDs = append(c.FeedbackIDs, f.ID)
		}
		src, err := p.ask(step, parent, sample, k)
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, ErrBudget) || errors.Is(err, llm.ErrUnavailable) {
				return nil, err
			}
			c.Rejected = err.Error()
			dec.Candidates = append(dec.Candidates, c)
			p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
				Detail: fmt.Sprintf("round %d %s candidate %d: %s", round, step, k, err), Raw: src})
			continue
		}
		reg, err := p.register(src, guideline.Record{
			Kind: p.kind, Parent: parent.rec.ID, Round: round, Step: step,
			FeedbackIDs: c.FeedbackIDs, Source: llm.RoleOptimizer,
		})
		if err != nil {
			return nil, err
		}
		c.ID = reg.rec.ID
		for _, r := range reg.rec.Validation.Repairs {
			c.Repairs = append(c.Repairs, fmt.Sprintf("line %d: %s -> %s", r.Line, r.From, r.To))
		}
		if reg.g == nil {
			c.Rejected = "invalid template: " + strings.Join(reg.rec.Validation.Problems, "; ")
			p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
				Detail: fmt.Sprintf("round %d %s candidate %d (%s): %s", round, step, k, c.ID, c.Rejected), Raw: src})
		} else {
			c.Valid = true
			cands[k] = reg
		}
		dec.Candidates = append(dec.Candidates, c)
	}
	return cands, nil
}

// score rolls every valid candidate out on the selection tasks and scores
// it and the parent there.
func (p *runner) score(round int, step string, cur *stagedRollout, tasks []env.Task, cands []compiled, dec *Decision) error {
	parentTr := pick(cur.Outcomes, tasks)
	dec.Parent0 = p.objective(step, parentTr, parentTr)
	for i := range dec.Candidates {
		c := &dec.Candidates[i]
		if !c.Valid {
			continue
		}
		res, err := p.rollout(filepath.Join(fmt.Sprintf("r%d-%s-select", round, step), c.ID), compress.Guideline, cands[c.K].g, tasks)
		if err != nil {
			return err
		}
		s := p.objective(step, res.Outcomes, parentTr)
		c.Score = &s
		pr := pairedOf(res.Outcomes, parentTr, uint64(p.job.Seed))
		c.Paired = &pr
		if _, err := p.reg.Score(c.ID, map[string]float64{step + "_selection_success": s.Success, step + "_objective": s.Objective}); err != nil {
			return err
		}
	}
	return nil
}

// decide picks from the scored candidates by the decision's rule and
// records the spread of their scores. keep-parent keeps the parent unless
// a candidate beats it; argmax (ACON's Algorithm 1) takes the best
// candidate whatever the parent scored.
func decide(dec *Decision) {
	best := -1
	var scores []Score
	for i, c := range dec.Candidates {
		if c.Score == nil {
			continue
		}
		scores = append(scores, *c.Score)
		if best < 0 || better(*c.Score, *dec.Candidates[best].Score) {
			best = i
		}
	}
	dec.Spread = spreadOf(scores)
	switch {
	case best < 0:
		dec.Chosen, dec.KeptParent = dec.Parent, true
		dec.Reason = "no valid candidate: the parent is kept"
	case dec.Rule != SelectArgmax && !better(*dec.Candidates[best].Score, dec.Parent0):
		dec.Chosen, dec.KeptParent = dec.Parent, true
		dec.Reason = "no candidate did better than the parent on the selection tasks: the parent is kept"
	default:
		c := dec.Candidates[best]
		dec.Chosen = c.ID
		dec.Reason = fmt.Sprintf("candidate %d has the best %s objective %.3f (parent %.3f)", c.K, dec.Step, c.Score.Objective, dec.Parent0.Objective)
		if dec.Rule == SelectArgmax && !better(*c.Score, dec.Parent0) {
			dec.Reason += "; taken by the argmax rule although it does not beat the parent"
		}
	}
}

// Spread is how the valid candidates of a step scored on the selection
// tasks: the variation K samples (and, at temperature > 0, seeds) produce.
type Spread struct {
	N            int     `json:"n"`
	SuccessMin   float64 `json:"success_min"`
	SuccessMax   float64 `json:"success_max"`
	SuccessSD    float64 `json:"success_sd"`
	ObjectiveMin float64 `json:"objective_min"`
	ObjectiveMax float64 `json:"objective_max"`
}

func spreadOf(scores []Score) *Spread {
	if len(scores) == 0 {
		return nil
	}
	s := &Spread{N: len(scores), SuccessMin: scores[0].Success, SuccessMax: scores[0].Success,
		ObjectiveMin: scores[0].Objective, ObjectiveMax: scores[0].Objective}
	var succ []float64
	for _, x := range scores {
		s.SuccessMin, s.SuccessMax = min(s.SuccessMin, x.Success), max(s.SuccessMax, x.Success)
		s.ObjectiveMin, s.ObjectiveMax = min(s.ObjectiveMin, x.Objective), max(s.ObjectiveMax, x.Objective)
		succ = append(succ, x.Success)
	}
	s.SuccessSD = stddev(succ)
	return s
}

// better orders scores: higher objective, then fewer tokens.
func better(a, b Score) bool {
	if a.Objective != b.Objective {
		return a.Objective > b.Objective
	}
	return a.TotalTokens < b.TotalTokens
}

// objective rates trajectories: UT by success, CO by success − λ·normalized
// context cost, normalized by the parent's on the same tasks.
func (p *runner) objective(step string, trs, parent []rollout.Outcome) Score {
	succ, ctx, tok := outcomes(trs)
	_, pctx, _ := outcomes(parent)
	s := Score{Success: eval.Mean(succ), ContextTokens: eval.Mean(ctx), TotalTokens: eval.Mean(tok)}
	if pc := eval.Mean(pctx); pc > 0 {
		s.NormCost = s.ContextTokens / pc
	}
	s.Objective = s.Success
	if step == contrastive.StepCO {
		s.Objective = s.Success - p.job.Optimize.Lambda*s.NormCost
	}
	return s
}

// outcomes returns per-task success (1/0), context tokens (agent input)
// and total tokens (agent and compressor). Rollouts that hit an
// unavailable endpoint never get here: their stage fails and is retried.
func outcomes(trs []rollout.Outcome) (succ, ctx, tok []float64) {
	for _, t := range trs {
		var s float64
		if t.Success {
			s = 1
		}
		m := t.Metrics
		succ = append(succ, s)
		ctx = append(ctx, float64(m.AgentInputTokens))
		tok = append(tok, float64(m.AgentInputTokens+m.AgentOutputTokens+m.CompressorInputTokens+m.CompressorOutputTokens))
	}
	return succ, ctx, tok
}

// pick returns the trajectories of tasks, in task order.
func pick(trs []rollout.Outcome, tasks []env.Task) []rollout.Outcome {
	by := make(map[string]rollout.Outcome, len(trs))
	for _, t := range trs {
		by[t.TaskID] = t
	}
	out := make([]rollout.Outcome, 0, len(tasks))
	for _, t := range tasks {
		if tr, ok := by[t.ID]; ok {
			out = append(out, tr)
		}
	}
	return out
}

func baselineSuccesses(train []env.Task, base *rollout.Result) []env.Task {
	ok := map[string]bool{}
	for _, t := range base.Outcomes {
		ok[t.TaskID] = t.Success && !t.Infra
	}
	var out []env.Task
	for _, t := range train {
		if ok[t.ID] {
			out = append(out, t)
		}
	}
	return out
}

// holdout returns a seeded share of tasks, in task order: at least one,
// and when there are two or more, never all, so the rest can give
// feedback.
func holdout(tasks []env.Task, share float64, seed int) []env.Task {
	if len(tasks) == 0 {
		return nil
	}
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = i
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc0))
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	n := max(int(float64(len(tasks))*share+0.5), 1)
	if len(tasks) > 1 {
		n = min(n, len(tasks)-1)
	}
	idx = idx[:n]
	sort.Ints(idx)
	out := make([]env.Task, len(idx))
	for i, j := range idx {
		out[i] = tasks[j]
	}
	return out
}

// ask asks the optimizer for the k-th candidate.
func (p *runner) ask(step string, parent compiled, sample []contrastive.Feedback, k int) (string, error) {
	prompt, err := contrastive.UpdatePrompt(step, string(p.kind), parent.src, sample)
	if err != nil {
		return "", err
	}
	resp, err := p.optimizer.Complete(p.ctx, llm.Request{
		Purpose:  llm.PurposeOptimizer,
		Messages: []llm.Message{{Role: "user", Content: prompt}},
		Sample:   k,
	})
	if err != nil {
		return "", fmt.Errorf("optimizer call: %w", err)
	}
	out := fencedTemplate(resp.Message.Content)
	if strings.TrimSpace(out) == "" {
		return resp.Message.Content, errors.New("optimizer returned an empty candidate")
	}
	return out, nil
}

// fencedTemplate returns the candidate in a reply: the body of its first
// Markdown code fence when it has one (models put prose before and after
// it: "Here is the updated guideline: ```...``` It keeps ..."), else the
// whole reply. An unclosed fence (a cut reply) runs to the end.
func fencedTemplate(s string) string {
	i := strings.Index(s, "```")
	if i < 0 {
		return s
	}
	t := s[i+3:]
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{}") {
		t = t[nl+1:] // the language tag
	}
	if j := strings.Index(t, "```"); j >= 0 {
		t = t[:j]
	}
	return strings.TrimSpace(t) + "\n"
}

// loadSources reads the job's imported trajectory directories (optimize
// import): runs with compression events join the compressed runs mined for
// UT and CO feedback, runs without join the baseline.
func loadSources(dirs []string) (base, compressed []*rollout.Trajectory, err error) {
	for _, d := range dirs {
		trs, err := rollout.ReadTrajectories(filepath.Join(d, rollout.TrajectoriesFile))
		if err != nil {
			return nil, nil, invalid(fmt.Errorf("sources: %w", err))
		}
		for _, t := range trs {
			if len(t.Events) > 0 {
				compressed = append(compressed, t)
			} else {
				base = append(base, t)
			}
		}
	}
	return base, compressed, nil
}
