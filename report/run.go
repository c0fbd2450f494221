package report

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

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
	// Gate is the job's gate; Baselines name the no-compression arm and
	// the promoted guideline's, the selected guideline is judged against.
	Gate      Gate
	Baselines Baselines
	Rounds    []guideline.Round
	// ACE says the job's optimizer was ACE: ACERounds are its rounds, the
	// UTCO summary is the final playbook's rollout and UT is empty.
	ACE       bool
	ACERounds []guideline.ACERound
	// Roles counts each role's calls; the malformed ones are recorded with
	// the raw reply in MalformedFile.
	Roles         map[string]llm.Stats
	MalformedFile string
	// Guideline is the selected guideline, its text and its diff against
	// its parent.
	Guideline Guideline
	// Diff is the selected guideline against the starting one.
	Starting, Selected, Diff string
}

// Arms name the candidates of a run's held-out evaluation.
type Arms struct{ None, Prompting, Selected string }

// Verdict is the run's answer: the selected guideline judged under the
// job's gate, or ok false when the job disabled the held-out evaluation.
func (r *Run) Verdict() (a Answer, ok bool, err error) {
	if r.Eval == nil {
		return Answer{}, false, nil
	}
	a, err = Judge(r.Eval, r.Arms.Selected, r.Baselines, r.Gate)
	return a, err == nil, err
}

// noVerdict says why a run without a held-out evaluation has no verdict.
const noVerdict = "No verdict: the job disabled the held-out evaluation (eval.disabled), and the train split the guidelines were selected on cannot judge them. The train split's figures are below."

// WriteRun writes report.md and report.html into dir (and, with the
// held-out evaluation, its own report in r.EvalDir): the verdict, the
// selected guideline and its diff against its parent, then the details.
func WriteRun(dir string, r *Run) error {
	title := "ctxopt run: " + r.Job
	notice := ModelNotice(r.EmbeddedModel, r.EmbeddedRoles)
	p := htmlPage{Title: title, Notice: notice, Guidelines: []htmlGuideline{r.Guideline.html()}}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", title)
	if notice != "" {
		b.WriteString(notice + "\n\n")
	}
	a, ok, err := r.Verdict()
	if err != nil {
		return err
	}
	if ok {
		v := runVerdict(r.Eval, a, r.Baselines, r.Gate, fmt.Sprintf("the %s guideline %s this run selected", r.Kind, r.Selected))
		v.markdown(&b)
		p.Verdict = v.html()
	} else {
		fmt.Fprintf(&b, "## Verdict\n\n%s\n\n", noVerdict)
		p.NoVerdict = noVerdict
	}
	r.Guideline.markdown(&b)
	b.WriteString("## Details\n\n")
	if r.Eval != nil {
		if err := heldOut(&b, dir, r); err != nil {
			return err
		}
		p.Eval = evalHTML(r.Eval, Plots(r.Eval))
	}
	for _, s := range r.details() {
		s.markdown(&b)
		p.Sections = append(p.Sections, s.html())
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, MarkdownFile), b.Bytes(), 0o644); err != nil {
		return err
	}
	return writePage(filepath.Join(dir, HTMLFile), p)
}

// details are the run's sections after the held-out evaluation.
func (r *Run) details() []section {
	out := []section{headline(r)}
	if r.EmbeddedModel {
		out = append(out, constructed(r))
	}
	out = append(out, beforeAfter(r))
	if len(r.Roles) > 0 {
		var roles bytes.Buffer
		PrintRoleStats(&roles, r.Roles)
		out = append(out, section{title: "Calls per role (this invocation)",
			paras: []string{fmt.Sprintf("Replies that could not be used as asked are counted as malformed and recorded with the raw reply in %s.", r.MalformedFile)},
			pre:   roles.String()})
	}
	out = append(out, decisions(r.Rounds)...)
	out = append(out, aceRounds(r.ACERounds)...)
	if r.Diff != "" && r.Guideline.Parent != r.Starting {
		out = append(out, section{title: fmt.Sprintf("Selected guideline %s against the starting one %s", r.Selected, r.Starting), pre: r.Diff, lang: "diff"})
	}
	return out
}

// section is a part of a report's details, written as Markdown and HTML.
type section struct {
	title  string
	paras  []string // sentences with **bold** and `code`
	tables []table
	pre    string
	lang   string
}

func (s section) markdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", s.title)
	for _, p := range s.paras {
		fmt.Fprintf(w, "%s\n\n", p)
	}
	for _, t := range s.tables {
		t.markdown(w)
	}
	if s.pre != "" {
		fmt.Fprintf(w, "```%s\n%s\n```\n\n", s.lang, strings.TrimRight(s.pre, "\n"))
	}
}

func (s section) html() htmlSection {
	h := htmlSection{Title: s.title, Pre: s.pre}
	for _, p := range s.paras {
		h.Paras = append(h.Paras, inline(p))
	}
	for _, t := range s.tables {
		h.Tables = append(h.Tables, t.html())
	}
	return h
}

// beforeAfter is the table of the train split's rollouts.
func beforeAfter(r *Run) section {
	rows, para := beforeAfterRows(r)
	return section{
		title:  fmt.Sprintf("Before and after (train split, %d tasks, the split the guidelines were selected on)", r.Baseline.Tasks),
		tables: []table{summaryTable(rows)},
		paras:  []string{para},
	}
}

// beforeAfterRows are the train split's rollouts by name, and what the
// compressor wrote per task; an ACE run has one optimized row.
func beforeAfterRows(r *Run) ([]Row, string) {
	rows := []Row{{Name: "none", Summary: r.Baseline}}
	if r.FIFO.Tasks > 0 { // a job with optimize.skip_fifo ran none
		rows = append(rows, Row{Name: "fifo", Summary: r.FIFO})
	}
	rows = append(rows, Row{Name: "prompting", Summary: r.Prompting})
	if r.ACE {
		return append(rows, Row{Name: "ace playbook", Summary: r.UTCO}), fmt.Sprintf("Compressor output tokens per task: prompting %s, ACE playbook %s.",
			Human(r.Prompting.CompressorOutputTokensMean), Human(r.UTCO.CompressorOutputTokensMean))
	}
	return append(rows, Row{Name: "acon ut", Summary: r.UT}, Row{Name: "acon utco", Summary: r.UTCO}), fmt.Sprintf("Compressor output tokens per task: prompting %s, UT %s, UTCO %s.",
		Human(r.Prompting.CompressorOutputTokensMean), Human(r.UT.CompressorOutputTokensMean), Human(r.UTCO.CompressorOutputTokensMean))
}

// aceRounds shows each ACE round: what the reflector and curator
// proposed, what code applied, deduplicated and evicted, and the gate.
func aceRounds(rounds []guideline.ACERound) []section {
	var out []section
	for _, r := range rounds {
		applied, rejected := 0, 0
		for _, op := range r.Ops {
			if op.Rejected != "" {
				rejected++
			} else {
				applied++
			}
		}
		t := table{head: []string{"feedback", "tags", "operations applied", "rejected", "deduplicated", "evicted", "playbook tokens", "batch kept"}, rows: [][]string{{
			fmt.Sprint(r.Feedback), fmt.Sprint(len(r.Tags)), fmt.Sprint(applied), fmt.Sprint(rejected),
			fmt.Sprint(len(r.Deduped)), fmt.Sprint(len(r.Evicted)), Human(float64(r.Tokens)), fmt.Sprint(r.BatchKept)}}}
		p := fmt.Sprintf("Parent %s, chosen %s; feedback from %d tasks, the batch gated on %d other tasks.", r.Parent, r.Chosen, len(r.FeedbackTasks), len(r.Tasks))
		out = append(out, section{title: fmt.Sprintf("ACE round %d", r.N), paras: []string{r.Reason, p}, tables: []table{t}})
	}
	return out
}

// heldOut writes the held-out evaluation's own report (eval/report.md,
// plots, html) and puts its tables and plots in the run's report too.
func heldOut(b *bytes.Buffer, dir string, r *Run) error {
	res := r.Eval
	if err := Write(r.EvalDir, res, fmt.Sprintf("ctxopt run %s: held-out evaluation", r.Job), Lead{Gate: r.Gate, Baselines: r.Baselines}); err != nil {
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
func decisions(rounds []guideline.Round) []section {
	var out []section
	for _, r := range rounds {
		for _, d := range []guideline.Decision{r.UT, r.CO} {
			p := fmt.Sprintf("Feedback: %d usable, %d rejected, from %d tasks. Selection (rule %s) on %d other tasks; parent %s scores %.3f.",
				d.Feedback, d.Rejected, len(d.FeedbackTasks), d.Rule, len(d.Tasks), d.Parent, d.Parent0.Objective)
			if sp := d.Spread; sp != nil {
				p += fmt.Sprintf(" Spread of the %d scored candidates: success %.3f to %.3f (sd %.3f), objective %.3f to %.3f.",
					sp.N, sp.SuccessMin, sp.SuccessMax, sp.SuccessSD, sp.ObjectiveMin, sp.ObjectiveMax)
			}
			t := table{head: []string{"k", "id", "valid", "success", "objective", "Δ success vs parent [95% CI]", "token change", "note"}}
			for _, c := range d.Candidates {
				t.rows = append(t.rows, candidateRow(c))
			}
			out = append(out, section{title: fmt.Sprintf("Decision: round %d, %s", r.N, d.Step), paras: []string{d.Reason, p}, tables: []table{t}})
		}
	}
	return out
}

func candidateRow(c guideline.Candidate) []string {
	note := c.Rejected
	if len(c.Repairs) > 0 {
		note += fmt.Sprintf(" repaired: %v", c.Repairs)
	}
	if c.Score == nil {
		return []string{fmt.Sprint(c.K), c.ID, fmt.Sprint(c.Valid), "", "", "", "", note}
	}
	return []string{fmt.Sprint(c.K), c.ID, fmt.Sprint(c.Valid), fmt.Sprintf("%.3f", c.Score.Success), fmt.Sprintf("%.3f", c.Score.Objective),
		fmt.Sprintf("%+.3f [%+.3f, %+.3f] (n=%d)", c.Paired.SuccessDiff, c.Paired.CILow, c.Paired.CIHigh, c.Paired.N), fmt.Sprintf("%+.1f%%", 100*c.Paired.TokenChange), note}
}

// headline is what ACON reports: success, EM/F1, peak tokens and
// dependency of no compression, prompting and the selected guideline, on
// the test split when it was evaluated.
func headline(r *Run) section {
	type row struct {
		name                      string
		success, em, f1, peak, dp float64
	}
	fromStage := func(name string, s rollout.Summary) row {
		return row{name, s.SuccessRate, s.EM, s.F1, s.PeakTokensMean, s.DependencyMean}
	}
	split := "train"
	rows := []row{fromStage("no compression", r.Baseline), fromStage("prompting", r.Prompting), fromStage(selectedLabel(r), r.UTCO)}
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
	t := table{head: []string{"", "success", "EM", "F1", "peak tokens", "dependency"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.name, pct(r.success), fmt.Sprintf("%.3f", r.em), fmt.Sprintf("%.3f", r.f1), Human(r.peak), Human(r.dp)})
	}
	return section{title: fmt.Sprintf("Headline (%s split)", split), paras: []string{fmt.Sprintf("Optimized: the %s guideline.", r.Kind)}, tables: []table{t}}
}

// selectedLabel names the optimized row of the headline.
func selectedLabel(r *Run) string {
	if r.ACE {
		return "selected (ace)"
	}
	return "selected (utco)"
}

// constructed says which figures the embedded model sets by construction,
// so nobody reads them as findings.
func constructed(r *Run) section {
	fail := r.Baseline.Scored - r.Baseline.Successes
	first := fmt.Sprintf("The baseline fails %d of %d train tasks", fail, r.Baseline.Scored)
	if r.Eval != nil {
		ev := r.Eval.Summary
		if a, ok := ev.Arm(r.Arms.None); ok {
			n := len(ev.Tasks)
			first += fmt.Sprintf(" and %.0f of %d test tasks", float64(n)*(1-a.Metrics[eval.MetricSuccess].Point), n)
		}
	}
	return section{title: "Set by construction of the embedded model (docs/embedded-model.md), not measured", paras: []string{
		first + ": tasks with a fact written in the archive form, which the embedded agent cannot read, or that hit the step limit. That caps every strategy's success.",
		"Prompting's losses come from the embedded compressor's fixed keep rate (0.7 per fact) when a guideline has no keep-word-for-word directive; UT's recovery comes from the directive vocabulary the embedded compressor reads. Their size says how the double was built, not how a model would behave.",
		"Token counts are real (o200k_base) but the texts are the double's.",
	}}
}
