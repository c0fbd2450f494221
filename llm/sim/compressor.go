package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/llm"

	"github.com/ctxopt/ctxopt/internal/memo"
)

// keepRate is the chance that a compressor without the strict rule keeps a
// fact.
const keepRate = 0.7

type reasoningMode int

const (
	reasonPerStep reasoningMode = iota
	reasonOne
	reasonNone
)

type lengthUnit int

const (
	unitChars lengthUnit = iota
	unitWords
	unitTokens
)

type lengthLimit struct {
	N    int
	Unit lengthUnit
}

// directives are the rules the compressor reads from a guideline.
type directives struct {
	// Strict copies the facts of the kinds in StrictRels (every kind when
	// empty) word for word; Paraphrase says a clause asked for facts in
	// other words, which overrides Strict.
	Strict, Paraphrase            bool
	StrictRels                    []string
	OtherFacts, QueryLog, Pending bool
	// QueryOpenOnly limits the query log to open questions (a loop guard).
	QueryOpenOnly bool
	Reasoning     reasoningMode
	Limits        []lengthLimit
}

// strictFor reports whether f is copied word for word.
func (d directives) strictFor(f fact) bool {
	return d.Strict && (len(d.StrictRels) == 0 || slices.Contains(d.StrictRels, asciiLower(f.Rel)))
}

var lengthRe = regexp.MustCompile(`(?:under|at most|within|no more than|below|<=|≤)\s*(\d[\d,]*)\s*(characters|chars|words|tokens)\b`)

// directivesRead holds the directives of the instruction texts read so
// far: a guideline's compressor is asked hundreds of times with the same
// instructions, and reading them (regular expressions on every line) was
// most of answering. Callers only read what they get: its slices are
// clipped, so an append copies.
var directivesRead = memo.New[string, directives](512)

// readDirectives reads the directives of the instruction text, line by
// line, case-insensitively (docs/embedded-model.md, Compressor), once per
// text.
func readDirectives(instr string) directives {
	if d, ok := directivesRead.Get(instr); ok {
		return d
	}
	d := parseDirectives(instr)
	d.StrictRels, d.Limits = slices.Clip(d.StrictRels), slices.Clip(d.Limits)
	directivesRead.Put(instr, d)
	return d
}

// parseDirectives is readDirectives without the memo.
func parseDirectives(instr string) directives {
	instr = bulletRules(instr)
	d := readFactDirectives(instr)
	var sw switches
	for line := range strings.Lines(asciiLower(instr)) {
		if l := strings.Join(strings.Fields(line), " "); l != "" {
			sw.read(l, &d)
		}
	}
	d.OtherFacts = sw.other && !sw.otherOff
	d.QueryLog = sw.logOn && !sw.logOff
	switch {
	case sw.none:
		d.Reasoning = reasonNone
	case sw.one:
		d.Reasoning = reasonOne
	}
	return d
}

// readFactDirectives reads the fact directives of the clauses of instr.
func readFactDirectives(instr string) directives {
	var d directives
	every := false
	for _, c := range clauses(asciiLower(instr)) {
		switch kind, rels := readFactClause(c); kind {
		case factVerbatim:
			d.Strict = true
			every = every || len(rels) == 0
			for _, r := range rels {
				if !slices.Contains(d.StrictRels, r) {
					d.StrictRels = append(d.StrictRels, r)
				}
			}
		case factParaphrase:
			d.Paraphrase = true
		}
	}
	if every || d.Paraphrase {
		d.StrictRels = nil
	}
	// A guideline that asks for facts in other words anywhere is not
	// strict: the negation wins over a contradicting clause.
	d.Strict = d.Strict && !d.Paraphrase
	return d
}

// switches are what the lines of a guideline turn on and off; a directive
// is on when some line turns it on and none off.
type switches struct {
	other, otherOff, logOn, logOff, one, none bool
}

// read reads one lower-case line with single blanks.
func (sw *switches) read(l string, d *directives) {
	if hasWord(l, "all") && anyStem(l, "data", "artifact", "fact") {
		sw.other = true
	}
	if anyPhrase(l, "only facts", "other entities", "unrelated") {
		sw.otherOff = true
	}
	if anyWord(l, "query", "queries") {
		if anyPhrase(l, "open questions", "unanswered", "still open") {
			// "keep queries only for open questions": a loop guard,
			// whatever the line says about dropping the rest.
			sw.logOn, d.QueryOpenOnly = true, true
			return
		}
		for _, c := range clauses(l) {
			switch queryClause(c) {
			case 1:
				sw.logOn = true
			case -1:
				sw.logOff = true
			}
		}
	}
	if hasWord(l, "pending") || hasWord(l, "todo") || anyPhrase(l, "remaining questions") {
		d.Pending = true
	}
	if anyPhrase(l, "one sentence", "single sentence", "one brief paragraph", "<=2", "<= 2", "≤2", "≤ 2") {
		sw.one = true
	}
	if anyPhrase(l, "no reasoning", "omit reasoning") {
		sw.none = true
	}
	d.Limits = append(d.Limits, lengthLimits(l)...)
}

// lengthLimits reads the length limits of a line.
func lengthLimits(l string) []lengthLimit {
	var out []lengthLimit
	for _, m := range lengthRe.FindAllStringSubmatch(l, -1) {
		n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		if err != nil || n <= 0 {
			continue
		}
		u := unitChars
		switch m[2] {
		case "words":
			u = unitWords
		case "tokens":
			u = unitTokens
		}
		out = append(out, lengthLimit{N: n, Unit: u})
	}
	return out
}

// compressorInput is a compressor prompt split into data and instructions.
type compressorInput struct {
	Questions []question
	Steps     []step
	Summaries []summaryBlock
	// Passages outside step blocks: the observation to compress.
	Passages []passage
	// Instr is the prompt minus data.
	Instr string
}

func parseCompressorPrompt(prompt string) compressorInput {
	var in compressorInput
	var stepSpans, sumSpans []span
	in.Steps, stepSpans = findSteps(prompt)
	in.Summaries, sumSpans = findSummaries(prompt)
	var rest string
	in.Passages, rest = splitPassages(cutSpans(prompt, stepSpans, sumSpans))
	var instr strings.Builder
	seen := map[int]bool{}
	for line := range strings.Lines(rest) {
		if q, ok := parseQuestionLine(strings.TrimRight(line, "\r\n")); ok {
			if !seen[q.N] {
				seen[q.N] = true
				in.Questions = append(in.Questions, q)
			}
			continue
		}
		instr.WriteString(line)
	}
	in.Instr = instr.String()
	return in
}

// factSource is a fact with where it was read.
type factSource struct {
	fact
	Q int // index of the question it answers, -1 for none
}

// classify assigns each fact to the question it answers. Facts are
// de-duplicated by key, first wins; filler sentences that merely look like
// facts about no question are left out.
func classify(facts []fact, qs []question) []factSource {
	seen := map[string]bool{}
	var out []factSource
	for _, f := range facts {
		k := f.key()
		if seen[k] {
			continue
		}
		qi := -1
		for i, q := range qs {
			if f.about(q) {
				qi = i
				break
			}
		}
		if qi < 0 && !plausible(f) {
			continue
		}
		seen[k] = true
		out = append(out, factSource{fact: f, Q: qi})
	}
	return out
}

// lossyKeep decides whether a compressor without the strict rule keeps a
// fact. In history summaries the choice depends on the fact alone, so a
// fact the compressor drops is dropped again each time it is re-found (see
// the Decisions in docs/embedded-model.md).
// At temperature > 0 the request's variation (seed and sample) changes
// which facts are dropped; at 0 it is 0 and the choice is the fact's alone.
func lossyKeep(f fact, variation uint64) bool {
	return unit(vary(hashStrings("history-keep", f.key()), variation)) < keepRate
}

// lossyKeepAt is the observation compressor's choice, made afresh at each
// step.
func lossyKeepAt(f fact, stepN int, variation uint64) bool {
	return unit(vary(hashInts(hashStrings("observation-keep", f.key()), stepN), variation)) < keepRate
}

func identified(f fact) string {
	return fmt.Sprintf("- Identified the %s of %s: %s.", f.Rel, f.Ent, f.Ans)
}

// outSection is one section of a compressor answer. Sections with a lower
// Prio are cut first when the answer is too long.
type outSection struct {
	// Heading is the line before the items ("FACT CACHE:"), or the text
	// before them on the same line when Inline ("REASONING:"); "" for none.
	Heading  string
	Inline   bool
	Items    []string
	Prio     int
	CutFront bool
	// Fixed sections are written even when empty and never cut.
	Fixed bool
}

// Cut priorities, lowest first (docs/embedded-model.md, length directive).
const (
	prioOther = iota
	prioReasoning
	prioQueries
	prioPending
	prioFacts
)

type outDoc struct {
	Head, Tail string
	Sections   []outSection
}

func (d *outDoc) render() string {
	var b strings.Builder
	b.WriteString(d.Head)
	for _, s := range d.Sections {
		if len(s.Items) == 0 && !s.Fixed {
			continue
		}
		if s.Inline {
			b.WriteString(s.Heading)
			if s.Heading != "" && len(s.Items) > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strings.Join(s.Items, " "))
			b.WriteByte('\n')
			continue
		}
		if s.Heading != "" {
			b.WriteString(s.Heading)
			b.WriteByte('\n')
		}
		for _, it := range s.Items {
			b.WriteString(it)
			b.WriteByte('\n')
		}
	}
	b.WriteString(d.Tail)
	return b.String()
}

func measure(tok *llm.Tokenizer, s string, u lengthUnit) int {
	switch u {
	case unitWords:
		return len(strings.Fields(s))
	case unitTokens:
		return tok.Count(s)
	default:
		return utf8.RuneCountInString(s)
	}
}

// fit cuts items, lowest priority first, until the rendered document meets
// every limit or nothing is left to cut. Item sizes are estimated to cut in
// bulk; the exact size is checked after each round.
func (d *outDoc) fit(tok *llm.Tokenizer, limits []lengthLimit) {
	for _, lim := range limits {
		for {
			over := measure(tok, d.render(), lim.Unit) - lim.N
			if over <= 0 {
				break
			}
			cut := false
			for over > 0 {
				s := d.lowest()
				if s == nil {
					break
				}
				var it string
				if s.CutFront {
					it, s.Items = s.Items[0], s.Items[1:]
				} else {
					it, s.Items = s.Items[len(s.Items)-1], s.Items[:len(s.Items)-1]
				}
				cut = true
				over -= measure(tok, it, lim.Unit) + 1
				if len(s.Items) == 0 {
					over -= measure(tok, s.Heading, lim.Unit) + 1
				}
			}
			if !cut {
				break
			}
		}
	}
}

// lowest returns the non-empty section cut first, or nil.
func (d *outDoc) lowest() *outSection {
	var best *outSection
	for i := range d.Sections {
		s := &d.Sections[i]
		if len(s.Items) > 0 && !s.Fixed && (best == nil || s.Prio < best.Prio) {
			best = s
		}
	}
	return best
}

// compress answers a compressor prompt: a history summary, or a refined
// observation when the prompt carries passages outside <step> blocks.
func compress(prompt string, tok *llm.Tokenizer, variation uint64) string {
	in := parseCompressorPrompt(prompt)
	d := readDirectives(in.Instr)
	if len(in.Passages) > 0 {
		return compressObservation(in, d, tok, variation)
	}
	return compressHistory(in, d, tok, variation)
}

// shown returns the facts and search queries of the prompt's summaries and
// steps, and the number of its last step (0 for none).
func (in compressorInput) shown() (facts []fact, queries []string, lastStep int) {
	for _, s := range in.Summaries {
		facts = append(facts, parseFacts(s.Body)...)
		queries = append(queries, queryLines(s.Body)...)
	}
	for _, st := range in.Steps {
		facts = append(facts, parseFacts(st.Obs)...)
		if len(st.Actions) > 0 {
			if q := st.Actions[0].query(); q != "" {
				queries = append(queries, q)
			}
		}
		lastStep = max(lastStep, st.N)
	}
	return facts, queries, lastStep
}

// addLists adds the PENDING and ATTEMPTED QUERIES sections d asks for.
func (doc *outDoc) addLists(d directives, qs []question, answered []bool, queries []string) {
	if d.Pending {
		doc.Sections = append(doc.Sections, outSection{Heading: "PENDING:", Items: pendingLines(qs, answered), Prio: prioPending})
	}
	if d.QueryLog {
		doc.Sections = append(doc.Sections, outSection{Heading: "ATTEMPTED QUERIES:", Items: queryLogLines(queries), Prio: prioQueries})
	}
}

func compressHistory(in compressorInput, d directives, tok *llm.Tokenizer, variation uint64) string {
	all, queries, lastStep := in.shown()
	facts := classify(all, in.Questions)

	var kept, other []string
	answered := make([]bool, len(in.Questions))
	byQ := make([][]string, len(in.Questions))
	for _, f := range facts {
		strict := d.strictFor(f.fact)
		switch {
		case !strict && !lossyKeep(f.fact, variation):
		case f.Q >= 0:
			answered[f.Q] = true
			if strict {
				byQ[f.Q] = append(byQ[f.Q], fmt.Sprintf("- Q%d: %s", in.Questions[f.Q].N, f.Sentence))
			} else {
				byQ[f.Q] = append(byQ[f.Q], identified(f.fact))
			}
		case d.OtherFacts:
			if strict {
				other = append(other, "- "+f.Sentence)
			} else {
				other = append(other, identified(f.fact))
			}
		}
	}
	for _, ls := range byQ {
		kept = append(kept, ls...)
	}

	var reasoning []string
	switch d.Reasoning {
	case reasonPerStep:
		// Only the steps being summarized: the previous summary's
		// reasoning is not carried over (see Decisions).
		reasoning = stepSentences(in.Steps)
	case reasonOne:
		reasoning = []string{oneSentence(lastStep, answered)}
	}
	factName := "COMPLETED:"
	if d.Strict {
		factName = "FACT CACHE:"
	}
	doc := outDoc{
		Head: summaryOpen + "\n",
		Tail: summaryClose,
		Sections: []outSection{
			{Heading: "REASONING:", Inline: true, Items: reasoning, Prio: prioReasoning, CutFront: true},
			{Heading: factName, Items: kept, Prio: prioFacts},
			{Heading: "OTHER FACTS:", Items: other, Prio: prioOther},
		},
	}
	if d.QueryOpenOnly {
		queries = openQueries(in.Questions, answered, queries)
	}
	doc.addLists(d, in.Questions, answered, queries)
	doc.fit(tok, d.Limits)
	return doc.render()
}

// openQueries keeps the queries that name the entity of a question not
// answered yet. Questions can share an entity, so this keeps a query when in
// doubt: the log is a loop guard, and a missing guard costs steps.
func openQueries(qs []question, answered []bool, queries []string) []string {
	var out []string
	for _, q := range queries {
		lq := asciiLower(q)
		for i, qu := range qs {
			if e := asciiLower(qu.Ent); !answered[i] && e != "" && strings.Contains(lq, e) {
				out = append(out, q)
				break
			}
		}
	}
	return out
}

// stepSentences writes one sentence per step, with no facts in it.
func stepSentences(steps []step) []string {
	var out []string
	for _, st := range steps {
		var s string
		switch {
		case len(st.Actions) == 0:
			s = fmt.Sprintf("At step %d the agent called no tool.", st.N)
		case st.Actions[0].Name == "finish":
			s = fmt.Sprintf("At step %d the agent submitted its answers.", st.N)
		case st.Actions[0].query() != "":
			s = fmt.Sprintf("At step %d the agent looked up %q", st.N, st.Actions[0].query())
			ps, _ := splitPassages(st.Obs)
			if len(ps) > 0 {
				titles := make([]string, len(ps))
				for i, p := range ps {
					titles[i] = p.Title
				}
				s += " and read passages on " + strings.Join(titles, ", ")
			}
			s += "."
		default:
			s = fmt.Sprintf("At step %d the agent called %s.", st.N, st.Actions[0].Name)
		}
		out = append(out, s)
	}
	return out
}

func oneSentence(lastStep int, answered []bool) string {
	n := 0
	for _, a := range answered {
		if a {
			n++
		}
	}
	if lastStep == 0 {
		return fmt.Sprintf("So far the agent has answers to %d of %d questions.", n, len(answered))
	}
	return fmt.Sprintf("By step %d the agent had answers to %d of %d questions.", lastStep, n, len(answered))
}

func pendingLines(qs []question, answered []bool) []string {
	var out []string
	for i, q := range qs {
		if !answered[i] {
			out = append(out, fmt.Sprintf("- Q%d: %s", q.N, q.Text))
		}
	}
	return out
}

func queryLogLines(queries []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, q := range queries {
		if l := asciiLower(q); !seen[l] {
			seen[l] = true
			out = append(out, "- \""+q+"\"")
		}
	}
	return out
}

func compressObservation(in compressorInput, d directives, tok *llm.Tokenizer, variation uint64) string {
	// What the history already shows, for PENDING and to find the entity of
	// the search that produced the observation.
	histFacts, queries, lastStep := in.shown()
	known := make([]bool, len(in.Questions))
	for _, f := range classify(histFacts, in.Questions) {
		if f.Q >= 0 {
			known[f.Q] = true
		}
	}
	stepN := lastStep + 1
	if n := len(in.Steps); n > 0 && !in.Steps[n-1].HasObs {
		stepN = in.Steps[n-1].N
	}
	var obsFacts []fact
	perPassage := make([]int, len(in.Passages))
	for i, p := range in.Passages {
		fs := parseFacts(p.Text)
		perPassage[i] = len(fs)
		obsFacts = append(obsFacts, fs...)
	}
	answered := slices.Clone(known)
	k := observationKeeper{d: d, qs: in.Questions, focus: searchFocus(in, known), stepN: stepN, variation: variation, answered: answered}
	for _, f := range classify(obsFacts, in.Questions) {
		k.keep(f)
	}
	var reasoning []string
	switch d.Reasoning {
	case reasonPerStep:
		for i, p := range in.Passages {
			reasoning = append(reasoning, fmt.Sprintf("Passage %d on %s states %s.", i+1, p.Title, plural(perPassage[i], "fact")))
		}
	case reasonOne:
		reasoning = []string{fmt.Sprintf("Kept %d of %s from %s.", len(k.main)+len(k.other), plural(len(obsFacts), "fact"), plural(len(in.Passages), "passage"))}
	}
	mainName := "FACTS:"
	if d.Strict {
		mainName = "FACT CACHE:"
	}
	doc := outDoc{
		Sections: []outSection{
			{Heading: "# Reasoning", Fixed: true},
			{Inline: true, Items: reasoning, Prio: prioReasoning, CutFront: true},
			{Heading: "# Refined Observation", Fixed: true},
			{Heading: mainName, Items: k.main, Prio: prioFacts},
			{Heading: "OTHER FACTS:", Items: k.other, Prio: prioOther},
		},
	}
	doc.addLists(d, in.Questions, answered, queries)
	doc.fit(tok, d.Limits)
	out := doc.render()
	if strings.HasSuffix(out, "# Refined Observation\n") {
		// Every fact was dropped; say so rather than leave the part empty,
		// which readers would take for a missing heading.
		out += "No fact in these passages was kept.\n"
	}
	return out
}

// observationKeeper sorts the facts of an observation into the lines kept
// about the search's entity (main) and about others, marking the questions
// they answer.
type observationKeeper struct {
	d           directives
	qs          []question
	focus       string
	stepN       int
	variation   uint64
	answered    []bool
	main, other []string
}

func (k *observationKeeper) keep(f factSource) {
	focused := strings.Contains(k.focus, asciiLower(f.Ent))
	strict := k.d.strictFor(f.fact)
	switch {
	case strict && f.Q >= 0:
		k.main = append(k.main, fmt.Sprintf("- Q%d: %s", k.qs[f.Q].N, f.Sentence))
		k.answered[f.Q] = true
	case strict && k.d.OtherFacts:
		k.other = append(k.other, "- "+f.Sentence)
	case strict:
	case !lossyKeepAt(f.fact, k.stepN, k.variation):
	case focused || k.d.OtherFacts:
		if focused {
			k.main = append(k.main, identified(f.fact))
		} else {
			k.other = append(k.other, identified(f.fact))
		}
		if f.Q >= 0 {
			k.answered[f.Q] = true
		}
	}
}

// searchFocus returns, lower-case, the text whose entity the observation is
// about: the query of a trailing step that has no observation yet; else the
// first question the history does not answer whose entity the passages
// name; else the first passage's title.
func searchFocus(in compressorInput, known []bool) string {
	if n := len(in.Steps); n > 0 && !in.Steps[n-1].HasObs && len(in.Steps[n-1].Actions) > 0 {
		if q := in.Steps[n-1].Actions[0].query(); q != "" {
			return asciiLower(q)
		}
	}
	var text strings.Builder
	for _, p := range in.Passages {
		text.WriteString(p.Title)
		text.WriteByte('\n')
		text.WriteString(p.Text)
		text.WriteByte('\n')
	}
	lower := asciiLower(text.String())
	for i, q := range in.Questions {
		if !known[i] && q.Ent != "" && strings.Contains(lower, asciiLower(q.Ent)) {
			return asciiLower(q.Text)
		}
	}
	if len(in.Passages) > 0 {
		return asciiLower(in.Passages[0].Title)
	}
	return ""
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
