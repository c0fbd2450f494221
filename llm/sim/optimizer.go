package sim

import (
	"cmp"
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/templates"
)

// lengthFooter is the paper's CO footer (ACON G.7), Jinja default filter
// and all: the guideline validator is expected to repair it.
const lengthFooter = "Target summaries well under {{ max_chars | default(1500) }} characters."

// brokenLine opens a block it never closes, as optimizer models now and then
// do; the pipeline must reject such a candidate.
const brokenLine = "{% if prev_summary %}Update the previous summary instead of rewriting it."

var (
	ruleLineRe   = regexp.MustCompile(`^\s*` + regexp.QuoteMeta(templates.RuleItem) + `\s*(.+?)\s*$`)
	removeLineRe = regexp.MustCompile(`^\s*` + regexp.QuoteMeta(templates.RemoveItem) + `([^\]]+)\]`)
)

var errNoOriginal = errors.New("optimizer prompt lacks the two " + templates.OriginalPrompt + " lines around the current guideline (see docs/embedded-model.md, Optimizer)")

// optimize answers an update prompt with the revised guideline. It acts
// on the diagnosis of the samples (the facts and state the compressed runs
// lost, the unused content to remove) and adds the RULE lines as written.
// With no diagnosis and no rule it understands, nothing it adds changes
// what the compressor does.
func optimize(prompt string, sample int, variation uint64) (string, error) {
	original, outside, ok := splitOriginal(prompt)
	if !ok {
		return "", errNoOriginal
	}
	fb := readFeedback(outside)
	// A CO prompt that found nothing to remove still has the headings of
	// the removals.
	co := len(fb.cats) > 0 || strings.Contains(outside, templates.RemovalsHeading)
	lines := strings.Split(original, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return removable(l, fb.cats) })
	add := newRules(lines, diagnosis(outside), fb, sample, variation)
	if co && !strings.Contains(original, "Target summaries well under") {
		add = append(add, lengthFooter)
	}
	broken := sample > 0 && hashInts(hashStrings("broken", prompt), sample)%4 == 0
	lines = insertRules(lines, add, broken)
	return strings.Join(lines, "\n"), nil
}

// feedback is what the RULE and REMOVE lines of an update prompt ask for.
type feedback struct {
	rules   []string // lower-case, in order of first appearance
	count   map[string]int
	spelled map[string]string
	cats    map[string]bool // removal categories, lower-case
}

func readFeedback(outside string) feedback {
	fb := feedback{count: map[string]int{}, spelled: map[string]string{}, cats: map[string]bool{}}
	for line := range strings.Lines(outside) {
		line = strings.TrimRight(line, "\r\n")
		if m := ruleLineRe.FindStringSubmatch(line); m != nil {
			k := asciiLower(m[1])
			if fb.count[k] == 0 {
				fb.rules = append(fb.rules, k)
				fb.spelled[k] = m[1]
			}
			fb.count[k]++
			continue
		}
		if m := removeLineRe.FindStringSubmatch(line); m != nil {
			fb.cats[asciiLower(strings.TrimSpace(m[1]))] = true
		}
	}
	return fb
}

// newRules are the rules to add to the guideline lines: first its own from
// the diagnosis (the kinds of fact lost, the most often lost first; the
// query log when the runs lost track of their searches), then the RULE
// lines, most frequent first (ties in order of first appearance). The
// sample index decides how many kinds and RULE lines are taken: samples 0
// and 1 take all, each further pair one fewer, so K samples of one
// feedback set differ. Rules the guideline has already are left out.
func newRules(lines []string, lost lostFacts, fb feedback, sample int, variation uint64) []string {
	present := map[string]bool{}
	for _, l := range lines {
		present[asciiLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")))] = true
	}
	var add []string
	addRule := func(r string) {
		if k := asciiLower(r); !present[k] {
			add = append(add, r)
			present[k] = true
		}
	}
	if rels := lost.kinds(); len(rels) > 0 {
		rels = rels[:len(rels)-dropped(len(rels), sample)]
		if variation != 0 {
			slices.SortStableFunc(rels, func(a, b string) int { return cmpHash(variation, a, b) })
		}
		addRule(factRule(rels, variation))
	}
	if lost.queries {
		addRule(queryRule)
	}
	order := slices.Clone(fb.rules)
	slices.SortStableFunc(order, func(a, b string) int { return fb.count[b] - fb.count[a] })
	for _, k := range order[:len(order)-dropped(len(order), sample)] {
		addRule(fb.spelled[k])
	}
	return add
}

// dropped is how many of n items sample s leaves out: none for samples 0
// and 1, one more for each further pair, never all.
func dropped(n, s int) int {
	if n == 0 {
		return 0
	}
	return (s / 2) % n
}

// cmpHash orders strings by a hash mixed with seed: a seeded shuffle
// that does not depend on the input order.
func cmpHash(seed uint64, a, b string) int {
	return cmp.Compare(mix(hashStrings(a)^seed), mix(hashStrings(b)^seed))
}

// lostFacts is the diagnosis an update prompt carries: the kinds of fact
// the compressed runs lost, how often, and whether they lost their
// searches.
type lostFacts struct {
	order   []string
	count   map[string]int
	queries bool
}

// kinds returns the kinds of fact lost, most often first (ties: first
// seen).
func (l lostFacts) kinds() []string {
	out := slices.Clone(l.order)
	slices.SortStableFunc(out, func(a, b string) int { return l.count[b] - l.count[a] })
	return out
}

// diagnosis reads the "- " lines under every heading of what the
// compressed runs lost (templates.LostHeading, EvolveLostHeading): each
// fact sentence there is a fact of its relation's kind the run lost; a
// "state ATTEMPTED QUERIES" line is the lost query log.
func diagnosis(text string) lostFacts {
	l := lostFacts{count: map[string]int{}}
	in := false
	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)
		switch {
		case t == templates.LostHeading || t == templates.EvolveLostHeading:
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(t, "- "):
			in = false
			continue
		}
		item := strings.TrimPrefix(t, "- ")
		if strings.HasPrefix(item, "state ") {
			if strings.Contains(asciiLower(item), "attempted queries") {
				l.queries = true
			}
			continue
		}
		for _, f := range parseFacts(item) {
			r := asciiLower(f.Rel)
			if l.count[r] == 0 {
				l.order = append(l.order, r)
			}
			l.count[r]++
		}
	}
	return l
}

// splitOriginal returns the guideline between the two marker lines and the
// rest of the prompt.
func splitOriginal(prompt string) (original, outside string, ok bool) {
	first := markerLine(prompt, 0)
	if first < 0 {
		return "", "", false
	}
	startBody := first + len(templates.OriginalPrompt)
	second := markerLine(prompt, startBody)
	if second < 0 {
		return "", "", false
	}
	original = strings.TrimPrefix(prompt[startBody:second], "\n")
	original = strings.TrimRight(original, "\n")
	return original, prompt[:first] + "\n" + prompt[second+len(templates.OriginalPrompt):], true
}

// markerLine returns the offset of the next marker that stands on a line of
// its own (blanks aside) at or after off, or -1.
func markerLine(s string, off int) int {
	for off <= len(s) {
		i := strings.Index(s[off:], templates.OriginalPrompt)
		if i < 0 {
			return -1
		}
		i += off
		ls := strings.LastIndexByte(s[:i], '\n') + 1
		le := strings.IndexByte(s[i:], '\n')
		if le < 0 {
			le = len(s)
		} else {
			le += i
		}
		if strings.TrimSpace(s[ls:i]) == "" && strings.TrimSpace(s[i+len(templates.OriginalPrompt):le]) == "" {
			return i
		}
		off = i + len(templates.OriginalPrompt)
	}
	return -1
}

// removable reports whether a guideline line asks for content of one of the
// removal categories. Lines holding template code are never removed.
func removable(line string, cats map[string]bool) bool {
	if len(cats) == 0 || strings.Contains(line, "{{") || strings.Contains(line, "{%") {
		return false
	}
	l := asciiLower(line)
	switch {
	case cats["tool-logs"] && anyWord(l, "query", "queries", "log", "logs"):
		return true
	case cats["unrelated-facts"] && hasWord(l, "all") && anyStem(l, "data", "artifact", "fact"):
		return true
	case cats["narrative"] && (anyStem(l, "rationale", "influence") || hasWord(l, "why") ||
		anyPhrase(l, "earlier steps", "steps influenced", "shaped later")):
		return true
	case cats["formatting"] && (hasWord(l, "pending") || hasWord(l, "todo") || anyPhrase(l, "remaining questions")):
		return true
	}
	return false
}

// insertRules extends the guideline's Rules: block with add, or creates one
// before the output-format section (at the end without one).
func insertRules(lines, add []string, broken bool) []string {
	if len(add) == 0 && !broken {
		return lines
	}
	items := make([]string, 0, len(add)+1)
	if broken {
		items = append(items, brokenLine)
	}
	for _, r := range add {
		items = append(items, "- "+r)
	}
	for i, l := range lines {
		if strings.EqualFold(strings.TrimSpace(l), "rules:") {
			j := i + 1
			for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "- ") {
				j++
			}
			return slices.Insert(lines, j, items...)
		}
	}
	block := append([]string{"Rules:"}, items...)
	for i, l := range lines {
		if strings.Contains(l, templates.OutputFormat) {
			return slices.Insert(lines, i, append(block, "")...)
		}
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return append(append(lines, ""), block...)
}
