package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/rollout"
)

func init() {
	pipeline.RegisterEngine(pipeline.EngineTemporal, func(ctx context.Context, spec pipeline.EngineSpec) (pipeline.Engine, error) {
		c, err := Dial(ctx, spec.Address, spec.Namespace)
		if err != nil {
			return nil, err
		}
		return &Engine{c: c, queue: spec.TaskQueue, limits: DefaultLimits}, nil
	})
}

// Engine runs rollout stages as StageWorkflows on the task queue.
type Engine struct {
	c      client.Client
	queue  string
	limits Limits
}

// Close closes the connection.
func (e *Engine) Close() error {
	e.c.Close()
	return nil
}

// Rollout runs the stage's tasks that have no record yet as a workflow
// (attaching to it when a driver before this one started it), collects
// the records and lets the runner publish the rollout from them.
func (e *Engine) Rollout(ctx context.Context, r *rollout.Runner, w pipeline.RolloutWork) (*rollout.Result, error) {
	res, err := e.run(ctx, w)
	if err != nil {
		return nil, err
	}
	if res.BudgetStop {
		// The records stay where they are: a re-run with a larger budget
		// runs only the tasks without one.
		return nil, fmt.Errorf("stage %s: %d tasks recorded this time: %w", w.Stage, res.Done, budgetErr(res.Reason))
	}
	n, err := pipeline.PublishRemote(ctx, w)
	if err != nil {
		return nil, err
	}
	if n != len(w.Tasks) {
		return nil, fmt.Errorf("stage %s: the workers recorded %d of %d tasks", w.Stage, n, len(w.Tasks))
	}
	return r.RunDir(ctx, w.Tasks, w.Dir)
}

// run starts (or attaches to) the stage's workflow for the tasks without
// a record and waits for it.
func (e *Engine) run(ctx context.Context, w pipeline.RolloutWork) (StageResult, error) {
	pending, err := w.Pending(ctx)
	if err != nil {
		return StageResult{}, err
	}
	if len(pending) == 0 {
		return StageResult{}, nil
	}
	in := StageInput{Task: w.Task(0), Budget: w.Budget, Spent: w.Spent, Limits: e.limits}
	in.Task.TaskID = ""
	for _, i := range pending {
		in.TaskIDs = append(in.TaskIDs, w.Tasks[i].ID)
	}
	id := workflowID(w, in.TaskIDs)
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: e.queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, WorkflowStage, in)
	if err != nil {
		return StageResult{}, fmt.Errorf("stage %s: start workflow: %w", w.Stage, err)
	}
	slog.Info("stage running on Temporal", "stage", w.Stage, "workflow", id, "run", run.GetRunID(), "tasks", len(in.TaskIDs), "task_queue", e.queue)
	var res StageResult
	if err := run.Get(ctx, &res); err != nil {
		return res, fmt.Errorf("stage %s: workflow %s: %w", w.Stage, id, err)
	}
	return res, nil
}

// workflowID names a stage's workflow by the run directory, the stage and
// what it runs, so a driver started again attaches to the running one.
func workflowID(w pipeline.RolloutWork, ids []string) string {
	b, _ := json.Marshal([]any{w.Store.URL(), w.Fingerprint, w.Guideline, ids})
	h := sha256.Sum256(b)
	return "ctxopt/" + filepath.Base(w.RunDir) + "/" + w.Stage + "/" + hex.EncodeToString(h[:8])
}

// budgetErr is the workflow's budget stop as pipeline.ErrBudget.
func budgetErr(reason string) error {
	return fmt.Errorf("%w (%s)", pipeline.ErrBudget, reason)
}
