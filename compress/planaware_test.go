package compress

import (
	"context"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/golden"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/templates"
)

// simClient is a compressor client of a fresh embedded model.
func simClient(t *testing.T) (*llm.Client, *sim.Server) {
	t.Helper()
	s, err := sim.Start(t.Context(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := llm.NewClient("compressor", llm.RoleConfig{BaseURL: s.URL(), Model: "sim", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// builtinPrompt is a built-in template as a guideline (the pipeline
// validates guidelines; these are the shipped ones).
type builtinPrompt string

func (b builtinPrompt) Render(vars map[string]string) (string, error) {
	m := make(map[string]any, len(vars))
	for k, v := range vars {
		m[k] = v
	}
	return templates.Render(string(b), m)
}

func TestPlanAwareKeepsWhatThePlanNeeds(t *testing.T) {
	client, _ := simClient(t)
	// Q1 is answered; the plan is Q2 then Q3. The fact Q3 needs (step
	// t+2 of the plan) is in turn 5, the fact of Q1 in turn 1.
	questions := []string{"Q2: What is the founder of Ostrava Mills?", "Q3: What is the river of Caldera?"}
	// Office plans are tool steps whose arguments name the facts they need
	// as {{R of E}} slots; the embedded compressor reads those as questions.
	toolSteps := []string{
		`calendar_create {"room":"{{river of Caldera}}","title":"Survey"}`,
		`email_send {"body":"Founded by {{founder of Ostrava Mills}}.","to":"Ines"}`,
	}
	for _, tc := range []struct {
		name       string
		plan       []string
		k          int
		keep, drop []string
	}{
		{"questions k=3", questions, 3, []string{"river of Caldera: the Sorn", "founder of Ostrava Mills: Ilse Varga"}, []string{"Marnth"}},
		{"questions k=1", questions, 1, []string{"founder of Ostrava Mills: Ilse Varga"}, []string{"Sorn", "Marnth"}},
		{"questions k=0", questions, 0, nil, []string{"Sorn", "Ilse Varga", "Marnth"}},
		{"tool steps k=1", toolSteps, 1, []string{"river of Caldera: the Sorn"}, []string{"Ilse Varga", "Marnth"}},
		{"tool steps k=2", toolSteps, 2, []string{"river of Caldera: the Sorn", "founder of Ostrava Mills: Ilse Varga"}, []string{"Marnth"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			s, err := New(PlanAware, &PlanAwareParams{K: k}, Deps{
				Tokenizer: testTokenizer(t), Compressor: client,
				History: &Prompt{ID: "builtin-plan-aware", Template: builtinPrompt("history_plan_aware.tmpl")}, HistoryThreshold: 100,
			})
			if err != nil {
				t.Fatal(err)
			}
			in := fixtureInput()
			in.Plan = tc.plan
			out, err := s.History.CompressHistory(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			checkPairs(t, out.Messages)
			for _, w := range tc.keep {
				if !strings.Contains(out.Summary, w) {
					t.Errorf("summary lost %q:\n%s", w, out.Summary)
				}
			}
			for _, w := range tc.drop {
				if strings.Contains(out.Summary, w) {
					t.Errorf("summary kept %q, which no plan step in the window needs:\n%s", w, out.Summary)
				}
			}
			if got := out.Event.Vars[VarPlan]; tc.k > 0 && !strings.Contains(got, "1. "+tc.plan[0]) {
				t.Errorf("plan variable %q", got)
			}
			if tc.name == "questions k=3" {
				out.Event.Model = ""
				golden.Check(t, "plan_aware_k3.golden", dump(out))
			}
		})
	}
}
