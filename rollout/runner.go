package rollout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sourcegraph/conc/pool"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/internal/progress"
)

// File names inside a rollout directory.
const (
	TrajectoriesFile = "trajectories.jsonl"
	SummaryFile      = "summary.json"
	FingerprintFile  = "rollout.json"
	IndexFile        = "index.jsonl"
	partialSuffix    = ".partial"
)

// ErrOtherRollout marks a refusal to resume or reuse a directory that holds
// another rollout (another configuration or task set), or something that is
// not a rollout.
var ErrOtherRollout = errors.New("the directory holds another rollout")

// otherRollout is a refusal that wraps ErrOtherRollout with its own text.
type otherRollout struct{ msg string }

func (e *otherRollout) Error() string { return e.msg }
func (e *otherRollout) Unwrap() error { return ErrOtherRollout }

func refuse(format string, args ...any) error {
	return &otherRollout{fmt.Sprintf(format, args...)}
}

// Summary aggregates a rollout; it is summary.json.
type Summary struct {
	Strategy               string `json:"strategy"`
	Split                  string `json:"split,omitempty"`
	HistoryGuidelineID     string `json:"history_guideline_id,omitempty"`
	ObservationGuidelineID string `json:"observation_guideline_id,omitempty"`
	// Tasks counts every task and the success rate is over all of them: a
	// task an unavailable endpoint left unfinished (InfraFailures, shown
	// beside) counts as not succeeded. The means are over the Scored ones
	// (infra failures excluded).
	Tasks          int     `json:"tasks"`
	Scored         int     `json:"scored"`
	Successes      int     `json:"successes"`
	SuccessRate    float64 `json:"success_rate"`
	EM             float64 `json:"em"`
	F1             float64 `json:"f1"`
	StepsMean      float64 `json:"steps_mean"`
	PeakTokensMean float64 `json:"peak_tokens_mean"`
	DependencyMean float64 `json:"dependency_mean"`
	StepLimitHits  int     `json:"step_limit_hits"`
	// ContextTokensP95 is the 95th percentile of the agent's prompt size
	// over every step of every scored task (system prompt excluded).
	ContextTokensP95 int `json:"context_tokens_p95"`
	// StepsUntilOverflow is the mean step at which the prompt outgrew the
	// context window, over the tasks that overflowed; null when none did.
	StepsUntilOverflow *float64 `json:"steps_until_overflow"`
	Overflows          int      `json:"overflows"`

	AgentInputTokens            int     `json:"agent_input_tokens"`
	AgentOutputTokens           int     `json:"agent_output_tokens"`
	CompressorCalls             int     `json:"compressor_calls"`
	CompressorInputTokens       int     `json:"compressor_input_tokens"`
	CompressorOutputTokens      int     `json:"compressor_output_tokens"`
	CompressorOutputTokensMean  float64 `json:"compressor_output_tokens_mean"`
	CompressorOutputPerCallMean float64 `json:"compressor_output_tokens_per_call"`
	TotalTokens                 int     `json:"total_tokens"`
	CostUSD                     float64 `json:"cost_usd"`

	InfraFailures      int `json:"infra_failures"`
	LLMCalls           int `json:"llm_calls"`
	CacheHits          int `json:"cache_hits"`
	Retries            int `json:"retries"`
	MalformedToolCalls int `json:"malformed_tool_calls"`
	// Reasked* are agent replies thrown away and asked again (malformed tool
	// arguments) and their tokens, apart from the episodes' own figures.
	ReaskedCalls        int `json:"reasked_calls"`
	ReaskedInputTokens  int `json:"reasked_input_tokens"`
	ReaskedOutputTokens int `json:"reasked_output_tokens"`
	// ResumedTasks were read back from an interrupted run, not run again.
	ResumedTasks int `json:"resumed_tasks"`
	// EmbeddedModel is true when the embedded offline model played every
	// role; EmbeddedRoles names the roles it played.
	EmbeddedModel bool     `json:"embedded_model"`
	EmbeddedRoles []string `json:"embedded_roles,omitempty"`
}

// Summarize aggregates the outcomes of a rollout.
func Summarize(strategy string, trajs []Outcome) Summary {
	s := Summary{Strategy: strategy, Tasks: len(trajs)}
	var steps, peak, dep, em, f1, overflowAt float64
	var ctxSizes []int
	for _, t := range trajs {
		if s.Split == "" {
			s.Split = t.Split
		}
		if s.HistoryGuidelineID == "" {
			s.HistoryGuidelineID = t.HistoryGuidelineID
		}
		if s.ObservationGuidelineID == "" {
			s.ObservationGuidelineID = t.ObservationGuidelineID
		}
		m := t.Metrics
		s.LLMCalls += m.LLMCalls
		s.CacheHits += m.CacheHits
		s.Retries += m.Retries
		s.MalformedToolCalls += m.MalformedToolCalls
		s.ReaskedCalls += m.ReaskedCalls
		s.ReaskedInputTokens += m.ReaskedInputTokens
		s.ReaskedOutputTokens += m.ReaskedOutputTokens
		s.AgentInputTokens += m.AgentInputTokens
		s.AgentOutputTokens += m.AgentOutputTokens
		s.CompressorCalls += m.CompressorCalls
		s.CompressorInputTokens += m.CompressorInputTokens
		s.CompressorOutputTokens += m.CompressorOutputTokens
		s.CostUSD += m.CostUSD
		if t.Infra {
			s.InfraFailures++
			continue
		}
		s.Scored++
		if t.Success {
			s.Successes++
		}
		if t.StepLimit {
			s.StepLimitHits++
		}
		steps += float64(m.Steps)
		ctxSizes = append(ctxSizes, t.ContextSizes...)
		if t.ContextOverflow {
			s.Overflows++
			overflowAt += float64(t.OverflowStep)
		}
		peak += float64(m.PeakTokens)
		dep += m.Dependency
		em += t.Score.EM
		f1 += t.Score.F1
	}
	s.TotalTokens = s.AgentInputTokens + s.AgentOutputTokens + s.CompressorInputTokens + s.CompressorOutputTokens
	if s.Tasks > 0 {
		s.SuccessRate = float64(s.Successes) / float64(s.Tasks)
	}
	if s.Scored > 0 {
		n := float64(s.Scored)
		s.EM, s.F1 = em/n, f1/n
		s.StepsMean, s.PeakTokensMean, s.DependencyMean = steps/n, peak/n, dep/n
		s.CompressorOutputTokensMean = float64(s.CompressorOutputTokens) / float64(s.Tasks)
	}
	s.ContextTokensP95 = percentile(ctxSizes, 0.95)
	if s.Overflows > 0 {
		v := overflowAt / float64(s.Overflows)
		s.StepsUntilOverflow = &v
	}
	if s.CompressorCalls > 0 {
		s.CompressorOutputPerCallMean = float64(s.CompressorOutputTokens) / float64(s.CompressorCalls)
	}
	return s
}

// percentile is the nearest-rank q-quantile of xs, 0 when empty.
func percentile(xs []int, q float64) int {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// Runner runs tasks concurrently into a directory.
type Runner struct {
	Agent       *Agent
	Concurrency int
	// Label names the work in progress reports.
	Label string
	// Progress, when set, counts the tasks this runner runs instead of a
	// report of its own (several rollouts under one bar); the caller
	// finishes it.
	Progress *progress.Progress
	// EmbeddedModel and EmbeddedRoles are copied into the summary.
	EmbeddedModel bool
	EmbeddedRoles []string
	// Staged, when set, is called with the staging directory before any
	// task runs, so files written during the rollout (optimize rollout's
	// malformed replies) are published with it.
	Staged func(staging string) error
	// Replace starts over in a directory that holds another rollout
	// (ErrOtherRollout) instead of refusing it: for callers that own the
	// directory and mean to redo what changed (optimize eval --replace).
	Replace bool
}

// Result is a finished rollout: its summary and the outcome of every task,
// in task order. The records themselves stay on disk (Path); Load or
// Records reads them.
type Result struct {
	Summary  Summary
	Outcomes []Outcome
	// Reused is true when dir already held this finished rollout.
	Reused bool
	// Path is the trajectories.jsonl file.
	Path string
}

// Load reads every trajectory of the rollout, in task order.
func (r *Result) Load() ([]*Trajectory, error) { return ReadTrajectories(r.Path) }

// RunDir runs tasks and writes dir/trajectories.jsonl, dir/index.jsonl and
// dir/summary.json. Work goes to dir.partial first, one complete record
// line per finished task, so a killed run resumes where it stopped; dir
// appears only when complete. Records are streamed to disk as tasks finish:
// only their outcomes stay in memory. A dir that already holds a finished
// rollout of the same tasks is reused from its index.
func (r *Runner) RunDir(ctx context.Context, tasks []env.Task, dir string) (*Result, error) {
	dir = filepath.Clean(dir) // "out/" must not put the staging dir inside dir
	staging := dir + partialSuffix
	fp := r.Agent.Fingerprint()
	res, err := readFinished(dir, tasks, fp)
	if err == nil && res == nil {
		err = checkStaging(staging, fp)
	}
	if r.Replace && errors.Is(err, ErrOtherRollout) {
		slog.Info("replacing a rollout made with another configuration", "dir", dir, "reason", err)
		for _, d := range []string{dir, staging} {
			if err := os.RemoveAll(d); err != nil {
				return nil, fmt.Errorf("replace %s: %w", d, err)
			}
		}
		res, err = nil, nil
	}
	if err != nil || (res != nil && res.Summary.InfraFailures == 0) {
		return res, err
	}
	if res != nil {
		// Tasks an unavailable endpoint stopped are run again; the rest of
		// the finished rollout is kept.
		slog.Info("retrying the tasks that hit an unavailable endpoint", "dir", dir, "tasks", res.Summary.InfraFailures)
		if err := os.Rename(dir, staging); err != nil {
			return nil, fmt.Errorf("resume %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, fmt.Errorf("rollout dir: %w", err)
	}
	if err := checkFingerprint(staging, fp); err != nil {
		return nil, err
	}
	if r.Staged != nil {
		if err := r.Staged(staging); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(staging, TrajectoriesFile)
	done, err := recoverPartial(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	resumed := 0
	var todo []env.Task
	for _, t := range tasks {
		if o, ok := done[t.ID]; ok && !o.Infra {
			resumed++
			continue
		}
		todo = append(todo, t)
	}
	if resumed > 0 {
		slog.Info("resuming rollout", "dir", dir, "finished", resumed, "remaining", len(todo))
	}

	label := r.Label
	if label == "" {
		label = "rollout " + r.Agent.strategyName()
	}
	prog := r.Progress
	if prog == nil {
		prog = progress.New(label, len(todo))
		defer prog.Finish()
	}
	var mu sync.Mutex
	n := r.Concurrency
	if n <= 0 {
		n = 8
	}
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(n)
	for _, t := range todo {
		p.Go(func(ctx context.Context) error {
			tr, err := r.Agent.Run(ctx, t)
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			line, err := EncodeTrajectory(tr)
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			o := OutcomeOf(tr)
			tr = nil // only the outcome is kept
			line = append(line, '\n')
			mu.Lock()
			defer mu.Unlock()
			// One write per line: a crash leaves at most one partial line,
			// which recoverPartial cuts off.
			if _, err := f.Write(line); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			o.Offset, o.Length = end, int64(len(line))
			end += int64(len(line))
			done[t.ID] = o
			prog.Add(1)
			return nil
		})
	}
	err = p.Wait()
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}

	ordered := make([]Outcome, 0, len(tasks))
	for _, t := range tasks {
		ordered = append(ordered, done[t.ID])
	}
	sum := Summarize(r.Agent.strategyName(), ordered)
	sum.ResumedTasks = resumed
	sum.EmbeddedModel, sum.EmbeddedRoles = r.EmbeddedModel, r.EmbeddedRoles
	if err := writeFinal(staging, dir, ordered, sum); err != nil {
		return nil, err
	}
	return &Result{Summary: sum, Outcomes: ordered, Path: filepath.Join(dir, TrajectoriesFile)}, nil
}

// writeFinal puts the records in task order by copying their bytes (no
// record is decoded or encoded again), writes the index and the summary,
// and moves staging to dir.
func writeFinal(staging, dir string, outs []Outcome, sum Summary) error {
	path := filepath.Join(staging, TrajectoriesFile)
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer src.Close()
	var off int64
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		for i := range outs {
			o := &outs[i]
			if _, err := io.Copy(bw, io.NewSectionReader(src, o.Offset, o.Length)); err != nil {
				return fmt.Errorf("copy record %s: %w", o.TaskID, err)
			}
			o.Offset = off
			off += o.Length
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	return publish(staging, dir, outs, sum)
}

// publish writes the index and the summary into staging and moves it to
// dir, replacing what was there.
func publish(staging, dir string, outs []Outcome, sum Summary) error {
	if err := writeIndex(filepath.Join(staging, IndexFile), outs); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(staging, SummaryFile), sum); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("finish %s: %w", dir, err)
	}
	return nil
}

// WriteJSON writes v as indented JSON, atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// checkFingerprint records fp in dir, or checks that dir was started with
// the same configuration.
func checkFingerprint(dir string, fp Fingerprint) error {
	path := filepath.Join(dir, FingerprintFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return WriteJSON(path, fp)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var old Fingerprint
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if old != fp {
		want, _ := json.Marshal(fp)
		return refuse("%s holds a rollout with another configuration (%s, now %s); remove it or choose another --out", dir, b, want)
	}
	return nil
}

// checkStaging checks that an interrupted rollout in staging, if any, was
// started with fp; it records nothing.
func checkStaging(staging string, fp Fingerprint) error {
	if _, err := os.Stat(filepath.Join(staging, FingerprintFile)); err != nil {
		return nil // none, or checkFingerprint reports it when it records fp
	}
	return checkFingerprint(staging, fp)
}

// readFinished returns the rollout in dir when it is finished and covers
// exactly tasks with the same configuration, nil when dir does not exist.
// It reads the index, not the records.
func readFinished(dir string, tasks []env.Task, fp Fingerprint) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if errors.Is(err, os.ErrNotExist) {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			return nil, refuse("output directory %s exists and is not a finished rollout; remove it or choose another --out", dir)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	if err := checkFingerprint(dir, fp); err != nil {
		return nil, err
	}
	var sum Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SummaryFile), err)
	}
	outs, err := ReadIndex(dir)
	if err != nil {
		return nil, err
	}
	if len(outs) != len(tasks) {
		return nil, refuse("%s holds %d trajectories for %d tasks; remove it to run again", dir, len(outs), len(tasks))
	}
	for i, t := range tasks {
		if outs[i].TaskID != t.ID {
			return nil, refuse("%s holds another task set (task %d is %s, want %s); remove it to run again", dir, i+1, outs[i].TaskID, t.ID)
		}
	}
	return &Result{Summary: sum, Outcomes: outs, Reused: true, Path: filepath.Join(dir, TrajectoriesFile)}, nil
}

// recoverPartial returns the outcomes of the records an interrupted run
// wrote to path and readies the file for appending (jsonl.Mend): a torn
// last line is cut off, a last record without its newline is ended. A
// damaged line is an error and the file is left as it was: cutting the
// file there would drop the records after it.
func recoverPartial(path string) (map[string]Outcome, error) {
	done := map[string]Outcome{}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var last string
	err = readOutcomes(f, path, func(o Outcome) {
		done[o.TaskID] = o
		last = o.TaskID
	})
	if err != nil {
		return nil, err
	}
	line, cut, err := jsonl.Mend(f, RecordLimits)
	if err != nil {
		return nil, err
	}
	if line > 0 && !cut {
		// writeFinal copies the record with the newline Mend added.
		o := done[last]
		o.Length++
		done[last] = o
	}
	return done, nil
}
