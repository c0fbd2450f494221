package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/report"
)

// writeReport writes the night's report.md: the verdict first, then what
// was read, what was compared and each gate rule's verdict.
func (w *nightly) writeReport(res *NightResult) error {
	d := res.Decision
	var b strings.Builder
	fmt.Fprintf(&b, "# ctxopt nightly %s\n\n", w.n.ID)
	ev, evErr := eval.Load(filepath.Join(w.dir, nightEval))
	if evErr == nil && ev.Summary.EmbeddedModel {
		fmt.Fprintf(&b, "> Made with the embedded offline model (%s): the figures show the loop's mechanics, not a model's quality.\n\n", strings.Join(ev.Summary.EmbeddedRoles, ", "))
	}
	if d.Pass {
		fmt.Fprintf(&b, "**Promoted %s** (was %s): %s.\n\n", d.Candidate, d.Incumbent, d.Reason)
	} else {
		fmt.Fprintf(&b, "**Nothing promoted**: %s. %s stays.\n\n", d.Reason, d.Incumbent)
	}
	fmt.Fprintf(&b, "- sessions: %d imported from %s, bytes %d to %d\n", d.Sessions, w.n.File, w.n.From, w.n.To)
	fmt.Fprintf(&b, "- promoted when the night began: %s (%s)\n", w.n.Incumbent, w.n.IncumbentOrigin)
	fmt.Fprintf(&b, "- best candidate of the optimization: %s (%s)\n", d.Candidate, filepath.Join(nightRun, SummaryFile))
	if evErr == nil {
		replayed := 0
		if ev.Summary.Replay != nil {
			replayed = len(ev.Summary.Replay.Requests)
		}
		fmt.Fprintf(&b, "- compared on the %s split (%d tasks) and %d replayed requests: %s\n\n", ev.Summary.Split, len(ev.Summary.Tasks), replayed, filepath.Join(nightEval, "report.md"))
		b.WriteString("| arm | success | agreement | peak tokens |\n|---|---|---|---|\n")
		for _, a := range ev.Summary.Candidates {
			s, g, p := a.Metrics[eval.MetricSuccess], a.Metrics[eval.MetricAgreement], a.Metrics[eval.MetricPeakTokens]
			fmt.Fprintf(&b, "| %s (%s) | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %s |\n", a.Name, a.HistoryGuidelineID, s.Point, s.Low, s.High, g.Point, g.Low, g.High, report.Human(p.Point))
		}
	}
	if len(d.Verdicts) > 0 {
		b.WriteString("\nGate (each rule on the paired 95% interval, candidate against promoted):\n\n")
		for _, v := range d.Verdicts {
			mark := "PASS"
			if !v.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "- %s `%s`: %s\n", mark, v.Rule.Text, v.Reason)
		}
	}
	return writeBytes(res.Report, []byte(b.String()))
}
