package report

import (
	"fmt"
	"io"
	"slices"
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
	if l := ModelsLine(tableModels(rows)); l != "" {
		fmt.Fprintln(w, l)
	}
}

// tableModels combines the rows' notices: each row names the roles its
// strategy called (none's row never names the compressor), so the
// embedded model played every role of the table only when it did in every
// row, and the table names every role it played in some row.
func tableModels(rows []Row) (all bool, roles []string) {
	all = len(rows) > 0
	for _, r := range rows {
		all = all && r.Summary.EmbeddedModel
		for _, role := range r.Summary.EmbeddedRoles {
			if !slices.Contains(roles, role) {
				roles = append(roles, role)
			}
		}
	}
	slices.Sort(roles)
	return all, roles
}
