package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
)

// The run directory's files and folders (DESIGN.md, Run directory); each
// stage keeps its own under stages/<stage> (stage.go).
const (
	// JobFile is the resolved job `optimize run` writes.
	JobFile = "job.yaml"
	// SummaryFile is the summary `optimize run` writes.
	SummaryFile = "summary.json"
	// SpentFile records what every invocation of the run spent.
	SpentFile = "spent.json"
	// GuidelinesDir is the run's guideline registry.
	GuidelinesDir = "guidelines"
	// DatasetsDir holds the distillation export.
	DatasetsDir = "datasets"
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
	// Optimizer is the job's (acon or ace); with ace, UT stays empty and
	// UTCO is the last round's playbook.
	Optimizer string `json:"optimizer"`
	// Baseline runs without compression, Prompting with the starting
	// guideline, FIFO keeps the last turns; UT and UTCO are the last round's.
	Baseline          StageSummary      `json:"baseline"`
	Prompting         StageSummary      `json:"prompting"`
	FIFO              StageSummary      `json:"fifo"`
	UT                StageSummary      `json:"ut"`
	UTCO              StageSummary      `json:"utco"`
	SelectedGuideline string            `json:"selected_guideline"`
	StartingGuideline string            `json:"starting_guideline"`
	Rounds            []guideline.Round `json:"rounds"`
	// ACERounds are the rounds of the ACE optimizer (optimizer: ace).
	ACERounds    []guideline.ACERound `json:"ace_rounds,omitempty"`
	StoppedEarly bool                 `json:"stopped_early"`
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
	if job.Engine.WithDefaults().Kind != EngineInProcess {
		return runRemote(ctx, job, outDir, opts)
	}
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

type runner struct {
	ctx   context.Context
	job   *Job
	rt    *Runtime
	dir   string
	reg   registry
	meter *Meter
	kind  guideline.Kind
	// engine runs the rollout stages (engine.go); shared is the run store
	// when workers run them (Advance; nil in process).
	engine Engine
	shared *RunStore
	store  *StageStore // nil: no reuse across runs
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

// run is Algorithm 1 of ACON: roll the train split out without compression
// and with the starting guideline, then for each round a UT step and a CO
// step, then evaluate the selected guideline on the test split and distill
// it.
func (p *runner) run() (*RunSummary, error) {
	sum, seed, err := p.begin()
	if err != nil {
		return nil, err
	}
	base, cur, err := p.baselines(sum, seed)
	if err != nil {
		return nil, err
	}
	parent := seed
	if p.job.Optimizer == OptimizerACE {
		parent, cur, err = p.aceRounds(sum, seed, base, cur)
		if err != nil {
			return sum, err
		}
	}
	for r := 1; r <= p.job.Optimize.Rounds && p.job.Optimizer == OptimizerACON; r++ {
		if parent, cur, err = p.round(sum, r, parent, base, cur); err != nil {
			return sum, err
		}
		if last := sum.Rounds[len(sum.Rounds)-1]; last.UT.KeptParent && last.CO.KeptParent {
			slog.Info("round gained nothing; stopping early", "round", r)
			sum.StoppedEarly = true
			break
		}
	}
	if !p.job.Eval.Disabled {
		if sum.Eval, err = p.evaluate(seed, parent); err != nil {
			return sum, err
		}
	}
	if p.job.Distill.Enabled {
		if sum.Dataset, err = p.distill(sum, cur); err != nil {
			return sum, err
		}
	}
	return sum, p.writeSummary(sum)
}

// begin starts the summary with the projected cost and registers the
// starting guideline P(0).
func (p *runner) begin() (*RunSummary, compiled, error) {
	job := p.job
	sum := &RunSummary{Job: job.Name, Kind: string(p.kind), Optimizer: job.Optimizer}
	p.uses = nil // a retry builds its agents again
	if job.Optimize.Rounds > 0 {
		p.uses = append(p.uses, p.rt.use(llm.RoleOptimizer))
	}
	if job.Optimizer == OptimizerACE {
		p.uses = append(p.uses, p.rt.use(llm.RoleReflector), p.rt.use(llm.RoleCurator))
	}
	sum.Projected = Project(job, len(p.train))
	sum.Projected.Log()
	if err := sum.Projected.Check(job.Budget); err != nil {
		slog.Warn("the budget is smaller than the projected cost; the run will stop cleanly when it is reached", "reason", err)
	}
	seed, err := p.registerSeed()
	sum.StartingGuideline = seed.rec.ID
	return sum, seed, err
}

// baselines rolls the train split out without compression (ACON's
// baseline H), with FIFO (unless optimize.skip_fifo), and with the
// starting guideline (H' under P(0)).
//
// Run by workers (Advance), the three wait for their rollouts together.
func (p *runner) baselines(sum *RunSummary, seed compiled) (base, cur *stagedRollout, err error) {
	var waits []error
	base, err = p.rollout("baseline", compress.None, nil, p.train)
	if err != nil && !waiting(err) {
		return nil, nil, err
	}
	waits = append(waits, err)
	var fifo *stagedRollout
	if !p.job.Optimize.SkipFIFO {
		fifo, err = p.rollout("fifo", compress.FIFO, nil, p.train)
		if err != nil && !waiting(err) {
			return nil, nil, err
		}
		waits = append(waits, err)
	}
	cur, err = p.rollout("prompting", compress.Prompting, seed.g, p.train)
	if err = joinNeeds(append(waits, err)); err != nil {
		return nil, nil, err
	}
	sum.Baseline = StageSummary{Summary: base.Summary}
	if fifo != nil {
		sum.FIFO = StageSummary{Summary: fifo.Summary}
	}
	sum.Prompting = StageSummary{Summary: cur.Summary, GuidelineID: seed.rec.ID}
	return base, cur, nil
}

// round runs round r from parent, whose train rollout is cur: a UT step
// (baseline successes against compressed failures), then a CO step (what
// the successful compressed runs carried but never used). It returns the
// round's guideline and its train rollout.
func (p *runner) round(sum *RunSummary, r int, parent compiled, base, cur *stagedRollout) (compiled, *stagedRollout, error) {
	ut, utRun, utDec, err := p.advance(r, guideline.StepUT, fmt.Sprintf("r%d-ut-train", r), parent, base, cur)
	if err != nil {
		return parent, cur, err
	}
	sum.UT = StageSummary{Summary: utRun.Summary, GuidelineID: ut.rec.ID}
	co, coRun, coDec, err := p.advance(r, guideline.StepCO, fmt.Sprintf("r%d-utco-train", r), ut, base, utRun)
	if err != nil {
		return parent, cur, err
	}
	sum.UTCO = StageSummary{Summary: coRun.Summary, GuidelineID: co.rec.ID}
	sum.SelectedGuideline = co.rec.ID
	sum.Rounds = append(sum.Rounds, guideline.Round{N: r, UT: utDec, CO: coDec})
	return co, coRun, p.writeSummary(sum)
}

// advance runs a step from parent and rolls the guideline it chose out on
// the train split as the stage trainStage; a parent kept keeps its train
// rollout cur.
func (p *runner) advance(r int, step, trainStage string, parent compiled, base, cur *stagedRollout) (compiled, *stagedRollout, guideline.Decision, error) {
	g, dec, err := p.step(r, step, parent, base, cur)
	if err != nil || dec.KeptParent {
		return g, cur, dec, err
	}
	run, err := p.rollout(trainStage, compress.Guideline, g.g, p.train)
	return g, run, dec, err
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
