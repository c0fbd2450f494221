package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ctxopt/ctxopt/rollout"
)

// Row is one line of a results table.
type Row struct {
	Name    string
	Summary rollout.Summary
}

// PrintTable writes the rows as an aligned table with ACON's columns.
func PrintTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\ttasks\tsuccess\tEM\tF1\tsteps\tpeak tok\tdependency\tcomp in\tcomp out\tinfra\tcalls\tcache hits\t")
	for _, r := range rows {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.3f\t%.3f\t%.2f\t%.0f\t%.3g\t%d\t%d\t%d\t%d\t%d\t\n",
			r.Name, s.Tasks, 100*s.SuccessRate, s.EM, s.F1, s.StepsMean, s.PeakTokensMean, s.DependencyMean,
			s.CompressorInputTokens, s.CompressorOutputTokens, s.InfraFailures, s.LLMCalls, s.CacheHits)
	}
	tw.Flush()
	if len(rows) > 0 {
		if l := ModelsLine(rows[0].Summary.EmbeddedModel, rows[0].Summary.EmbeddedRoles); l != "" {
			fmt.Fprintln(w, l)
		}
	}
}
