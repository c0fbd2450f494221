package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/rollout"
)

// rolloutStages are the stages of a one-round run that roll the agent out
// (or choose by rolling out): each depends on the environment's settings.
var rolloutStages = []string{"baseline", "fifo", "prompting", "r1-ut", "r1-co", "eval"}

// readStages are rolloutStages and the distill stage, which reads the
// trajectories of the selected guideline's train rollout.
var readStages = append(slices.Clone(rolloutStages), "distill")

// TestRunNeverServesStale: changing one input that changes what a rollout
// does, and nothing else, re-runs every stage that rolls out, both in the
// same run directory and in a new one sharing the stage store; changing
// nothing, or only what changes no result, reuses every stage with no
// upstream call; changing a role no rollout calls re-runs only the steps
// that call it.
func TestRunNeverServesStale(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	data := t.TempDir()
	for _, name := range []string{"corpus.jsonl", "train.jsonl", "test.jsonl", "VERSION"} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(mustRead(t, filepath.Join("../datasets/qa", name))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := smallJob(t, 2, "")
	base.Env.Dataset = data
	base.Optimize.Candidates = 2
	first := t.TempDir()
	if _, err := Run(context.Background(), base, first, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	orig := stageManifests(t, first)
	all := readStages
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, j *Job)
		// rerun must not keep the first run's inputs; reuse must be taken
		// as they were (from the store, or left as they are in place).
		rerun, reuse []string
	}{
		{"nothing", func(*testing.T, *Job) {}, nil, all},
		{"embedded latency", func(_ *testing.T, j *Job) { j.Embedded.Latency = time.Millisecond }, nil, all},
		{"concurrency", func(_ *testing.T, j *Job) { j.Rollout.Concurrency = 2 }, nil, all},
		{"search_budget", func(_ *testing.T, j *Job) { j.Env.SearchBudget = 3 }, all, nil},
		{"top_k", func(_ *testing.T, j *Job) { j.Env.TopK = 2 }, all, nil},
		// The limits and the strategy's parameters change what the steps'
		// candidates do even where the parent's outcomes stay the same.
		{"step_limit", func(_ *testing.T, j *Job) { j.Env.StepLimit = 29 }, all, nil},
		{"context_window", func(_ *testing.T, j *Job) { j.Rollout.ContextWindow = 1 << 20 }, all, nil},
		{"history threshold", func(_ *testing.T, j *Job) { j.Compression.History.Threshold++ }, []string{"prompting", "r1-ut", "r1-co", "eval", "distill"}, []string{"baseline", "fifo"}},
		{"corpus edited in place, same VERSION", func(t *testing.T, _ *Job) {
			path := filepath.Join(data, "corpus.jsonl")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.WriteFile(path, b, 0o644) })
			if err := os.WriteFile(path, bytes.Replace(b, []byte(" the "), []byte(" that "), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}, all, nil},
		// Rollouts call no optimizer: a new one re-runs the steps only.
		// Whether distill re-runs depends on whether the new optimizer
		// changes the selected guideline, so it is left out.
		{"optimizer temperature", func(_ *testing.T, j *Job) { j.Roles.Optimizer.Temperature = 0.5 }, []string{"r1-ut", "r1-co"}, []string{"baseline", "fifo", "prompting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same directory starts as the first run left it (taken
			// from the stage store), before the change.
			same := t.TempDir()
			if _, err := Run(context.Background(), base, same, RunOptions{}); err != nil {
				t.Fatal(err)
			}
			before := stageManifests(t, same)
			job := *base
			tc.edit(t, &job)
			for _, dir := range []string{t.TempDir(), same} {
				sum, err := Run(context.Background(), &job, dir, RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				where := "a new directory"
				if dir == same {
					where = "the same directory"
				}
				ms := stageManifests(t, dir)
				for _, name := range tc.rerun {
					if m := ms[name]; m.InputsHash == orig[name].InputsHash {
						t.Errorf("%s: stage %s kept the inputs of the first run (reused from %q)", where, name, m.ReusedFrom)
					}
				}
				for _, name := range tc.reuse {
					m := ms[name]
					if dir == same && !m.Finished.Equal(before[name].Finished) {
						t.Errorf("%s: unchanged stage %s ran again", where, name)
					}
					if dir != same && m.ReusedFrom == "" {
						t.Errorf("%s: unchanged stage %s was not reused", where, name)
					}
				}
				// A dataset taken from the store was written by another run.
				if want := filepath.Join(dir, "datasets"); sum.Dataset == nil || sum.Dataset.Dir != want {
					t.Errorf("%s: summary's dataset %+v, want it in %s", where, sum.Dataset, want)
				}
				if len(tc.reuse) == len(all) && (sum.SpentThisRun.Calls != 0 || sum.SpentThisRun.CacheHits != 0) {
					t.Errorf("%s: nothing changed, yet the run spent %+v", where, sum.SpentThisRun)
				}
			}
		})
	}
	// The dataset's manifest and card name the job: another job with the
	// same settings takes every rollout and step from the store, not them.
	t.Run("job name", func(t *testing.T) {
		job := *base
		job.Name = "other"
		dir := t.TempDir()
		if _, err := Run(context.Background(), &job, dir, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		ms := stageManifests(t, dir)
		for _, name := range rolloutStages {
			if ms[name].ReusedFrom == "" {
				t.Errorf("stage %s was not reused", name)
			}
		}
		if ms["distill"].InputsHash == orig["distill"].InputsHash {
			t.Errorf("stage distill kept the inputs of the first run (reused from %q)", ms["distill"].ReusedFrom)
		}
		if b := mustRead(t, filepath.Join(dir, "datasets", "manifest.json")); !strings.Contains(b, `"job": "other"`) {
			t.Errorf("the dataset's manifest does not name the job: %s", b)
		}
	})
}

func stageManifests(t *testing.T, dir string) map[string]Manifest {
	t.Helper()
	ms := map[string]Manifest{}
	for _, name := range readStages {
		ms[name] = readManifest(t, dir, name)
	}
	return ms
}

// TestStepInputsNameSources: a step's inputs name the imported trajectories
// by content, so importing again into the same directory re-runs the steps,
// and a directory without them is an error naming the field.
func TestStepInputsNameSources(t *testing.T) {
	src := t.TempDir()
	f := newStepFixture(t, 2, func(j *Job) { j.Sources = []string{src} })
	b, err := os.ReadFile(f.base.Path)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(src, rollout.TrajectoriesFile)
	inputs := func(content []byte) ([]byte, error) {
		t.Helper()
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := f.p.stepInputs(contrastive.StepUT, f.seed, f.base, f.cur)
		if err != nil {
			return nil, err
		}
		return json.Marshal(in)
	}
	first, err := inputs(b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := inputs(b); !bytes.Equal(first, again) {
		t.Errorf("the same sources named twice differently:\n%s\n%s", first, again)
	}
	one, _, _ := bytes.Cut(b, []byte("\n"))
	if fewer, _ := inputs(append(one, '\n')); bytes.Equal(first, fewer) {
		t.Error("sources imported again with one trajectory left: the step's inputs did not change")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.stepInputs(contrastive.StepUT, f.seed, f.base, f.cur); err == nil || !strings.Contains(err.Error(), "sources[0]") {
		t.Errorf("sources without trajectories: err %v, want one naming sources[0]", err)
	}
}
