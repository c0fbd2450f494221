package report

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// Run is an `optimize run` as its report shows it.
type Run struct {
	Job  string
	Kind string // the kind of guideline optimized
	// EmbeddedModel and EmbeddedRoles say where the embedded model played
	// (Embedded).
	EmbeddedModel bool
	EmbeddedRoles []string
	// The train split's rollouts: no compression, FIFO, the starting
	// guideline, and the last round's UT and UTCO guidelines.
	Baseline, FIFO, Prompting, UT, UTCO rollout.Summary
	// Eval is the held-out evaluation (nil when the job disabled it),
	// written in EvalDir; Arms names its candidates: no compression, the
	// starting and the selected guideline.
	Eval    *eval.Result
	EvalDir string
	Arms    Arms
	Rounds  []guideline.Round
	// Roles counts each role's calls; the malformed ones are recorded with
	// the raw reply in MalformedFile.
	Roles         map[string]llm.Stats
	MalformedFile string
	// Diff is the selected guideline against the starting one.
	Starting, Selected, Diff string
}

// Arms name the candidates of a run's held-out evaluation.
type Arms struct{ None, Prompting, Selected string }

// WriteRun writes report.md (and, with the held-out evaluation, its own
// report in r.EvalDir and report.html) into dir:
// the results before and after optimization, the held-out evaluation,
// each selection decision, and the diff of the selected guideline against
// the starting one.
func WriteRun(dir string, r *Run) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ctxopt run: %s\n\n", r.Job)
	if n := ModelNotice(r.EmbeddedModel, r.EmbeddedRoles); n != "" {
		b.WriteString(n + "\n\n")
	}
	fmt.Fprintf(&b, "Optimized: the %s guideline.\n\n", r.Kind)
	headline(&b, r)
	if r.EmbeddedModel {
		constructed(&b, r)
	}
	beforeAfter(&b, r)
	if r.Eval != nil {
		if err := heldOut(&b, dir, r); err != nil {
			return err
		}
	}
	if len(r.Roles) > 0 {
		b.WriteString("## Calls per role (this invocation)\n\n")
		fmt.Fprintf(&b, "Replies that could not be used as asked are counted as malformed and recorded with the raw reply in %s.\n\n```\n", r.MalformedFile)
		PrintRoleStats(&b, r.Roles)
		b.WriteString("```\n\n")
	}
	decisions(&b, r.Rounds)
	fmt.Fprintf(&b, "## Selected guideline %s against the starting one %s\n\n```diff\n%s```\n", r.Selected, r.Starting, r.Diff)
	if err := atomicfile.WriteFile(filepath.Join(dir, MarkdownFile), b.Bytes(), 0o644); err != nil {
		return err
	}
	if r.Eval != nil {
		if err := WriteHTML(filepath.Join(dir, HTMLFile), r.Eval, Plots(r.Eval), "ctxopt run: "+r.Job); err != nil {
			return err
		}
	}
	return nil
}

// beforeAfter is the table of the train split's rollouts.
func beforeAfter(b *bytes.Buffer, r *Run) {
	fmt.Fprintf(b, "## Before and after (train split, %d tasks, the split the guidelines were selected on)\n\n```\n", r.Baseline.Tasks)
	PrintTable(b, []Row{
		{Name: "none", Summary: r.Baseline},
		{Name: "fifo", Summary: r.FIFO},
		{Name: "prompting", Summary: r.Prompting},
		{Name: "acon ut", Summary: r.UT},
		{Name: "acon utco", Summary: r.UTCO},
	})
	b.WriteString("```\n\n")
	fmt.Fprintf(b, "Compressor output tokens per task: prompting %.0f, UT %.0f, UTCO %.0f.\n\n",
		r.Prompting.CompressorOutputTokensMean, r.UT.CompressorOutputTokensMean, r.UTCO.CompressorOutputTokensMean)
}

// heldOut writes the held-out evaluation's own report (eval/report.md,
// plots, html) and puts its tables and plots in the run's report too.
func heldOut(b *bytes.Buffer, dir string, r *Run) error {
	res := r.Eval
	if err := Write(r.EvalDir, res, fmt.Sprintf("ctxopt run %s: held-out evaluation", r.Job)); err != nil {
		return err
	}
	fmt.Fprintf(b, "## Held-out evaluation (%s split, %d tasks, never used for selection)\n\n", res.Summary.Split, len(res.Summary.Tasks))
	rel, err := filepath.Rel(dir, filepath.Join(r.EvalDir, PlotsDir))
	if err != nil {
		return err
	}
	Markdown(b, res, Plots(res), filepath.ToSlash(rel))
	return nil
}

// decisions shows each step's candidates and choice.
func decisions(b *bytes.Buffer, rounds []guideline.Round) {
	b.WriteString("## Decisions\n\n")
	for _, r := range rounds {
		for _, d := range []guideline.Decision{r.UT, r.CO} {
			fmt.Fprintf(b, "### Round %d, %s\n\n%s\n\nFeedback: %d usable, %d rejected, from %d tasks. Selection (rule %s) on %d other tasks; parent %s scores %.3f.",
				r.N, d.Step, d.Reason, d.Feedback, d.Rejected, len(d.FeedbackTasks), d.Rule, len(d.Tasks), d.Parent, d.Parent0.Objective)
			if sp := d.Spread; sp != nil {
				fmt.Fprintf(b, " Spread of the %d scored candidates: success %.3f to %.3f (sd %.3f), objective %.3f to %.3f.",
					sp.N, sp.SuccessMin, sp.SuccessMax, sp.SuccessSD, sp.ObjectiveMin, sp.ObjectiveMax)
			}
			b.WriteString("\n\n")
			b.WriteString("| k | id | valid | success | objective | Δ success vs parent [95% CI] | token change | note |\n|---|---|---|---|---|---|---|---|\n")
			for _, c := range d.Candidates {
				candidateRow(b, c)
			}
			b.WriteString("\n")
		}
	}
}

func candidateRow(b *bytes.Buffer, c guideline.Candidate) {
	note := c.Rejected
	if len(c.Repairs) > 0 {
		note += fmt.Sprintf(" repaired: %v", c.Repairs)
	}
	if c.Score == nil {
		fmt.Fprintf(b, "| %d | %s | %v | | | | | %s |\n", c.K, c.ID, c.Valid, note)
		return
	}
	fmt.Fprintf(b, "| %d | %s | %v | %.3f | %.3f | %+.3f [%+.3f, %+.3f] (n=%d) | %+.1f%% | %s |\n",
		c.K, c.ID, c.Valid, c.Score.Success, c.Score.Objective, c.Paired.SuccessDiff, c.Paired.CILow, c.Paired.CIHigh, c.Paired.N, 100*c.Paired.TokenChange, note)
}

// headline leads the report with what ACON reports: success, EM/F1, peak
// tokens and dependency of no compression, prompting and the selected
// guideline, on the test split when it was evaluated.
func headline(b *bytes.Buffer, r *Run) {
	type row struct {
		name                      string
		success, em, f1, peak, dp float64
	}
	fromStage := func(name string, s rollout.Summary) row {
		return row{name, s.SuccessRate, s.EM, s.F1, s.PeakTokensMean, s.DependencyMean}
	}
	split := "train"
	rows := []row{fromStage("no compression", r.Baseline), fromStage("prompting", r.Prompting), fromStage("selected (utco)", r.UTCO)}
	if r.Eval != nil {
		ev := r.Eval.Summary
		split = ev.Split
		for i, name := range []string{r.Arms.None, r.Arms.Prompting, r.Arms.Selected} {
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
func constructed(b *bytes.Buffer, r *Run) {
	b.WriteString("**Set by construction of the embedded model** (docs/embedded-model.md), not measured:\n\n")
	fail := r.Baseline.Scored - r.Baseline.Successes
	fmt.Fprintf(b, "- The baseline fails %d of %d train tasks", fail, r.Baseline.Scored)
	if r.Eval != nil {
		ev := r.Eval.Summary
		if a, ok := ev.Arm(r.Arms.None); ok {
			n := len(ev.Tasks)
			fmt.Fprintf(b, " and %.0f of %d test tasks", float64(n)*(1-a.Metrics[eval.MetricSuccess].Point), n)
		}
	}
	b.WriteString(": tasks with a fact written in the archive form, which the embedded agent cannot read, or that hit the step limit. That caps every strategy's success.\n")
	b.WriteString("- Prompting's losses come from the embedded compressor's fixed keep rate (0.7 per fact) when a guideline has no keep-word-for-word directive; UT's recovery comes from the directive vocabulary the embedded compressor reads. Their size says how the double was built, not how a model would behave.\n")
	b.WriteString("- Token counts are real (o200k_base) but the texts are the double's.\n\n")
}
