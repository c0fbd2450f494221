package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ctxopt/ctxopt/eval"
)

// Brief prints what a terminal needs after `optimize run`: the selected
// guideline, its success against no compression and the starting guideline
// (on the test split with 95% intervals when it was evaluated, else on the
// train split), the money spent, and the files written. The reports hold
// the rest.
func Brief(w io.Writer, r *Run, spent string, written []string) {
	fmt.Fprintf(w, "ctxopt run %s: selected %s guideline %s (started from %s)\n", r.Job, r.Kind, r.Selected, r.Starting)
	if a, ok, err := r.Verdict(); err != nil {
		fmt.Fprintf(w, "verdict: none (%v)\n", err)
	} else if ok {
		fmt.Fprintf(w, "verdict: %s %s against %s under %s\n", a.Decision(), a.Candidate, a.Against, strings.ReplaceAll(r.Gate.describe(), "`", ""))
	} else {
		fmt.Fprintln(w, "verdict: none (the job disabled the held-out evaluation)")
	}
	if r.Eval != nil {
		briefEval(w, r)
	} else {
		fmt.Fprintf(w, "success on the train split (%d tasks; no test-split evaluation):\n", r.Baseline.Tasks)
		for _, row := range []Row{{Name: "selected", Summary: r.UTCO}, {Name: "none", Summary: r.Baseline}, {Name: "prompting", Summary: r.Prompting}} {
			fmt.Fprintf(w, "  %-10s %s\n", row.Name, pct(row.Summary.SuccessRate))
		}
	}
	fmt.Fprintf(w, "money spent: %s %s\n", spent, ModelsLine(r.EmbeddedModel, r.EmbeddedRoles))
	fmt.Fprintf(w, "wrote %s\n", strings.Join(written, ", "))
}

// briefEval is the held-out evaluation in three arms and the selected
// guideline's paired differences.
func briefEval(w io.Writer, r *Run) {
	ev := r.Eval.Summary
	fmt.Fprintf(w, "success on the %s split (%d tasks, never used for selection) [95%% CI]:\n", ev.Split, len(ev.Tasks))
	for _, name := range []string{r.Arms.Selected, r.Arms.None, r.Arms.Prompting} {
		if a, ok := ev.Arm(name); ok {
			fmt.Fprintf(w, "  %-10s %s\n", name, withCI(eval.MetricSuccess, a.Metrics[eval.MetricSuccess]))
		}
	}
	for _, c := range r.Eval.Comparisons {
		if c.Candidate == r.Arms.Selected {
			fmt.Fprintf(w, "  %s vs %s: %s\n", c.Candidate, c.Reference, diffCI(eval.MetricSuccess, c.Metrics[eval.MetricSuccess].Diff))
		}
	}
}
