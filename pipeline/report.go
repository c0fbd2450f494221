package pipeline

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/report"
)

// Report writes the run's report (report.Run) into runDir and prints its
// brief to w: the verdict, the money spent and the paths written.
func Report(w io.Writer, runDir string, sum *RunSummary, gate []eval.Rule) error {
	r := &report.Run{
		Job: sum.Job, Kind: sum.Kind, EmbeddedModel: sum.EmbeddedModel, EmbeddedRoles: sum.EmbeddedRoles,
		Baseline: sum.Baseline.Summary, FIFO: sum.FIFO.Summary, Prompting: sum.Prompting.Summary, UT: sum.UT.Summary, UTCO: sum.UTCO.Summary,
		Arms:   report.Arms{None: evalNone, Prompting: evalPrompting, Selected: evalSelected},
		Gate:   report.GateOf(gate),
		Rounds: sum.Rounds, ACE: sum.Optimizer == OptimizerACE, ACERounds: sum.ACERounds, Roles: sum.Roles, MalformedFile: MalformedFile,
		Starting: sum.StartingGuideline, Selected: sum.SelectedGuideline,
	}
	dir := filepath.Join(runDir, GuidelinesDir)
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		return err
	}
	if err := selectedGuideline(reg, r); err != nil {
		return err
	}
	if sum.Eval != nil {
		res, err := eval.Load(sum.Eval.Dir)
		if err != nil {
			return err
		}
		kind, err := guideline.ParseKind(sum.Kind)
		if err != nil {
			return err
		}
		promoted, _, err := PromotedGuideline(dir, kind)
		if err != nil {
			return err
		}
		r.Eval, r.EvalDir, r.Baselines = res, sum.Eval.Dir, report.BaselinesOf(res, promoted)
	}
	if err := report.WriteRun(runDir, r); err != nil {
		return err
	}
	written := []string{filepath.Join(runDir, report.MarkdownFile), filepath.Join(runDir, report.HTMLFile)}
	if sum.Dataset != nil {
		written = append(written, filepath.Join(runDir, DatasetsDir)+string(filepath.Separator))
	}
	written = append(written, filepath.Join(runDir, SummaryFile))
	report.Brief(w, r, sum.Money(), written)
	return nil
}

// selectedGuideline fills the selected guideline, its diff against its
// parent, and the diff from the starting guideline.
func selectedGuideline(reg *guideline.Registry, r *report.Run) error {
	g, err := shownGuideline(reg, r.Selected, fmt.Sprintf("the selected %s guideline", r.Kind))
	if err != nil {
		return err
	}
	r.Guideline = g
	r.Diff, err = reg.Diff(r.Starting, r.Selected)
	return err
}

// shownGuideline is guideline id of reg as a report shows it: its text and
// its diff against its parent.
func shownGuideline(reg *guideline.Registry, id, role string) (report.Guideline, error) {
	rec, src, err := reg.Get(id)
	if err != nil {
		return report.Guideline{}, err
	}
	g := report.Guideline{ID: rec.ID, Role: role, Text: src, Parent: rec.Parent}
	if rec.Parent != "" {
		if g.ParentDiff, err = reg.Diff(rec.Parent, rec.ID); err != nil {
			return g, err
		}
	}
	return g, nil
}

// Money is what the run spent in dollars, or none when the embedded model
// did all its work.
func (s *RunSummary) Money() string {
	if s.EmbeddedModel {
		return NoMoney
	}
	return fmt.Sprintf("$%.4f", s.Spent.CostUSD)
}

// EvalLead is what an `optimize eval` report puts before its details:
// the job's gate, the arms without compression and with the guideline
// promoted in the evaluation's registry (--registry, or --run's), and the
// registry's guidelines the candidates ran.
func EvalLead(job *Job, res *eval.Result, opt EvalOptions) (report.Lead, error) {
	lead := report.Lead{Gate: report.GateOf(job.Eval.Rules()), Baselines: report.BaselinesOf(res, "")}
	opt, err := withRun(opt)
	if err != nil || opt.Registry == "" {
		return lead, err
	}
	reg, err := guideline.OpenRegistry(opt.Registry)
	if err != nil {
		return lead, err
	}
	id, _, err := PromotedGuideline(opt.Registry, guideline.KindHistory)
	if err == nil && id == "" {
		id, _, err = PromotedGuideline(opt.Registry, guideline.KindObservation)
	}
	if err != nil {
		return lead, err
	}
	lead.Baselines = report.BaselinesOf(res, id)
	seen := map[string]bool{}
	for _, a := range res.Summary.Candidates {
		for _, gid := range []string{a.HistoryGuidelineID, a.ObservationGuidelineID} {
			if gid == "" || seen[gid] {
				continue
			}
			seen[gid] = true
			g, err := shownGuideline(reg, gid, "run by candidate "+a.Name)
			if errors.Is(err, guideline.ErrNotFound) {
				continue // a built-in or a file, not in this registry
			}
			if err != nil {
				return lead, err
			}
			lead.Guidelines = append(lead.Guidelines, g)
		}
	}
	return lead, nil
}
