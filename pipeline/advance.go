package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/rollout"
)

// A run on another engine is driven in advances: each runs Algorithm 1 on
// a worker, in a mirror of the run store, from where the run stands until
// it finishes or needs rollouts that workers run task by task. Finished
// stages are skipped, so an advance picks up where the last one stopped.

// RolloutRequest is a rollout stage a run waits for: the tasks of it that
// no worker has recorded yet.
type RolloutRequest struct {
	// Task is the stage's tasks' template (TaskID empty).
	Task    TaskWork
	TaskIDs []string
	// Budget is the job's, Spent what the run spent before the stage.
	Budget Budget
	Spent  Spend
}

// Advanced is what an advance left: the rollouts the run waits for (none
// when it is done), or why it stopped at its budget. The run's files are
// in the run store; nothing else is returned.
type Advanced struct {
	Needs  []RolloutRequest `json:"needs,omitempty"`
	Budget string           `json:"budget,omitempty"`
}

// needRollouts is the error a run returns when it waits for rollouts.
type needRollouts struct{ reqs []RolloutRequest }

func (e *needRollouts) Error() string {
	names := make([]string, len(e.reqs))
	for i, r := range e.reqs {
		names[i] = r.Task.Stage
	}
	return "waiting for the rollouts of " + strings.Join(names, ", ")
}

// joinNeeds gathers the rollouts errs wait for into one error, each once
// (two candidates with the same source share a rollout); any other error
// wins.
func joinNeeds(errs []error) error {
	var all needRollouts
	seen := map[string]bool{}
	for _, err := range errs {
		var n *needRollouts
		if err == nil {
			continue
		}
		if !errors.As(err, &n) {
			return err
		}
		for _, r := range n.reqs {
			if !seen[r.Task.Dir] {
				seen[r.Task.Dir] = true
				all.reqs = append(all.reqs, r)
			}
		}
	}
	if len(all.reqs) == 0 {
		return nil
	}
	return &all
}

// waiting reports whether err only says the run waits for rollouts.
func waiting(err error) bool {
	var n *needRollouts
	return errors.As(err, &n)
}

// recordsEngine runs no task: it publishes a rollout stage from the
// records workers left in the run store, or asks for the tasks without
// one. The records it published are deleted once the stage's files are
// in the store (consumed).
type recordsEngine struct {
	meter    *Meter
	consumed []string
}

func (e *recordsEngine) Rollout(ctx context.Context, r *rollout.Runner, w RolloutWork) (*rollout.Result, error) {
	pending, err := w.Pending(ctx)
	if err != nil {
		return nil, err
	}
	if len(pending) > 0 {
		req := RolloutRequest{Task: w.Task(0), Budget: w.Budget, Spent: w.Spent}
		req.Task.TaskID = ""
		for _, i := range pending {
			req.TaskIDs = append(req.TaskIDs, w.Tasks[i].ID)
		}
		return nil, &needRollouts{reqs: []RolloutRequest{req}}
	}
	n, spent, err := PublishRemote(ctx, w)
	if err != nil {
		return nil, err
	}
	if n != len(w.Tasks) {
		return nil, fmt.Errorf("stage %s: the workers recorded %d of %d tasks", w.Stage, n, len(w.Tasks))
	}
	e.meter.published(spent)
	e.consumed = append(e.consumed, remotePrefix(w.dirKey()))
	return r.RunDir(ctx, w.Tasks, w.Dir)
}

// Advance runs the run from where its store stands until it is done or
// waits for rollouts, its calls recorded in the ledger under key, and puts
// what it wrote back in the store. name is the run directory's name.
func (t *WorkerRun) Advance(ctx context.Context, name string, key LedgerKey) (Advanced, error) {
	tmp, err := os.MkdirTemp("", "ctxopt-advance-")
	if err != nil {
		return Advanced{}, err
	}
	defer os.RemoveAll(tmp)
	m, err := t.store.Download(ctx, filepath.Join(tmp, name))
	if err != nil {
		return Advanced{}, err
	}
	p, eng, err := t.runner(ctx, m.Dir, key)
	if err != nil {
		return Advanced{}, err
	}
	defer p.rt.Close()
	err = WithPatience(ctx, p.job.Rollout.Patience, func() error {
		_, err := p.run()
		return err
	})
	if perr := p.meter.Persist(); perr != nil && (err == nil || waiting(err)) {
		err = perr
	}
	var out Advanced
	var need *needRollouts
	switch {
	case errors.As(err, &need):
		out.Needs, err = need.reqs, nil
	case errors.Is(err, ErrBudget):
		out.Budget, err = err.Error(), nil
	}
	if ctx.Err() != nil {
		// Cancelled: another attempt may own the run now.
		return out, errors.Join(err, ctx.Err())
	}
	// What the advance finished is kept, whatever stopped it.
	if uerr := t.store.Upload(ctx, m); uerr != nil {
		return out, errors.Join(err, uerr)
	}
	for _, prefix := range eng.consumed {
		if derr := t.store.DeletePrefix(ctx, prefix); derr != nil {
			return out, errors.Join(err, derr)
		}
	}
	return out, err
}

// runner returns the runner of an advance in the run directory dir: a
// runtime of its own (on the worker's cache), the records engine, and a
// meter that records its calls in the ledger under key. The caller closes
// p.rt.
func (t *WorkerRun) runner(ctx context.Context, dir string, key LedgerKey) (p *runner, eng *recordsEngine, err error) {
	rt, err := openRuntime(ctx, t.p.job, t.p.rt.cache)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	eng = &recordsEngine{}
	p = &runner{ctx: ctx, job: t.p.job, rt: rt, dir: dir, started: time.Now(), engine: eng, shared: t.store, tmpls: map[string]*guideline.Template{}}
	if err := p.loadStart(); err != nil {
		return nil, nil, err
	}
	if err := p.openRecords(); err != nil {
		return nil, nil, err
	}
	if err := p.meter.UseLedger(t.ledger, key); err != nil {
		return nil, nil, err
	}
	p.meter.ledger.proxy = t.proxy
	eng.meter = p.meter
	p.wrapClients()
	return p, eng, nil
}
