package pipeline

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
)

// An eval report's lead: the job's gate rules, none and the arm that ran
// the registry's promoted guideline as baselines, and every registry
// guideline a candidate ran with its diff against its parent (a guideline
// from elsewhere is not shown).
func TestEvalLead(t *testing.T) {
	dir := t.TempDir()
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := mustRead(t, "../templates/history_prompting.tmpl")
	seed, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Step: guideline.StepSeed, Source: "builtin:prompting"}, src)
	if err != nil {
		t.Fatal(err)
	}
	child, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Step: guideline.StepUT, Parent: seed.ID, Round: 1, Source: "optimizer"},
		strings.TrimRight(src, "\n")+"\nKeep every number word for word.\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Promote(child.ID); err != nil {
		t.Fatal(err)
	}
	res := &eval.Result{Dir: t.TempDir(), Summary: eval.Summary{Split: "test", Samples: 1, Seed: 1, TaskSet: "t", Tasks: []string{"a", "b"}, Reference: "none"}}
	for _, a := range []struct {
		name, id string
		s        compress.Name
	}{{"none", "", compress.None}, {"start", seed.ID, compress.Guideline}, {"tuned", child.ID, compress.Guideline}, {"file", "h-elsewhere01", compress.Guideline}} {
		res.Summary.Candidates = append(res.Summary.Candidates, eval.Arm{Spec: eval.Spec{Name: a.name, Strategy: a.s}, HistoryGuidelineID: a.id})
		for _, task := range res.Summary.Tasks {
			res.Outcomes = append(res.Outcomes, eval.Outcome{Candidate: a.name, Task: task, Success: true, Values: map[string]float64{eval.MetricSuccess: 1, eval.MetricPeakTokens: 100}})
		}
	}
	if err := res.Save(); err != nil {
		t.Fatal(err)
	}
	job := &Job{Eval: EvalSpec{Gate: []string{"success >= 0"}}}
	lead, err := EvalLead(job, res, EvalOptions{Registry: dir})
	if err != nil {
		t.Fatal(err)
	}
	if lead.Gate.Default || len(lead.Gate.Rules) != 1 || lead.Gate.Rules[0].Text != "success >= 0" {
		t.Errorf("gate %+v, want the job's rule", lead.Gate)
	}
	if b := lead.Baselines; b.None != "none" || b.PromotedID != child.ID || b.Promoted != "tuned" {
		t.Errorf("baselines %+v", b)
	}
	if len(lead.Guidelines) != 2 {
		t.Fatalf("guidelines %+v, want the two of the registry", lead.Guidelines)
	}
	if g := lead.Guidelines[0]; g.ID != seed.ID || g.Parent != "" || g.ParentDiff != "" || g.Text != src {
		t.Errorf("starting guideline %+v", g)
	}
	if g := lead.Guidelines[1]; g.ID != child.ID || g.Parent != seed.ID || !strings.Contains(g.ParentDiff, "+Keep every number word for word.") || g.Role != "run by candidate tuned" {
		t.Errorf("tuned guideline %+v", g)
	}
	// Without a registry: the default gate, none, no guideline.
	lead, err = EvalLead(&Job{}, res, EvalOptions{})
	if err != nil || !lead.Gate.Default || lead.Baselines.None != "none" || lead.Baselines.PromotedID != "" || lead.Guidelines != nil {
		t.Errorf("no registry: %+v, %v", lead, err)
	}
}
