package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/templates"
)

// Remediation rules name the kinds of fact (the relations) the compressed
// run lost; the phrasings are synonyms in the compressor's vocabulary
// (vocabulary.go). At temperature 0 the first is used; above, the
// request's variation picks one, so samples differ in words, not in
// meaning.
var (
	factRuleForms = []string{
		"Copy word for word into a FACT CACHE every sentence that gives the %s of an entity a task question names.",
		"Preserve verbatim every sentence that states the %s of an entity a question asks about, one line per question in a FACT CACHE.",
		"Keep the exact sentence that gives the %s of an entity a question names in a FACT CACHE.",
	}
	queryRule   = "Record every search query already issued under ATTEMPTED QUERIES."
	pendingRule = "List the pending questions."
)

// everyFactRuleForms keep every fact that answers a question.
var everyFactRuleForms = []string{
	"Copy word for word into a FACT CACHE every sentence that answers one of the task's questions, one line per question.",
	"Preserve verbatim every sentence that answers a task question, one line per question in a FACT CACHE.",
	"Keep the exact sentence of every answer to a task question in a FACT CACHE.",
}

// factRule is the rule that keeps facts of the kinds rels (every fact
// that answers a question when rels is empty) word for word.
func factRule(rels []string, variation uint64) string {
	if len(rels) == 0 {
		return everyFactRuleForms[variation%uint64(len(everyFactRuleForms))]
	}
	return fmt.Sprintf(factRuleForms[variation%uint64(len(factRuleForms))], joinKinds(rels))
}

// joinKinds writes "a", "a or b", "a, b or c".
func joinKinds(rels []string) string {
	if len(rels) <= 1 {
		return strings.Join(rels, "")
	}
	return strings.Join(rels[:len(rels)-1], ", ") + " or " + rels[len(rels)-1]
}

// CO rules: each drops one kind of unused content without using a word the
// compressor would read as asking for that content.
var coRules = map[string]string{
	"tool-logs":       "Drop the search queries of questions already answered; keep ATTEMPTED QUERIES only for open questions, as a loop guard.",
	"unrelated-facts": "Keep only facts that answer the task's questions; leave out facts about other entities.",
	"narrative":       "Write REASONING as one sentence.",
	"formatting":      "Do not restate the open questions; the task already lists them.",
}

var coPatterns = map[string]string{
	"tool-logs":       "ATTEMPTED QUERIES entries for questions already answered",
	"unrelated-facts": "facts about entities or relations that no question asks for",
	"narrative":       "one REASONING sentence per step",
	"formatting":      "PENDING list restating the task's questions",
}

var errNoAnalysisMarkers = errors.New("analyzer prompt has neither " + templates.BaselineStart + " nor " + templates.CompressedStart + " markers (see docs/embedded-model.md, Analyzer)")

// analyze answers an analysis prompt: UT (baseline vs compressed run) or CO
// (one successful compressed run).
func analyze(prompt string, variation uint64) (string, error) {
	var v any
	switch {
	case strings.Contains(prompt, templates.BaselineStart):
		v = analyzeUT(prompt, variation)
	case strings.Contains(prompt, templates.CompressedStart):
		v = analyzeCO(prompt)
	default:
		return "", errNoAnalysisMarkers
	}
	b, err := marshalJSON(v)
	if err != nil {
		return "", fmt.Errorf("encode analysis: %w", err)
	}
	return b, nil
}

func marshalJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// run is one rendered trajectory: its steps and summaries in order.
type run struct {
	Steps     []step
	Summaries []summaryBlock
}

func parseRun(text string) run {
	var r run
	r.Steps, _ = findSteps(text)
	r.Summaries, _ = findSummaries(text)
	return r
}

// searches returns the search queries of the run with the steps that
// issued them, in order of first issue; keys are lower-case.
func (r run) searches() (order []string, at map[string][]int, spelled map[string]string) {
	at = map[string][]int{}
	spelled = map[string]string{}
	for _, st := range r.Steps {
		for _, a := range st.Actions {
			q := a.query()
			if q == "" {
				continue
			}
			k := asciiLower(q)
			if _, ok := at[k]; !ok {
				order = append(order, k)
				spelled[k] = q
			}
			at[k] = append(at[k], st.N)
		}
	}
	return order, at, spelled
}

// finalAnswers returns the answers of the run's last finish call, nil when
// it has none.
func (r run) finalAnswers() []string {
	for i := len(r.Steps) - 1; i >= 0; i-- {
		for _, a := range r.Steps[i].Actions {
			if a.Name != "finish" {
				continue
			}
			var v struct {
				Answers []string `json:"answers"`
			}
			if json.Unmarshal([]byte(a.Args), &v) == nil {
				return v.Answers
			}
		}
	}
	return nil
}

type missingFact struct {
	Baseline  string `json:"baseline"`
	Optimized string `json:"optimized_context_absent_or_changed"`
	Impact    string `json:"impact"`
}

type summaryInaccuracy struct {
	SummaryExcerpt string `json:"summary_excerpt"`
	IssueType      string `json:"issue_type"`
	Correct        string `json:"correct_baseline_reference"`
	Impact         string `json:"impact"`
}

type lostState struct {
	NameOrPattern    string `json:"name_or_pattern"`
	BaselineEvidence string `json:"baseline_evidence"`
	OptimizedIssue   string `json:"optimized_issue"`
}

type actionError struct {
	Excerpt     string `json:"optimized_step_excerpt"`
	ErrorType   string `json:"error_type"`
	Improvement string `json:"improvement"`
}

type inefficiency struct {
	Pattern     string `json:"pattern"`
	Evidence    string `json:"evidence_excerpt"`
	ExcessSteps int    `json:"excess_steps"`
	Cause       string `json:"cause"`
	Remediation string `json:"remediation"`
}

type timelineEntry struct {
	Phase     string `json:"phase"`
	Optimized string `json:"optimized_excerpt"`
	Baseline  string `json:"baseline_contrast"`
	Effect    string `json:"effect"`
}

type recovery struct {
	Excerpt string `json:"optimized_excerpt"`
	Fix     string `json:"missed_fix_action"`
}

// utAnalysis is the G.1 object; every key is always present.
type utAnalysis struct {
	TaskName              string              `json:"task_name"`
	Divergence            string              `json:"divergence_step_description"`
	RootCauses            []string            `json:"root_cause_categories"`
	MissingFacts          []missingFact       `json:"missing_or_distorted_facts"`
	SummaryInaccuracies   []summaryInaccuracy `json:"summary_inaccuracies"`
	LostState             []lostState         `json:"lost_state_variables"`
	ActionErrors          []actionError       `json:"api_or_action_errors"`
	Inefficiencies        []inefficiency      `json:"inefficiency_patterns"`
	Timeline              []timelineEntry     `json:"timeline_of_divergence"`
	PerformanceRegression bool                `json:"performance_regression"`
	BaselineEnvSteps      *int                `json:"baseline_env_steps"`
	OptimizedEnvSteps     *int                `json:"optimized_env_steps"`
	StepRatio             *float64            `json:"step_ratio"`
	Recommendations       []string            `json:"remediation_recommendations"`
	Recovery              []recovery          `json:"recovery_opportunities_missed"`
	Reliability           float64             `json:"reliability_score"`
	Summary               string              `json:"concise_failure_mechanism_summary"`
}

var (
	metaRe = regexp.MustCompile(`\b(` + strings.Join([]string{
		templates.OutcomeBaselineSteps, templates.OutcomeOptimizedSteps, templates.OutcomeStepRatio,
		templates.OutcomeRegression, templates.OutcomeOptimizedSuccess,
	}, "|") + `)=(\S*)`)
	taskNameRe = regexp.MustCompile(`(?mi)^[ \t]*` + regexp.QuoteMeta(templates.TaskLabel) + `[ \t]*(\S.*?)[ \t]*$`)
)

// utMeta is what the UT prompt says about the two runs.
type utMeta struct {
	taskName                  string
	baseSteps, optSteps       *int
	ratio                     *float64
	regression, regressionSet bool
	optSuccess                *bool
}

func parseUTMeta(outside string) utMeta {
	var m utMeta
	if mm := taskNameRe.FindStringSubmatch(outside); mm != nil {
		m.taskName = mm[1]
	}
	for _, mm := range metaRe.FindAllStringSubmatch(outside, -1) {
		v := strings.Trim(mm[2], ",;")
		switch mm[1] {
		case templates.OutcomeBaselineSteps:
			m.baseSteps = parseIntPtr(v)
		case templates.OutcomeOptimizedSteps:
			m.optSteps = parseIntPtr(v)
		case templates.OutcomeStepRatio:
			if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				m.ratio = &f
			}
		case templates.OutcomeRegression:
			if b, err := strconv.ParseBool(v); err == nil {
				m.regression, m.regressionSet = b, true
			}
		case templates.OutcomeOptimizedSuccess:
			if b, err := strconv.ParseBool(v); err == nil {
				m.optSuccess = &b
			}
		}
	}
	if m.ratio == nil && m.baseSteps != nil && m.optSteps != nil && *m.baseSteps > 0 {
		r := math.Round(float64(*m.optSteps)/float64(*m.baseSteps)*100) / 100
		m.ratio = &r
	}
	if !m.regressionSet && m.ratio != nil {
		m.regression = *m.ratio >= 1.5
	}
	return m
}

func parseIntPtr(s string) *int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &n
}

// answeringFact is a fact that answers question Q, with where it was read.
type answeringFact struct {
	fact
	Q    int
	Step int
}

func answeringFacts(r run, qs []question) []answeringFact {
	var out []answeringFact
	seen := map[string]bool{}
	for _, st := range r.Steps {
		for _, f := range parseFacts(st.Obs) {
			for qi, q := range qs {
				if f.about(q) && !seen[f.key()] {
					seen[f.key()] = true
					out = append(out, answeringFact{fact: f, Q: qi, Step: st.N})
				}
			}
		}
	}
	return out
}

func analyzeUT(prompt string, variation uint64) utAnalysis {
	baseText, _ := between(prompt, templates.BaselineStart, templates.BaselineEnd)
	optText, _ := between(prompt, templates.OptimizedStart, templates.OptimizedEnd)
	outside := prompt
	for _, sec := range []string{baseText, optText} {
		if sec != "" {
			outside = strings.Replace(outside, sec, "\n", 1)
		}
	}
	qs := parseQuestions(outside)
	meta := parseUTMeta(outside)
	base, opt := parseRun(baseText), parseRun(optText)
	a := newUTAnalysis(meta)
	end := endOf(opt)
	baseFacts := answeringFacts(base, qs)
	var f utFindings
	f.missingQs, f.firstMissing = a.compareFacts(baseFacts, qs, end, opt.finalAnswers())
	f.repeat, f.looping = a.repeatedSearches(opt, qs, f.missingQs)
	if f.repeat.step > 0 && (end.last == nil || len(queryLines(end.last.Body)) == 0) {
		a.LostState = append(a.LostState, lostQueryLog(base))
	}
	a.ActionErrors = append(a.ActionErrors, actionErrors(opt)...)
	a.Timeline = timeline(opt, baseFacts, qs)
	f.lostOpen = end.lostOpen(qs)
	a.diagnose(f, qs, variation)
	a.Divergence = divergence(f, end.where)
	a.Reliability = f.reliability(a)
	a.Summary = mechanism(a, len(f.missingQs), meta)
	return a
}

// newUTAnalysis starts the G.1 object with every list empty, not null.
func newUTAnalysis(meta utMeta) utAnalysis {
	a := utAnalysis{
		TaskName:              meta.taskName,
		RootCauses:            []string{},
		MissingFacts:          []missingFact{},
		SummaryInaccuracies:   []summaryInaccuracy{},
		LostState:             []lostState{},
		ActionErrors:          []actionError{},
		Inefficiencies:        []inefficiency{},
		Timeline:              []timelineEntry{},
		Recommendations:       []string{},
		Recovery:              []recovery{},
		BaselineEnvSteps:      meta.baseSteps,
		OptimizedEnvSteps:     meta.optSteps,
		StepRatio:             meta.ratio,
		PerformanceRegression: meta.regression,
	}
	if a.TaskName == "" {
		a.TaskName = "unknown"
	}
	return a
}

// runEnd is what the compressed run still held at its end: its last
// summary, or every refined observation when nothing was summarized.
type runEnd struct {
	facts []fact
	keys  map[string]bool
	last  *summaryBlock
	// later maps the facts read after the last summary to the step that
	// first read each.
	later map[string]int
	where string
}

func endOf(opt run) runEnd {
	e := runEnd{keys: map[string]bool{}, where: "the compressed run's refined observations"}
	if n := len(opt.Summaries); n > 0 {
		e.last = &opt.Summaries[n-1]
		e.facts = parseFacts(e.last.Body)
		e.where = "the last HISTORY_SUMMARY"
		e.later = map[string]int{}
		for _, st := range opt.Steps {
			if st.At <= e.last.At {
				continue
			}
			for _, f := range parseFacts(st.Obs) {
				if _, ok := e.later[f.key()]; !ok {
					e.later[f.key()] = st.N
				}
			}
		}
	} else {
		for _, st := range opt.Steps {
			e.facts = append(e.facts, parseFacts(st.Obs)...)
		}
	}
	for _, f := range e.facts {
		e.keys[f.key()] = true
	}
	return e
}

// about returns the first fact held at the end that answers q, or nil.
func (e runEnd) about(q question) *fact {
	for i := range e.facts {
		if e.facts[i].about(q) {
			return &e.facts[i]
		}
	}
	return nil
}

// lostOpen reports whether the last summary has no PENDING or TODO section
// and leaves a question unanswered.
func (e runEnd) lostOpen(qs []question) bool {
	if e.last == nil {
		return false
	}
	for _, s := range sections(e.last.Body) {
		if s.Name == "PENDING" || s.Name == "TODO" {
			return false
		}
	}
	return slices.ContainsFunc(qs, func(q question) bool { return e.about(q) == nil })
}

// utFindings are what the UT diagnosis is drawn from.
type utFindings struct {
	missingQs    []int // questions whose baseline fact the end lacks
	firstMissing *answeringFact
	repeat       repeatedSearch // the earliest repeated search
	looping      bool           // a search was issued three times or more
	lostOpen     bool
}

// repeatedSearch is a search issued again at step, first issued at from.
type repeatedSearch struct {
	step, from int
	query      string
}

// compareFacts reports each baseline fact the end of the compressed run
// lacks or states with another answer. It returns the questions whose fact
// went missing and the first such fact.
func (a *utAnalysis) compareFacts(baseFacts []answeringFact, qs []question, end runEnd, finals []string) ([]int, *answeringFact) {
	var missingQs []int
	var first *answeringFact
	for _, bf := range baseFacts {
		if end.keys[bf.key()] {
			continue
		}
		q := qs[bf.Q]
		if changed := end.about(q); changed != nil {
			a.SummaryInaccuracies = append(a.SummaryInaccuracies, summaryInaccuracy{
				SummaryExcerpt: changed.Sentence, IssueType: "wrong value",
				Correct: bf.Sentence, Impact: fmt.Sprintf("Q%d would be answered %q instead of %q.", q.N, changed.Ans, bf.Ans),
			})
			a.MissingFacts = append(a.MissingFacts, missingFact{
				Baseline: bf.Sentence, Optimized: "changed: " + changed.Sentence,
				Impact: fmt.Sprintf("Q%d's answer was altered.", q.N),
			})
			continue
		}
		missingQs = append(missingQs, bf.Q)
		if first == nil {
			first = &bf
		}
		a.MissingFacts = append(a.MissingFacts, missingFact{
			Baseline:  bf.Sentence,
			Optimized: fmt.Sprintf("absent from %s (baseline read it at step %d)", end.where, bf.Step),
			Impact:    missingImpact(bf, q, end, finals),
		})
	}
	return missingQs, first
}

// missingImpact says what losing bf did to the compressed run.
func missingImpact(bf answeringFact, q question, end runEnd, finals []string) string {
	switch n, ok := end.later[bf.key()]; {
	case ok:
		return fmt.Sprintf("Q%d had to be found again after the summary (step %d).", q.N, n)
	case bf.Q < len(finals) && !strings.EqualFold(finals[bf.Q], bf.Ans):
		return fmt.Sprintf("Q%d was answered %q instead of %q.", q.N, finals[bf.Q], bf.Ans)
	case bf.Q < len(finals):
		return fmt.Sprintf("Q%d was answered only after searching again.", q.N)
	}
	return fmt.Sprintf("Q%d was still open when the compressed run ended.", q.N)
}

// repeatedSearches reports the searches the compressed run issued more
// than once, and the recoveries it missed. It returns the earliest repeat
// and whether a search was issued three times or more.
func (a *utAnalysis) repeatedSearches(opt run, qs []question, missingQs []int) (first repeatedSearch, looping bool) {
	order, at, spelled := opt.searches()
	for _, k := range order {
		steps := at[k]
		if len(steps) < 2 {
			continue
		}
		looping = looping || len(steps) >= 3
		if first.step == 0 || steps[1] < first.step {
			first = repeatedSearch{step: steps[1], from: steps[0], query: spelled[k]}
		}
		qi := questionOfQuery(qs, k)
		cause := "the summary kept no record of the searches already issued"
		if qi >= 0 && slices.Contains(missingQs, qi) {
			cause = fmt.Sprintf("the summary dropped the answer to Q%d that this search had found", qs[qi].N)
		}
		a.Inefficiencies = append(a.Inefficiencies, inefficiency{
			Pattern:     "repeated search query",
			Evidence:    fmt.Sprintf("search(%q) at steps %s", spelled[k], joinInts(steps)),
			ExcessSteps: len(steps) - 1,
			Cause:       cause,
			Remediation: queryRule,
		})
		if qi < 0 {
			continue
		}
		lastAt := steps[len(steps)-1]
		if f := firstObserved(opt, qs[qi], lastAt); f != nil {
			a.Recovery = append(a.Recovery, recovery{
				Excerpt: fmt.Sprintf("action: search(%q) at step %d", spelled[k], lastAt),
				Fix:     fmt.Sprintf("carry %q from step %d in the summary instead of searching again", f.Sentence, f.Step),
			})
		}
	}
	return first, looping
}

// lostQueryLog is the state a compressed run without a query log lost.
func lostQueryLog(base run) lostState {
	ev := "every search stays visible in the full context"
	if order, at, spelled := base.searches(); len(order) > 0 {
		ev = fmt.Sprintf("search(%q) at baseline step %d stays visible until the end", spelled[order[0]], at[order[0]][0])
	}
	return lostState{
		NameOrPattern:    "ATTEMPTED QUERIES",
		BaselineEvidence: ev,
		OptimizedIssue:   "the summary keeps no list of the queries already issued, so the agent cannot tell what it tried",
	}
}

// actionErrors lists the actions of r whose arguments are not JSON.
func actionErrors(r run) []actionError {
	var out []actionError
	for _, st := range r.Steps {
		for _, act := range st.Actions {
			if act.Args != "" && !json.Valid([]byte(act.Args)) {
				out = append(out, actionError{
					Excerpt:     fmt.Sprintf("action: %s(%s)", act.Name, act.Args),
					ErrorType:   "invalid JSON arguments",
					Improvement: "write complete JSON arguments",
				})
			}
		}
	}
	return out
}

// diagnose names the root causes and the rules that remedy them.
func (a *utAnalysis) diagnose(f utFindings, qs []question, variation uint64) {
	if len(f.missingQs) > 0 {
		a.RootCauses = append(a.RootCauses, "Missing Critical Fact")
		// The kinds of fact lost, in order of first loss.
		var rels []string
		for _, qi := range f.missingQs {
			if r := asciiLower(qs[qi].Rel); !slices.Contains(rels, r) {
				rels = append(rels, r)
			}
		}
		a.Recommendations = append(a.Recommendations, factRule(rels, variation))
	}
	if len(a.SummaryInaccuracies) > 0 {
		a.RootCauses = append(a.RootCauses, "Incorrect Summary")
	}
	if f.repeat.step > 0 {
		a.RootCauses = append(a.RootCauses, "Unnecessary Re-discovery")
		a.Recommendations = append(a.Recommendations, queryRule)
	}
	if f.looping {
		a.RootCauses = append(a.RootCauses, "Inefficient Looping")
	}
	if len(a.ActionErrors) > 0 {
		a.RootCauses = append(a.RootCauses, "API Misuse")
	}
	// Open questions were lost: recommended only next to another problem.
	if f.lostOpen && (len(f.missingQs) > 0 || f.repeat.step > 0) {
		a.Recommendations = append(a.Recommendations, pendingRule)
	}
	if len(a.RootCauses) == 0 {
		a.RootCauses = append(a.RootCauses, "Other")
	}
}

func divergence(f utFindings, where string) string {
	switch {
	case f.repeat.step > 0:
		return fmt.Sprintf("At step %d the compressed run searched %q again, which it had already done at step %d; the context before it no longer showed that search or its result.",
			f.repeat.step, f.repeat.query, f.repeat.from)
	case f.firstMissing != nil:
		return fmt.Sprintf("%s lacks %q, which the baseline read at step %d.", capitalize(where), f.firstMissing.Sentence, f.firstMissing.Step)
	}
	return "No divergence found: the compressed run repeats no search and keeps every fact the baseline used."
}

func (f utFindings) reliability(a utAnalysis) float64 {
	switch {
	case len(f.missingQs) > 0:
		return 0.9
	case f.repeat.step > 0:
		return 0.75
	case len(a.ActionErrors) > 0 || len(a.SummaryInaccuracies) > 0:
		return 0.6
	}
	return 0.3
}

func mechanism(a utAnalysis, missing int, meta utMeta) string {
	var parts []string
	if missing > 0 {
		parts = append(parts, fmt.Sprintf("the summaries dropped %d fact(s) the baseline used", missing))
	}
	excess := 0
	for _, in := range a.Inefficiencies {
		excess += in.ExcessSteps
	}
	if excess > 0 {
		parts = append(parts, fmt.Sprintf("the agent repeated searches %d time(s)", excess))
	}
	if len(a.ActionErrors) > 0 {
		parts = append(parts, fmt.Sprintf("%d action(s) had invalid arguments", len(a.ActionErrors)))
	}
	if len(parts) == 0 {
		return "No loss of facts or repeated work was found in the compressed run."
	}
	s := capitalize(strings.Join(parts, "; "))
	switch {
	case meta.optSuccess != nil && !*meta.optSuccess:
		s += ", and the run failed."
	case meta.regression:
		s += ", which inflated the step count."
	default:
		s += "."
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}

// questionOfQuery returns the question whose entity the (lower-case) query
// names, the longest entity winning; -1 for none.
func questionOfQuery(qs []question, query string) int {
	best, bestLen := -1, 0
	for i, q := range qs {
		if e := asciiLower(q.Ent); e != "" && len(e) > bestLen && strings.Contains(query, e) {
			best, bestLen = i, len(e)
		}
	}
	return best
}

// firstObserved returns the first fact answering q that the run read before
// step n, or nil.
func firstObserved(r run, q question, n int) *answeringFact {
	for _, st := range r.Steps {
		if st.N >= n {
			break
		}
		for _, f := range parseFacts(st.Obs) {
			if f.about(q) {
				return &answeringFact{fact: f, Step: st.N}
			}
		}
	}
	return nil
}

// timeline lists the summaries that first dropped a baseline answer the
// compressed context held just before them, one entry per answer.
func timeline(opt run, baseFacts []answeringFact, qs []question) []timelineEntry {
	out := []timelineEntry{}
	held := map[string]bool{}
	reported := map[string]bool{}
	si := 0
	for _, st := range opt.Steps {
		for si < len(opt.Summaries) && opt.Summaries[si].At < st.At {
			sum := opt.Summaries[si]
			now := map[string]bool{}
			for _, f := range parseFacts(sum.Body) {
				now[f.key()] = true
			}
			for _, bf := range baseFacts {
				if held[bf.key()] && !now[bf.key()] && !reported[bf.key()] {
					reported[bf.key()] = true
					out = append(out, timelineEntry{
						Phase:     fmt.Sprintf("summary %d, before step %d", si+1, st.N),
						Optimized: firstLines(sum.Body, 2),
						Baseline:  bf.Sentence,
						Effect:    fmt.Sprintf("Q%d's answer left the context", qs[bf.Q].N),
					})
					break
				}
			}
			held = now
			si++
		}
		for _, f := range parseFacts(st.Obs) {
			held[f.key()] = true
		}
	}
	return out
}

// firstLines joins the first n non-blank lines of s, cut to excerptLimit
// characters.
func firstLines(s string, n int) string {
	var out []string
	for line := range strings.Lines(s) {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return excerpt(strings.Join(out, " / "))
}

const excerptLimit = 240

func excerpt(s string) string {
	if utf8.RuneCountInString(s) <= excerptLimit {
		return s
	}
	return string([]rune(s)[:excerptLimit-1]) + "…"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

type removal struct {
	Category string `json:"category"`
	Pattern  string `json:"pattern"`
	Action   string `json:"action"`
}

type keep struct {
	Reason        string   `json:"reason"`
	EvidenceSpans []string `json:"evidence_spans"`
}

type coOverview struct {
	UsedShare       string  `json:"used_share"`
	MainWaste       string  `json:"main_waste"`
	Reliability     float64 `json:"reliability_score"`
	Sessions        int     `json:"sessions"`
	AvgSummaryChars int     `json:"avg_summary_chars"`
}

type coAnalysis struct {
	Removals []removal  `json:"removals"`
	Keeps    []keep     `json:"keeps"`
	Rules    []string   `json:"rules"`
	Overview coOverview `json:"overview"`
}

// analyzeCO finds what the compressed context carried that the successful
// run never used.
func analyzeCO(prompt string) coAnalysis {
	text, _ := between(prompt, templates.CompressedStart, templates.CompressedEnd)
	qs := parseQuestions(strings.Replace(prompt, text, "\n", 1))
	r := parseRun(text)
	// The compressed content: summaries, or refined observations when only
	// observations were compressed.
	var units []string
	for _, s := range r.Summaries {
		units = append(units, s.Body)
	}
	if len(units) == 0 {
		for _, st := range r.Steps {
			units = append(units, st.Obs)
		}
	}
	waste, total := map[string]int{}, 0
	for _, u := range units {
		total += utf8.RuneCountInString(u)
		for _, sec := range sections(u) {
			if cat, n := sectionWaste(sec, qs); n > 0 {
				waste[cat] += n
			}
		}
	}
	a := coAnalysis{Removals: []removal{}, Keeps: []keep{}, Rules: []string{}}
	mainWaste := a.remove(waste)
	used := a.keep(r, qs)
	share := 0
	if total > 0 {
		share = min(100, int(math.Round(float64(used)/float64(total)*100)))
	}
	a.Overview = coOverview{
		UsedShare: fmt.Sprintf("%d%%", share), MainWaste: mainWaste,
		Reliability: 0.8, Sessions: len(r.Summaries) + 1,
	}
	if len(units) > 0 {
		a.Overview.AvgSummaryChars = total / len(units)
	}
	return a
}

// sectionWaste returns the category of unused content of a section of the
// compressed context and its size in characters (0 for none).
func sectionWaste(sec section, qs []question) (string, int) {
	size := 0
	for _, l := range sec.Lines {
		size += utf8.RuneCountInString(l) + 1
	}
	switch {
	case strings.Contains(sec.Name, "QUER") || strings.Contains(sec.Name, "LOG"):
		return "tool-logs", size
	case sec.Name == "OTHER FACTS":
		return "unrelated-facts", size
	case sec.Name == "PENDING" || sec.Name == "TODO":
		return "formatting", size
	case sec.Name == "REASONING":
		if sents := splitSentences(strings.Join(sec.Lines, " ")); len(sents) > 1 {
			return "narrative", size - utf8.RuneCountInString(sents[0])
		}
		return "", 0
	}
	unrelated := 0
	for _, l := range sec.Lines {
		if slices.ContainsFunc(parseFacts(l), func(f fact) bool { return !slices.ContainsFunc(qs, f.about) }) {
			unrelated += utf8.RuneCountInString(l) + 1
		}
	}
	return "unrelated-facts", unrelated
}

// remove adds a removal and its rule per category of waste, in a fixed
// order, and returns the category with the most waste ("none" for none).
func (a *coAnalysis) remove(waste map[string]int) string {
	mainWaste, most := "none", 0
	for _, cat := range []string{"tool-logs", "unrelated-facts", "narrative", "formatting"} {
		if waste[cat] == 0 {
			continue
		}
		action := "drop"
		if cat == "narrative" {
			action = "shorten"
		}
		a.Removals = append(a.Removals, removal{Category: cat, Pattern: coPatterns[cat], Action: action})
		a.Rules = append(a.Rules, coRules[cat])
		if waste[cat] > most {
			mainWaste, most = cat, waste[cat]
		}
	}
	return mainWaste
}

// keep adds the statements the final answers came from: the last summary
// and what was read after it, or every observation when nothing was
// summarized. It returns their size in characters.
func (a *coAnalysis) keep(r run, qs []question) int {
	var from []string
	after := -1
	if n := len(r.Summaries); n > 0 {
		from = append(from, r.Summaries[n-1].Body)
		after = r.Summaries[n-1].At
	}
	for _, st := range r.Steps {
		if st.At > after {
			from = append(from, st.Obs)
		}
	}
	finals := r.finalAnswers()
	used := 0
	for i, q := range qs {
		if i >= len(finals) || strings.EqualFold(finals[i], unknownAnswer) {
			continue
		}
		if span := evidence(from, q, finals[i]); span != "" {
			used += utf8.RuneCountInString(span)
			a.Keeps = append(a.Keeps, keep{
				Reason:        fmt.Sprintf("Q%d's final answer %q comes from it", q.N, finals[i]),
				EvidenceSpans: []string{span},
			})
		}
	}
	return used
}

// evidence returns the first line of texts that states answer ans to q.
func evidence(texts []string, q question, ans string) string {
	for _, t := range texts {
		for line := range strings.Lines(t) {
			l := strings.TrimSpace(line)
			for _, f := range parseFacts(l) {
				if f.about(q) && strings.EqualFold(f.Ans, ans) {
					if f.Form == 4 || strings.HasPrefix(l, "-") {
						return l
					}
					return f.Sentence
				}
			}
		}
	}
	return ""
}
