package pipeline

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// split returns a step's selection tasks and the items its feedback comes
// from, which never share a task. UT selects on a held-out part of the
// tasks the baseline solves (ACON's I⁺) and analyses the contrastive pairs
// of the rest; CO selects on a held-out part of the train split and
// analyses the successful compressed runs of the rest.
func (p *runner) split(step string, base, cur *stagedRollout) ([]env.Task, []contrastive.Pair, error) {
	opt := p.job.Optimize
	var tasks []env.Task
	if step == contrastive.StepUT {
		tasks = guideline.Holdout(guideline.Solved(p.train, base.Outcomes), opt.UTHoldout, p.job.Seed)
	} else {
		tasks = guideline.Holdout(p.train, opt.COHoldout, p.job.Seed)
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
func (p *runner) analyse(round int, step, dir string, items []contrastive.Pair, dec *guideline.Decision) ([]contrastive.Feedback, error) {
	opt := p.job.Optimize
	fb, err := contrastive.Analyze(p.ctx, p.optimizer, step, items, contrastive.Options{
		Round: round, Kind: string(p.kind), StepRatio: opt.StepRatio, Concurrency: p.job.Rollout.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	if err := contrastive.WriteFeedback(filepath.Join(dir, contrastive.FeedbackFile), fb); err != nil {
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
