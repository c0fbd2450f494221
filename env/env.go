// Package env defines the environments an agent acts in and provides the
// built-in ones.
package env

import (
	"context"
	"encoding/json"
)

// Task is one unit of work for the agent.
type Task struct {
	ID    string `json:"id"`
	Split string `json:"split"`
	// Prompt is the task text the agent is given (for qa: the numbered
	// questions, one "Qn: question" line each).
	Prompt    string     `json:"prompt"`
	Questions []Question `json:"questions,omitempty"`
}

// Question is one objective of a multi-objective task, with its gold answers.
type Question struct {
	Text    string   `json:"q"`
	Answers []string `json:"answers"`
}

// ToolSpec describes an action the agent may take, as an OpenAI function.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Action is one tool call of the agent. Arguments is the raw JSON the model
// wrote; environments validate it and answer bad input with an observation.
type Action struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// Score is the outcome of a finished episode.
type Score struct {
	Success bool    `json:"success"`
	EM      float64 `json:"em"`
	F1      float64 `json:"f1"`
	// Reward is an external environment's score of the episode, when it
	// gives one.
	Reward float64 `json:"reward,omitempty"`
	// PerQuestion holds the answer given and its EM/F1, in question order.
	PerQuestion []QuestionScore `json:"per_question,omitempty"`
}

// QuestionScore scores one answer.
type QuestionScore struct {
	Answer string  `json:"answer"`
	EM     float64 `json:"em"`
	F1     float64 `json:"f1"`
}

// StepResult is what the environment returns for an action.
type StepResult struct {
	Observation string `json:"observation"`
	Done        bool   `json:"done"`
	// Score is set when Done.
	Score *Score `json:"score,omitempty"`
}

// Environment hands out tasks and starts episodes on them.
type Environment interface {
	Name() string
	Tools() []ToolSpec
	Tasks(split string) ([]Task, error)
	// Reset starts a fresh episode on task. Episodes are independent and may
	// run concurrently.
	Reset(ctx context.Context, task Task) (Episode, error)
}

// Configured is implemented by environments whose results depend on more
// than their name: Settings names the dataset and every option that
// changes what a task is or how it is scored (not limits on input size,
// timeouts or retries). Rollout fingerprints carry it, so work done under
// other settings is neither resumed nor reused.
type Configured interface {
	Settings() string
}

// Episode is one run of one task.
type Episode interface {
	Step(ctx context.Context, a Action) (StepResult, error)
	// Finish ends the episode without a finish action (step limit reached)
	// and scores whatever was answered: nothing, for qa.
	Finish(ctx context.Context) Score
}

// Planner is implemented by episodes whose task has an explicit plan. Plan
// returns the steps still ahead, in order (for qa: the questions not yet
// answered); plan-aware compression conditions on the next few of them.
type Planner interface {
	Plan() []string
}
