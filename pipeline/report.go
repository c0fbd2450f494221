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
func Report(w io.Writer, runDir string, sum *RunSummary) error {
	r := &report.Run{
		Job: sum.Job, Kind: sum.Kind, EmbeddedModel: sum.EmbeddedModel, EmbeddedRoles: sum.EmbeddedRoles,
		Baseline: sum.Baseline.Summary, FIFO: sum.FIFO.Summary, Prompting: sum.Prompting.Summary, UT: sum.UT.Summary, UTCO: sum.UTCO.Summary,
		Arms:   report.Arms{None: evalNone, Prompting: evalPrompting, Selected: evalSelected},
		Rounds: sum.Rounds, Roles: sum.Roles, MalformedFile: MalformedFile,
		Starting: sum.StartingGuideline, Selected: sum.SelectedGuideline,
	}
	if sum.Eval != nil {
		res, err := eval.Load(sum.Eval.Dir)
		if err != nil {
			return err
		}
		r.Eval, r.EvalDir = res, sum.Eval.Dir
	}
	reg, err := guideline.OpenRegistry(filepath.Join(runDir, GuidelinesDir))
	if err != nil {
		return err
	}
	if r.Diff, err = reg.Diff(sum.StartingGuideline, sum.SelectedGuideline); err != nil {
		return err
	}
	if err := report.WriteRun(runDir, r); err != nil {
		return err
	}
	written := []string{filepath.Join(runDir, report.MarkdownFile)}
	if r.Eval != nil {
		written = append(written, filepath.Join(runDir, report.HTMLFile))
	}
	if sum.Dataset != nil {
		written = append(written, filepath.Join(runDir, DatasetsDir)+string(filepath.Separator))
	}
	written = append(written, filepath.Join(runDir, SummaryFile))
	report.Brief(w, r, sum.Money(), written)
	return nil
}

// Money is what the run spent in dollars, or none when the embedded model
// did all its work.
func (s *RunSummary) Money() string {
	if s.EmbeddedModel {
		return NoMoney
	}
	return fmt.Sprintf("$%.4f", s.Spent.CostUSD)
}
