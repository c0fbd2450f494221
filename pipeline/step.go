package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/progress"
	"github.com/ctxopt/ctxopt/rollout"
)

// step runs one UT or CO step: analysis, K candidates, selection.
func (p *runner) step(round int, step string, parent compiled, base, cur *stagedRollout) (compiled, guideline.Decision, error) {
	name := fmt.Sprintf("r%d-%s", round, step)
	inputs, err := p.stepInputs(step, parent, base, cur)
	if err != nil {
		return compiled{}, guideline.Decision{}, err
	}
	dec, err := stage(p.dir, p.meter, stageSpec[guideline.Decision]{name: name, inputs: inputs, store: p.store, shared: []string{GuidelinesDir}, run: func(dir string) (guideline.Decision, map[string]float64, error) {
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

// runStep runs one UT or CO step: analyse, propose, select.
func (p *runner) runStep(round int, step, dir string, parent compiled, base, cur *stagedRollout) (guideline.Decision, error) {
	dec := guideline.Decision{Step: step, Parent: parent.rec.ID, Rule: p.job.Optimize.Selection}
	tasks, items, err := p.split(step, base, cur)
	if err != nil {
		return dec, err
	}
	if d, cands, ok, err := p.proposed(dir); ok || err != nil {
		if err != nil {
			return dec, err
		}
		return p.selectFrom(round, step, dir, d, cur, tasks, cands)
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
	return p.selectFrom(round, step, dir, dec, cur, tasks, cands)
}

// selectFrom scores the proposed candidates and decides.
func (p *runner) selectFrom(round int, step, dir string, dec guideline.Decision, cur *stagedRollout, tasks []env.Task, cands []compiled) (guideline.Decision, error) {
	if err := p.score(round, step, cur, tasks, cands, &dec); err != nil {
		if waiting(err) {
			err = errors.Join(err, rollout.WriteJSON(filepath.Join(dir, proposedFile), dec))
		}
		return dec, err
	}
	guideline.Decide(&dec)
	slog.Info("selected", "step", step, "round", round, "chosen", dec.Chosen, "kept_parent", dec.KeptParent, "reason", dec.Reason)
	// Decided, the step's directory holds what it holds in process.
	if err := os.Remove(filepath.Join(dir, proposedFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return dec, err
	}
	return dec, nil
}

// proposedFile keeps, in a step's directory, the decision of a step whose
// candidates wait for their rollouts on workers (Advance), so the next
// advance scores them without analysing and asking the optimizer again.
const proposedFile = "proposed.json"

// proposed reads dir's proposal back (ok) with the candidates compiled.
func (p *runner) proposed(dir string) (dec guideline.Decision, cands []compiled, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, proposedFile))
	if errors.Is(err, os.ErrNotExist) {
		return dec, nil, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &dec)
	}
	if err != nil {
		return dec, nil, false, fmt.Errorf("%s: %w", proposedFile, err)
	}
	cands = make([]compiled, p.job.Optimize.Candidates)
	for _, c := range dec.Candidates {
		if !c.Valid {
			continue
		}
		rec, src, err := p.reg.Get(c.ID)
		if err == nil {
			cands[c.K], err = p.register(src, rec)
		}
		if err != nil {
			return dec, nil, false, fmt.Errorf("%s: candidate %s: %w", proposedFile, c.ID, err)
		}
	}
	return dec, cands, true, nil
}

// score rolls every valid candidate out on the selection tasks and scores
// it and the parent there.
func (p *runner) score(round int, step string, cur *stagedRollout, tasks []env.Task, cands []compiled, dec *guideline.Decision) error {
	parentTr := guideline.Pick(cur.Outcomes, tasks)
	dec.Parent0 = guideline.Objective(step, p.job.Optimize.Lambda, parentTr, parentTr)
	valid := 0
	for _, c := range dec.Candidates {
		if c.Valid {
			valid++
		}
	}
	name := fmt.Sprintf("r%d-%s-select", round, step)
	prog := progress.New(name, valid*len(tasks))
	defer prog.Finish()
	// Run by workers (Advance), the candidates wait for their rollouts
	// together.
	var waits []error
	for i := range dec.Candidates {
		c := &dec.Candidates[i]
		if !c.Valid {
			continue
		}
		res, err := p.rolloutCounted(filepath.Join(name, c.ID), compress.Guideline, cands[c.K].g, tasks, prog)
		if waiting(err) {
			waits = append(waits, err)
			continue
		}
		if err != nil {
			return err
		}
		s := guideline.Objective(step, p.job.Optimize.Lambda, res.Outcomes, parentTr)
		c.Score = &s
		pr := guideline.Compare(res.Outcomes, parentTr, uint64(p.job.Seed))
		c.Paired = &pr
		if _, err := p.reg.Score(c.ID, map[string]float64{step + "_selection_success": s.Success, step + "_objective": s.Objective}); err != nil {
			return err
		}
	}
	return joinNeeds(waits)
}
