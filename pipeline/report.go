package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/report"
)

// Report writes report.md (and, with the final evaluation, report.html)
// into runDir and prints report.md to w: the results before and after
// optimization, the held-out evaluation, each selection decision, and the
// diff of the selected guideline against the starting one.
func Report(w io.Writer, runDir string, sum *RunSummary) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ctxopt run: %s\n\n", sum.Job)
	if n := report.ModelNotice(sum.EmbeddedModel, sum.EmbeddedRoles); n != "" {
		b.WriteString(n + "\n\n")
	}
	fmt.Fprintf(&b, "Optimized: the %s guideline.\n\n", sum.Kind)
	headline(&b, sum)
	if sum.EmbeddedModel {
		constructed(&b, sum)
	}
	fmt.Fprintf(&b, "## Before and after (train split, %d tasks, the split the guidelines were selected on)\n\n```\n", sum.Baseline.Tasks)
	report.PrintTable(&b, []report.Row{
		{Name: "none", Summary: sum.Baseline.Summary},
		{Name: "fifo", Summary: sum.FIFO.Summary},
		{Name: "prompting", Summary: sum.Prompting.Summary},
		{Name: "acon ut", Summary: sum.UT.Summary},
		{Name: "acon utco", Summary: sum.UTCO.Summary},
	})
	b.WriteString("```\n\n")
	fmt.Fprintf(&b, "Compressor output tokens per task: prompting %.0f, UT %.0f, UTCO %.0f.\n\n",
		sum.Prompting.CompressorOutputTokensMean, sum.UT.CompressorOutputTokensMean, sum.UTCO.CompressorOutputTokensMean)
	var res *eval.Result
	if sum.Eval != nil {
		// The final evaluation's own report (eval/report.md, plots, html);
		// its tables and plots are part of the run's report too.
		r, err := eval.Load(sum.Eval.Dir)
		if err != nil {
			return err
		}
		res = r
		if err := report.Write(sum.Eval.Dir, res, fmt.Sprintf("ctxopt run %s: held-out evaluation", sum.Job)); err != nil {
			return err
		}
		fmt.Fprintf(&b, "## Held-out evaluation (%s split, %d tasks, never used for selection)\n\n", res.Summary.Split, len(res.Summary.Tasks))
		rel, err := filepath.Rel(runDir, filepath.Join(sum.Eval.Dir, report.PlotsDir))
		if err != nil {
			return err
		}
		report.Markdown(&b, res, report.Plots(res), filepath.ToSlash(rel))
	}
	if len(sum.Roles) > 0 {
		b.WriteString("## Calls per role (this invocation)\n\n")
		fmt.Fprintf(&b, "Replies that could not be used as asked are counted as malformed and recorded with the raw reply in %s.\n\n```\n", MalformedFile)
		PrintRoleStats(&b, sum.Roles)
		b.WriteString("```\n\n")
	}
	b.WriteString("## Decisions\n\n")
	for _, r := range sum.Rounds {
		for _, d := range []Decision{r.UT, r.CO} {
			fmt.Fprintf(&b, "### Round %d, %s\n\n%s\n\nFeedback: %d usable, %d rejected, from %d tasks. Selection (rule %s) on %d other tasks; parent %s scores %.3f.",
				r.N, d.Step, d.Reason, d.Feedback, d.Rejected, len(d.FeedbackTasks), d.Rule, len(d.Tasks), d.Parent, d.Parent0.Objective)
			if sp := d.Spread; sp != nil {
				fmt.Fprintf(&b, " Spread of the %d scored candidates: success %.3f to %.3f (sd %.3f), objective %.3f to %.3f.",
					sp.N, sp.SuccessMin, sp.SuccessMax, sp.SuccessSD, sp.ObjectiveMin, sp.ObjectiveMax)
			}
			b.WriteString("\n\n")
			b.WriteString("| k | id | valid | success | objective | Δ success vs parent [95% CI] | token change | note |\n|---|---|---|---|---|---|---|---|\n")
			for _, c := range d.Candidates {
				note := c.Rejected
				if len(c.Repairs) > 0 {
					note += fmt.Sprintf(" repaired: %v", c.Repairs)
				}
				if c.Score == nil {
					fmt.Fprintf(&b, "| %d | %s | %v | | | | | %s |\n", c.K, c.ID, c.Valid, note)
					continue
				}
				fmt.Fprintf(&b, "| %d | %s | %v | %.3f | %.3f | %+.3f [%+.3f, %+.3f] (n=%d) | %+.1f%% | %s |\n",
					c.K, c.ID, c.Valid, c.Score.Success, c.Score.Objective, c.Paired.SuccessDiff, c.Paired.CILow, c.Paired.CIHigh, c.Paired.N, 100*c.Paired.TokenChange, note)
			}
			b.WriteString("\n")
		}
	}
	reg, err := guideline.OpenRegistry(filepath.Join(runDir, "guidelines"))
	if err != nil {
		return err
	}
	diff, err := reg.Diff(sum.StartingGuideline, sum.SelectedGuideline)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "## Selected guideline %s against the starting one %s\n\n```diff\n%s```\n", sum.SelectedGuideline, sum.StartingGuideline, diff)
	if err := atomicfile.WriteFile(filepath.Join(runDir, report.MarkdownFile), b.Bytes(), 0o644); err != nil {
		return err
	}
	if res != nil {
		if err := report.WriteHTML(filepath.Join(runDir, report.HTMLFile), res, report.Plots(res), "ctxopt run: "+sum.Job); err != nil {
			return err
		}
	}
	_, err = w.Write(b.Bytes())
	return err
}

// headline leads the report with what ACON reports: success, EM/F1, peak
// tokens and dependency of no compression, prompting and the selected
// guideline, on the test split when it was evaluated.
func headline(b *bytes.Buffer, sum *RunSummary) {
	type row struct {
		name                      string
		success, em, f1, peak, dp float64
	}
	fromStage := func(name string, s StageSummary) row {
		return row{name, s.SuccessRate, s.EM, s.F1, s.PeakTokensMean, s.DependencyMean}
	}
	split := "train"
	rows := []row{fromStage("no compression", sum.Baseline), fromStage("prompting", sum.Prompting), fromStage("selected (utco)", sum.UTCO)}
	if ev := sum.Eval; ev != nil {
		split = ev.Split
		for i, name := range []string{evalNone, evalPrompting, evalSelected} {
			if a, ok := ev.Arm(name); ok {
				m := a.Metrics
				rows[i] = row{rows[i].name, m[eval.MetricSuccess].Point, m[eval.MetricEM].Point, m[eval.MetricF1].Point,
					m[eval.MetricPeakTokens].Point, m[eval.MetricDependency].Point}
			}
		}
	}
	fmt.Fprintf(b, "## Headline (%s split)\n\n| | success | EM | F1 | peak tokens | dependency |\n|---|---|---|---|---|---|\n", split)
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %.1f%% | %.3f | %.3f | %.0f | %.3g |\n", r.name, 100*r.success, r.em, r.f1, r.peak, r.dp)
	}
	b.WriteString("\n")
}

// constructed says which figures the embedded model sets by construction,
// so nobody reads them as findings.
func constructed(b *bytes.Buffer, sum *RunSummary) {
	b.WriteString("**Set by construction of the embedded model** (docs/embedded-model.md), not measured:\n\n")
	fail := sum.Baseline.Scored - sum.Baseline.Successes
	fmt.Fprintf(b, "- The baseline fails %d of %d train tasks", fail, sum.Baseline.Scored)
	if ev := sum.Eval; ev != nil {
		if a, ok := ev.Arm(evalNone); ok {
			n := len(ev.Tasks)
			fmt.Fprintf(b, " and %.0f of %d test tasks", float64(n)*(1-a.Metrics[eval.MetricSuccess].Point), n)
		}
	}
	b.WriteString(": tasks with a fact written in the archive form, which the embedded agent cannot read, or that hit the step limit. That caps every strategy's success.\n")
	b.WriteString("- Prompting's losses come from the embedded compressor's fixed keep rate (0.7 per fact) when a guideline has no keep-word-for-word directive; UT's recovery comes from the directive vocabulary the embedded compressor reads. Their size says how the double was built, not how a model would behave.\n")
	b.WriteString("- Token counts are real (o200k_base) but the texts are the double's.\n\n")
}
