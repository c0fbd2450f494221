package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
)

// Gate is what a report's verdict is judged under: the job's gate rules,
// or eval.DefaultRules when the job sets none.
type Gate struct {
	Rules   []eval.Rule
	Default bool
}

// GateOf is the gate of a job whose rules are rules.
func GateOf(rules []eval.Rule) Gate {
	if len(rules) == 0 {
		return Gate{Rules: eval.DefaultGate(), Default: true}
	}
	return Gate{Rules: rules}
}

// describe names the rules and where they come from.
func (g Gate) describe() string {
	texts := make([]string, len(g.Rules))
	for i, r := range g.Rules {
		texts[i] = "`" + r.Text + "`"
	}
	if g.Default {
		return "the default rule (the job sets no `eval.gate`; docs/eval.md): " + strings.Join(texts, " and ")
	}
	return "the job's gate rules (`eval.gate`): " + strings.Join(texts, " and ")
}

// Baselines name the arms of an evaluation a verdict compares with.
type Baselines struct {
	// None ran without compression; "" when the evaluation has no such arm.
	None string
	// PromotedID is the guideline promoted in the registry ("" when none
	// is) and Promoted the arm that ran it ("" when none did).
	PromotedID, Promoted string
}

// BaselinesOf finds the no-compression arm of res and the arm that ran the
// promoted guideline promotedID ("" when none is promoted).
func BaselinesOf(res *eval.Result, promotedID string) Baselines {
	b := Baselines{PromotedID: promotedID}
	for _, a := range res.Summary.Candidates {
		switch {
		case a.Strategy == compress.None && b.None == "":
			b.None = a.Name
		case promotedID != "" && b.Promoted == "" && (a.HistoryGuidelineID == promotedID || a.ObservationGuidelineID == promotedID):
			b.Promoted = a.Name
		}
	}
	return b
}

// Answer is a candidate's verdict: the gate's rules judged by eval.Gate,
// the one implementation `optimize gate` runs, against the promoted
// guideline when one was evaluated, else against no compression.
type Answer struct {
	Candidate, Against string
	Verdicts           []eval.Verdict
	Promote            bool
	// VsNone and VsPromoted are the paired comparisons (nil when that arm
	// was not evaluated, or is the candidate itself).
	VsNone, VsPromoted *eval.Comparison
}

// Judge answers for candidate in res.
func Judge(res *eval.Result, candidate string, b Baselines, g Gate) (Answer, error) {
	a := Answer{Candidate: candidate}
	if b.None != "" && b.None != candidate {
		c := res.Compare(candidate, b.None)
		a.VsNone, a.Against = &c, b.None
	}
	if b.Promoted != "" && b.Promoted != candidate {
		c := res.Compare(candidate, b.Promoted)
		a.VsPromoted, a.Against = &c, b.Promoted
	}
	if a.Against == "" {
		a.Against = res.Summary.Reference
	}
	if a.Against == candidate {
		return a, nil
	}
	vs, err := eval.Gate(res, candidate, res, a.Against, g.Rules)
	if err != nil {
		return a, fmt.Errorf("verdict for %s: %w", candidate, err)
	}
	a.Verdicts, a.Promote = vs, eval.Promotes(vs)
	return a, nil
}

// Decision is the answer in two words.
func (a Answer) Decision() string {
	switch {
	case a.Verdicts == nil:
		return "reference"
	case a.Promote:
		return "PROMOTE"
	}
	return "DO NOT PROMOTE"
}

// failed lists the rules a candidate fails, by their text.
func (a Answer) failed() string {
	var out []string
	for _, v := range a.Verdicts {
		if !v.Pass {
			out = append(out, v.Rule.Text)
		}
	}
	return strings.Join(out, "; ")
}

// verdictView is the verdict section as both report formats show it.
type verdictView struct {
	Heading string
	Promote bool
	Lines   []string // what was compared, before the table
	Table   table
	Gate    string   // the rules and what they were judged against
	Rules   []string // each rule's verdict, PASS or FAIL and why
}

// metricsShown are the verdict's figures: success, the largest context
// and what compressing cost.
var metricsShown = []string{eval.MetricSuccess, eval.MetricPeakTokens, eval.MetricCompressorTokens}

// armRow is an arm's figures with their 95% intervals.
func armRow(res *eval.Result, label, name string) []string {
	a, _ := res.Arm(name)
	row := []string{label}
	for _, m := range metricsShown {
		row = append(row, withCI(m, a.Metrics[m]))
	}
	return row
}

// diffRow is a paired comparison's differences with their 95% intervals.
func diffRow(c *eval.Comparison) []string {
	row := []string{c.Candidate + " − " + c.Reference}
	for _, m := range metricsShown {
		row = append(row, diffCI(m, c.Metrics[m].Diff))
	}
	return row
}

// runVerdict is a run report's verdict on its one candidate.
func runVerdict(res *eval.Result, a Answer, b Baselines, g Gate, what string) verdictView {
	v := verdictView{Promote: a.Promote, Heading: fmt.Sprintf("Verdict: %s %s", a.Decision(), a.Candidate)}
	s := res.Summary
	v.Lines = append(v.Lines, fmt.Sprintf("Candidate **%s** (%s), on the %s split (%d tasks × %d sample(s), never used for selection); 95%% bootstrap intervals over tasks, differences paired on the same tasks.",
		a.Candidate, what, s.Split, len(s.Tasks), s.Samples))
	v.Lines = append(v.Lines, promotedLine(b, a.Candidate))
	v.Table = table{head: []string{"", "success", "peak tokens", "compressor tokens per task"}}
	v.Table.rows = append(v.Table.rows, armRow(res, a.Candidate, a.Candidate))
	if b.None != "" && b.None != a.Candidate {
		v.Table.rows = append(v.Table.rows, armRow(res, b.None+" (no compression)", b.None))
	}
	if b.Promoted != "" && b.Promoted != a.Candidate {
		v.Table.rows = append(v.Table.rows, armRow(res, b.Promoted+" (the promoted guideline "+b.PromotedID+")", b.Promoted))
	}
	for _, c := range []*eval.Comparison{a.VsNone, a.VsPromoted} {
		if c != nil {
			v.Table.rows = append(v.Table.rows, diffRow(c))
		}
	}
	v.Gate = fmt.Sprintf("**%s** under %s, judged against %s on the paired 95%% interval (as `optimize gate` judges).", a.Decision(), g.describe(), a.Against)
	for _, r := range a.Verdicts {
		mark := "PASS"
		if !r.Pass {
			mark = "FAIL"
		}
		v.Rules = append(v.Rules, fmt.Sprintf("%s `%s`: %s", mark, r.Rule.Text, r.Reason))
	}
	return v
}

// promotedLine says which guideline is promoted and whether it was
// compared.
func promotedLine(b Baselines, candidate string) string {
	switch {
	case b.PromotedID == "":
		return "No guideline is promoted in the registry, so the candidate is judged against no compression."
	case b.Promoted == "":
		return fmt.Sprintf("The promoted guideline %s was not evaluated here; candidates are judged against no compression.", b.PromotedID)
	case b.Promoted == candidate:
		return fmt.Sprintf("The candidate is the promoted guideline %s itself.", b.PromotedID)
	}
	return fmt.Sprintf("The promoted guideline %s ran as %s; the gate judges the candidate against it.", b.PromotedID, b.Promoted)
}

// evalVerdict is an evaluation's verdict on every candidate, no
// compression first.
func evalVerdict(res *eval.Result, b Baselines, g Gate) (verdictView, error) {
	base := b.None
	if base == "" {
		base = res.Summary.Reference
	}
	v := verdictView{Heading: "Verdict against " + base}
	v.Lines = append(v.Lines, fmt.Sprintf("Each candidate against %s on the %s split (%d tasks × %d sample(s)); 95%% bootstrap intervals over tasks, differences paired on the same tasks.",
		base, res.Summary.Split, len(res.Summary.Tasks), res.Summary.Samples))
	if b.PromotedID != "" {
		v.Lines = append(v.Lines, promotedLine(b, ""))
	}
	v.Table = table{head: []string{"candidate", "success", "Δ success vs " + base, "peak tokens", "Δ peak tokens vs " + base, "compressor tokens per task", "verdict"}}
	order := []string{base}
	for _, a := range res.Summary.Candidates {
		if a.Name != base {
			order = append(order, a.Name)
		}
	}
	for _, name := range order {
		a, err := Judge(res, name, b, g)
		if err != nil {
			return v, err
		}
		arm, _ := res.Arm(name)
		row := []string{name, withCI(eval.MetricSuccess, arm.Metrics[eval.MetricSuccess]), "", withCI(eval.MetricPeakTokens, arm.Metrics[eval.MetricPeakTokens]), "",
			withCI(eval.MetricCompressorTokens, arm.Metrics[eval.MetricCompressorTokens]), a.Decision()}
		if name != base {
			c := res.Compare(name, base)
			row[2], row[4] = diffCI(eval.MetricSuccess, c.Metrics[eval.MetricSuccess].Diff), diffCI(eval.MetricPeakTokens, c.Metrics[eval.MetricPeakTokens].Diff)
		}
		if f := a.failed(); f != "" {
			row[6] += " (fails " + f + ")"
		}
		v.Table.rows = append(v.Table.rows, row)
	}
	v.Gate = fmt.Sprintf("Verdicts under %s, each judged against %s on the paired 95%% interval (as `optimize gate` judges).", g.describe(), judgedAgainst(b, base))
	return v, nil
}

func judgedAgainst(b Baselines, base string) string {
	if b.Promoted != "" && b.Promoted != base {
		return b.Promoted + " (the promoted guideline; " + b.Promoted + " itself against " + base + ")"
	}
	return base
}

// markdown writes the verdict section.
func (v verdictView) markdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", v.Heading)
	for _, l := range v.Lines {
		fmt.Fprintf(w, "%s\n\n", l)
	}
	v.Table.markdown(w)
	fmt.Fprintf(w, "%s\n\n", v.Gate)
	for _, r := range v.Rules {
		fmt.Fprintf(w, "- %s\n", r)
	}
	if len(v.Rules) > 0 {
		fmt.Fprintln(w)
	}
}
