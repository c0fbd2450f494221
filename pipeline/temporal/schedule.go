package temporal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of the nightly workflow and its activity.
const (
	WorkflowNightly = "ctxopt.Nightly"
	ActivityNightly = "ctxopt.RunNightly"
	memoCron        = "cron"
)

// NightlyInput is what a schedule starts: optimize nightly with Args
// (e.g. --config nightly.yaml) on a worker.
type NightlyInput struct {
	Args []string
}

// NightlyResult is the exit code of optimize nightly: 0 promoted, 1 the
// gate failed (both are a night that ran).
type NightlyResult struct {
	ExitCode int
}

// NightlyWorkflow runs one night. The nightly loop is idempotent and
// resumable, so an attempt cut off is retried from where it stopped.
func NightlyWorkflow(ctx workflow.Context, in NightlyInput) (NightlyResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Minute, MaximumAttempts: 3},
	})
	var res NightlyResult
	err := workflow.ExecuteActivity(actx, ActivityNightly, in).Get(ctx, &res)
	return res, err
}

// RunNightly runs this binary's optimize nightly with in.Args, beating
// the heart while it runs. Exit codes 0 and 1 are results; any other is
// an error (retried).
func RunNightly(ctx context.Context, in NightlyInput) (NightlyResult, error) {
	self, err := os.Executable()
	if err != nil {
		return NightlyResult{}, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"nightly"}, in.Args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	stop := heartbeat(ctx, activity.GetInfo(ctx).HeartbeatTimeout)
	defer stop()
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return NightlyResult{}, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return NightlyResult{ExitCode: 1}, nil
	default:
		return NightlyResult{}, fmt.Errorf("optimize nightly %v: %w", in.Args, err)
	}
}

// Schedule is one schedule of optimize nightly.
type Schedule struct {
	ID        string
	Cron      string
	TaskQueue string
	Args      []string
	// Next is when it runs next (List only).
	Next time.Time
}

// CreateSchedule creates s; a run still going when the next is due makes
// that one skipped (overlap policy skip).
func CreateSchedule(ctx context.Context, c client.Client, s Schedule) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      s.ID,
		Spec:    client.ScheduleSpec{CronExpressions: []string{s.Cron}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		// The server keeps the spec as calendars; the memo keeps the cron
		// expression as given, for list.
		Memo: map[string]any{memoCron: s.Cron},
		Action: &client.ScheduleWorkflowAction{
			ID: s.ID + "-night", Workflow: WorkflowNightly, TaskQueue: s.TaskQueue,
			Args: []any{NightlyInput{Args: s.Args}},
		},
	})
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", s.ID, err)
	}
	return nil
}

// ListSchedules lists every schedule of the namespace.
func ListSchedules(ctx context.Context, c client.Client) ([]Schedule, error) {
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	var out []Schedule
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		s := Schedule{ID: e.ID}
		if e.Memo != nil && e.Memo.Fields[memoCron] != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(e.Memo.Fields[memoCron], &s.Cron)
		}
		if len(e.NextActionTimes) > 0 {
			s.Next = e.NextActionTimes[0]
		}
		out = append(out, s)
	}
	return out, nil
}

// DeleteSchedule deletes schedule id.
func DeleteSchedule(ctx context.Context, c client.Client, id string) error {
	if err := c.ScheduleClient().GetHandle(ctx, id).Delete(ctx); err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}
