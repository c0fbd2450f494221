package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxopt/ctxopt/pipeline"
)

// WorkerOptions configure optimize worker.
type WorkerOptions struct {
	Address, Namespace, TaskQueue string
	// Concurrency bounds the tasks the worker runs at once.
	Concurrency int
	// Drain is how long a stopping worker lets its running tasks finish
	// before it cancels them (they are then retried elsewhere).
	Drain time.Duration
	// Meter, when set, is the metering proxy (optimize meter) the runs'
	// LLM requests go through: it records them in the spend ledger.
	Meter *url.URL
}

// Dial connects to the Temporal frontend at address.
func Dial(ctx context.Context, address, namespace string) (client.Client, error) {
	c, err := client.DialContext(ctx, client.Options{
		HostPort: address, Namespace: namespace,
		Logger: log.NewStructuredLogger(slog.Default().With("component", "temporal")),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", address, namespace, err)
	}
	return c, nil
}

// Register registers the workflows and acts' activities on w.
func Register(w worker.Registry, acts *Activities) {
	w.RegisterWorkflowWithOptions(StageWorkflow, workflow.RegisterOptions{Name: WorkflowStage})
	w.RegisterWorkflowWithOptions(ChunkWorkflow, workflow.RegisterOptions{Name: WorkflowChunk})
	w.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: WorkflowRun})
	w.RegisterActivityWithOptions(acts.RunTask, activity.RegisterOptions{Name: ActivityRunTask})
	w.RegisterActivityWithOptions(acts.Advance, activity.RegisterOptions{Name: ActivityAdvance})
	w.RegisterWorkflowWithOptions(NightlyWorkflow, workflow.RegisterOptions{Name: WorkflowNightly})
	w.RegisterActivityWithOptions(RunNightly, activity.RegisterOptions{Name: ActivityNightly})
}

// RunWorker runs the workflows and activities of the task queue until ctx
// is cancelled, then drains: it takes no new task, lets the running ones
// finish for up to o.Drain, and returns.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	c, err := Dial(ctx, o.Address, o.Namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	acts := &Activities{Open: func(ctx context.Context, store string) (Run, error) {
		r, err := pipeline.OpenWorkerRun(ctx, store)
		if err != nil {
			return nil, err
		}
		if o.Meter != nil {
			r.SendThrough(o.Meter)
		}
		return r, nil
	}}
	defer acts.Close()
	w := worker.New(c, o.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: o.Concurrency,
		WorkerStopTimeout:                  o.Drain,
	})
	Register(w, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", o.TaskQueue, err)
	}
	slog.Info("worker started", "address", o.Address, "namespace", o.Namespace, "task_queue", o.TaskQueue, "concurrency", o.Concurrency, "meter", meterName(o.Meter))
	<-ctx.Done()
	slog.Info("worker draining", "drain", o.Drain)
	w.Stop()
	slog.Info("worker stopped")
	return nil
}

// meterName names the metering proxy in the worker's log: none, or its
// URL.
func meterName(u *url.URL) string {
	if u == nil {
		return "none"
	}
	return u.Redacted()
}
