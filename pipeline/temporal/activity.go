package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxopt/ctxopt/pipeline"
)

// Names under which the workflows and activities are registered.
const (
	ActivityRunTask = "ctxopt.RunTask"
	ActivityAdvance = "ctxopt.Advance"
	WorkflowRun     = "ctxopt.Run"
	WorkflowStage   = "ctxopt.Stage"
	WorkflowChunk   = "ctxopt.Chunk"
	// refusedType is the error type of work a worker refuses; it is not
	// retried.
	refusedType = "ctxopt.Refused"
)

// Run is a run as a worker holds it (pipeline.WorkerRun): it runs one
// of its tasks, or advances it.
type Run interface {
	RunTask(ctx context.Context, w pipeline.TaskWork, key pipeline.LedgerKey) (pipeline.TaskResult, error)
	Advance(ctx context.Context, name string, key pipeline.LedgerKey) (pipeline.Advanced, error)
	Close() error
}

// Activities are the activities a worker runs. It opens each run
// directory's runtime once and keeps it.
type Activities struct {
	// Open opens a run by its store's URL (pipeline.OpenWorkerRun in a
	// worker).
	Open func(ctx context.Context, store string) (Run, error)

	mu   sync.Mutex
	runs map[string]Run
}

// RunTask runs one task, heartbeating while it runs so that a worker
// that dies gives its task to another within the heartbeat timeout. Its
// calls are recorded in the run's ledger under this attempt's key.
func (a *Activities) RunTask(ctx context.Context, w pipeline.TaskWork) (pipeline.TaskResult, error) {
	r, key, stop, err := a.begin(ctx, w.Store)
	if err != nil {
		return pipeline.TaskResult{}, err
	}
	defer stop()
	res, err := r.RunTask(ctx, w, key)
	return res, classify(err)
}

// AdvanceInput names the run an Advance activity advances: its store and
// its run directory's name.
type AdvanceInput struct {
	Store, Name string
}

// Advance runs the run's stages on this worker (analysis, the optimizer's
// updates, the final evaluation, the export) from where the run stands
// until it is done or waits for rollouts (pipeline.WorkerRun.Advance). Its
// result names the rollouts; the run's files are in its store.
func (a *Activities) Advance(ctx context.Context, in AdvanceInput) (pipeline.Advanced, error) {
	r, key, stop, err := a.begin(ctx, in.Store)
	if err != nil {
		return pipeline.Advanced{}, err
	}
	defer stop()
	adv, err := r.Advance(ctx, in.Name, key)
	return adv, classify(err)
}

// begin opens the activity's run and starts heartbeating, so that a
// worker that dies gives its work to another within the heartbeat
// timeout; the activity's calls are recorded in the run's ledger under
// this attempt's key.
func (a *Activities) begin(ctx context.Context, store string) (Run, pipeline.LedgerKey, func(), error) {
	info := activity.GetInfo(ctx)
	r, err := a.runner(ctx, store)
	if err != nil {
		return nil, pipeline.LedgerKey{}, nil, classify(err)
	}
	key := pipeline.LedgerKey{
		Workflow: info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID,
		Activity: info.ActivityID, Attempt: int(info.Attempt),
	}
	return r, key, heartbeat(ctx, info.HeartbeatTimeout), nil
}

// runner returns the task runner of the run whose store is at store,
// opening it the first time.
func (a *Activities) runner(ctx context.Context, store string) (Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.runs[store]; r != nil {
		return r, nil
	}
	// The runtime outlives this activity: it is closed with the worker.
	r, err := a.Open(context.WithoutCancel(ctx), store)
	if err != nil {
		return nil, fmt.Errorf("open run %s: %w", store, err)
	}
	if a.runs == nil {
		a.runs = map[string]Run{}
	}
	a.runs[store] = r
	return r, nil
}

// Close closes every run the worker opened.
func (a *Activities) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, r := range a.runs {
		errs = append(errs, r.Close())
	}
	a.runs = nil
	return errors.Join(errs...)
}

// classify makes work a worker refuses (and bad input) non-retryable:
// another attempt would be refused again.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pipeline.ErrWorkRefused) || errors.Is(err, pipeline.ErrInvalidInput) {
		return temporal.NewNonRetryableApplicationError(err.Error(), refusedType, err)
	}
	return err
}

// heartbeat records the activity's liveness at a third of timeout until
// stop is called.
func heartbeat(ctx context.Context, timeout time.Duration) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	t := time.NewTicker(timeout / 3)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case <-done: // the task finished meanwhile
					return
				default:
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done) }
}
