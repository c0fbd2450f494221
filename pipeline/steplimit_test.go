package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// listingAgent never submits: it lists the files at every step, so only
// the step limit ends its episodes.
type listingAgent struct{}

func (listingAgent) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	call := llm.ToolCall{ID: "c", Name: "files_list", Arguments: "{}"}
	return llm.Response{
		Message: llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call}},
		Usage:   llm.Usage{PromptTokens: 10 * len(req.Messages), CompletionTokens: 5},
	}, nil
}

// TestOfficeStepLimit: a job's env.step_limit bounds office episodes as it
// does qa's. The agent loop enforces it and scores an episode cut off by
// the state it reached; a job that sets no step_limit gets 30. The office
// tasks' plans have five steps.
func TestOfficeStepLimit(t *testing.T) {
	for _, tc := range []struct {
		name, stepLimit string
		agent           rollout.Completer // nil: the embedded model
		wantSteps       int               // 0: fewer than the limit
		wantLimit       bool
	}{
		{name: "below the plan", stepLimit: "  step_limit: 3\n", wantSteps: 3, wantLimit: true},
		{name: "above the plan", stepLimit: "  step_limit: 12\n", wantLimit: false},
		{name: "unset means 30", stepLimit: "", agent: listingAgent{}, wantSteps: rollout.DefaultStepLimit, wantLimit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mustRead(t, "../jobs/office.yaml")
			src = strings.Replace(src, "path: .cache/llm.db", "path: "+filepath.Join(t.TempDir(), "llm.db"), 1)
			if !strings.Contains(src, "  step_limit: 12\n") {
				t.Fatal("jobs/office.yaml no longer sets step_limit: 12")
			}
			src = strings.Replace(src, "  step_limit: 12\n", tc.stepLimit, 1)
			job, err := ParseJob("office.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			rt, err := Open(t.Context(), job)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			agent := rt.NewAgent(nil)
			if tc.agent != nil {
				agent.Model = tc.agent
			}
			tasks, err := rt.Tasks("train")
			if err != nil {
				t.Fatal(err)
			}
			tr, err := agent.Run(t.Context(), tasks[0])
			if err != nil {
				t.Fatal(err)
			}
			limit := job.Env.StepLimit
			steps := tr.Metrics.Steps
			switch {
			case tc.wantSteps > 0 && (steps != tc.wantSteps || limit != tc.wantSteps):
				t.Errorf("%d steps at the job's step limit %d, want %d at %d", steps, limit, tc.wantSteps, tc.wantSteps)
			case tc.wantSteps == 0 && steps >= limit:
				t.Errorf("%d steps at the step limit %d, want the plan finished before it", steps, limit)
			}
			if tr.StepLimit != tc.wantLimit {
				t.Errorf("trajectory step_limit %v, want %v", tr.StepLimit, tc.wantLimit)
			}
			if tc.wantLimit && (tr.Success || tr.Score.EM >= 1) {
				t.Errorf("an episode cut off before its plan's end scored %+v, want the checks of the state it reached to fail", tr.Score)
			}
		})
	}
}
