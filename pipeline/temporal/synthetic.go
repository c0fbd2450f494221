package temporal

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/ctxopt/ctxopt/pipeline"
)

// SyntheticStage configures a stage whose tasks only wait Work each: it
// measures what the engine adds to a rollout (bench/temporal), not a
// rollout.
type SyntheticStage struct {
	Address, Namespace string
	Tasks              int
	Work               time.Duration
	Workers            int
	Concurrency        int // per worker
	Limits             Limits
}

// SyntheticReport is what a synthetic stage measured.
type SyntheticReport struct {
	Wall time.Duration
	// Executions and MaxEvents are over the stage's executions and its
	// chunks': how many, and the largest history's event count.
	Executions, MaxEvents int
	// Added is each activity's scheduled-to-completed time less its work,
	// sorted.
	Added []time.Duration
}

// waitRunner is a Run whose tasks wait.
type waitRunner struct{ d time.Duration }

func (w waitRunner) RunTask(ctx context.Context, _ pipeline.TaskWork, _ pipeline.LedgerKey) (pipeline.TaskResult, error) {
	select {
	case <-time.After(w.d):
		return pipeline.TaskResult{Success: true, Spend: pipeline.Spend{Calls: 1, Requests: 1}}, nil
	case <-ctx.Done():
		return pipeline.TaskResult{}, ctx.Err()
	}
}

func (waitRunner) Advance(context.Context, string, pipeline.LedgerKey) (pipeline.Advanced, error) {
	return pipeline.Advanced{}, fmt.Errorf("%w: a synthetic stage is not a run", pipeline.ErrWorkRefused)
}

func (waitRunner) Close() error { return nil }

// RunSynthetic runs s on the server with s.Workers workers in this process
// (on a task queue of its own) and reads every history it wrote.
func RunSynthetic(ctx context.Context, s SyntheticStage) (SyntheticReport, error) {
	c, err := Dial(ctx, s.Address, s.Namespace)
	if err != nil {
		return SyntheticReport{}, err
	}
	defer c.Close()
	queue := "ctxopt-synthetic-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for range s.Workers {
		w := worker.New(c, queue, worker.Options{MaxConcurrentActivityExecutionSize: s.Concurrency})
		Register(w, &Activities{Open: func(context.Context, string) (Run, error) { return waitRunner{s.Work}, nil }})
		if err := w.Start(); err != nil {
			return SyntheticReport{}, err
		}
		defer w.Stop()
	}
	in := StageInput{Limits: s.Limits}
	for i := range s.Tasks {
		in.TaskIDs = append(in.TaskIDs, "t"+strconv.Itoa(i))
	}
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, WorkflowStage, in)
	if err != nil {
		return SyntheticReport{}, err
	}
	var res StageResult
	if err := run.Get(ctx, &res); err != nil {
		return SyntheticReport{}, err
	}
	rep := SyntheticReport{Wall: time.Since(start)}
	if res.Done != s.Tasks {
		return rep, fmt.Errorf("synthetic stage: %d of %d tasks done", res.Done, s.Tasks)
	}
	return rep, rep.read(ctx, c, queue, run.GetRunID(), s)
}

// read walks the stage's executions (following continue-as-new) and its
// chunks' histories.
func (r *SyntheticReport) read(ctx context.Context, c client.Client, id, runID string, s SyntheticStage) error {
	for runID != "" {
		h, err := readHistory(ctx, c, id, runID)
		if err != nil {
			return err
		}
		r.add(h, 0)
		runID = h.next
	}
	for off := 0; off < s.Tasks; off += s.Limits.ChunkSize {
		h, err := readHistory(ctx, c, id+"/chunk-"+strconv.Itoa(off), "")
		if err != nil {
			return err
		}
		r.add(h, s.Work)
	}
	slices.Sort(r.Added)
	return nil
}

func (r *SyntheticReport) add(h history, work time.Duration) {
	r.Executions++
	r.MaxEvents = max(r.MaxEvents, h.events)
	for _, d := range h.activities {
		r.Added = append(r.Added, d-work)
	}
}

type history struct {
	events     int
	activities []time.Duration // scheduled to completed
	next       string          // the run it continued as
}

func readHistory(ctx context.Context, c client.Client, id, runID string) (history, error) {
	var h history
	scheduled := map[int64]time.Time{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("history of %s: %w", id, err)
		}
		h.events++
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[e.GetEventId()] = at
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if t, ok := scheduled[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				h.activities = append(h.activities, at.Sub(t))
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			h.next = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return h, nil
}
