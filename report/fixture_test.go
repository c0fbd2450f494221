package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// armSpec is a made-up candidate: the share of tasks it solves, its mean
// peak and compressor tokens per task.
type armSpec struct {
	name, text string
	strategy   compress.Name
	guideline  string
	success    float64
	peak, comp float64
}

// fixture builds an evaluation of arms on tasks tasks: deterministic
// outcomes with the given success shares (a permutation of the tasks, so
// candidates fail different ones), contexts that grow and, compressed,
// level off, and compressed contexts with dropped facts.
func fixture(t *testing.T, arms []armSpec, tasks, samples int) *eval.Result {
	t.Helper()
	r := &eval.Result{Dir: t.TempDir(), Summary: eval.Summary{Split: "test", Samples: samples, Seed: 42, TaskSet: "fixture", Reference: arms[0].name, EmbeddedModel: true}}
	for _, a := range arms {
		r.Summary.Candidates = append(r.Summary.Candidates, eval.Arm{Spec: eval.Spec{Name: a.name, Text: a.text, Strategy: a.strategy}, HistoryGuidelineID: a.guideline})
	}
	for i := range tasks {
		r.Summary.Tasks = append(r.Summary.Tasks, fmt.Sprintf("task-%02d", i))
	}
	for c, a := range arms {
		for i, task := range r.Summary.Tasks {
			for s := range samples {
				r.Outcomes = append(r.Outcomes, outcome(a, c, i, s, task, tasks))
			}
		}
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	return r
}

func outcome(a armSpec, c, i, s int, task string, tasks int) eval.Outcome {
	ok := float64((i*7+3*c+s)%tasks) < a.success*float64(tasks)
	spread := 0.9 + 0.02*float64((i+c)%10)
	peak, comp := a.peak*spread, a.comp*spread
	b := map[bool]float64{true: 1}
	o := eval.Outcome{Candidate: a.name, Task: task, Sample: s, Success: ok, LLMCalls: 9 + i%4, Values: map[string]float64{
		eval.MetricSuccess: b[ok], eval.MetricEM: b[ok], eval.MetricF1: 0.4 + 0.6*b[ok], eval.MetricSteps: float64(8 + i%5),
		eval.MetricPeakTokens: peak, eval.MetricDependency: peak * peak / 40, eval.MetricAgentTokens: 6 * peak,
		eval.MetricCompressorTokens: comp, eval.MetricCostUSD: 6*peak*2e-6 + comp*8e-6,
	}}
	steps := 8 + i%5
	for step := range steps {
		size := 300 + (peak-300)*float64(step)/float64(steps-1)
		if a.strategy != compress.None {
			size = min(size, 0.8*peak+30*float64(step%3))
		}
		o.Context = append(o.Context, int(size))
	}
	if a.strategy != compress.None {
		o.Summary = fmt.Sprintf("Summary of %s: searched for Paris and 1889.", task)
		if i == 0 {
			// Longer than its box: the page scrolls it, and the browser
			// test sees the text it hides.
			o.Summary += strings.Repeat("\nREASONING: the agent searched again and kept the facts.", 60)
		}
		o.Answer = `finish {"answers":["Paris"]}`
		o.Dropped = []string{"The Eiffel Tower is 330 metres tall."}
	}
	return o
}

// strategiesFixture is make demo's strategy comparison, two samples per
// task (so the per-task variance tables are there too): eight candidates,
// five of them crowded at 0% success with nearly the same peak tokens, the
// case whose labels used to overlap.
func strategiesFixture(t *testing.T) *eval.Result {
	arms := []armSpec{
		{name: "none", strategy: compress.None, success: 0.78, peak: 4517},
		{name: "fifo", strategy: compress.FIFO, success: 0, peak: 1500},
		{name: "retrieval", strategy: compress.Retrieval, success: 0, peak: 1520, comp: 0},
		{name: "llmlingua", strategy: compress.LLMLingua, success: 0, peak: 1490, comp: 0},
		{name: "prompting", strategy: compress.Prompting, success: 0.5, peak: 2000, comp: 2400},
		{name: "guideline", text: "guideline,guideline=h-3fa9c1e2b4d0", strategy: compress.Guideline, guideline: "h-3fa9c1e2b4d0", success: 0.52, peak: 2100, comp: 2600},
		{name: "pace", strategy: compress.PACE, success: 0, peak: 1510, comp: 1200},
		{name: "plan-aware", strategy: compress.PlanAware, success: 0, peak: 1530, comp: 2300},
	}
	for i := range arms {
		if arms[i].text == "" {
			arms[i].text = arms[i].name
		}
		arms[i].text = arms[i].name + "=" + arms[i].text
	}
	return fixture(t, arms, 20, 2)
}

// runFixture is a run whose registry has another guideline promoted: its
// held-out evaluation has no compression, the starting, the selected and
// the promoted guideline.
func runFixture(t *testing.T, dir string) *Run {
	res := fixture(t, []armSpec{
		{name: "none", text: "none", strategy: compress.None, success: 0.78, peak: 4517},
		{name: "prompting", text: "prompting", strategy: compress.Prompting, guideline: "h-seed00000001", success: 0.5, peak: 2000, comp: 2400},
		{name: "selected", text: "guideline,guideline=h-sel000000001", strategy: compress.Guideline, guideline: "h-sel000000001", success: 0.72, peak: 2100, comp: 2600},
		{name: "promoted", text: "guideline,guideline=h-prom00000001", strategy: compress.Guideline, guideline: "h-prom00000001", success: 0.7, peak: 2300, comp: 2500},
	}, 20, 1)
	res.Dir = filepath.Join(dir, "eval")
	train := func(rate, peak, comp float64) rollout.Summary {
		return rollout.Summary{Tasks: 40, Scored: 40, Successes: int(40 * rate), SuccessRate: rate, EM: rate, F1: rate, StepsMean: 9.5, PeakTokensMean: peak,
			DependencyMean: peak * peak / 40, CompressorInputTokens: int(60 * comp), CompressorOutputTokens: int(40 * comp), CompressorOutputTokensMean: comp,
			LLMCalls: 400, CacheHits: 12, EmbeddedModel: true, EmbeddedRoles: []string{"agent", "compressor"}}
	}
	cand := func(k int, id string, succ float64) guideline.Candidate {
		return guideline.Candidate{K: k, ID: id, Valid: true, Score: &guideline.Score{Success: succ, Objective: succ - 0.1},
			Paired: &guideline.Paired{N: 10, SuccessDiff: succ - 0.5, CILow: succ - 0.7, CIHigh: succ - 0.3, TokenChange: -0.12}}
	}
	dec := func(step, parent, chosen string) guideline.Decision {
		return guideline.Decision{Step: step, Parent: parent, Chosen: chosen, Rule: guideline.SelectKeepParent, Tasks: []string{"a", "b"}, FeedbackTasks: []string{"c"},
			Feedback: 3, Parent0: guideline.Score{Objective: 0.4}, Reason: "chose " + chosen + ": the highest objective on the selection tasks.",
			Candidates: []guideline.Candidate{cand(1, chosen, 0.7), cand(2, "h-other0000001", 0.6), {K: 3, Rejected: "uses no {{ history }}"}}}
	}
	return &Run{
		Job: "demo", Kind: "history", EmbeddedModel: true, EmbeddedRoles: []string{"agent", "compressor", "optimizer"},
		Baseline: train(0.8, 4400, 0), FIFO: train(0.1, 1500, 0), Prompting: train(0.5, 2000, 60), UT: train(0.7, 2100, 65), UTCO: train(0.72, 2050, 62),
		Eval: res, EvalDir: res.Dir, Arms: Arms{None: "none", Prompting: "prompting", Selected: "selected"},
		Gate: GateOf(nil), Baselines: BaselinesOf(res, "h-prom00000001"),
		Rounds:        []guideline.Round{{N: 1, UT: dec("ut", "h-seed00000001", "h-ut000000001"), CO: dec("co", "h-ut000000001", "h-sel000000001")}},
		Roles:         map[string]llm.Stats{"agent": {Calls: 1200, CacheHits: 40, PromptTokens: 2_400_000, CompletionTokens: 90_000}, "compressor": {Calls: 300, PromptTokens: 450_000, CompletionTokens: 61_000}},
		MalformedFile: "malformed.jsonl",
		Guideline: Guideline{ID: "h-sel000000001", Role: "the selected history guideline",
			Text:       "Summarize the history for the task {{ task }}.\nKeep every number, date and name word for word.\nDrop tool output the task never used.\n\n{{ history }}\n",
			Parent:     "h-ut000000001",
			ParentDiff: "--- h-ut000000001.tmpl\n+++ h-sel000000001.tmpl\n@@ -1,3 +1,3 @@\n Summarize the history for the task {{ task }}.\n Keep every number, date and name word for word.\n-Keep tool output.\n+Drop tool output the task never used.\n"},
		Starting: "h-seed00000001", Selected: "h-sel000000001",
		Diff: "--- h-seed00000001.tmpl\n+++ h-sel000000001.tmpl\n@@ -1,2 +1,3 @@\n Summarize the history for the task {{ task }}.\n+Keep every number, date and name word for word.\n+Drop tool output the task never used.\n",
	}
}

// strategiesLead judges the strategies under the default rule against none
// and shows the guideline the guideline candidate ran.
func strategiesLead(res *eval.Result) Lead {
	return Lead{Gate: GateOf(nil), Baselines: BaselinesOf(res, ""), Guidelines: []Guideline{{
		ID: "h-3fa9c1e2b4d0", Role: "run by candidate guideline", Parent: "h-013439ae590c",
		Text:       "Summarize the history.\nKeep every number word for word.\n\n{{ history }}\n",
		ParentDiff: "--- h-013439ae590c.tmpl\n+++ h-3fa9c1e2b4d0.tmpl\n@@ -1,2 +1,3 @@\n Summarize the history.\n+Keep every number word for word.\n \n",
	}}}
}
