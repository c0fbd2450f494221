package sim

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/templates"
)

// TestPlanHistory checks the plan-aware compressor by ablation: the plan
// window decides what is kept, a rule naming kinds of fact keeps those
// beyond the window, and a prompt told to ignore the plan is not answered
// by it.
func TestPlanHistory(t *testing.T) {
	src, err := templates.Source("history_plan_aware.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	render := func(tmpl, plan string) string {
		r := strings.NewReplacer("{{ task }}", "Execute this workflow.", "{{ plan }}", plan, "{{ prev_summary }}", "",
			"{{ history }}", "<step n=\"1\">\nthought: Reading.\naction: read_input({})\nobservation:\nInput:\nThe founder of Lake Tiram is Emeka Novak.\nThe elevation of Lake Tiram is 7715.\nThe founder of Brenn Valley is Emeka Ruiz.\n</step>")
		return r.Replace(tmpl)
	}
	rule := "\nRules:\n- Copy word for word into a FACT CACHE every sentence that gives the founder of an entity a task question names."
	tests := []struct {
		name       string
		tmpl, plan string
		keep, drop []string
	}{
		{"keeps the window's facts", src, "1. Q2: What is the elevation of Lake Tiram?", []string{"elevation of Lake Tiram: 7715"}, []string{"Emeka"}},
		{"an empty window keeps nothing", src, "(none)", nil, []string{"7715", "Emeka"}},
		{"a rule naming a kind keeps it beyond the window", src + rule, "1. Q2: What is the elevation of Lake Tiram?", []string{"elevation of Lake Tiram: 7715", "founder of Lake Tiram: Emeka Novak", "founder of Brenn Valley: Emeka Ruiz"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := extendedCompress(render(tc.tmpl, tc.plan))
			if !ok {
				t.Fatal("not answered as a plan-aware prompt")
			}
			for _, k := range tc.keep {
				if !strings.Contains(out, k) {
					t.Errorf("lacks %q:\n%s", k, out)
				}
			}
			for _, d := range tc.drop {
				if strings.Contains(out, d) {
					t.Errorf("keeps %q:\n%s", d, out)
				}
			}
		})
	}
	blind := strings.Replace(src, "Keep what the next plan steps need:", "Ignore the plan. Keep what seems important:", 1)
	if _, ok := extendedCompress(render(blind, "1. Q2: What is the elevation of Lake Tiram?")); ok {
		t.Fatal("a prompt told to ignore the plan was answered by the plan-aware compressor")
	}
}
