package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

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

// Engine runs a rollout stage's tasks. In process the runner runs them
// here; in a run on another engine (Advance) workers run them and the
// engine publishes their records where the runner resumes them, or asks
// for the tasks without one.
type Engine interface {
	Rollout(ctx context.Context, runner *rollout.Runner, w RolloutWork) (*rollout.Result, error)
}

// inProcess is today's engine: the runner runs every task here.
type inProcess struct{}

func (inProcess) Rollout(ctx context.Context, r *rollout.Runner, w RolloutWork) (*rollout.Result, error) {
	return r.RunDir(ctx, w.Tasks, w.Dir)
}

// Driver runs a whole run on another engine: it starts the run's
// workflow, or attaches to the one already running it, shows its progress
// and waits for it. The stages run elsewhere, reading and writing the run
// store (Advance, RunTask).
type Driver interface {
	Drive(ctx context.Context, run RemoteRun) (Driven, error)
	Close() error
}

// RemoteRun names a run for a driver. ID is derived from the run store's
// URL and the resolved job (RunID), so a driver started again, on any
// machine that sees the same store, names the same run.
type RemoteRun struct {
	ID, Store, Name string
}

// Driven is how a driven run ended.
type Driven struct {
	// Attached is set when the run was already running (a driver before
	// this one started it).
	Attached bool
	// Budget, when set, is why the run stopped at its budget.
	Budget string
}

// DriverOpener opens the driver of an engine kind.
type DriverOpener func(ctx context.Context, spec EngineSpec) (Driver, error)

var (
	enginesMu sync.Mutex
	engines   = map[string]DriverOpener{}
)

// RegisterEngine makes an engine kind available to jobs; packages that
// implement one register it from init.
func RegisterEngine(kind string, open DriverOpener) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[kind] = open
}

// openDriver opens the driver of the engine spec names.
func openDriver(ctx context.Context, spec EngineSpec) (Driver, error) {
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
	d, err := open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("engine %s at %s: %w", spec.Kind, spec.Address, err)
	}
	return d, nil
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
