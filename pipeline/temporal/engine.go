package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxopt/ctxopt/pipeline"
)

func init() {
	pipeline.RegisterEngine(pipeline.EngineTemporal, func(ctx context.Context, spec pipeline.EngineSpec) (pipeline.Driver, error) {
		c, err := Dial(ctx, spec.Address, spec.Namespace)
		if err != nil {
			return nil, err
		}
		return &Driver{c: c, queue: spec.TaskQueue, limits: DefaultLimits, poll: 2 * time.Second}, nil
	})
}

// advancesPerRun is how many advances a run workflow's execution runs
// before it continues as new: an advance and the stages it waits for
// write a few dozen events, so a history stays far below the limits.
const advancesPerRun = 50

// Driver runs a run as a RunWorkflow on the task queue.
type Driver struct {
	c      client.Client
	queue  string
	limits Limits
	poll   time.Duration // how often the progress is asked for
}

// Close closes the connection.
func (d *Driver) Close() error {
	d.c.Close()
	return nil
}

// WorkflowID is the run workflow's ID of run: derived from the run, so a
// driver started again on any machine finds it.
func WorkflowID(run pipeline.RemoteRun) string {
	return "ctxopt/" + run.Name + "/" + run.ID
}

// Drive starts the run's workflow, or attaches to it when it is running
// (a driver before this one, here or on another machine, started it),
// logs its progress and waits for it.
func (d *Driver) Drive(ctx context.Context, run pipeline.RemoteRun) (pipeline.Driven, error) {
	id := WorkflowID(run)
	attached := d.running(ctx, id)
	wr, err := d.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: d.queue,
		// A running execution is the run: attach to it. A closed one
		// (done, failed, cancelled) leaves the run to a new execution,
		// which skips every finished stage.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, WorkflowRun, RunInput{Store: run.Store, Name: run.Name, Limits: d.limits, AdvancesPerRun: advancesPerRun})
	if err != nil {
		return pipeline.Driven{}, fmt.Errorf("start the run's workflow %s: %w", id, err)
	}
	msg := "run started on Temporal"
	if attached {
		msg = "run attached to its running workflow"
	}
	slog.Info(msg, "workflow", id, "run", wr.GetRunID(), "task_queue", d.queue, "store", run.Store)
	stop := d.watch(ctx, id)
	defer stop()
	var res RunResult
	if err := wr.Get(ctx, &res); err != nil {
		return pipeline.Driven{Attached: attached}, fmt.Errorf("the run's workflow %s: %w", id, err)
	}
	return pipeline.Driven{Attached: attached, Budget: res.Budget}, nil
}

// running reports whether workflow id has an execution running.
func (d *Driver) running(ctx context.Context, id string) bool {
	desc, err := d.c.DescribeWorkflow(ctx, id, "")
	return err == nil && desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// watch logs the run's progress when it changes, until stop is called.
func (d *Driver) watch(ctx context.Context, id string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d.poll)
		defer t.Stop()
		var last RunProgress
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			v, err := d.c.QueryWorkflow(ctx, id, "", QueryProgress)
			var p RunProgress
			if err != nil || v.Get(&p) != nil {
				continue // between executions, or busy: ask again later
			}
			if p.Advances != last.Advances || !slices.Equal(p.Waiting, last.Waiting) {
				slog.Info("run progress", "advances", p.Advances, "stages", p.Stages, "waiting_for", p.Waiting)
				last = p
			}
		}
	}()
	return func() { cancel(); <-done }
}
