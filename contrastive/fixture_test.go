package contrastive

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

const fixtureTask = "Answer all 2 questions below. Search for evidence, then call finish with the answers in question order.\n" +
	"Q1: What is the capital of Veloria?\n" +
	"Q2: What is the chief export of Port Anselm?"

const (
	obsVeloria = "[1] (doc d00123) Veloria\nVeloria lies in the northern hills. The capital of Veloria is Marnth. Its winters are long.\n\n" +
		"[2] (doc d00124) Marnth\nMarnth is a river town with a stone bridge."
	obsAnselm = "[1] (doc d00456) Port Anselm\nPort Anselm's chief export is copper. The harbour freezes rarely.\n\n" +
		"[2] (doc d00457) Ostrel\nThe river of Ostrel is the Vanta."
	obsNothing = "[1] (doc d00999) Veloria\nVeloria lies in the northern hills. Its winters are long."
)

func search(id, q string) llm.Message {
	args, _ := json.Marshal(map[string]string{"query": q})
	return llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: "search", Arguments: string(args)}}}
}

func finish(answers ...string) llm.Message {
	args, _ := json.Marshal(map[string][]string{"answers": answers})
	return llm.Message{Role: "assistant", Content: "All questions answered.", ToolCalls: []llm.ToolCall{{ID: "f", Name: "finish", Arguments: string(args)}}}
}

func turn(step int, out llm.Message, obs string) rollout.Turn {
	if out.Content == "" {
		out.Content = fmt.Sprintf("Looking up, step %d.", step)
	}
	c := out.ToolCalls[0]
	return rollout.Turn{Step: step, Output: out, Observation: obs,
		Action: env.Action{Tool: c.Name, Arguments: json.RawMessage(c.Arguments)}}
}

// baselineRun solved both questions in three steps.
func baselineRun() *rollout.Trajectory {
	return &rollout.Trajectory{
		TaskID: "qa-0007", Split: "train", Strategy: "none", Task: fixtureTask,
		Turns: []rollout.Turn{
			turn(1, search("c1", "What is the capital of Veloria?"), obsVeloria),
			turn(2, search("c2", "What is the chief export of Port Anselm?"), obsAnselm),
			turn(3, finish("Marnth", "copper"), "done"),
		},
		Success: true,
		Score: env.Score{Success: true, EM: 1, F1: 1, PerQuestion: []env.QuestionScore{
			{Answer: "Marnth", EM: 1, F1: 1}, {Answer: "copper", EM: 1, F1: 1}}},
		Metrics: rollout.Metrics{Steps: 3},
	}
}

// lossySummary dropped the capital of Veloria.
const lossySummary = "<HISTORY_SUMMARY>\nREASONING: At step 1 the agent looked up \"What is the capital of Veloria?\" and read passages on Veloria, Marnth.\n" +
	"COMPLETED:\n- Searched for Veloria.\nATTEMPTED QUERIES:\n- \"What is the capital of Veloria?\"\n</HISTORY_SUMMARY>"

// compressedRun lost the capital in a summary, searched again in vain and
// answered unknown.
func compressedRun() *rollout.Trajectory {
	t3 := turn(3, search("c3", "Veloria capital"), obsNothing)
	return &rollout.Trajectory{
		TaskID: "qa-0007", Split: "train", Strategy: "guideline", HistoryGuidelineID: "g-hist-0",
		Task: fixtureTask,
		Turns: []rollout.Turn{
			turn(1, search("c1", "What is the capital of Veloria?"), obsVeloria),
			turn(2, search("c2", "What is the chief export of Port Anselm?"), obsAnselm),
			t3,
			turn(4, finish("unknown", "copper"), "done"),
		},
		Events: []rollout.CompressionEvent{{
			Kind: compress.KindHistory, Step: 2, GuidelineID: "g-hist-0", Output: lossySummary,
			Vars: map[string]string{"task": fixtureTask},
		}},
		Success: false,
		Score: env.Score{EM: 0.5, F1: 0.5, PerQuestion: []env.QuestionScore{
			{Answer: "unknown"}, {Answer: "copper", EM: 1, F1: 1}}},
		Metrics: rollout.Metrics{Steps: 4},
	}
}

// goodUT is a complete G.1 answer.
const goodUT = `{
  "task_name": "qa-0007",
  "divergence_step_description": "After the summary at step 2 the capital of Veloria was gone and the agent searched again.",
  "root_cause_categories": ["Missing Critical Fact", "Unnecessary Re-discovery"],
  "missing_or_distorted_facts": [{"baseline": "The capital of Veloria is Marnth.", "optimized_context_absent_or_changed": "absent from the summary", "impact": "Q1 answered unknown"}],
  "summary_inaccuracies": [],
  "lost_state_variables": [{"name_or_pattern": "answers so far", "baseline_evidence": "The capital of Veloria is Marnth.", "optimized_issue": "not carried"}],
  "api_or_action_errors": [],
  "inefficiency_patterns": [{"pattern": "repeated search for Veloria", "evidence_excerpt": "Veloria capital", "excess_steps": 1, "cause": "lost fact", "remediation": "keep answers"}],
  "timeline_of_divergence": [],
  "performance_regression": false,
  "baseline_env_steps": 3,
  "optimized_env_steps": 4,
  "step_ratio": 1.33,
  "remediation_recommendations": ["Copy verbatim every sentence that answers one of the task's questions into a FACT CACHE, one line per question.", "Record every search query already issued under ATTEMPTED QUERIES."],
  "recovery_opportunities_missed": [],
  "reliability_score": 0.9,
  "concise_failure_mechanism_summary": "The summary dropped the answer to Q1."
}`

// goodCO is a complete CO answer.
const goodCO = `{"removals":[{"category":"narrative","pattern":"per-step reasoning sentences","action":"drop"},{"category":"tool-logs","pattern":"list of issued searches","action":"drop"}],
"keeps":[{"reason":"the final answer used it","evidence_spans":["The capital of Veloria is Marnth."]}],
"rules":["Write no per-step reasoning.","Do not list the searches already issued."],
"overview":{"used_share":"about a third","main_waste":"narrative","reliability_score":0.8}}`

// fakeModel answers analyzer calls from a script and records the requests.
type fakeModel struct {
	mu     sync.Mutex
	reqs   []llm.Request
	answer func(call int, req llm.Request) (string, error)
}

func (f *fakeModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	text, err := f.answer(n, req)
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.Message{Role: "assistant", Content: text}, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10}}, nil
}

// replies answers call i with texts[i] (the last one after that).
func replies(texts ...string) *fakeModel {
	return &fakeModel{answer: func(call int, _ llm.Request) (string, error) {
		return texts[min(call, len(texts)-1)], nil
	}}
}
