package compress

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
)

// contracted is a guideline template stating a contract.
type contracted struct {
	Template
	c SummaryContract
}

func (t contracted) SummaryContract() SummaryContract { return t.c }

func TestCheckSummary(t *testing.T) {
	tok := testTokenizer(t)
	hist := []llm.Message{
		{Role: "assistant", Content: strings.Repeat("searched the archive and read many passages ", 20)},
		{Role: "tool", Content: strings.Repeat("passage text about the subject ", 20)},
		{Role: "assistant", Content: "next"},
	}
	in := Input{History: hist}
	sections := SummaryContract{Sections: []string{"REASONING", "FACT CACHE"}}
	for _, tc := range []struct {
		name    string
		summary string
		covered int
		c       SummaryContract
		want    string // "" for valid
		rule    string // the rule RuleOf names
	}{
		{"valid, no sections asked", "the agent searched", 2, SummaryContract{}, "", ""},
		{"valid, one section of two", "FACT CACHE:\n- a fact", 2, sections, "", ""},
		{"section in another case", "Reasoning: it searched", 2, sections, "", ""},
		{"empty", "  \n", 2, sections, "empty", RuleEmpty},
		{"covers nothing new", "FACT CACHE: x", 0, sections, "not past 0", RuleCoverage},
		{"not shorter", strings.Repeat("REASONING word ", 400), 2, sections, "not shorter", RuleNotShorter},
		{"no section", "lorem ipsum dolor", 2, sections, "none of the guideline's sections (REASONING, FACT CACHE)", RuleNoSection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSummary(tok, in, Output{Summary: tc.summary, Covered: tc.covered}, tc.c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidSummary) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if got := RuleOf(err); got != tc.rule {
				t.Errorf("RuleOf(%v) = %q, want %q", err, got, tc.rule)
			}
		})
	}
	p := &Prompt{Template: contracted{c: sections}}
	if got := ContractOf(p); len(got.Sections) != 2 {
		t.Fatalf("ContractOf = %+v", got)
	}
	if got := ContractOf(&Prompt{Template: builtinPrompt("history_prompting.tmpl")}); len(got.Sections) != 0 {
		t.Fatalf("a template stating no contract has %+v", got)
	}
}

// TestRolloutReportsInvalidSummary: a rollout keeps a summary the rule
// rejects and reports it as malformed, with the rule it broke.
func TestRolloutReportsInvalidSummary(t *testing.T) {
	rec := &reporting{Completer: &summaryFake{}}
	p := &Prompt{ID: "h", Template: contracted{Template: builtinPrompt("history_prompting.tmpl"), c: SummaryContract{Sections: []string{"NO SUCH SECTION"}}}}
	s, err := New(Guideline, nil, Deps{Tokenizer: testTokenizer(t), Compressor: rec, History: p, HistoryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	hist := []llm.Message{
		{Role: "assistant", Content: strings.Repeat("searched and read ", 50)},
		{Role: "tool", Content: strings.Repeat("a long passage ", 50)},
		{Role: "assistant", Content: "next"},
	}
	out, err := s.History.CompressHistory(t.Context(), Input{Step: 2, Task: "t", History: hist, ContextTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if out.Summary == "" || len(rec.got) != 1 || rec.got[0].Kind != llm.MalformedInvalidSummary || !strings.Contains(rec.got[0].Detail, "NO SUCH SECTION") {
		t.Fatalf("summary %q, reports %+v", out.Summary, rec.got)
	}
}

// reporting records the malformed replies reported against it.
type reporting struct {
	Completer
	got []llm.MalformedReply
}

func (r *reporting) ReportMalformed(m llm.MalformedReply) { r.got = append(r.got, m) }
