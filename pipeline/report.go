package pipeline

import (
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
		Rounds: sum.Rounds, Roles: sum.Roles, MalformedFile: MalformedFile,
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

// selectedGuideline fills the selected guideline's text, its parent and
// the diffs from its parent and from the starting guideline.
func selectedGuideline(reg *guideline.Registry, r *report.Run) error {
	rec, src, err := reg.Get(r.Selected)
	if err != nil {
		return err
	}
	r.SelectedText, r.Parent = src, rec.Parent
	if rec.Parent != "" {
		if r.ParentDiff, err = reg.Diff(rec.Parent, r.Selected); err != nil {
			return err
		}
	}
	r.Diff, err = reg.Diff(r.Starting, r.Selected)
	return err
}

// Money is what the run spent in dollars, or none when the embedded model
// did all its work.
func (s *RunSummary) Money() string {
	if s.EmbeddedModel {
		return NoMoney
	}
	return fmt.Sprintf("$%.4f", s.Spent.CostUSD)
}

// EvalVerdict is what an `optimize eval` report's verdict is judged under:
// the job's gate, and the arms without compression and with the guideline
// promoted in the evaluation's registry (--registry, or --run's).
func EvalVerdict(job *Job, res *eval.Result, opt EvalOptions) (report.Gate, report.Baselines, error) {
	g := report.GateOf(job.Eval.Rules())
	opt, err := withRun(opt)
	if err != nil || opt.Registry == "" {
		return g, report.BaselinesOf(res, ""), err
	}
	id, _, err := PromotedGuideline(opt.Registry, guideline.KindHistory)
	if err != nil {
		return g, report.Baselines{}, err
	}
	if id == "" {
		id, _, err = PromotedGuideline(opt.Registry, guideline.KindObservation)
	}
	return g, report.BaselinesOf(res, id), err
}
