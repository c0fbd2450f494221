package guideline

import (
	"slices"
	"testing"

	"github.com/ctxopt/ctxopt/templates"
)

// TestSections reads the headings a history guideline names: at a line's
// start or inside a rule, never in template code, and none for an
// observation guideline (its output is no summary).
func TestSections(t *testing.T) {
	prompting, err := templates.Source("history_prompting.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	// An optimized guideline as the embedded optimizer writes them: its
	// rules move the facts from COMPLETED to a FACT CACHE.
	const optimized = "You keep a running summary.\n\nCOMPLETED: list the subtasks finished so far.\n\n" +
		"{{ task }}\n{{ prev_summary }}\n{{ history }}\n\nRules:\n" +
		"- Copy word for word into a FACT CACHE every sentence that answers one of the task's questions.\n" +
		"- Keep ATTEMPTED QUERIES only for open questions, as a loop guard.\n" +
		"- Write REASONING as one sentence.\n"
	for _, tc := range []struct {
		name string
		kind Kind
		src  string
		want []string
	}{
		{"prompting", KindHistory, prompting, []string{"REASONING", "COMPLETED"}},
		{"optimized", KindHistory, optimized, []string{"COMPLETED", "FACT CACHE", "ATTEMPTED QUERIES", "REASONING"}},
		{"none named", KindHistory, "Summarize {{ task }} {{ prev_summary }} {{ history }} by ID and URL.", nil},
		{"template code", KindHistory, "{% if task == \"NOTE\" %}x{% endif %} {{ task }} {{ prev_summary }} {{ history }}", nil},
		{"observation", KindObservation, "REFINED: {{ task }} {{ history }} {{ observation }}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, rep := Validate(tc.kind, tc.src)
			if !rep.OK {
				t.Fatalf("rejected: %v", rep.Problems)
			}
			if !slices.Equal(rep.Sections, tc.want) || !slices.Equal(tpl.SummaryContract().Sections, tc.want) {
				t.Fatalf("sections %q, contract %q; want %q", rep.Sections, tpl.SummaryContract().Sections, tc.want)
			}
		})
	}
}
