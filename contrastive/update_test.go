package contrastive

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
)

func records(n int) []Feedback {
	fs := make([]Feedback, n)
	for i := range fs {
		fs[i] = Feedback{Step: StepUT, TaskID: fmt.Sprintf("t%02d", i), Kind: compress.KindHistory, Status: StatusOK,
			Recommendations: []string{fmt.Sprintf("rule %d", i)}}
		if i%4 == 3 {
			fs[i].Status, fs[i].Reason = StatusRejected, "not JSON"
		}
		fs[i].setID()
	}
	return fs
}

func TestSample(t *testing.T) {
	fs := records(20) // 15 ok
	taskIDs := func(s []Feedback) string {
		var b strings.Builder
		for _, f := range s {
			b.WriteString(f.TaskID + " ")
		}
		return b.String()
	}
	t.Run("deterministic", func(t *testing.T) {
		for k := range 5 {
			a, b := Sample(fs, 6, 42, k), Sample(append([]Feedback(nil), fs...), 6, 42, k)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("k=%d: %s != %s", k, taskIDs(a), taskIDs(b))
			}
		}
	})
	t.Run("varies with k and seed", func(t *testing.T) {
		seen := map[string]bool{}
		for k := range 5 {
			seen[taskIDs(Sample(fs, 6, 42, k))] = true
		}
		if len(seen) < 4 {
			t.Errorf("only %d distinct samples over 5 candidates", len(seen))
		}
		if taskIDs(Sample(fs, 6, 42, 0)) == taskIDs(Sample(fs, 6, 7, 0)) {
			t.Error("seed does not change the sample")
		}
	})
	t.Run("ok only, input order, size", func(t *testing.T) {
		for _, n := range []int{1, 6, 15, 100, 0, -1} {
			s := Sample(fs, n, 42, 3)
			want := min(n, 15)
			if n <= 0 {
				want = 15
			}
			if len(s) != want {
				t.Errorf("n=%d: %d records, want %d", n, len(s), want)
			}
			for i, f := range s {
				if f.Status != StatusOK {
					t.Errorf("n=%d: rejected record %s sampled", n, f.TaskID)
				}
				if i > 0 && s[i-1].TaskID >= f.TaskID {
					t.Errorf("n=%d: input order lost: %s", n, taskIDs(s))
				}
			}
		}
	})
}

func TestUpdatePromptErrors(t *testing.T) {
	fs := records(4)
	cases := []struct {
		name, step, kind string
		sample           []Feedback
		err              string
	}{
		{"unknown step", "xx", compress.KindHistory, fs, "analysis step"},
		{"unknown kind", StepUT, "both", fs, "guideline kind"},
		{"nothing ok", StepUT, compress.KindHistory, fs[3:], "no usable feedback"},
		{"empty", StepCO, compress.KindHistory, nil, "no usable feedback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := UpdatePrompt(tc.step, tc.kind, "x {{ task }}", tc.sample); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestUpdatePromptLines checks the contract the optimizer parses: one RULE
// line per rule even when the analyzer wrote newlines into it, one REMOVE
// line per removal, the original between two marker lines.
func TestUpdatePromptLines(t *testing.T) {
	f := Feedback{Step: StepCO, TaskID: "t1", Status: StatusOK}
	fill(&f, StepCO, mustParse(t, StepCO, `{"removals":[{"category":"tool-logs","pattern":"issued\nsearches","action":""}],"keeps":[],"rules":["Drop the\n  query log.","Write no reasoning."]}`))
	orig := "Summarize.\n{{ task }}\n{{ prev_summary }}\n{{ history }}"
	p, err := UpdatePrompt(StepCO, compress.KindHistory, orig, []Feedback{f})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(p, "\n")
	var rules, removes []string
	var markers []int
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "- RULE: "):
			rules = append(rules, l)
		case strings.HasPrefix(l, "- REMOVE "):
			removes = append(removes, l)
		case l == "<<<ORIGINAL_PROMPT>>>":
			markers = append(markers, i)
		}
	}
	if want := []string{"- RULE: Drop the query log.", "- RULE: Write no reasoning."}; !reflect.DeepEqual(rules, want) {
		t.Errorf("RULE lines %q, want %q", rules, want)
	}
	if want := []string{"- REMOVE [tool-logs] issued searches -> drop"}; !reflect.DeepEqual(removes, want) {
		t.Errorf("REMOVE lines %q, want %q", removes, want)
	}
	if len(markers) != 2 || strings.Join(lines[markers[0]+1:markers[1]], "\n") != orig {
		t.Errorf("original not verbatim between two marker lines (markers at %v)", markers)
	}
	if !strings.Contains(p, "{{ task }}, {{ prev_summary }}, {{ history }}") {
		t.Error("required placeholders not listed")
	}
}

func mustParse(t *testing.T, step, reply string) gjson.Result {
	t.Helper()
	r, err := parseReply(step, reply)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFeedbackFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "feedback", "ut-r0.jsonl")
	fs := []Feedback{fixtureFeedback(t, StepUT, goodUT, "qa-0007", false), records(4)[3]}
	fs[0].Usage = llm.Usage{PromptTokens: 1200, CompletionTokens: 300}
	fs[0].Raw = goodUT
	if err := WriteFeedback(path, fs); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) != 3 || lines[2] != "" {
		t.Fatalf("%d lines, want 2 each ending in a newline", strings.Count(string(b), "\n"))
	}
	var got []Feedback
	for _, l := range lines[:2] {
		var f Feedback
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if !reflect.DeepEqual(got, fs) {
		t.Errorf("round trip differs:\n%+v\n%+v", got, fs)
	}
	if strings.Contains(string(b), `\u0027`) || strings.Contains(string(b), `\u003c`) {
		t.Error("HTML escaping in the records")
	}
}
