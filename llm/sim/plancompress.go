package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxopt/ctxopt/templates"
)

// extendedCompress plays the compressor modes of PACE summaries and
// plan-aware compression (docs/embedded-model.md, "PACE summaries" and
// "Plan-aware compressor"), known by their prompts' markers; ok is false
// for every other prompt, which the guideline compressor answers.
func extendedCompress(prompt string) (string, bool) {
	switch {
	case strings.Contains(prompt, templates.PaceStep):
		return paceSummarize(prompt), true
	case planIgnored(prompt):
		// Told to ignore the plan it is shown: the guideline compressor.
		return "", false
	case strings.Contains(prompt, templates.HistoryPlan):
		return planHistory(prompt), true
	case strings.Contains(prompt, templates.ObservationPlan):
		return planObservation(prompt), true
	}
	return "", false
}

// planIgnoredPhrases tell the compressor not to use the plan.
var planIgnoredPhrases = []string{"ignore the plan", "disregard the plan", "do not use the plan", "don't use the plan"}

// planIgnored reports whether the prompt tells the compressor to ignore the
// plan.
func planIgnored(prompt string) bool {
	return anyPhrase(asciiLower(strings.Join(strings.Fields(prompt), " ")), planIgnoredPhrases...)
}

// paceWords is the length of a detailed summary (PACE: about 100 words).
const paceWords = 100

// paceSummarize writes DETAILED (the step's action and every fact sentence
// of its result, up to 100 words) and BRIEF (one sentence: the action and
// the titles of the passages found, no fact).
func paceSummarize(prompt string) string {
	steps, _ := findSteps(prompt)
	if len(steps) == 0 {
		return templates.PaceDetailed + " (no step)\n" + templates.PaceBrief + " (no step)"
	}
	st := steps[0]
	did := "took no action"
	if len(st.Actions) > 0 {
		a := st.Actions[0]
		if q := a.query(); q != "" {
			did = fmt.Sprintf("searched %q", q)
		} else {
			did = "called " + a.Name
		}
	}
	var facts []string
	for _, f := range parseFacts(st.Obs) {
		facts = append(facts, f.Sentence)
	}
	detailed := fmt.Sprintf("Step %d %s.", st.N, did)
	if len(facts) > 0 {
		detailed += " Found: " + strings.Join(facts, " ")
	} else {
		detailed += " Found no fact."
	}
	if w := strings.Fields(detailed); len(w) > paceWords {
		detailed = strings.Join(w[:paceWords], " ") + " …"
	}
	brief := fmt.Sprintf("Step %d %s.", st.N, did)
	if titles := passageTitles(st.Obs); len(titles) > 0 {
		brief += " The results were about " + strings.Join(titles, ", ") + "."
	}
	return templates.PaceDetailed + " " + detailed + "\n" + templates.PaceBrief + " " + brief
}

var titleRe = regexp.MustCompile(`(?m)^\[\d+\] \(doc [^)]*\) (.+)$`)

// passageTitles lists the distinct titles of the passages in obs.
func passageTitles(obs string) []string {
	var out []string
	for _, m := range titleRe.FindAllStringSubmatch(obs, -1) {
		t := strings.TrimSpace(m[1])
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// planWindow reads the numbered plan lines after marker: a question
// ("1. Q3: What is ...?") or a tool step whose arguments name the facts it
// needs as {{R of E}} slots ("3. email_send {...}", the office plans), each
// slot read as the question about R of E.
func planWindow(prompt, marker string) []question {
	i := strings.Index(prompt, marker)
	if i < 0 {
		return nil
	}
	var qs []question
	for _, line := range strings.Split(prompt[i+len(marker):], "\n")[1:] {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		j := strings.Index(line, ". ")
		if j < 0 || j > 4 {
			break
		}
		if q, ok := parseQuestionLine(line[j+2:]); ok {
			qs = append(qs, q)
			continue
		}
		for _, m := range slotRE.FindAllStringSubmatch(line, -1) {
			qs = append(qs, question{Rel: m[1], Ent: m[2]})
		}
	}
	return qs
}

var queryArgRe = regexp.MustCompile(`"query"\s*:\s*"((?:[^"\\]|\\.)*)"`)

// planHistory keeps the facts about the plan window's questions (from the
// previous summary and the turns) as fact-cache lines, and the searches
// about their entities; it drops every other fact.
func planHistory(prompt string) string {
	window := planWindow(prompt, templates.HistoryPlan)
	// The sections of templates/history_plan_aware.tmpl; the turns hold
	// "[n]" passage lines, so sections end at the next heading by name,
	// and the turns at their last step block.
	prev, _ := between(prompt, templates.HistoryPrevSummary, templates.HistoryTurns)
	_, turns, _ := strings.Cut(prompt, templates.HistoryTurns)
	tail := turns
	if i := strings.LastIndex(turns, stepClose); i >= 0 {
		turns, tail = turns[:i+len(stepClose)], turns[i+len(stepClose):]
	} else {
		turns = ""
	}
	src := prev + "\n" + turns
	// The guideline's own text: before the sections, and after the turns
	// (where an optimizer puts its Rules).
	head, _, _ := strings.Cut(prompt, templates.HistoryTask)
	kinds := namedKinds(head + "\n" + tail)
	var b strings.Builder
	b.WriteString("FACTS FOR THE NEXT STEPS:\n")
	seen := map[string]bool{}
	n := 0
	for _, f := range parseFacts(src) {
		if seen[f.key()] || f.Form == 3 {
			continue
		}
		keep := slices.Contains(kinds, asciiLower(f.Rel))
		for _, q := range window {
			keep = keep || f.about(q)
		}
		if keep {
			seen[f.key()] = true
			fmt.Fprintf(&b, "- %s of %s: %s\n", f.Rel, f.Ent, f.Ans)
			n++
		}
	}
	if n == 0 {
		b.WriteString("- none yet\n")
	}
	b.WriteString("SEARCHES MADE FOR THEM:\n")
	queries := queryLines(src)
	for _, m := range queryArgRe.FindAllStringSubmatch(src, -1) {
		queries = append(queries, strings.ReplaceAll(m[1], `\"`, `"`))
	}
	done := map[string]bool{}
	for _, q := range queries {
		lq := asciiLower(q)
		if done[lq] {
			continue
		}
		for _, w := range window {
			if w.Ent != "" && strings.Contains(lq, asciiLower(w.Ent)) {
				done[lq] = true
				fmt.Fprintf(&b, "- %q\n", q)
				break
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// namedKinds are the kinds of fact that verbatim directives of instr name
// ("copy word for word every sentence that gives the founder or date of an
// entity"): the plan-aware compressor keeps facts of those kinds whatever
// the plan window. A directive that names no kind (the built-in "the
// facts ... stated exactly") does not widen the window.
func namedKinds(instr string) []string {
	var out []string
	for _, c := range clauses(asciiLower(instr)) {
		if kind, rels := readFactClause(c); kind == factVerbatim {
			for _, r := range rels {
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// planObservation keeps the observation's fact sentences about the plan
// window's questions.
func planObservation(prompt string) string {
	window := planWindow(prompt, templates.ObservationPlan)
	obs := prompt
	if i := strings.Index(prompt, templates.ObservationCurrent); i >= 0 {
		obs = prompt[i:]
		if j := strings.Index(obs, templates.OutputFormat); j >= 0 {
			obs = obs[:j]
		}
	}
	var kept []string
	for _, f := range parseFacts(obs) {
		for _, q := range window {
			if f.about(q) {
				kept = append(kept, f.Sentence)
				break
			}
		}
	}
	out := "# Reasoning\nKept the statements the next plan steps ask for.\n# Refined Observation\n"
	if len(kept) == 0 {
		return out + "Nothing here answers the next plan steps."
	}
	return out + strings.Join(kept, "\n")
}
