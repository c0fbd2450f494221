package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/templates"
)

// The environment a workflow is executed in (docs/architecture.md,
// "synth"): the task message gives the plan Π as its step ids and the
// output specification; the noisy input is the observation of the agent's
// first action (read_input) and is shown once, so what later steps need
// survives only in the agent's memory; each step's instruction is given
// in turn, with the observation that ends the step before it; answer
// records a step's output; the final output is one line per plan step,
// checked by the workflow's checker. The plan-aware teacher is conditioned
// on the instructions of the next k steps (env.Planner), which the agent
// has not been given yet.

// Tool names of the workflow environment.
const (
	ToolReadInput = "read_input"
	ToolAnswer    = "answer"
	ToolFinish    = "finish"
)

// EnvName names the workflow environment in trajectories.
const EnvName = "synth"

// Unknown is the output of a step the agent could not carry out.
const Unknown = "unknown"

var workflowTools = []env.ToolSpec{
	{Name: ToolReadInput, Description: "Show the workflow's input. It is shown once.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: ToolAnswer, Description: "Record the output of one plan step (by its number, as in Qn).", Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"integer","description":"The step number, as in Qn."},"answer":{"type":"string","description":"The step's output."}},"required":["question","answer"]}`)},
	{Name: ToolFinish, Description: "End the workflow once every step has an output.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
}

// workflowEnv runs one workflow. It is an env.Environment so the rollout's
// agent loop, compression and metrics run on it unchanged.
type workflowEnv struct{ w *Workflow }

var (
	_ env.Environment = workflowEnv{}
	_ env.Planner     = (*episode)(nil)
)

func (workflowEnv) Name() string          { return EnvName }
func (workflowEnv) Tools() []env.ToolSpec { return workflowTools }
func (e workflowEnv) task() env.Task {
	return env.Task{ID: e.w.ID, Split: "train", Prompt: strings.Join(e.w.Plan, ", ")}
}
func (e workflowEnv) Tasks(string) ([]env.Task, error) { return []env.Task{e.task()}, nil }

// stepLine is plan step i's instruction as the agent is given it: "Qn:
// text", numbered as answer takes it.
func stepLine(w *Workflow, i int) string {
	return fmt.Sprintf("Q%d: %s", i+1, oneLine(w.Instruction(i).Text))
}

// steps lists every instruction in plan order, one stepLine each.
func (e workflowEnv) steps() string {
	lines := make([]string, len(e.w.Plan))
	for i := range e.w.Plan {
		lines[i] = stepLine(e.w, i)
	}
	return strings.Join(lines, "\n")
}

// AgentPrompts writes the workflow's agent prompts (rollout.Instructed).
func (e workflowEnv) AgentPrompts(task env.Task) (system, user string, err error) {
	if system, err = templates.Render("synth_agent_system.tmpl", nil); err != nil {
		return "", "", err
	}
	user, err = templates.Render("synth_task.tmpl", map[string]any{"count": len(e.w.Plan), "plan": task.Prompt, "spec": oneLine(e.w.Output.Spec)})
	return system, user, err
}

func (e workflowEnv) Reset(context.Context, env.Task) (env.Episode, error) {
	return &episode{w: e.w, answers: make([]string, len(e.w.Plan)), given: make([]bool, len(e.w.Plan))}, nil
}

type episode struct {
	w       *Workflow
	mu      sync.Mutex
	readAt  int // step of the read_input call, 0 before
	steps   int
	answers []string
	given   []bool
}

func (ep *episode) Step(_ context.Context, a env.Action) (env.StepResult, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.steps++
	switch a.Tool {
	case ToolReadInput:
		if ep.readAt > 0 {
			return env.StepResult{Observation: fmt.Sprintf("error: the input was shown at step %d and is shown once; use what you kept of it.", ep.readAt)}, nil
		}
		ep.readAt = ep.steps
		return env.StepResult{Observation: "Input:\n" + ep.w.Input + "\n\nFirst step:\n" + stepLine(ep.w, 0)}, nil
	case ToolAnswer:
		return env.StepResult{Observation: ep.answer(a.Arguments)}, nil
	case ToolFinish:
		s := ep.score()
		return env.StepResult{Observation: "Workflow finished.", Done: true, Score: &s}, nil
	}
	return env.StepResult{Observation: fmt.Sprintf("error: unknown tool %q; the tools are %s, %s and %s.", a.Tool, ToolReadInput, ToolAnswer, ToolFinish)}, nil
}

func (ep *episode) answer(raw json.RawMessage) string {
	const usage = `call it with {"question": 2, "answer": "the step's output"}`
	var args struct {
		Question *int    `json:"question"`
		Answer   *string `json:"answer"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.Question == nil || args.Answer == nil {
		return "error: answer needs an integer \"question\" and a string \"answer\"; " + usage
	}
	n := *args.Question
	if n < 1 || n > len(ep.answers) {
		return fmt.Sprintf("error: answer \"question\" must be a step number from 1 to %d; %s", len(ep.answers), usage)
	}
	ep.answers[n-1], ep.given[n-1] = oneLine(*args.Answer), true
	for i, g := range ep.given {
		if !g {
			return fmt.Sprintf("Recorded the answer to Q%d. Next unanswered: Q%d.\n%s", n, i+1, stepLine(ep.w, i))
		}
	}
	return fmt.Sprintf("Recorded the answer to Q%d. Every question has an answer; call finish.", n)
}

func (ep *episode) Finish(context.Context) env.Score {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.score()
}

// Plan is the steps not yet answered, as the task message numbers them.
func (ep *episode) Plan() []string {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []string
	for i := range ep.w.Plan {
		if !ep.given[i] {
			out = append(out, stepLine(ep.w, i))
		}
	}
	return out
}

// score checks the final output against the checker; PerQuestion keeps
// each step's output so the final output can be rebuilt from the score.
func (ep *episode) score() env.Score {
	s := env.Score{PerQuestion: make([]env.QuestionScore, len(ep.answers))}
	for i, a := range ep.answers {
		if !ep.given[i] {
			a = Unknown
		}
		s.PerQuestion[i].Answer = a
	}
	out := FinalOutput(ep.w, s)
	ok, share := ep.w.Checker.Check(out)
	s.Success, s.EM, s.F1 = ok, boolFloat(ok), share
	return s
}

// FinalOutput is the workflow's final output after an episode scored s:
// one "step id: output" line per plan step, in plan order.
func FinalOutput(w *Workflow, s env.Score) string {
	var b strings.Builder
	for i, id := range w.Plan {
		a := Unknown
		if i < len(s.PerQuestion) {
			a = s.PerQuestion[i].Answer
		}
		fmt.Fprintf(&b, "%s: %s\n", id, a)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Check reports whether out passes the checker (the expected output, up to
// case and white space, and every fact, as a case-insensitive substring),
// and the share of the facts it contains.
func (c Checker) Check(out string) (bool, float64) {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	o := norm(out)
	ok := c.Expected == "" || o == norm(c.Expected)
	found := 0
	for _, f := range c.Facts {
		if strings.Contains(o, norm(f)) {
			found++
		}
	}
	share := 1.0
	if len(c.Facts) > 0 {
		share = float64(found) / float64(len(c.Facts))
	}
	return ok && found == len(c.Facts), share
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// oneLine folds white space runs, so a line-oriented prompt stays one line
// per item whatever a generator wrote.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
