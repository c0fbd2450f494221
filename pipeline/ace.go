package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// The ACE optimizer (job optimizer: ace). Each round mines the same
// contrastive sets as ACON's UT and CO steps, asks the reflector to tag
// the bullets and the curator to propose delta operations, applies them
// in code (guideline.Playbook), de-duplicates, enforces the token budget,
// and keeps the batch only when it does not lose to the playbook without
// it on held-out selection tasks. Every round is a stage: a run cut off
// mid-round re-runs that round from its saved parts, and the embedded
// model and the response cache answer alike, so the playbook comes out
// the same.

// aceRounds runs the job's ACE rounds from the seed playbook and returns
// the final playbook and its train rollout.
func (p *runner) aceRounds(sum *RunSummary, seed compiled, base, cur *stagedRollout) (compiled, *stagedRollout, error) {
	parent, err := p.registerSeedPlaybook()
	if err != nil {
		return seed, cur, err
	}
	if parent.rec.ID != seed.rec.ID {
		// The seed playbook (no bullets yet) renders its own source.
		if cur, err = p.rollout("r0-ace-train", compress.Guideline, parent.g, p.train); err != nil {
			return seed, cur, err
		}
	}
	spec := p.job.ACE
	rounds := spec.Epochs
	if spec.Mode == ACEOnline {
		stream, err := p.aceStream()
		if err != nil {
			return seed, cur, err
		}
		rounds = (len(stream) + spec.Every - 1) / spec.Every
	}
	for r := 1; r <= rounds; r++ {
		next, dec, err := p.aceRound(r, parent, base, cur)
		if err != nil {
			return parent, cur, err
		}
		sum.ACERounds = append(sum.ACERounds, dec)
		if next.rec.ID != parent.rec.ID {
			if cur, err = p.rollout(fmt.Sprintf("r%d-ace-train", r), compress.Guideline, next.g, p.train); err != nil {
				return next, cur, err
			}
		}
		parent = next
		sum.UTCO = StageSummary{Summary: cur.Summary, GuidelineID: parent.rec.ID}
		sum.SelectedGuideline = parent.rec.ID
		if err := p.writeSummary(sum); err != nil {
			return parent, cur, err
		}
	}
	sum.SelectedGuideline = parent.rec.ID
	return parent, cur, nil
}

// registerSeedPlaybook stores the starting guideline as a playbook: the
// playbook it renders when it is one (a promoted playbook), else a
// playbook with no bullets on it as the frame.
func (p *runner) registerSeedPlaybook() (compiled, error) {
	pb, err := guideline.ParsePlaybook(p.kind, p.seedSrc)
	if errors.Is(err, guideline.ErrNotPlaybook) {
		pb, err = guideline.NewPlaybook(p.kind, p.seedSrc)
	}
	if err != nil {
		return compiled{}, invalid(err)
	}
	return p.putPlaybook(guideline.Record{Step: guideline.StepSeed, Source: p.seedOrigin}, pb)
}

// putPlaybook registers pb and compiles it for rollouts.
func (p *runner) putPlaybook(rec guideline.Record, pb *guideline.Playbook) (compiled, error) {
	rec, t, err := p.reg.PutPlaybook(rec, pb)
	if err != nil {
		return compiled{}, err
	}
	p.keep(t.Source(), t)
	return compiled{rec: rec, src: t.Source(), g: promptOf(t)}, nil
}

// aceRound runs round r as a stage and returns the playbook it chose.
func (p *runner) aceRound(r int, parent compiled, base, cur *stagedRollout) (compiled, guideline.ACERound, error) {
	window, err := p.aceWindow(r)
	if err != nil {
		return parent, guideline.ACERound{}, err
	}
	// A round does not depend on how many follow it.
	spec := p.job.ACE
	spec.Epochs = 0
	inputs := map[string]any{
		"parent": parent.rec.ID, "baseline": base.name(), "current": cur.name(),
		"ace": spec, "optimize": stepSettings(guideline.StepUT, p.job.Optimize), "co_holdout": p.job.Optimize.COHoldout,
		"seed": p.job.Seed, "models": p.rt.ModelInputs(), "window": window,
	}
	// No stage store: a round's playbooks live in the run's registry,
	// which a stage taken from the store would not bring along.
	dec, err := stage(p.dir, p.meter, stageSpec[guideline.ACERound]{name: fmt.Sprintf("r%d-ace", r), inputs: inputs, shared: []string{GuidelinesDir},
		run: func(dir string) (guideline.ACERound, map[string]float64, error) {
			d, err := p.runACERound(r, dir, window, parent, base, cur)
			return d, map[string]float64{"feedback": float64(d.Feedback), "operations": float64(len(d.Ops)), "playbook_tokens": float64(d.Tokens)}, err
		}})
	if err != nil || dec.KeptParent {
		return parent, dec, err
	}
	rec, pb, err := p.reg.Playbook(dec.Chosen)
	if err != nil {
		return parent, dec, err
	}
	c, err := p.putPlaybook(rec, pb)
	return c, dec, err
}

// aceStream lists, in order, the trajectories an online run reads: the
// train split's, then those of the job's imported sources (the nightly
// loop's sessions), by task id.
func (p *runner) aceStream() ([]string, error) {
	ids := taskIDs(p.train)
	for _, dir := range p.job.Sources {
		outs, err := rollout.ReadIndex(dir)
		if err != nil {
			return nil, invalid(fmt.Errorf("sources: %w", err))
		}
		for _, o := range outs {
			ids = append(ids, o.TaskID)
		}
	}
	return ids, nil
}

// aceWindow names the trajectories round r reads: all of them offline
// (nil), the r-th run of Every of the stream online.
func (p *runner) aceWindow(r int) ([]string, error) {
	if p.job.ACE.Mode != ACEOnline {
		return nil, nil
	}
	stream, err := p.aceStream()
	if err != nil {
		return nil, err
	}
	n := p.job.ACE.Every
	lo := min((r-1)*n, len(stream))
	return stream[lo:min(lo+n, len(stream))], nil
}

// runACERound mines and analyses feedback, reflects, curates, applies and
// gates one delta batch.
func (p *runner) runACERound(r int, dir string, window []string, parent compiled, base, cur *stagedRollout) (guideline.ACERound, error) {
	dec := guideline.ACERound{N: r, Parent: parent.rec.ID, Window: window}
	_, pb, err := p.reg.Playbook(parent.rec.ID)
	if err != nil {
		return dec, err
	}
	if g, ok, err := p.waitingGate(dir); ok || err != nil {
		if err != nil {
			return dec, err
		}
		return p.gate(r, dir, g.dec, parent, cur, g.tasks, [3]*guideline.Playbook{pb, g.tagged, g.cand}, g.rec)
	}
	tasks, fb, err := p.aceFeedback(r, dir, window, base, cur, &dec)
	if err != nil {
		return dec, err
	}
	dec.Tokens = pb.Tokens(p.rt.Tokenizer.Count)
	if len(fb) == 0 {
		dec.Chosen, dec.KeptParent = parent.rec.ID, true
		dec.Reason = fmt.Sprintf("no usable feedback (%d rejected): no operation applied, the playbook is kept", dec.Rejected)
		return dec, nil
	}
	tagged := pb.Clone()
	tags, err := p.reflect(r, pb, fb)
	if err != nil {
		return dec, err
	}
	dec.Tags, dec.TagsRejected = tags, tagged.ApplyTags(r, tags)
	// Counters grow digits: the tagged playbook is budgeted too.
	if dec.Evicted, err = tagged.Budget(p.job.ACE.MaxTokens, p.rt.Tokenizer.Count); err != nil {
		return dec, invalid(fmt.Errorf("ace.max_tokens: %w", err))
	}
	cand, err := p.curate(r, tagged, fb, &dec)
	if err != nil {
		return dec, err
	}
	fbIDs := make([]string, len(fb))
	for i, f := range fb {
		fbIDs[i] = f.ID
	}
	rec := guideline.Record{Parent: parent.rec.ID, Round: r, Step: guideline.StepACE, FeedbackIDs: fbIDs, Source: llm.RoleCurator}
	dec.Tokens = cand.Tokens(p.rt.Tokenizer.Count)
	if cand.Source() == tagged.Source() {
		dec.Reason = "the curator's batch changed nothing"
		return p.keepTagged(dec, parent, pb, tagged, rec)
	}
	return p.gate(r, dir, dec, parent, cur, tasks, [3]*guideline.Playbook{pb, tagged, cand}, rec)
}

// keepTagged ends a round without a batch: the playbook with the round's
// counters, or the parent when no tag changed one.
func (p *runner) keepTagged(dec guideline.ACERound, parent compiled, pb, tagged *guideline.Playbook, rec guideline.Record) (guideline.ACERound, error) {
	dec.Tokens = tagged.Tokens(p.rt.Tokenizer.Count)
	if tagged.Source() == pb.Source() {
		dec.Chosen, dec.KeptParent = parent.rec.ID, true
		return dec, nil
	}
	c, err := p.putPlaybook(rec, tagged)
	dec.Chosen = c.rec.ID
	return dec, err
}

// gate rolls the playbook with the batch out on the selection tasks and
// keeps the batch when it passes the gate against the parent's rollout of
// the same tasks; the parent has the batch's bullets but for the batch,
// and counters only differ in numbers.
// pbs are the parent's playbook, it with the round's tags, and the
// candidate with the batch.
func (p *runner) gate(r int, dir string, dec guideline.ACERound, parent compiled, cur *stagedRollout, tasks []env.Task, pbs [3]*guideline.Playbook, rec guideline.Record) (guideline.ACERound, error) {
	c, err := p.putPlaybook(rec, pbs[2])
	if err != nil {
		return dec, err
	}
	dec.Candidate = c.rec.ID
	killpoint.Reach("ace-round") // the batch stored, its gate not yet run
	res, err := p.rollout(filepath.Join(fmt.Sprintf("r%d-ace-select", r), c.rec.ID), compress.Guideline, c.g, tasks)
	if waiting(err) {
		return dec, errors.Join(err, keepGate(dir, dec, pbs[1], rec))
	}
	if err != nil {
		return dec, err
	}
	if err := os.Remove(filepath.Join(dir, aceGateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return dec, err
	}
	with, without := guideline.Pick(res.Outcomes, tasks), guideline.Pick(cur.Outcomes, tasks)
	var pass bool
	dec.Gate, pass = guideline.GateBatch(with, without, uint64(p.job.Seed), p.job.ACE.rules())
	if pass {
		dec.Chosen, dec.BatchKept = c.rec.ID, true
		dec.Reason = fmt.Sprintf("the batch passed the gate on %d selection tasks", len(tasks))
		slog.Info("ace batch kept", "round", r, "playbook", c.rec.ID, "tokens", dec.Tokens)
		return dec, nil
	}
	dec.Reason = "the batch was rejected by the gate: " + failedRules(dec)
	slog.Info("ace batch rejected", "round", r, "reason", dec.Reason)
	return p.keepTagged(dec, parent, pbs[0], pbs[1], rec)
}

func failedRules(dec guideline.ACERound) string {
	var out string
	for _, v := range dec.Gate {
		if !v.Pass {
			if out != "" {
				out += "; "
			}
			out += v.Reason
		}
	}
	return out
}

// aceFeedback mines the round's contrastive sets as UT and CO do and
// analyses them: UT's failures against the baseline's successes, CO's
// successful compressed runs. It returns the selection tasks (held out of
// the baseline's successes) and the usable feedback of the other tasks
// (of the round's window, online).
func (p *runner) aceFeedback(r int, dir string, window []string, base, cur *stagedRollout, dec *guideline.ACERound) ([]env.Task, []contrastive.Feedback, error) {
	tasks, ut, err := p.split(contrastive.StepUT, base, cur)
	if err != nil {
		return nil, nil, err
	}
	_, co, err := p.split(contrastive.StepCO, base, cur)
	if err != nil {
		return nil, nil, err
	}
	held := taskIDs(tasks)
	keep := func(it contrastive.Pair) bool {
		id := it.Compressed.TaskID
		return !slices.Contains(held, id) && (window == nil || slices.Contains(window, id))
	}
	dec.Tasks = held
	var out []contrastive.Feedback
	for _, s := range []struct {
		step  string
		items []contrastive.Pair
	}{{contrastive.StepUT, ut}, {contrastive.StepCO, co}} {
		items := slices.DeleteFunc(s.items, func(it contrastive.Pair) bool { return !keep(it) })
		for _, it := range items {
			dec.FeedbackTasks = append(dec.FeedbackTasks, it.Compressed.TaskID)
		}
		var d guideline.Decision
		if err := os.MkdirAll(filepath.Join(dir, s.step), 0o755); err != nil {
			return nil, nil, err
		}
		fb, err := p.analyse(r, s.step, filepath.Join(dir, s.step), items, &d)
		if err != nil {
			return nil, nil, err
		}
		dec.Feedback += d.Feedback
		dec.Rejected += d.Rejected
		out = append(out, fb...)
	}
	return tasks, out, nil
}

// aceGateFile keeps, in an ACE round's directory, a round whose batch
// waits for its gate's rollout on workers (Advance), so the next advance
// gates it without analysing, reflecting and curating again.
const aceGateFile = "gate.json"

type aceGate struct {
	Decision guideline.ACERound `json:"decision"`
	Tagged   json.RawMessage    `json:"tagged"`
	Record   guideline.Record   `json:"record"`
}

// keepGate writes the round waiting for its gate to dir.
func keepGate(dir string, dec guideline.ACERound, tagged *guideline.Playbook, rec guideline.Record) error {
	b, err := guideline.MarshalPlaybook(tagged)
	if err != nil {
		return err
	}
	return rollout.WriteJSON(filepath.Join(dir, aceGateFile), aceGate{Decision: dec, Tagged: b, Record: rec})
}

// waitingGate is a round kept by keepGate, read back (ok) with its
// selection tasks and its tagged and candidate playbooks.
type waitingGate struct {
	dec          guideline.ACERound
	rec          guideline.Record
	tasks        []env.Task
	tagged, cand *guideline.Playbook
}

func (p *runner) waitingGate(dir string) (g waitingGate, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, aceGateFile))
	if errors.Is(err, os.ErrNotExist) {
		return g, false, nil
	}
	var kept aceGate
	if err == nil {
		err = json.Unmarshal(b, &kept)
	}
	if err == nil {
		g.tagged, err = guideline.UnmarshalPlaybook(kept.Tagged)
	}
	if err == nil {
		_, g.cand, err = p.reg.Playbook(kept.Decision.Candidate)
	}
	if err != nil {
		return g, false, fmt.Errorf("%s: %w", aceGateFile, err)
	}
	g.dec, g.rec = kept.Decision, kept.Record
	byID := map[string]env.Task{}
	for _, t := range p.train {
		byID[t.ID] = t
	}
	for _, id := range g.dec.Tasks { // in the round's order
		t, ok := byID[id]
		if !ok {
			return g, false, fmt.Errorf("%s: task %s is not in the train split", aceGateFile, id)
		}
		g.tasks = append(g.tasks, t)
	}
	return g, true, nil
}
