package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/rollout"
)

// Engine kinds: the in-process engine runs a job's rollouts in this
// process (the default); others run them elsewhere (pipeline/temporal).
const (
	EngineInProcess = "inprocess"
	EngineTemporal  = "temporal"
)

// EngineSpec is the job's engine section: where its rollouts run.
type EngineSpec struct {
	// Kind is inprocess (the default) or temporal.
	Kind string `yaml:"kind" json:"kind"`
	// Address is the Temporal frontend (host:port).
	Address string `yaml:"address" json:"address,omitempty"`
	// Namespace and TaskQueue are where the run's workflows and
	// activities go; optimize worker polls the same task queue.
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
	TaskQueue string `yaml:"task_queue" json:"task_queue,omitempty"`
	// Storage is the bucket URL (gocloud.dev/blob: file://, s3://, gs://,
	// azblob://) where the run's shared files live, under a prefix named
	// after the run directory; empty keeps them in the run directory,
	// which workers must then see at the same path.
	Storage string `yaml:"storage" json:"storage,omitempty"`
}

// Defaults of the temporal engine's settings.
const (
	DefaultTemporalAddress   = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultTaskQueue         = "ctxopt"
)

// WithDefaults fills in what the section leaves out.
func (e EngineSpec) WithDefaults() EngineSpec {
	if e.Kind == "" {
		e.Kind = EngineInProcess
	}
	if e.Kind != EngineTemporal {
		return e
	}
	if e.Address == "" {
		e.Address = DefaultTemporalAddress
	}
	if e.Namespace == "" {
		e.Namespace = DefaultTemporalNamespace
	}
	if e.TaskQueue == "" {
		e.TaskQueue = DefaultTaskQueue
	}
	return e
}

// EngineProblem is one invalid setting of the engine section; Field is
// relative to it.
type EngineProblem struct{ Field, Message string }

// Problems checks the section (after WithDefaults).
func (e EngineSpec) Problems() []EngineProblem {
	var out []EngineProblem
	switch e.Kind {
	case "", EngineInProcess:
		for f, v := range map[string]string{"address": e.Address, "namespace": e.Namespace, "task_queue": e.TaskQueue, "storage": e.Storage} {
			if v != "" {
				out = append(out, EngineProblem{f, "is set but engine.kind is inprocess; set kind: temporal or remove it"})
			}
		}
	case EngineTemporal:
		if _, port, err := net.SplitHostPort(e.Address); err != nil || port == "" {
			out = append(out, EngineProblem{"address", fmt.Sprintf("%q is not host:port (e.g. %s)", e.Address, DefaultTemporalAddress)})
		}
		if msg := storageProblem(e.Storage); msg != "" {
			out = append(out, EngineProblem{"storage", msg})
		}
		if strings.TrimSpace(e.TaskQueue) == "" {
			out = append(out, EngineProblem{"task_queue", "is blank; name the task queue optimize worker polls"})
		}
	default:
		out = append(out, EngineProblem{"kind", fmt.Sprintf("unknown engine %q; want %s or %s", e.Kind, EngineInProcess, EngineTemporal)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// RolloutWork is a rollout stage's work as an engine sees it: enough for
// a process that has only the run directory to run any of its tasks.
type RolloutWork struct {
	// RunDir is the run directory; Stage the stage's name; Dir the
	// rollout's directory, where the runner writes its files.
	RunDir, Stage, Dir string
	Strategy           compress.Name
	// Guideline is the source of the optimized kind's guideline ("" for
	// strategies that take none).
	Guideline string
	Tasks     []env.Task
	// Fingerprint is the agent's: a worker that builds another refuses.
	Fingerprint rollout.Fingerprint
	// Store is the run store the workers share.
	Store *RunStore
	// Budget is the job's, Spent what the run spent before the stage: an
	// engine stops scheduling tasks once the budget is reached.
	Budget Budget
	Spent  Spend
}

// Engine runs a rollout stage's tasks. The in-process engine runs them
// with runner here; another runs them elsewhere, leaves their records
// where runner resumes them (PublishRemote) and returns what runner
// returns then.
type Engine interface {
	Rollout(ctx context.Context, runner *rollout.Runner, w RolloutWork) (*rollout.Result, error)
	Close() error
}

// inProcess is today's engine: the runner runs every task here.
type inProcess struct{}

func (inProcess) Rollout(ctx context.Context, r *rollout.Runner, w RolloutWork) (*rollout.Result, error) {
	return r.RunDir(ctx, w.Tasks, w.Dir)
}

func (inProcess) Close() error { return nil }

// EngineOpener opens an engine for a job's run.
type EngineOpener func(ctx context.Context, spec EngineSpec) (Engine, error)

var (
	enginesMu sync.Mutex
	engines   = map[string]EngineOpener{}
)

// RegisterEngine makes an engine kind available to jobs; packages that
// implement one register it from init.
func RegisterEngine(kind string, open EngineOpener) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[kind] = open
}

// OpenEngine opens the engine spec names.
func OpenEngine(ctx context.Context, spec EngineSpec) (Engine, error) {
	spec = spec.WithDefaults()
	if spec.Kind == EngineInProcess {
		return inProcess{}, nil
	}
	enginesMu.Lock()
	open := engines[spec.Kind]
	known := make([]string, 0, len(engines))
	for k := range engines {
		known = append(known, k)
	}
	enginesMu.Unlock()
	if open == nil {
		slices.Sort(known)
		return nil, invalid(fmt.Errorf("engine.kind %s is not built into this binary (have %s, %s)", spec.Kind, EngineInProcess, strings.Join(known, ", ")))
	}
	e, err := open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("engine %s at %s: %w", spec.Kind, spec.Address, err)
	}
	return e, nil
}

// openEngine opens the job's engine. One that runs work in other
// processes gets the run store, with the resolved job in it, and the meter
// keeps the run's spend in its ledger, where those processes record theirs.
func (p *runner) openEngine() (err error) {
	e, err := OpenEngine(p.ctx, p.job.Engine)
	if err != nil {
		return err
	}
	if _, local := e.(inProcess); local {
		p.engine = e
		return nil
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	url, err := RunStoreURL(p.job.Engine.Storage, p.dir)
	if err != nil {
		return invalid(err)
	}
	shared, err := OpenRunStore(p.ctx, url)
	if err != nil {
		return invalid(err)
	}
	job, err := os.ReadFile(filepath.Join(p.dir, JobFile))
	if err == nil {
		err = shared.Put(p.ctx, JobFile, job)
	}
	key := LedgerKey{Workflow: "driver " + p.started.UTC().Format(time.RFC3339Nano), Activity: "local", Attempt: 1}
	if err == nil {
		err = p.meter.UseLedger(OpenLedger(shared), key)
	}
	if err != nil {
		shared.Close()
		return err
	}
	p.engine, p.shared = e, shared
	return nil
}

// storageProblem checks a storage URL; "" when it is fine.
func storageProblem(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("%q is not a URL: %v", s, err)
	}
	switch u.Scheme {
	case "file", "s3", "gs", "azblob":
		return ""
	}
	return fmt.Sprintf("%q: want a bucket URL with scheme file, s3, gs or azblob (e.g. s3://bucket?region=eu-west-1)", s)
}

// OverrideEngine sets the engine's kind and address from command-line
// flags (empty: keep the job's) and checks the section again.
func (j *Job) OverrideEngine(kind, address string) error {
	if kind != "" {
		j.Engine.Kind = kind
	}
	if address != "" {
		j.Engine.Address = address
		if kind == "" && j.Engine.Kind == "" {
			j.Engine.Kind = EngineTemporal
		}
	}
	if j.Engine.Kind == EngineTemporal {
		j.Engine = j.Engine.WithDefaults()
	}
	var msgs []string
	for _, p := range j.Engine.Problems() {
		msgs = append(msgs, fmt.Sprintf("--engine/--temporal-address: engine.%s %s", p.Field, p.Message))
	}
	if len(msgs) > 0 {
		return invalid(errors.New(strings.Join(msgs, "\n")))
	}
	return nil
}
