// Package temporal runs a job on Temporal: one workflow per run
// (RunWorkflow), whose Algorithm 1 advances as activities on workers and
// whose rollout stages are child workflows, each stage's tasks in child
// workflows of at most Limits.ChunkSize tasks, each task an activity that
// optimize worker processes run on any machine. It is the only package
// that imports the Temporal SDK.
package temporal

import (
	"errors"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxopt/ctxopt/pipeline"
)

// Limits shape a stage's executions. Temporal allows 2,000 pending
// activities per execution and warns at 10,240 history events: a chunk of
// 500 tasks writes about 3 events per task, and a stage continues as new
// after ChunksPerRun chunks, so every history stays far below both.
type Limits struct {
	// Window bounds the activities pending in a chunk at once.
	Window int
	// ChunkSize is the most tasks a child workflow holds.
	ChunkSize int
	// ChunksPerRun is how many chunks a stage execution runs before it
	// continues as new.
	ChunksPerRun int
	// Heartbeat is how soon a task whose worker stopped answering is
	// given to another worker.
	Heartbeat time.Duration
}

// DefaultLimits are the limits the engine uses.
var DefaultLimits = Limits{Window: 200, ChunkSize: 500, ChunksPerRun: 10, Heartbeat: 10 * time.Second}

// StageInput is a stage workflow's input: the task template, the tasks
// still to run, and what was done before this execution (a stage that
// continued as new carries it along).
type StageInput struct {
	Task    pipeline.TaskWork
	TaskIDs []string
	Budget  pipeline.Budget
	Limits  Limits
	// Next is the first task not yet run; Done and Spent are what the
	// earlier executions did and spent, Spent starting with the run's
	// spend before the stage.
	Next  int
	Done  int
	Spent pipeline.Spend
}

// StageResult is a stage workflow's result. Records are where the
// workers left them (pipeline.PublishRemote collects them).
type StageResult struct {
	Done  int
	Spent pipeline.Spend
	// BudgetStop is set when the budget was reached before every task was
	// scheduled; Reason says which.
	BudgetStop bool
	Reason     string
	// Executions counts the stage's executions (continue-as-new).
	Executions int
}

// ChunkInput is a child workflow's input: at most Limits.ChunkSize tasks.
type ChunkInput struct {
	Task    pipeline.TaskWork
	TaskIDs []string
	Budget  pipeline.Budget
	Spent   pipeline.Spend
	Limits  Limits
}

// ChunkResult is what a chunk did.
type ChunkResult struct {
	Done       int
	Spend      pipeline.Spend
	BudgetStop bool
	Reason     string
	// MaxPending is the most activities it had pending at once.
	MaxPending int
}

// StageWorkflow runs a stage's tasks, one chunk (child workflow) at a
// time, checking the budget before each, and continues as new every
// ChunksPerRun chunks.
func StageWorkflow(ctx workflow.Context, in StageInput) (StageResult, error) {
	lim := in.Limits
	res := StageResult{Done: in.Done, Spent: in.Spent, Executions: 1}
	for chunk := 0; in.Next < len(in.TaskIDs); chunk++ {
		if chunk == lim.ChunksPerRun {
			in.Done, in.Spent = res.Done, res.Spent
			return res, workflow.NewContinueAsNewError(ctx, WorkflowStage, in)
		}
		if err := in.Budget.Reached(res.Spent); err != nil {
			res.BudgetStop, res.Reason = true, err.Error()
			return res, nil
		}
		end := min(in.Next+lim.ChunkSize, len(in.TaskIDs))
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/chunk-" + strconv.Itoa(in.Next),
		})
		var cr ChunkResult
		err := workflow.ExecuteChildWorkflow(cctx, WorkflowChunk, ChunkInput{
			Task: in.Task, TaskIDs: in.TaskIDs[in.Next:end], Budget: in.Budget, Spent: res.Spent, Limits: lim,
		}).Get(ctx, &cr)
		if err != nil {
			return res, err
		}
		res.Done += cr.Done
		res.Spent = res.Spent.Add(cr.Spend)
		if cr.BudgetStop {
			res.BudgetStop, res.Reason = true, cr.Reason
			return res, nil
		}
		in.Next = end
	}
	return res, nil
}

// ChunkWorkflow runs its tasks as activities, keeping at most
// Limits.Window pending, and schedules no more once the budget is
// reached (the calls in flight may still overshoot it).
func ChunkWorkflow(ctx workflow.Context, in ChunkInput) (ChunkResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    in.Limits.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{refusedType},
		},
	})
	var res ChunkResult
	var firstErr error
	sel := workflow.NewSelector(ctx)
	pending := 0
	wait := func() {
		sel.Select(ctx)
		pending--
	}
	for _, id := range in.TaskIDs {
		for pending >= in.Limits.Window {
			wait()
		}
		if firstErr != nil {
			break
		}
		if err := in.Budget.Reached(in.Spent.Add(res.Spend)); err != nil {
			res.BudgetStop, res.Reason = true, err.Error()
			break
		}
		w := in.Task
		w.TaskID = id
		f := workflow.ExecuteActivity(actx, ActivityRunTask, w)
		pending++
		res.MaxPending = max(res.MaxPending, pending)
		sel.AddFuture(f, func(f workflow.Future) {
			var tr pipeline.TaskResult
			if err := f.Get(ctx, &tr); err != nil {
				firstErr = errors.Join(firstErr, err)
				return
			}
			res.Done++
			res.Spend = res.Spend.Add(tr.Spend)
		})
	}
	for pending > 0 {
		wait()
	}
	return res, firstErr
}

// RunInput is a run workflow's input: the run (its store and its run
// directory's name), and what its executions before this one did (a run
// that continued as new carries it along).
type RunInput struct {
	Store, Name string
	Limits      Limits
	// AdvancesPerRun is how many advances an execution runs before it
	// continues as new.
	AdvancesPerRun int
	Advances       int
	// Stages counts the stage workflows started so far; it names the
	// next.
	Stages int
}

// RunResult is how a run workflow ended: Budget, when set, is why it
// stopped at the job's budget.
type RunResult struct {
	Advances, Stages int
	Budget           string
}

// RunProgress is what the progress query answers.
type RunProgress struct {
	Advances, Stages int
	// Waiting names the rollout stages the run waits for.
	Waiting []string
}

// QueryProgress is the query a run workflow answers with its RunProgress.
const QueryProgress = "progress"

// RunWorkflow is one run of a job: Algorithm 1 advances on a worker
// (ActivityAdvance: analysis, the optimizer's updates, the decisions, the
// final evaluation, the export) until it waits for rollouts, which run as
// stage child workflows; then it advances again, until the run is done.
// The budget is checked in the advances and before every chunk and task.
func RunWorkflow(ctx workflow.Context, in RunInput) (RunResult, error) {
	res := RunResult{Advances: in.Advances, Stages: in.Stages}
	prog := RunProgress{Advances: in.Advances, Stages: in.Stages}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (RunProgress, error) { return prog, nil }); err != nil {
		return res, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    in.Limits.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{refusedType},
		},
	})
	for n := 0; ; n++ {
		if n == in.AdvancesPerRun {
			in.Advances, in.Stages = res.Advances, res.Stages
			return res, workflow.NewContinueAsNewError(ctx, WorkflowRun, in)
		}
		var adv pipeline.Advanced
		if err := workflow.ExecuteActivity(actx, ActivityAdvance, AdvanceInput{Store: in.Store, Name: in.Name}).Get(ctx, &adv); err != nil {
			return res, err
		}
		res.Advances++
		prog.Advances, prog.Waiting = res.Advances, nil
		if adv.Budget != "" || len(adv.Needs) == 0 {
			res.Budget = adv.Budget
			return res, nil
		}
		for _, r := range adv.Needs {
			prog.Waiting = append(prog.Waiting, r.Task.Stage)
		}
		budget, err := runStages(ctx, in.Limits, adv.Needs, &res)
		prog.Stages = res.Stages
		if err != nil || budget != "" {
			res.Budget = budget
			return res, err
		}
	}
}

// runStages runs the rollout stages a run waits for as child workflows:
// side by side, or, when the job has a budget, one after the other, each
// starting from what the ones before spent, so that the budget is checked
// against all of it. It returns why the budget stopped them, if it did.
func runStages(ctx workflow.Context, lim Limits, reqs []pipeline.RolloutRequest, res *RunResult) (string, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	start := func(r pipeline.RolloutRequest, spent pipeline.Spend) workflow.ChildWorkflowFuture {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id + "/stage-" + strconv.Itoa(res.Stages)})
		res.Stages++
		return workflow.ExecuteChildWorkflow(cctx, WorkflowStage, StageInput{Task: r.Task, TaskIDs: r.TaskIDs, Budget: r.Budget, Spent: spent, Limits: lim})
	}
	if reqs[0].Budget != (pipeline.Budget{}) {
		var extra pipeline.Spend // what the stages before spent
		for _, r := range reqs {
			var sr StageResult
			if err := start(r, r.Spent.Add(extra)).Get(ctx, &sr); err != nil || sr.BudgetStop {
				return sr.Reason, err
			}
			extra = sr.Spent.Sub(r.Spent)
		}
		return "", nil
	}
	futures := make([]workflow.ChildWorkflowFuture, len(reqs))
	for i, r := range reqs {
		futures[i] = start(r, r.Spent)
	}
	budget := ""
	var errs []error
	for _, f := range futures {
		var sr StageResult
		if err := f.Get(ctx, &sr); err != nil {
			errs = append(errs, err)
		}
		if sr.BudgetStop && budget == "" {
			budget = sr.Reason
		}
	}
	return budget, errors.Join(errs...)
}
