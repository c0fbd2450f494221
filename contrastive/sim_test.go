package contrastive

import (
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// TestEmbeddedAnalyzer runs the analysis prompts against the embedded model
// over loopback HTTP: the markers of the templates are what it parses, so
// this checks the prompt contract of docs/embedded-model.md end to end.
func TestEmbeddedAnalyzer(t *testing.T) {
	s, err := sim.Start(t.Context(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := llm.NewClient("optimizer", llm.RoleConfig{BaseURL: s.URL(), Model: "sim", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}

	var ut, co Feedback
	t.Run("ut names the lost fact", func(t *testing.T) {
		fs, err := Analyze(t.Context(), c, StepUT, utPair(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ut = fs[0]
		if ut.Status != StatusOK {
			t.Fatalf("status %s: %s\nreply: %s", ut.Status, ut.Reason, ut.Raw)
		}
		if !slices.ContainsFunc(ut.MissingFacts, func(m string) bool { return strings.Contains(m, "The capital of Veloria is Marnth") }) {
			t.Errorf("missing facts %q do not name the capital of Veloria", ut.MissingFacts)
		}
		if len(ut.Recommendations) == 0 {
			t.Error("no remediation recommendations")
		}
	})

	t.Run("co finds the unused query log", func(t *testing.T) {
		run := compressedRun()
		run.Success = true
		fs, err := Analyze(t.Context(), c, StepCO, []Pair{{Compressed: run}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		co = fs[0]
		if co.Status != StatusOK {
			t.Fatalf("status %s: %s\nreply: %s", co.Status, co.Reason, co.Raw)
		}
		if !slices.ContainsFunc(co.Removals, func(r Removal) bool { return r.Category == "tool-logs" }) || len(co.Rules) == 0 {
			t.Errorf("removals %+v, rules %q: want the ATTEMPTED QUERIES section removed", co.Removals, co.Rules)
		}
		if !slices.ContainsFunc(co.Keeps, func(k Keep) bool { return slices.Contains(k.Evidence, "Port Anselm's chief export is copper.") }) {
			t.Errorf("keeps %+v lack the fact the final answer used", co.Keeps)
		}
	})

	// The optimizer reads the RULE lines and the original between the
	// markers of the update prompts.
	for _, f := range []*Feedback{&ut, &co} {
		t.Run("optimizer applies "+f.Step+" rules", func(t *testing.T) {
			if f.Status != StatusOK {
				t.Skip("no feedback")
			}
			p, err := UpdatePrompt(f.Step, compress.KindHistory, fixtureGuideline, []Feedback{*f})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Complete(t.Context(), llm.Request{Purpose: llm.PurposeOptimizer, Messages: []llm.Message{{Role: "user", Content: p}}})
			if err != nil {
				t.Fatal(err)
			}
			out := resp.Message.Content
			rules := slices.Concat(f.Recommendations, f.Rules)
			if !strings.Contains(out, "{{ history }}") || !slices.ContainsFunc(rules, func(r string) bool { return strings.Contains(out, r) }) {
				t.Errorf("candidate lacks the placeholders or every rule of %q:\n%s", rules, out)
			}
		})
	}
}
