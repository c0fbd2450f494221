package sim

import (
	"encoding/binary"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/internal/memo"
)

// asciiLower maps A-Z to a-z and leaves every other byte alone, so byte
// offsets in the result are offsets in s: the agent finds a pattern in the
// lower-case text and cuts the answer from the original.
func asciiLower(s string) string {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// hashStrings is FNV-1a over the parts, each followed by a zero byte so
// ("ab","c") and ("a","bc") differ. It is stable across processes, which the
// lossy choices need: a run must be reproducible.
func hashStrings(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// mix is splitmix64's finalizer: it spreads the bits of x so that nearby
// inputs (arrival counts, sample indexes) give independent draws.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps a hash to [0,1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// vary mixes a request's variation into h; variation 0 (temperature 0)
// leaves h as it is.
func vary(h, variation uint64) uint64 {
	if variation == 0 {
		return h
	}
	return mix(h ^ variation)
}

// hashInts folds integers into h.
func hashInts(h uint64, xs ...int) uint64 {
	var b [8]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h = mix(h ^ binary.LittleEndian.Uint64(b[:]))
	}
	return h
}

// question is one "Qn: What is the R of E?" line of a task.
type question struct {
	N    int
	Text string
	// Rel and Ent are empty when the text is not of the QA form.
	Rel, Ent string
}

// parseQuestionLine reads "Qn: text" (leading blanks allowed).
func parseQuestionLine(line string) (question, bool) {
	s := strings.TrimLeft(line, " \t")
	if len(s) < 4 || s[0] != 'Q' {
		return question{}, false
	}
	j := 1
	for j < len(s) && '0' <= s[j] && s[j] <= '9' {
		j++
	}
	if j == 1 || j+1 >= len(s) || s[j] != ':' || s[j+1] != ' ' {
		return question{}, false
	}
	n, err := strconv.Atoi(s[1:j])
	if err != nil {
		return question{}, false
	}
	text := strings.TrimSpace(s[j+2:])
	if text == "" {
		return question{}, false
	}
	q := question{N: n, Text: text}
	if m := questionForm.FindStringSubmatch(text); m != nil {
		q.Rel, q.Ent = m[1], m[2]
	}
	return q, true
}

var questionForm = regexp.MustCompile(`^What is the ([a-z]+(?: [a-z]+)*) of ([A-Z][^?]*?)\s*\?$`)

// parseQuestions returns the distinct Qn lines of text, first wins.
func parseQuestions(text string) []question {
	var qs []question
	seen := map[int]bool{}
	for line := range strings.Lines(text) {
		if q, ok := parseQuestionLine(strings.TrimRight(line, "\r\n")); ok && !seen[q.N] {
			seen[q.N] = true
			qs = append(qs, q)
		}
	}
	return qs
}

// fact is one fact statement read from text, in any of the contract's forms.
type fact struct {
	Rel, Ent, Ans string
	// Sentence is the statement as written, without list markers, so the
	// strict compressor can copy it verbatim.
	Sentence string
	// Form is 1, 2 or 3 for the sentence forms, 4 for a fact-cache line.
	Form int
}

// key identifies a fact regardless of its form.
func (f fact) key() string {
	return asciiLower(f.Rel) + "|" + asciiLower(f.Ent) + "|" + asciiLower(f.Ans)
}

// about reports whether f states the relation of the entity q asks for.
func (f fact) about(q question) bool {
	return q.Rel != "" && strings.EqualFold(f.Rel, q.Rel) && strings.EqualFold(f.Ent, q.Ent)
}

const (
	relPat = `([a-z]+(?: [a-z]+)*)`
	entPat = `([A-Z][A-Za-z-]*(?: [A-Z][A-Za-z-]*)?)`
)

var (
	form1Re = regexp.MustCompile(`^[Tt]he ` + relPat + ` of ` + entPat + ` is (.+)$`)
	form2Re = regexp.MustCompile(`^` + entPat + `'s ` + relPat + ` is (.+)$`)
	form3Re = regexp.MustCompile(`^(.+) is listed in the archives of ` + entPat + ` under ` + relPat + `$`)
	cacheRe = regexp.MustCompile(`^(?:[Ii]dentified )?(?:[Tt]he )?` + relPat + ` of ` + entPat + `(?::| ->| =) (.+)$`)
	// listPrefix strips "- ", "* ", "- Q3: " and "Q3: " from a line.
	listPrefix = regexp.MustCompile(`^(?:[-*•]\s+)?(?:Q\d+:\s+)?`)
)

// factsRead holds the facts of the texts read so far: a history's
// observations are read again at every compression of it, and reading
// them (regular expressions on every sentence) was most of answering.
// Callers only read what they get: the slices are clipped, so an append
// copies.
var factsRead = memo.New[string, []fact](1 << 12)

// parseFacts returns every fact statement of text in order of appearance,
// read once per text.
func parseFacts(text string) []fact {
	if fs, ok := factsRead.Get(text); ok {
		return fs
	}
	fs := slices.Clip(scanFacts(text))
	factsRead.Put(text, fs)
	return fs
}

// scanFacts is parseFacts without the memo. Fact-cache lines are read
// whole; other lines are split into sentences.
func scanFacts(text string) []fact {
	var out []fact
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '[' || line[0] == '<' {
			continue
		}
		body := line[len(listPrefix.FindString(line)):]
		if f, ok := parseCacheLine(body); ok {
			out = append(out, f)
			continue
		}
		for _, s := range splitSentences(body) {
			if f, ok := parseSentence(s); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func parseCacheLine(s string) (fact, bool) {
	if !strings.Contains(s, ": ") && !strings.Contains(s, " -> ") && !strings.Contains(s, " = ") {
		return fact{}, false
	}
	m := cacheRe.FindStringSubmatch(strings.TrimSpace(strings.TrimSuffix(s, ".")))
	if m == nil {
		return fact{}, false
	}
	ans := cleanAnswer(m[3])
	if ans == "" {
		return fact{}, false
	}
	return fact{Rel: m[1], Ent: m[2], Ans: ans, Sentence: s, Form: 4}, true
}

// parseSentence reads one sentence (with or without its final period).
func parseSentence(s string) (fact, bool) {
	core := strings.TrimSuffix(s, ".")
	if !strings.Contains(core, " is ") {
		return fact{}, false
	}
	if m := form3Re.FindStringSubmatch(core); m != nil {
		return fact{Rel: m[3], Ent: m[2], Ans: cleanAnswer(m[1]), Sentence: s, Form: 3}, true
	}
	if m := form1Re.FindStringSubmatch(core); m != nil {
		if a := cleanAnswer(m[3]); a != "" {
			return fact{Rel: m[1], Ent: m[2], Ans: a, Sentence: s, Form: 1}, true
		}
	}
	if m := form2Re.FindStringSubmatch(core); m != nil {
		if a := cleanAnswer(m[3]); a != "" {
			return fact{Rel: m[2], Ent: m[1], Ans: a, Sentence: s, Form: 2}, true
		}
	}
	return fact{}, false
}

func cleanAnswer(a string) string { return strings.Trim(a, " \t\"'`*") }

// plausible reports whether a fact about no task question is likely a real
// fact rather than a filler sentence of the same shape ("The legend of X is
// told ..."): answers are names or numbers.
func plausible(f fact) bool {
	if f.Form == 3 || f.Form == 4 {
		return true
	}
	c := f.Ans[0]
	return ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// splitSentences cuts text after '.', '!' or '?' followed by a blank.
func splitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '!', '?':
			if i+1 == len(s) || s[i+1] == ' ' {
				if t := strings.TrimSpace(s[start : i+1]); t != "" {
					out = append(out, t)
				}
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// action is one "action: name(args)" line of a step block.
type action struct {
	Name, Args string
}

// query returns the search query of a search action, or "" when the
// action is not a search or its arguments do not parse.
func (a action) query() string {
	if a.Name != "search" {
		return ""
	}
	return searchQuery(a.Args)
}

// step is one <step n="k"> block as rollout renders history.
type step struct {
	N       int
	Actions []action
	Obs     string
	HasObs  bool
	// At is the byte offset of the block in the text it came from, so steps
	// and summaries can be put in order.
	At int
}

// summaryBlock is one <HISTORY_SUMMARY> block.
type summaryBlock struct {
	Body string
	At   int
}

// span is a byte range of a text.
type span struct{ from, to int }

const (
	stepOpen     = "<step n=\""
	stepClose    = "</step>"
	summaryOpen  = "<HISTORY_SUMMARY>"
	summaryClose = "</HISTORY_SUMMARY>"
)

// findSteps returns the step blocks of text and their spans.
func findSteps(text string) ([]step, []span) {
	var steps []step
	var spans []span
	for off := 0; ; {
		i := strings.Index(text[off:], stepOpen)
		if i < 0 {
			break
		}
		i += off
		j := strings.Index(text[i:], stepClose)
		if j < 0 {
			break
		}
		j += i
		steps = append(steps, parseStep(text[i:j], i))
		spans = append(spans, span{i, j + len(stepClose)})
		off = j + len(stepClose)
	}
	return steps, spans
}

func parseStep(block string, at int) step {
	st := step{At: at}
	head, body, _ := strings.Cut(block, "\n")
	if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(head, stepOpen), "\">")); err == nil {
		st.N = n
	}
	var obs strings.Builder
	inObs := false
	for line := range strings.Lines(body) {
		l := strings.TrimRight(line, "\r\n")
		switch {
		case !inObs && strings.HasPrefix(l, "action: "):
			st.Actions = append(st.Actions, parseAction(strings.TrimPrefix(l, "action: ")))
		case l == "observation:":
			inObs, st.HasObs = true, true
		case inObs:
			obs.WriteString(l)
			obs.WriteByte('\n')
		}
	}
	st.Obs = obs.String()
	return st
}

func parseAction(s string) action {
	name, rest, ok := strings.Cut(s, "(")
	if !ok {
		return action{Name: strings.TrimSpace(s)}
	}
	return action{Name: strings.TrimSpace(name), Args: strings.TrimSuffix(rest, ")")}
}

// findSummaries returns the <HISTORY_SUMMARY> blocks of text. Each closing
// tag pairs with the nearest opening tag before it, so an instruction that
// merely names "<HISTORY_SUMMARY>" earlier in the prompt is not data.
func findSummaries(text string) ([]summaryBlock, []span) {
	var blocks []summaryBlock
	var spans []span
	for off := 0; ; {
		j := strings.Index(text[off:], summaryClose)
		if j < 0 {
			break
		}
		j += off
		i := strings.LastIndex(text[off:j], summaryOpen)
		if i >= 0 {
			i += off
			blocks = append(blocks, summaryBlock{Body: text[i+len(summaryOpen) : j], At: i})
			spans = append(spans, span{i, j + len(summaryClose)})
		}
		off = j + len(summaryClose)
	}
	return blocks, spans
}

// passage is one "[k] (doc dNNNNN) Title" block of a search observation.
type passage struct {
	Title, Text string
}

var passageHeader = regexp.MustCompile(`^\[(\d+)\] \(doc ([^)]*)\) ?(.*)$`)

// splitPassages separates the passage blocks of text (each from its header
// line to the next blank line) from the other lines.
func splitPassages(text string) (ps []passage, rest string) {
	var other strings.Builder
	var cur *passage
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.Text = strings.TrimSpace(body.String())
			ps = append(ps, *cur)
			cur = nil
			body.Reset()
		}
	}
	for line := range strings.Lines(text) {
		l := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(l, "[") {
			if m := passageHeader.FindStringSubmatch(l); m != nil {
				flush()
				cur = &passage{Title: strings.TrimSpace(m[3])}
				continue
			}
		}
		if cur != nil {
			if strings.TrimSpace(l) == "" {
				flush()
				other.WriteByte('\n')
				continue
			}
			body.WriteString(l)
			body.WriteByte('\n')
			continue
		}
		other.WriteString(l)
		other.WriteByte('\n')
	}
	flush()
	return ps, other.String()
}

// cutSpans returns text without the given ordered, disjoint spans.
func cutSpans(text string, spans ...[]span) string {
	var all []span
	for _, s := range spans {
		all = append(all, s...)
	}
	if len(all) == 0 {
		return text
	}
	// Spans of different kinds may interleave; sort by start.
	slices.SortFunc(all, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	pos := 0
	for _, s := range all {
		if s.from < pos {
			s.from = pos
		}
		if s.from > s.to {
			continue
		}
		b.WriteString(text[pos:s.from])
		b.WriteByte('\n')
		pos = s.to
	}
	b.WriteString(text[pos:])
	return b.String()
}

// between returns the text between the first line containing start and the
// next line containing end after it; ok is false when start is missing.
// A missing end marker means "to the end of text".
func between(text, start, end string) (string, bool) {
	i := strings.Index(text, start)
	if i < 0 {
		return "", false
	}
	i += len(start)
	if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
		i += nl + 1
	} else {
		i = len(text)
	}
	j := strings.Index(text[i:], end)
	if j < 0 {
		return text[i:], true
	}
	return text[i : i+j], true
}

// hasWord reports whether lower-case line contains w as a whole word.
func hasWord(line, w string) bool { return hasAt(line, w, true) }

// hasStem reports whether lower-case line contains a word starting with w.
func hasStem(line, w string) bool { return hasAt(line, w, false) }

// hasAt reports whether w starts a word of line, and ends one when whole.
func hasAt(line, w string, whole bool) bool {
	for off := 0; ; {
		i := strings.Index(line[off:], w)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(w)
		if (i == 0 || !isWordByte(line[i-1])) && (!whole || end == len(line) || !isWordByte(line[end])) {
			return true
		}
		off = i + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c >= 0x80
}

func anyWord(line string, ws ...string) bool {
	for _, w := range ws {
		if hasWord(line, w) {
			return true
		}
	}
	return false
}

func anyStem(line string, ws ...string) bool {
	for _, w := range ws {
		if hasStem(line, w) {
			return true
		}
	}
	return false
}

func anyPhrase(line string, ps ...string) bool {
	for _, p := range ps {
		if strings.Contains(line, p) {
			return true
		}
	}
	return false
}

// sections splits a summary body into its sections. A heading is a line
// whose leading word run is upper case (REASONING:, ### FACT CACHE, 2. VARS);
// text after the colon of a heading belongs to its section.
func sections(body string) []section {
	var out []section
	for line := range strings.Lines(body) {
		l := strings.TrimRight(line, "\r\n")
		if name, rest, ok := heading(l); ok {
			out = append(out, section{Name: name})
			if rest != "" {
				out[len(out)-1].Lines = append(out[len(out)-1].Lines, rest)
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(out) == 0 {
			out = append(out, section{})
		}
		out[len(out)-1].Lines = append(out[len(out)-1].Lines, l)
	}
	return out
}

type section struct {
	Name  string
	Lines []string
}

var headingRe = regexp.MustCompile(`^\s*(?:#+\s*|\d+\.\s*)?([A-Z][A-Z_/ ]*[A-Z])\s*(?::\s*(.*)|\s*)$`)

func heading(l string) (name, rest string, ok bool) {
	m := headingRe.FindStringSubmatch(l)
	if m == nil {
		return "", "", false
	}
	return strings.Join(strings.Fields(m[1]), " "), strings.TrimSpace(m[2]), true
}

// queryLines returns the queries of `- "query"` lines of text.
func queryLines(text string) []string {
	var out []string
	for off := 0; ; {
		i := strings.Index(text[off:], "- \"")
		if i < 0 {
			return out
		}
		i += off
		lineStart := strings.LastIndexByte(text[:i], '\n') + 1
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += i
		}
		off = end
		if strings.TrimSpace(text[lineStart:i]) != "" {
			continue
		}
		l := strings.TrimSpace(text[i+2 : end])
		if len(l) >= 2 && l[len(l)-1] == '"' {
			if q := strings.TrimSpace(l[1 : len(l)-1]); q != "" {
				out = append(out, q)
			}
		}
	}
}
