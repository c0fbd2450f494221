// Package report writes what people read after a run or an evaluation:
// report.md with tables and SVG plots, and a self-contained, interactive
// report.html (every asset inlined, no network request).
package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// Files a report writes into its directory.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	PlotsDir     = "plots"
)

// EmbeddedNotice opens every report made with the embedded model in
// every role.
const EmbeddedNotice = "Every role was played by the embedded offline model (llm/sim), not a real LLM: the figures show the pipeline's mechanics, not a model's quality."

// Use is a role a piece of work called and whether the embedded model
// answered it there. A role can be used twice, answered once by the
// embedded model and once by a real one (an eval candidate's own
// compressor endpoint).
type Use struct {
	Role     string
	Embedded bool
}

// Embedded says whether the embedded model answered every use (all; false
// when there is none) and names, sorted, the roles it answered. A role the
// work never called is not named, whatever its endpoint.
func Embedded(uses []Use) (all bool, roles []string) {
	all = len(uses) > 0
	for _, u := range uses {
		if !u.Embedded {
			all = false
			continue
		}
		if !slices.Contains(roles, u.Role) {
			roles = append(roles, u.Role)
		}
	}
	slices.Sort(roles)
	return all, roles
}

// ModelNotice opens a report: EmbeddedNotice when the embedded model
// played every role used (all), "mixed" and the roles it played when it
// played some, and "" when every model was real.
func ModelNotice(all bool, roles []string) string {
	switch {
	case all:
		return EmbeddedNotice
	case len(roles) > 0:
		return fmt.Sprintf("Mixed models: the embedded offline model (llm/sim), not a real LLM, played these roles: %s; real models played the others. What those roles did shows the pipeline's mechanics, not a model's quality.", strings.Join(roles, ", "))
	}
	return ""
}

// ModelsLine is ModelNotice in brief, for the tables printed on a terminal.
func ModelsLine(all bool, roles []string) string {
	switch {
	case all:
		return "(models: the embedded offline model, not a real LLM)"
	case len(roles) > 0:
		return "(models: mixed; the embedded offline model, not a real LLM, as " + strings.Join(roles, ", ") + "; real models otherwise)"
	}
	return ""
}

// maxDisagreements bounds the tasks shown side by side per comparison.
const maxDisagreements = 40

// Write writes report.md, plots/*.svg and report.html for res into dir:
// first the verdict on every candidate against no compression under the
// lead's gate, then the guidelines they ran, then the evaluation's details.
func Write(dir string, res *eval.Result, title string, lead Lead) error {
	plots := Plots(res)
	if err := WritePlots(filepath.Join(dir, PlotsDir), plots); err != nil {
		return err
	}
	v, err := evalVerdict(res, lead.Baselines, lead.Gate)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "# %s\n\n", title)
	notice := ModelNotice(res.Summary.EmbeddedModel, res.Summary.EmbeddedRoles)
	if notice != "" {
		md.WriteString(notice + "\n\n")
	}
	v.markdown(&md)
	p := htmlPage{Title: title, Notice: notice, Verdict: v.html(), Eval: evalHTML(res, plots)}
	for _, g := range lead.Guidelines {
		g.markdown(&md)
		p.Guidelines = append(p.Guidelines, g.html())
	}
	md.WriteString("## Details\n\n")
	Markdown(&md, res, plots, PlotsDir)
	if err := atomicfile.WriteFile(filepath.Join(dir, MarkdownFile), md.Bytes(), 0o644); err != nil {
		return err
	}
	return writePage(filepath.Join(dir, HTMLFile), p)
}

// WritePlots writes each plot as dir/ID.svg.
func WritePlots(dir string, plots []Plot) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plots dir: %w", err)
	}
	for _, p := range plots {
		if err := atomicfile.WriteFile(filepath.Join(dir, p.ID+".svg"), []byte(p.SVG), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// metricFormat prints a metric's values.
func metricFormat(m string) func(float64) string {
	switch m {
	case eval.MetricSuccess, eval.MetricAgreement:
		return pct
	case eval.MetricEM, eval.MetricF1:
		return func(v float64) string { return fmt.Sprintf("%.3f", v) }
	case eval.MetricSteps:
		return func(v float64) string { return fmt.Sprintf("%.2f", v) }
	case eval.MetricCostUSD:
		return func(v float64) string { return fmt.Sprintf("$%.4f", v) }
	default:
		return Human
	}
}

func withCI(m string, iv eval.Interval) string {
	f := metricFormat(m)
	return fmt.Sprintf("%s [%s, %s]", f(iv.Point), f(iv.Low), f(iv.High))
}

// diffFormat prints a difference: success in points, others as numbers.
func diffFormat(m string, v float64) string {
	if m == eval.MetricSuccess || m == eval.MetricAgreement {
		return fmt.Sprintf("%+.1f pt", 100*v)
	}
	if m == eval.MetricCostUSD {
		return fmt.Sprintf("%+.4f", v)
	}
	return signed(v)
}

func diffCI(m string, iv eval.Interval) string {
	return fmt.Sprintf("%s [%s, %s]", diffFormat(m, iv.Point), diffFormat(m, iv.Low), diffFormat(m, iv.High))
}

func ratioCI(r *eval.Interval) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.2fx [%.2f, %.2f]", r.Point, r.Low, r.High)
}

// table is a header and rows of cells, rendered as Markdown or HTML.
type table struct {
	head []string
	rows [][]string
}

func (t table) markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(t.head, " | "), strings.Repeat("---|", len(t.head)))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "|", `\|`), "\n", " ")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}

// candidatesTable: each metric's mean with its 95% interval; the spec
// only when some candidate's differs from its name.
func candidatesTable(res *eval.Result) table {
	t := table{head: []string{"candidate"}}
	withSpec := false
	for _, a := range res.Summary.Candidates {
		withSpec = withSpec || specShown(a.Spec) != ""
	}
	if withSpec {
		t.head = append(t.head, "spec")
	}
	for _, m := range res.MetricNames() {
		t.head = append(t.head, metricHead(m))
	}
	t.head = append(t.head, "guideline tokens", "LLM calls", "cache hits", "Pareto (peak, $)")
	for _, a := range res.Summary.Candidates {
		row := []string{a.Name}
		if withSpec {
			row = append(row, specShown(a.Spec))
		}
		for _, m := range res.MetricNames() {
			row = append(row, withCI(m, a.Metrics[m]))
		}
		front := []string{}
		if a.ParetoPeak {
			front = append(front, "peak")
		}
		if a.ParetoCost {
			front = append(front, "$")
		}
		row = append(row, dash0(a.GuidelineTokens), Human(float64(a.LLMCalls)), Human(float64(a.CacheHits)), strings.Join(front, ", "))
		t.rows = append(t.rows, row)
	}
	return t
}

// metricHead is a metric's name as a column head: words a narrow column
// can wrap.
func metricHead(m string) string { return strings.ReplaceAll(m, "_", " ") }

// specShown is what a candidate's spec says beyond its name: "" for
// none=none, "guideline, guideline=h-1" for sel=guideline,guideline=h-1
// (spaced, so a narrow column can wrap it).
func specShown(sp eval.Spec) string {
	rest := strings.TrimPrefix(sp.Text, sp.Name+"=")
	if rest == sp.Name {
		return ""
	}
	return strings.ReplaceAll(rest, ",", ", ")
}

// pValue prints a p-value without an exponent.
func pValue(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}

// dash0 writes n, or "–" for none.
func dash0(n int) string {
	if n == 0 {
		return "–"
	}
	return Human(float64(n))
}

// comparisonsTable: the key figures of each comparison with the reference.
func comparisonsTable(res *eval.Result) table {
	t := table{head: []string{"candidate", "vs", "Δ success [95% CI]", "McNemar b/c", "p", "p (Holm)", "wins/losses/ties", "Δ peak tokens [95% CI]", "peak tokens ratio", "Δ cost [95% CI]", "cost ratio"}}
	for _, c := range res.Comparisons {
		t.rows = append(t.rows, []string{
			c.Candidate, c.Reference,
			diffCI(eval.MetricSuccess, c.Metrics[eval.MetricSuccess].Diff),
			fmt.Sprintf("%d/%d", c.McNemar.B, c.McNemar.C), pValue(c.McNemar.P), pValue(c.McNemar.PHolm),
			fmt.Sprintf("%d/%d/%d", c.Wins, c.Losses, c.Ties),
			diffCI(eval.MetricPeakTokens, c.Metrics[eval.MetricPeakTokens].Diff), ratioCI(c.Metrics[eval.MetricPeakTokens].Ratio),
			diffCI(eval.MetricCostUSD, c.Metrics[eval.MetricCostUSD].Diff), ratioCI(c.Metrics[eval.MetricCostUSD].Ratio),
		})
	}
	return t
}

// diffsTable: every metric's paired difference and ratio, one row per
// comparison, so the table's width does not grow with the candidates.
func diffsTable(res *eval.Result) table {
	t := table{head: []string{"comparison"}}
	for _, m := range res.MetricNames() {
		t.head = append(t.head, metricHead(m))
	}
	for _, c := range res.Comparisons {
		row := []string{fmt.Sprintf("%s − %s", c.Candidate, c.Reference)}
		for _, m := range res.MetricNames() {
			p := c.Metrics[m]
			row = append(row, diffCI(m, p.Diff)+"; "+ratioCI(p.Ratio))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// varianceTables: the mean within-task standard deviation per candidate,
// and each task's success and peak tokens across samples.
func varianceTables(res *eval.Result) (table, table) {
	shown := []string{eval.MetricSuccess, eval.MetricSteps, eval.MetricPeakTokens, eval.MetricCompressorTokens}
	sd := table{head: []string{"candidate"}}
	for _, m := range shown {
		sd.head = append(sd.head, "sd "+metricHead(m))
	}
	for _, a := range res.Summary.Candidates {
		row := []string{a.Name}
		for _, m := range shown {
			row = append(row, Human(a.TaskSD[m]))
		}
		sd.rows = append(sd.rows, row)
	}
	per := table{head: []string{"task"}}
	type cell struct{ succ, peak []float64 }
	cells := map[[2]string]*cell{}
	for _, o := range res.Outcomes {
		k := [2]string{o.Task, o.Candidate}
		if cells[k] == nil {
			cells[k] = &cell{}
		}
		cells[k].succ = append(cells[k].succ, o.Values[eval.MetricSuccess])
		cells[k].peak = append(cells[k].peak, o.Values[eval.MetricPeakTokens])
	}
	// One column per candidate, success and peak tokens in one cell, so
	// the table's width grows half as fast with the candidates.
	for _, a := range res.Summary.Candidates {
		per.head = append(per.head, a.Name)
	}
	for _, task := range res.Summary.Tasks {
		row := []string{task}
		for _, a := range res.Summary.Candidates {
			c := cells[[2]string{task, a.Name}]
			row = append(row, "success "+samplesCell(c.succ)+"; peak "+samplesCell(c.peak))
		}
		per.rows = append(per.rows, row)
	}
	return sd, per
}

// samplesCell lists a task's values across samples with their spread.
func samplesCell(xs []float64) string {
	parts := make([]string, len(xs))
	lo, hi := xs[0], xs[0]
	for i, x := range xs {
		parts[i] = Human(x)
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%s (range %s)", strings.Join(parts, " "), Human(hi-lo))
}

// Disagreement is a task that one candidate solved and the other failed
// (first sample): the two compressed contexts side by side.
type Disagreement struct {
	Task       string
	A, B       eval.Outcome
	Comparison string
}

// Disagreements returns, per comparison, the tasks whose success differs.
func Disagreements(res *eval.Result) []Disagreement {
	first := map[[2]string]eval.Outcome{}
	for _, o := range res.Outcomes {
		if o.Sample == 0 {
			first[[2]string{o.Candidate, o.Task}] = o
		}
	}
	var out []Disagreement
	for _, c := range res.Comparisons {
		n := 0
		for _, t := range res.Summary.Tasks {
			a, b := first[[2]string{c.Candidate, t}], first[[2]string{c.Reference, t}]
			if a.Success == b.Success || n == maxDisagreements {
				continue
			}
			n++
			out = append(out, Disagreement{Task: t, A: a, B: b, Comparison: c.Candidate + " vs " + c.Reference})
		}
	}
	return out
}

func outcomeLabel(o eval.Outcome) string {
	if o.Success {
		return o.Candidate + " solved it"
	}
	return o.Candidate + " failed"
}

func summaryText(o eval.Outcome) string {
	if o.Summary == "" {
		return "(no compression happened: the agent saw its full context)"
	}
	return o.Summary
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// intro says what was evaluated and how the statistics were computed.
func intro(s eval.Summary) string {
	return fmt.Sprintf("Evaluation on the %s split: %d tasks, %d sample(s) per task, seed %d, task set %s. Intervals are 95%% percentile bootstrap intervals over tasks (%d resamples); comparisons pair the same tasks; the McNemar test is exact and its p-values are Holm-corrected over the comparisons with the reference %q.",
		s.Split, len(s.Tasks), s.Samples, s.Seed, s.TaskSet, s.Resamples, s.Reference)
}

// Markdown writes the evaluation's figures and tables; plots are linked
// from plotDir.
func Markdown(w io.Writer, res *eval.Result, plots []Plot, plotDir string) {
	s := res.Summary
	fmt.Fprintf(w, "%s\n\n", intro(s))
	fmt.Fprintln(w, "## Candidates")
	fmt.Fprintln(w)
	candidatesTable(res).markdown(w)
	if len(res.Comparisons) > 0 {
		fmt.Fprintf(w, "## Against %s\n\n", s.Reference)
		comparisonsTable(res).markdown(w)
		fmt.Fprintln(w, "Every metric, paired (difference of means; ratio of means; 95% intervals):")
		fmt.Fprintln(w)
		diffsTable(res).markdown(w)
	}
	fmt.Fprintln(w, "## Plots")
	fmt.Fprintln(w)
	for _, p := range plots {
		fmt.Fprintf(w, "![%s](%s/%s.svg)\n\n", p.Title, plotDir, p.ID)
	}
	if s.Samples > 1 {
		sd, per := varianceTables(res)
		fmt.Fprintf(w, "## Variance across samples (%d per task)\n\nMean over tasks of the standard deviation across a task's samples:\n\n", s.Samples)
		sd.markdown(w)
		fmt.Fprintln(w, "Per task, each sample's value:")
		fmt.Fprintln(w)
		per.markdown(w)
	}
	if ds := Disagreements(res); len(ds) > 0 {
		fmt.Fprintln(w, "## Tasks one candidate solved and the other failed")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "The last compressed context of each run (first sample), and the sentences with a fact (a number or a name) the compressor dropped from its input. report.html shows them in full.")
		fmt.Fprintln(w)
		for _, d := range ds {
			t := table{head: []string{outcomeLabel(d.A), outcomeLabel(d.B)}}
			t.rows = append(t.rows, []string{clip(summaryText(d.A), 600), clip(summaryText(d.B), 600)})
			t.rows = append(t.rows, []string{"dropped: " + clip(strings.Join(d.A.Dropped, " / "), 400), "dropped: " + clip(strings.Join(d.B.Dropped, " / "), 400)})
			fmt.Fprintf(w, "### %s (%s)\n\n", d.Task, d.Comparison)
			t.markdown(w)
		}
	}
}

// Summary prints an evaluation in brief for a terminal: each candidate's
// success with its 95% interval, the paired difference against the
// reference and its verdict under the lead's gate; report.md holds every
// metric and test.
func Summary(w io.Writer, res *eval.Result, lead Lead) error {
	g, b := lead.Gate, lead.Baselines
	s := res.Summary
	fmt.Fprintf(w, "ctxopt eval: %d candidates on the %s split (%d tasks × %d samples); success [95%% CI], Δ vs %s, verdict:\n",
		len(s.Candidates), s.Split, len(s.Tasks), s.Samples, s.Reference)
	diffs := map[string]string{}
	for _, c := range res.Comparisons {
		diffs[c.Candidate] = diffCI(eval.MetricSuccess, c.Metrics[eval.MetricSuccess].Diff)
	}
	for _, a := range s.Candidates {
		ans, err := Judge(res, a.Name, b, g)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("  %-12s %-24s %-30s %s", a.Name, withCI(eval.MetricSuccess, a.Metrics[eval.MetricSuccess]), diffs[a.Name], ans.Decision())
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "verdicts under %s\n", strings.ReplaceAll(g.describe(), "`", ""))
	if l := ModelsLine(s.EmbeddedModel, s.EmbeddedRoles); l != "" {
		fmt.Fprintln(w, l)
	}
	return nil
}
