package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/templates"
)

const guidelineV0 = `You keep a running summary of an agent's work.

REASONING: describe the progress, why each action was taken, and how earlier steps shaped later ones.
COMPLETED: list the subtasks finished so far, with brief results.

[Instruction]
{{ task }}
[Previous summary]
{{ prev_summary }}
[Turns]
{{ history }}

Priorities:
1. Stay concise.
2. Retain all essential artifacts and data needed to finish the task.
3. Log every query you ran.

[Output format]
Return only the summary.`

func updatePrompt(original string, feedback ...string) string {
	return "You revise a prompt template.\n\n" + strings.Join(feedback, "\n") +
		"\n\nCurrent template, verbatim between the two marker lines:\n<<<ORIGINAL_PROMPT>>>\n" + original +
		"\n<<<ORIGINAL_PROMPT>>>\n\nOutput only the improved template text."
}

var utFeedback = []string{
	"===== SAMPLE 0 =====", "- RULE: Keep the answers found so far.", "- RULE: Record every search query already issued under ATTEMPTED QUERIES.",
	"===== SAMPLE 1 =====", "- RULE: " + factRule(nil, 0), "- RULE: Record every search query already issued under ATTEMPTED QUERIES.",
	"===== SAMPLE 2 =====", "- RULE: record every search query already issued under ATTEMPTED QUERIES.", "- RULE: List the pending questions.",
}

func TestOptimizeUT(t *testing.T) {
	out, err := optimize(updatePrompt(guidelineV0, utFeedback...), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "optimize_ut.golden", out)
	wantBlock := "Rules:\n- Record every search query already issued under ATTEMPTED QUERIES.\n- Keep the answers found so far.\n- " +
		factRule(nil, 0) + "\n- List the pending questions.\n\n[Output format]"
	if !strings.Contains(out, wantBlock) {
		t.Errorf("want the rules, most frequent first, before the output format:\n%s", out)
	}
	if strings.Contains(out, "Target summaries") {
		t.Error("a UT update got the CO length footer")
	}
	if !strings.Contains(out, "3. Log every query you ran.") {
		t.Error("a UT update removed lines")
	}
	d := readDirectives(out)
	if !d.Strict || !d.QueryLog || !d.Pending {
		t.Errorf("directives of the update = %+v, want strict, query log and pending", d)
	}
}

func TestOptimizeSampleCount(t *testing.T) {
	rules := func(sample int) int {
		out, err := optimize(updatePrompt(guidelineV0, utFeedback...), sample, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, block, _ := strings.Cut(out, "Rules:\n")
		n := 0
		for _, l := range strings.Split(block, "\n") {
			if l == brokenLine {
				continue
			}
			if !strings.HasPrefix(l, "- ") {
				break
			}
			n++
		}
		return n
	}
	for sample, want := range map[int]int{0: 4, 1: 4, 2: 3, 3: 3, 4: 2, 6: 1, 8: 4} {
		if got := rules(sample); got != want {
			t.Errorf("sample %d took %d rules, want %d", sample, got, want)
		}
	}
}

func TestOptimizeExtendsRules(t *testing.T) {
	original := guidelineV0 + "\n\nRules:\n- Keep the answers found so far.\nEnd."
	out, err := optimize(updatePrompt(original, "- RULE: Keep the answers found so far.", "- RULE: List the pending questions."), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "Rules:\n- Keep the answers found so far.\n- List the pending questions.\nEnd.") || strings.Count(out, "Rules:") != 1 {
		t.Errorf("want the existing block extended without duplicates:\n%s", out)
	}
}

func TestOptimizeCO(t *testing.T) {
	original := guidelineV0 + "\n\nRules:\n- " + factRule(nil, 0) + "\n- Record every search query already issued under ATTEMPTED QUERIES.\n- List the pending questions."
	feedback := []string{"for each REMOVE line, delete what asks for it",
		"- REMOVE [tool-logs] " + coPatterns["tool-logs"] + " -> drop", "- RULE: " + coRules["tool-logs"],
		"- REMOVE [unrelated-facts] " + coPatterns["unrelated-facts"] + " -> drop", "- RULE: " + coRules["unrelated-facts"],
		"- REMOVE [narrative] " + coPatterns["narrative"] + " -> shorten", "- RULE: " + coRules["narrative"],
		"- REMOVE [formatting] " + coPatterns["formatting"] + " -> drop", "- RULE: " + coRules["formatting"],
	}
	out, err := optimize(updatePrompt(original, feedback...), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "optimize_co.golden", out)
	for _, gone := range []string{"Log every query", "Retain all essential", "REASONING: describe", "Record every search query", "List the pending"} {
		if strings.Contains(out, gone) {
			t.Errorf("line with %q was not removed:\n%s", gone, out)
		}
	}
	for _, kept := range []string{"{{ task }}", "{{ prev_summary }}", "{{ history }}", factRule(nil, 0), lengthFooter, coRules["tool-logs"]} {
		if !strings.Contains(out, kept) {
			t.Errorf("output lacks %q:\n%s", kept, out)
		}
	}
	d := readDirectives(strings.ReplaceAll(out, "{{ max_chars | default(1500) }}", "1500"))
	if !d.Strict || !d.QueryOpenOnly || d.OtherFacts || d.Pending || d.Reasoning != reasonOne || len(d.Limits) != 1 || d.Limits[0].N != 1500 {
		t.Errorf("directives after CO = %+v", d)
	}
}

func TestOptimizeCOWithoutRemovals(t *testing.T) {
	out, err := optimize(updatePrompt(guidelineV0, "For each REMOVE line, delete what asks for that content.", templates.RemovalsHeading, "- (none found)"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, lengthFooter) {
		t.Errorf("a CO update without removals lacks the length footer:\n%s", out)
	}
}

func TestOptimizeBroken(t *testing.T) {
	prompt := updatePrompt(guidelineV0, utFeedback...)
	broken := 0
	for sample := range 40 {
		out, err := optimize(prompt, sample, 0)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := optimize(prompt, sample, 0)
		if again != out {
			t.Fatalf("sample %d is not deterministic", sample)
		}
		if strings.Contains(out, "{% if") {
			if sample == 0 {
				t.Error("sample 0 is broken; the first candidate must stay usable")
			}
			if strings.Contains(out, "{% endif") {
				t.Errorf("sample %d: the broken block is closed", sample)
			}
			broken++
		}
	}
	if broken < 4 || broken > 18 {
		t.Errorf("%d of 40 samples broken, want about a quarter", broken)
	}
}

func TestOptimizeWithoutMarkers(t *testing.T) {
	if _, err := optimize("Improve this: be concise.", 0, 0); err == nil {
		t.Error("no error for a prompt without <<<ORIGINAL_PROMPT>>> lines")
	}
	// A marker inside a sentence is not a marker line.
	if _, err := optimize("Text between <<<ORIGINAL_PROMPT>>> and <<<ORIGINAL_PROMPT>>> markers.", 0, 0); err == nil {
		t.Error("inline markers were accepted")
	}
}

// The optimizer acts on the diagnosis: the kinds of fact lost become a rule
// the compressor reads; no feedback, feedback about tone, and feedback whose
// words are reversed change nothing the compressor does.
func TestOptimizeFromDiagnosis(t *testing.T) {
	diag := []string{
		"===== SAMPLE 0: task a =====", "Facts or state the compressed context lost:",
		"- The capital of Veloria is Marnth.", "- The founding year of Ostrel is 1742.",
		"- state ATTEMPTED QUERIES: the summary keeps no list of the queries already issued",
		"Recommended changes:", "- (none given)",
		"===== SAMPLE 1: task b =====", "Facts or state the compressed context lost:",
		"- Port Anselm's chief export is Dorvik amber.", "- The capital of Ostrel is Tamsa.",
		"Recommended changes:", "- (none given)",
	}
	reversed := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			w := strings.Fields(strings.TrimPrefix(l, "- "))
			for a, b := 0, len(w)-1; a < b; a, b = a+1, b-1 {
				w[a], w[b] = w[b], w[a]
			}
			out[i] = strings.Join(w, " ")
			if strings.HasPrefix(l, "- ") {
				out[i] = "- " + out[i]
			}
		}
		return out
	}
	irrelevant := []string{"===== SAMPLE 0: task a =====", "Facts or state the compressed context lost:", "- (none found)",
		"Recommended changes:", "- RULE: Use a warm, friendly tone.", "- RULE: Format every heading in bold."}
	base := readDirectives(vagueGuideline)
	tests := []struct {
		name     string
		feedback []string
		changed  bool
	}{
		{"diagnosis", diag, true},
		{"no feedback", nil, false},
		{"irrelevant", irrelevant, false},
		{"reversed words", reversed(diag), false},
		{"reversed rules", reversed([]string{"- RULE: " + factRule(nil, 0), "- RULE: " + queryRule}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := optimize(updatePrompt(vagueGuideline, tt.feedback...), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := readDirectives(out)
			changed := d.Strict != base.Strict || d.QueryLog != base.QueryLog || d.Paraphrase != base.Paraphrase
			if changed != tt.changed {
				t.Fatalf("directives %+v (parent %+v), changed %v, want %v:\n%s", d, base, changed, tt.changed, out)
			}
			if tt.changed && (!slices.Equal(d.StrictRels, []string{"capital", "founding year", "chief export"}) || !d.QueryLog) {
				t.Errorf("diagnosis gave %+v, want the three lost kinds, the most often lost first, and the query log", d)
			}
		})
	}
}

// TestOptimizeShuffledFeedback pins what feedback whose words are shuffled
// does, as docs/embedded-model.md states it: it is not ignored. A shuffled
// rule keeps the words the compressor reads on their own, so "pending"
// still turns PENDING on; a shuffled diagnosis line that still reads as "the R
// of E is A" is read as a lost fact of a kind no question asks (here
// "founding"), which the optimizer's fact rule names; a line whose order
// forms neither (reversed words) changes nothing.
func TestOptimizeShuffledFeedback(t *testing.T) {
	base := readDirectives(vagueGuideline)
	if base.Pending || base.Strict {
		t.Fatalf("fixture: the parent already has %+v", base)
	}
	for _, tc := range []struct {
		name     string
		feedback []string
		pending  bool
		rels     []string
	}{
		{"shuffled rule", []string{"Recommended changes:", "- RULE: questions pending the List."}, true, nil},
		{"shuffled fact", []string{"Facts or state the compressed context lost:", "- The founding of Ostrel is year 1742."}, false, []string{"founding"}},
		{"reversed fact", []string{"Facts or state the compressed context lost:", "- 1742. is Ostrel of year founding The"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := optimize(updatePrompt(vagueGuideline, append([]string{"===== SAMPLE 0: task a ====="}, tc.feedback...)...), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := readDirectives(out)
			if d.Pending != tc.pending || !slices.Equal(d.StrictRels, tc.rels) || d.Strict != (tc.rels != nil) {
				t.Errorf("directives %+v, want pending %v and kinds %q:\n%s", d, tc.pending, tc.rels, out)
			}
		})
	}
}
