package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxopt/ctxopt/pipeline"
)

// fakeRunner stands in for pipeline.TaskRunner: each task spends one call
// and takes a moment, so that tasks overlap when the workflow lets them.
type fakeRunner struct {
	mu       sync.Mutex
	attempts map[string]int
	// failFirst fails the first attempt of these tasks (retryable).
	failFirst map[string]bool
	refuse    string // a task refused outright
	running   atomic.Int32
	maxSeen   atomic.Int32
	// advances scripts Advance: its i-th call returns advances[i], then
	// the run is done; ranAt records how many tasks had run at each call.
	advances []pipeline.Advanced
	ranAt    []int
}

func (f *fakeRunner) Advance(_ context.Context, name string, _ pipeline.LedgerKey) (pipeline.Advanced, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "run-1" {
		return pipeline.Advanced{}, fmt.Errorf("advance of %q", name)
	}
	ran := 0
	for _, n := range f.attempts {
		ran += n
	}
	f.ranAt = append(f.ranAt, ran)
	if i := len(f.ranAt) - 1; i < len(f.advances) {
		return f.advances[i], nil
	}
	return pipeline.Advanced{}, nil
}

func (f *fakeRunner) RunTask(ctx context.Context, w pipeline.TaskWork, key pipeline.LedgerKey) (pipeline.TaskResult, error) {
	f.mu.Lock()
	f.attempts[w.TaskID]++
	n := f.attempts[w.TaskID]
	f.mu.Unlock()
	if w.TaskID == f.refuse {
		return pipeline.TaskResult{}, fmt.Errorf("%w: not this one", pipeline.ErrWorkRefused)
	}
	if f.failFirst[w.TaskID] && n == 1 {
		return pipeline.TaskResult{}, errors.New("worker lost its endpoint")
	}
	if key.Attempt != n {
		return pipeline.TaskResult{}, fmt.Errorf("ledger key attempt %d, want %d", key.Attempt, n)
	}
	cur := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.maxSeen.Load()
		if cur <= m || f.maxSeen.CompareAndSwap(m, cur) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	return pipeline.TaskResult{Record: "r/" + w.TaskID, Success: true, Spend: pipeline.Spend{Calls: 1, Requests: 1, Tokens: 10}}, nil
}

func (f *fakeRunner) Close() error { return nil }

func newEnv(t *testing.T, f *fakeRunner) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env, &Activities{Open: func(context.Context, string) (Run, error) { return f, nil }})
	return env
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%03d", i)
	}
	return out
}

func newFake() *fakeRunner {
	return &fakeRunner{attempts: map[string]int{}, failFirst: map[string]bool{}}
}

// stage runs a stage workflow to its end, following continue-as-new the
// way the server does, and returns the result and how many executions it
// took.
func stage(t *testing.T, f *fakeRunner, in StageInput) (StageResult, int, error) {
	t.Helper()
	for execs := 1; ; execs++ {
		env := newEnv(t, f)
		env.ExecuteWorkflow(WorkflowStage, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			if can.WorkflowType.Name != WorkflowStage {
				t.Fatalf("continued as %s", can.WorkflowType.Name)
			}
			in = StageInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			return StageResult{}, execs, err
		}
		var res StageResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res, execs, nil
	}
}

func TestStageFansOutEveryTaskInChunks(t *testing.T) {
	f := newFake()
	lim := Limits{Window: 4, ChunkSize: 10, ChunksPerRun: 100, Heartbeat: time.Second}
	res, execs, err := stage(t, f, StageInput{TaskIDs: ids(25), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 25 || res.Spent.Calls != 25 || execs != 1 {
		t.Fatalf("done %d, calls %d, executions %d; want 25, 25, 1", res.Done, res.Spent.Calls, execs)
	}
	for _, id := range ids(25) {
		if f.attempts[id] != 1 {
			t.Fatalf("task %s ran %d times", id, f.attempts[id])
		}
	}
}

func TestChunkKeepsTheWindow(t *testing.T) {
	for _, window := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(window), func(t *testing.T) {
			f := newFake()
			env := newEnv(t, f)
			env.ExecuteWorkflow(WorkflowChunk, ChunkInput{TaskIDs: ids(20), Limits: Limits{Window: window, Heartbeat: time.Second}})
			var res ChunkResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			// The workflow's own count, and the tasks seen running at once.
			if res.Done != 20 || res.MaxPending != window || int(f.maxSeen.Load()) > window {
				t.Fatalf("done %d, max pending %d, max running %d; want 20, %d, <= %d", res.Done, res.MaxPending, f.maxSeen.Load(), window, window)
			}
		})
	}
}

func TestStageContinuesAsNew(t *testing.T) {
	f := newFake()
	lim := Limits{Window: 2, ChunkSize: 3, ChunksPerRun: 2, Heartbeat: time.Second}
	res, execs, err := stage(t, f, StageInput{TaskIDs: ids(14), Limits: lim, Spent: pipeline.Spend{Calls: 100}})
	if err != nil {
		t.Fatal(err)
	}
	// 5 chunks of at most 3, 2 per execution: 3 executions, and what the
	// earlier ones did and spent is carried along.
	if execs != 3 || res.Done != 14 || res.Spent.Calls != 114 {
		t.Fatalf("executions %d, done %d, calls %d; want 3, 14, 114", execs, res.Done, res.Spent.Calls)
	}
}

func TestActivityRetried(t *testing.T) {
	f := newFake()
	f.failFirst["t002"] = true
	res, _, err := stage(t, f, StageInput{TaskIDs: ids(5), Limits: Limits{Window: 2, ChunkSize: 5, ChunksPerRun: 1, Heartbeat: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 5 || f.attempts["t002"] != 2 {
		t.Fatalf("done %d, attempts of t002 %d; want 5, 2", res.Done, f.attempts["t002"])
	}
}

func TestRefusedTaskIsNotRetried(t *testing.T) {
	f := newFake()
	f.refuse = "t001"
	_, _, err := stage(t, f, StageInput{TaskIDs: ids(3), Limits: Limits{Window: 1, ChunkSize: 5, ChunksPerRun: 1, Heartbeat: time.Second}})
	if err == nil || f.attempts["t001"] != 1 {
		t.Fatalf("err %v, attempts %d; want a failure after one attempt", err, f.attempts["t001"])
	}
}

func TestBudgetStopsScheduling(t *testing.T) {
	for _, tc := range []struct {
		window, chunk, wantDone int
	}{
		// 3 calls were spent before the stage; the budget is 10 calls.
		// One at a time, the 7th task reaches it; with 3 in flight the
		// calls in flight may overshoot by at most 2.
		{window: 1, chunk: 50, wantDone: 7},
		{window: 3, chunk: 50, wantDone: 9},
		// Across chunks the stage checks too.
		{window: 1, chunk: 2, wantDone: 7},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			f := newFake()
			in := StageInput{TaskIDs: ids(30), Budget: pipeline.Budget{LLMCalls: 10}, Spent: pipeline.Spend{Calls: 3},
				Limits: Limits{Window: tc.window, ChunkSize: tc.chunk, ChunksPerRun: 100, Heartbeat: time.Second}}
			res, _, err := stage(t, f, in)
			if err != nil {
				t.Fatal(err)
			}
			if !res.BudgetStop || res.Done != tc.wantDone || len(f.attempts) != tc.wantDone {
				t.Fatalf("budget stop %v, done %d, tasks run %d; want true, %d", res.BudgetStop, res.Done, len(f.attempts), tc.wantDone)
			}
		})
	}
}

// need is a rollout request of stage for tasks.
func need(stage string, tasks []string, budget pipeline.Budget) pipeline.RolloutRequest {
	return pipeline.RolloutRequest{Task: pipeline.TaskWork{Stage: stage}, TaskIDs: tasks, Budget: budget}
}

// runAll runs a run workflow to its end, following continue-as-new, and
// returns its result and how many executions it took.
func runAll(t *testing.T, f *fakeRunner, in RunInput) (RunResult, int, error) {
	t.Helper()
	for execs := 1; ; execs++ {
		env := newEnv(t, f)
		env.ExecuteWorkflow(WorkflowRun, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			in = RunInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			return RunResult{}, execs, err
		}
		var res RunResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res, execs, nil
	}
}

// A run advances until it waits for rollouts, runs them as stages (the
// stages of one advance side by side), advances again once they are all
// done, and continues as new every AdvancesPerRun advances.
func TestRunAdvancesBetweenStages(t *testing.T) {
	f := newFake()
	ts := ids(12)
	f.advances = []pipeline.Advanced{
		{Needs: []pipeline.RolloutRequest{need("baseline", ts[:4], pipeline.Budget{}), need("fifo", ts[4:7], pipeline.Budget{})}},
		{Needs: []pipeline.RolloutRequest{need("r1-ut-select", ts[7:], pipeline.Budget{})}},
	}
	lim := Limits{Window: 2, ChunkSize: 3, ChunksPerRun: 100, Heartbeat: time.Second}
	res, execs, err := runAll(t, f, RunInput{Name: "run-1", Limits: lim, AdvancesPerRun: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Advance 1 before any task, 2 after the first two stages' 7 tasks,
	// 3 (in the second execution) after all 12; three stages.
	if res.Advances != 3 || res.Stages != 3 || res.Budget != "" || execs != 2 || fmt.Sprint(f.ranAt) != "[0 7 12]" {
		t.Fatalf("advances %d, stages %d, budget %q, executions %d, tasks run at each advance %v; want 3, 3, \"\", 2, [0 7 12]", res.Advances, res.Stages, res.Budget, execs, f.ranAt)
	}
	for _, id := range ts {
		if f.attempts[id] != 1 {
			t.Fatalf("task %s ran %d times", id, f.attempts[id])
		}
	}
}

// With a budget, the stages of an advance run one after the other, each
// from what the ones before spent: the run stops at the budget as if they
// were one stage, and advances no more.
func TestRunStopsAtTheBudget(t *testing.T) {
	f := newFake()
	ts := ids(20)
	b := pipeline.Budget{LLMCalls: 10}
	f.advances = []pipeline.Advanced{
		{Needs: []pipeline.RolloutRequest{need("baseline", ts[:6], b), need("fifo", ts[6:12], b), need("prompting", ts[12:], b)}},
	}
	res, _, err := runAll(t, f, RunInput{Name: "run-1", Limits: Limits{Window: 1, ChunkSize: 50, ChunksPerRun: 100, Heartbeat: time.Second}, AdvancesPerRun: 10})
	if err != nil {
		t.Fatal(err)
	}
	// One call per task: 6 in the first stage, 4 in the second, none in
	// the third.
	if res.Budget == "" || res.Advances != 1 || res.Stages != 2 || len(f.attempts) != 10 || f.attempts[ts[9]] != 1 {
		t.Fatalf("budget %q, advances %d, stages %d, tasks run %d; want a stop after 1 advance, 2 stages, 10 tasks", res.Budget, res.Advances, res.Stages, len(f.attempts))
	}
	// An advance that reaches the budget itself stops the run too.
	f = newFake()
	f.advances = []pipeline.Advanced{{Budget: "budget reached: 10 LLM calls"}}
	res, _, err = runAll(t, f, RunInput{Name: "run-1", Limits: Limits{Window: 1, ChunkSize: 50, ChunksPerRun: 100, Heartbeat: time.Second}, AdvancesPerRun: 10})
	if err != nil || res.Budget != "budget reached: 10 LLM calls" || res.Advances != 1 {
		t.Fatalf("err %v, budget %q, advances %d", err, res.Budget, res.Advances)
	}
}
