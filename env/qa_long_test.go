package env

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestQALongHorizon(t *testing.T) {
	q, err := NewQA(QAOptions{QuestionsPerTask: 64})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := q.Tasks("train")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 800/64 {
		t.Fatalf("%d long tasks from 800 questions, want %d", len(tasks), 800/64)
	}
	task := tasks[0]
	if len(task.Questions) != 64 || !strings.HasPrefix(task.Prompt, "Q1: ") || !strings.Contains(task.Prompt, "\nQ64: ") {
		t.Fatalf("task %s: %d questions, prompt %.80q", task.ID, len(task.Questions), task.Prompt)
	}
	// Questions about one entity recur at distant positions.
	first := map[string]int{}
	far := 0
	for i, qq := range task.Questions {
		if j, ok := first[subject(qq.Text)]; ok && i-j >= 8 {
			far++
		} else if !ok {
			first[subject(qq.Text)] = i
		}
	}
	if far == 0 {
		t.Fatal("no entity is asked about twice, 8 or more questions apart")
	}
	if !hasTool(q.Tools(), "answer") {
		t.Fatal("no answer tool in the long variant")
	}
	ep, err := q.Reset(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	plan := ep.(Planner).Plan()
	if len(plan) != 64 || plan[0] != "Q1: "+task.Questions[0].Text {
		t.Fatalf("plan %v", plan[:2])
	}
	step := func(tool string, args any) StepResult {
		b, _ := json.Marshal(args)
		res, err := ep.Step(context.Background(), Action{Tool: tool, Arguments: b})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	gold := task.Questions[1].Answers[0]
	if res := step("answer", map[string]any{"question": 2, "answer": gold}); res.Observation != "Recorded the answer to Q2. Next unanswered: Q1." {
		t.Fatalf("answer: %q", res.Observation)
	}
	if res := step("answer", map[string]any{"question": 65, "answer": "x"}); !strings.HasPrefix(res.Observation, "error: ") {
		t.Fatalf("bad question number: %q", res.Observation)
	}
	if p := ep.(Planner).Plan(); len(p) != 63 || p[0] != plan[0] || p[1] != plan[2] {
		t.Fatalf("plan after answering Q2: %v", p[:2])
	}
	res := step("finish", map[string]any{"answers": []string{}})
	if !res.Done || res.Score.PerQuestion[1].EM != 1 || res.Score.PerQuestion[0].EM != 0 {
		t.Fatalf("finish scored %+v", res.Score.PerQuestion[:2])
	}
	// The default qa has no answer tool.
	plain, err := NewQA(QAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasTool(plain.Tools(), "answer") {
		t.Fatal("answer tool outside the long variant")
	}
}

func hasTool(ts []ToolSpec, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

func TestQASearchBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		budget, calls int
		wantIndexed   int
	}{
		{"no cap", 0, 4, 4},
		{"cap of two", 2, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := NewQA(QAOptions{QuestionsPerTask: 64, SearchBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if got := q.Tools()[0].Description; strings.Contains(got, "At most") != (tc.budget > 0) {
				t.Fatalf("search description %q with budget %d", got, tc.budget)
			}
			tasks, _ := q.Tasks("train")
			ep, err := q.Reset(context.Background(), tasks[0])
			if err != nil {
				t.Fatal(err)
			}
			indexed := 0
			for i := range tc.calls {
				args, _ := json.Marshal(map[string]string{"query": tasks[0].Questions[i].Text})
				res, err := ep.Step(context.Background(), Action{Tool: "search", Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case strings.HasPrefix(res.Observation, "[1] (doc "):
					indexed++
				case !strings.HasPrefix(res.Observation, "error: "+SearchBudgetSpent+" (2 searches)"):
					t.Fatalf("search %d: %q", i+1, res.Observation)
				}
			}
			if indexed != tc.wantIndexed {
				t.Fatalf("%d searches reached the index, want %d", indexed, tc.wantIndexed)
			}
			// A malformed search is the agent's mistake and costs nothing.
			if res, _ := ep.Step(context.Background(), Action{Tool: "search", Arguments: json.RawMessage(`{}`)}); !strings.Contains(res.Observation, `needs the field "query"`) {
				t.Fatalf("bad search: %q", res.Observation)
			}
		})
	}
	if _, err := NewQA(QAOptions{SearchBudget: -1}); err == nil || !strings.Contains(err.Error(), "search_budget") {
		t.Fatalf("negative budget: %v", err)
	}
}
