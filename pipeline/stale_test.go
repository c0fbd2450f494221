package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rolloutStages are the stages of a one-round run that roll the agent out
// (or choose by rolling out): each depends on the environment's settings.
var rolloutStages = []string{"baseline", "fifo", "prompting", "r1-ut", "r1-co", "eval"}

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
	orig := rolloutManifests(t, first)
	all := rolloutStages
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, j *Job)
		// rerun must not keep the first run's inputs; reuse must be taken
		// as they were (from the store, or left as they are in place).
		rerun, reuse []string
	}{
		{"nothing", func(*testing.T, *Job) {}, nil, all},
		{"embedded latency", func(_ *testing.T, j *Job) { j.Embedded.Latency = time.Millisecond }, nil, all},
		{"search_budget", func(_ *testing.T, j *Job) { j.Env.SearchBudget = 3 }, all, nil},
		{"top_k", func(_ *testing.T, j *Job) { j.Env.TopK = 2 }, all, nil},
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
		{"optimizer temperature", func(_ *testing.T, j *Job) { j.Roles.Optimizer.Temperature = 0.5 }, []string{"r1-ut", "r1-co"}, []string{"baseline", "fifo", "prompting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same directory starts as the first run left it (taken
			// from the stage store), before the change.
			same := t.TempDir()
			if _, err := Run(context.Background(), base, same, RunOptions{}); err != nil {
				t.Fatal(err)
			}
			before := rolloutManifests(t, same)
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
				ms := rolloutManifests(t, dir)
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
				if len(tc.reuse) == len(all) && (sum.SpentThisRun.Calls != 0 || sum.SpentThisRun.CacheHits != 0) {
					t.Errorf("%s: nothing changed, yet the run spent %+v", where, sum.SpentThisRun)
				}
			}
		})
	}
}

func rolloutManifests(t *testing.T, dir string) map[string]Manifest {
	t.Helper()
	ms := map[string]Manifest{}
	for _, name := range rolloutStages {
		ms[name] = readManifest(t, dir, name)
	}
	return ms
}
