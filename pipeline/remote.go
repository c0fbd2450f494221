package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/rollout"
)

// remoteSuffix names the directory beside a rollout's where tasks run by
// other processes leave their records, one file per task, until
// PublishRemote moves them into the rollout.
const remoteSuffix = ".remote"

// ErrWorkRefused marks a task a worker cannot run as asked (another
// configuration, an unknown task): retrying it elsewhere cannot help.
var ErrWorkRefused = errors.New("work refused")

// TaskWork is one task of a RolloutWork, as a worker runs it. Store is
// the run store's URL; Dir the rollout's directory as a key in it.
type TaskWork struct {
	Store, Stage, Dir string
	Strategy          compress.Name
	Guideline         string
	Fingerprint       rollout.Fingerprint
	TaskID            string
}

// dirKey is the rollout's directory as a key of the run store.
func (w RolloutWork) dirKey() string {
	rel, err := filepath.Rel(w.RunDir, w.Dir)
	if err != nil {
		rel = w.Dir
	}
	return filepath.ToSlash(rel)
}

// Task returns w's i-th task as a worker runs it.
func (w RolloutWork) Task(i int) TaskWork {
	return TaskWork{Store: w.Store.URL(), Stage: w.Stage, Dir: w.dirKey(), Strategy: w.Strategy, Guideline: w.Guideline, Fingerprint: w.Fingerprint, TaskID: w.Tasks[i].ID}
}

// TaskResult is what a worker returns for a task: the key of its record
// in the run store, never the record itself, and what its calls spent.
type TaskResult struct {
	Record  string `json:"record"`
	Success bool   `json:"success"`
	Spend   Spend  `json:"spend"`
}

// remotePrefix is where workers leave the records of the rollout at dir.
func remotePrefix(dir string) string { return dir + remoteSuffix + "/" }

// record is the key of w's task's record: named by what the task runs
// (its agent's fingerprint and guideline) as well as by the task, so the
// records a stage left before its inputs changed are never taken for its
// new tasks'.
func (w TaskWork) record() string {
	b, _ := json.Marshal([]any{w.TaskID, w.Fingerprint, w.Guideline})
	h := sha256.Sum256(b)
	return remotePrefix(w.Dir) + hex.EncodeToString(h[:12]) + ".jsonl"
}

// spend is the key of what the attempt that left w's task's record spent,
// beside the record.
func (w TaskWork) spend() string {
	return strings.TrimSuffix(w.record(), ".jsonl") + ".spend.json"
}

// Pending returns the indexes of w's tasks no worker has recorded yet.
func (w RolloutWork) Pending(ctx context.Context) ([]int, error) {
	keys, err := w.Store.List(ctx, remotePrefix(w.dirKey()))
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, k := range keys {
		have[k] = true
	}
	var out []int
	for i := range w.Tasks {
		if !have[w.Task(i).record()] {
			out = append(out, i)
		}
	}
	return out, nil
}

// PublishRemote copies the records workers left for w into the rollout's
// staging directory, in task order, as the runner writes them; the runner
// then resumes every recorded task. It returns how many tasks had a
// record and what the attempts that left them spent. The records stay in
// the store until the rollout is there too (Advance deletes them then).
func PublishRemote(ctx context.Context, w RolloutWork) (int, Spend, error) {
	var spent Spend
	staging := w.Dir + ".partial"
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return 0, spent, fmt.Errorf("publish %s: %w", w.Stage, err)
	}
	if err := rollout.WriteJSON(filepath.Join(staging, rollout.FingerprintFile), w.Fingerprint); err != nil {
		return 0, spent, err
	}
	n := 0
	err := atomicfile.Write(filepath.Join(staging, rollout.TrajectoriesFile), 0o644, func(out io.Writer) error {
		for i := range w.Tasks {
			b, err := w.Store.Get(ctx, w.Task(i).record())
			if errors.Is(err, ErrNoObject) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
			n++
			var s Spend
			b, err = w.Store.Get(ctx, w.Task(i).spend())
			if err == nil {
				err = json.Unmarshal(b, &s)
			}
			if err != nil && !errors.Is(err, ErrNoObject) {
				return err
			}
			spent = spent.Add(s)
		}
		return nil
	})
	if err != nil {
		return 0, spent, fmt.Errorf("publish %s: %w", w.Stage, err)
	}
	return n, spent, nil
}

// WorkerRun is a run as a worker holds it: the run's runtime (opened
// once, with the LLM cache), the guidelines it compiled, the run store and
// its ledger. It runs the run's tasks (RunTask) and advances the run
// (Advance).
type WorkerRun struct {
	p      *runner
	store  *RunStore
	ledger *Ledger
	tasks  map[string]env.Task
	mu     sync.Mutex
	tmpls  map[string]*compress.Prompt
	// proxy, when set, is the metering proxy the run's LLM requests go
	// through (SendThrough).
	proxy *url.URL
}

// SendThrough makes the run's LLM requests go through the metering proxy
// at proxy (ParseMeterURL), which records them in the ledger; this
// process then records the rest of their spend (costs, cache hits) only.
func (t *WorkerRun) SendThrough(proxy *url.URL) { t.proxy = proxy }

// maxCacheSlots is how many cache files beside the job's a worker tries
// when other processes on its machine hold the ones before.
const maxCacheSlots = 8

// OpenWorkerRun opens the run whose store is at storeURL, as the resolved
// job there describes it. With the job's cache on, the worker uses the
// cache file of the job's cache section on its own machine, or, when
// another process holds that one (a second worker, an in-process run),
// the first free of path.worker2 … path.worker8: each worker's cache is
// local to it. An answer is the same from any of them or from none.
func OpenWorkerRun(ctx context.Context, storeURL string) (_ *WorkerRun, err error) {
	store, err := OpenRunStore(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	data, err := store.Get(ctx, JobFile)
	if err != nil {
		return nil, err
	}
	job, err := ParseJob(storeURL+" "+JobFile, data)
	if err != nil {
		return nil, err
	}
	rt, err := openWorkerRuntime(ctx, job)
	if err != nil {
		return nil, err
	}
	p := &runner{ctx: ctx, job: job, rt: rt, tmpls: map[string]*guideline.Template{}}
	if err := p.loadStart(); err != nil {
		rt.Close()
		return nil, err
	}
	t := &WorkerRun{p: p, store: store, ledger: OpenLedger(store), tasks: map[string]env.Task{}, tmpls: map[string]*compress.Prompt{}}
	for _, task := range p.train {
		t.tasks[task.ID] = task
	}
	return t, nil
}

// openWorkerRuntime opens job's runtime with the first cache slot no
// other process holds (OpenWorkerRun).
func openWorkerRuntime(ctx context.Context, job *Job) (*Runtime, error) {
	if job.Cache.Disabled {
		return Open(ctx, job)
	}
	path := CachePath(job.Cache.Path)
	var errs []error
	for slot := 1; slot <= maxCacheSlots; slot++ {
		j := *job
		j.Cache.Path = path
		if slot > 1 {
			j.Cache.Path = fmt.Sprintf("%s.worker%d", path, slot)
		}
		rt, err := Open(ctx, &j)
		if err == nil {
			slog.Info("worker cache", "path", j.Cache.Path)
			return rt, nil
		}
		if errors.Is(err, ErrInvalidInput) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no free cache slot: %w", errors.Join(errs...))
}

// Close releases the run's runtime and store.
func (t *WorkerRun) Close() error { return errors.Join(t.p.rt.Close(), t.store.Close()) }

// RunTask runs w's task, its calls recorded in the ledger under key, and
// leaves its record where PublishRemote finds it (written whole, so a task
// run twice leaves one record).
func (t *WorkerRun) RunTask(ctx context.Context, w TaskWork, key LedgerKey) (TaskResult, error) {
	task, ok := t.tasks[w.TaskID]
	if !ok {
		return TaskResult{}, fmt.Errorf("%w: task %s is not in the run's train split", ErrWorkRefused, w.TaskID)
	}
	g, err := t.compiled(w.Guideline)
	if err != nil {
		return TaskResult{}, err
	}
	meter := NewAttemptMeter(t.ledger, key)
	meter.ledger.proxy = t.proxy
	agent, _, err := t.p.agentWith(w.Strategy, g, meter.Wrap(t.p.rt.Agent), meter.Wrap(t.p.rt.Compressor), meter.Wrap(t.p.rt.Embedder))
	if err != nil {
		return TaskResult{}, err
	}
	if fp := agent.Fingerprint(); fp != w.Fingerprint {
		return TaskResult{}, fmt.Errorf("%w: this worker builds the agent %+v, the run's is %+v (another binary or job?)", ErrWorkRefused, fp, w.Fingerprint)
	}
	tr, err := agent.Run(ctx, task)
	if err != nil {
		return TaskResult{}, fmt.Errorf("task %s: %w", task.ID, err)
	}
	line, err := rollout.EncodeTrajectory(tr)
	if err != nil {
		return TaskResult{}, fmt.Errorf("task %s: %w", task.ID, err)
	}
	// The spend first: a record is a task done, and its spend is then
	// there for the stage's manifest.
	spent, err := json.Marshal(meter.Snapshot())
	if err == nil {
		err = t.store.Put(ctx, w.spend(), spent)
	}
	rec := w.record()
	if err == nil {
		err = t.store.Put(ctx, rec, append(line, '\n'))
	}
	if err != nil {
		return TaskResult{}, err
	}
	return TaskResult{Record: rec, Success: tr.Success, Spend: meter.Snapshot()}, nil
}

// compiled returns the guideline of src, compiling each source once
// (creating templates is not safe concurrently).
func (t *WorkerRun) compiled(src string) (*compress.Prompt, error) {
	if src == "" {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.tmpls[src]; g != nil {
		return g, nil
	}
	tmpl, err := Compile(t.p.kind, src, "the run's guideline")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkRefused, err)
	}
	g := promptOf(tmpl)
	t.tmpls[src] = g
	return g, nil
}
