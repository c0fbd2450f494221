package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	t := summaryTable(rows)
	fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
	if l := ModelsLine(tableModels(rows)); l != "" {
		fmt.Fprintln(w, l)
	}
}

// summaryTable has ACON's columns for each row, counts in human units.
func summaryTable(rows []Row) table {
	t := table{head: []string{"strategy", "tasks", "success", "EM", "F1", "steps", "peak tok", "dependency", "comp in", "comp out", "infra", "calls", "cache hits"}}
	for _, r := range rows {
		s := r.Summary
		t.rows = append(t.rows, []string{r.Name, fmt.Sprint(s.Tasks), pct(s.SuccessRate), fmt.Sprintf("%.3f", s.EM), fmt.Sprintf("%.3f", s.F1),
			fmt.Sprintf("%.2f", s.StepsMean), Human(s.PeakTokensMean), Human(s.DependencyMean), Human(float64(s.CompressorInputTokens)),
			Human(float64(s.CompressorOutputTokens)), fmt.Sprint(s.InfraFailures), Human(float64(s.LLMCalls)), Human(float64(s.CacheHits))})
	}
	return t
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
