package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// Report writes report.md into runDir and prints it to w: the results
// before and after optimization, each selection decision, and the diff of
// the selected guideline against the starting one.
func Report(w io.Writer, runDir string, sum *RunSummary) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ctxopt run: %s\n\n", sum.Job)
	if sum.EmbeddedModel {
		b.WriteString("Every role was played by the embedded offline model (llm/sim), not a real LLM: the figures show the pipeline's mechanics, not a model's quality.\n\n")
	}
	fmt.Fprintf(&b, "Optimized: the %s guideline.\n\n", sum.Kind)
	fmt.Fprintf(&b, "## Before and after (train split, %d tasks, the split the guidelines were selected on)\n\n```\n", sum.Baseline.Tasks)
	PrintTable(&b, []Row{
		{Name: "none", Summary: sum.Baseline.Summary},
		{Name: "fifo", Summary: sum.FIFO.Summary},
		{Name: "prompting", Summary: sum.Prompting.Summary},
		{Name: "acon ut", Summary: sum.UT.Summary},
		{Name: "acon utco", Summary: sum.UTCO.Summary},
	})
	b.WriteString("```\n\n")
	fmt.Fprintf(&b, "Compressor output tokens per task: prompting %.0f, UT %.0f, UTCO %.0f.\n\n",
		sum.Prompting.CompressorOutputTokensMean, sum.UT.CompressorOutputTokensMean, sum.UTCO.CompressorOutputTokensMean)
	if ev := sum.Eval; ev != nil {
		fmt.Fprintf(&b, "## Held-out evaluation (%s split, %d tasks, never used for selection)\n\n```\n", ev.Split, ev.Baseline.Tasks)
		PrintTable(&b, []Row{
			{Name: "none", Summary: ev.Baseline.Summary},
			{Name: "prompting", Summary: ev.Prompting.Summary},
			{Name: "selected", Summary: ev.Selected.Summary},
		})
		b.WriteString("```\n\n")
		for _, c := range []struct {
			name string
			p    Paired
		}{{"prompting", ev.VsPrompting}, {"no compression", ev.VsBaseline}} {
			fmt.Fprintf(&b, "Selected vs %s: Δ success %+.3f, 95%% paired bootstrap CI [%+.3f, %+.3f] (n=%d), tokens %+.1f%%.\n",
				c.name, c.p.SuccessDiff, c.p.CILow, c.p.CIHigh, c.p.N, 100*c.p.TokenChange)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Decisions\n\n")
	for _, r := range sum.Rounds {
		for _, d := range []Decision{r.UT, r.CO} {
			fmt.Fprintf(&b, "### Round %d, %s\n\n%s\n\nFeedback: %d usable, %d rejected. Selection on %d tasks; parent %s scores %.3f.\n\n",
				r.N, d.Step, d.Reason, d.Feedback, d.Rejected, len(d.Tasks), d.Parent, d.Parent0.Objective)
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
	if err := atomicfile.WriteFile(filepath.Join(runDir, "report.md"), b.Bytes(), 0o644); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}
