package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestStageStore runs a stage in one run directory and then in another:
// the second takes it from the store (with the files the stage wrote in
// the run directory) without running it, and says so in its manifest.
// Other inputs, or no store, run it.
func TestStageStore(t *testing.T) {
	store := &StageStore{dir: t.TempDir()}
	meter, err := NewMeter(Budget{}, "")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	spec := func(inputs string, st *StageStore) stageSpec[stageOut] {
		s := counting(t, "s", inputs, meter, &runs, nil)
		inner := s.run
		s.run = func(dir string) (stageOut, map[string]float64, error) {
			// A file the stage owns outside its directory.
			out := filepath.Join(filepath.Dir(filepath.Dir(dir)), "datasets")
			if err := os.MkdirAll(out, 0o755); err != nil {
				return stageOut{}, nil, err
			}
			if err := os.WriteFile(filepath.Join(out, "rows.jsonl"), []byte("row\n"), 0o644); err != nil {
				return stageOut{}, nil, err
			}
			return inner(dir)
		}
		s.store, s.owned = st, []string{"datasets"}
		return s
	}
	first := t.TempDir()
	if v, err := stage(first, meter, spec("a", store)); err != nil || v.N != 1 {
		t.Fatalf("first run: %+v, %v", v, err)
	}
	tests := []struct {
		name       string
		inputs     string
		store      *StageStore
		wantRuns   int
		wantReused bool
	}{
		{name: "same inputs in a new run directory are reused", inputs: "a", store: store, wantRuns: 1, wantReused: true},
		{name: "other inputs run", inputs: "b", store: store, wantRuns: 2},
		{name: "without a store the stage runs", inputs: "a", store: nil, wantRuns: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v, err := stage(dir, meter, spec(tc.inputs, tc.store))
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, dir, "s")
			if runs != tc.wantRuns || (m.ReusedFrom != "") != tc.wantReused || m.Status != statusDone {
				t.Fatalf("runs %d (want %d), manifest %+v", runs, tc.wantRuns, m)
			}
			if tc.wantReused {
				if v.N != 1 || m.Counts["items"] != 3 {
					t.Fatalf("reused result %+v, counts %v", v, m.Counts)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "datasets", "rows.jsonl")); err != nil || string(b) != "row\n" {
					t.Fatalf("the stage's output outside its directory was not restored: %q %v", b, err)
				}
			}
		})
	}
}

// TestRunReusesStages runs a small job, then the same job into a new
// directory (every stage reused, no LLM call), with --no-reuse (stages run),
// and with only a CO setting changed (UT and the rollouts before it
// reused, CO run again).
func TestRunReusesStages(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	job := smallJob(t, 4, "")
	job.Optimize.Candidates = 2
	if _, err := Run(context.Background(), job, t.TempDir(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	second := t.TempDir()
	sum, err := Run(context.Background(), job, second, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.SpentThisRun.Calls != 0 || sum.SpentThisRun.CacheHits != 0 {
		t.Fatalf("second run spent %+v, want nothing", sum.SpentThisRun)
	}
	stages, err := filepath.Glob(filepath.Join(second, "stages", "*", ManifestFile))
	if err != nil || len(stages) < 8 {
		t.Fatalf("%d stages, %v", len(stages), err)
	}
	for _, p := range stages {
		name := filepath.Base(filepath.Dir(p))
		if m := readManifest(t, second, name); m.ReusedFrom == "" {
			t.Errorf("stage %s was not reused", name)
		}
	}

	fresh, err := Run(context.Background(), job, t.TempDir(), RunOptions{NoReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.SpentThisRun.CacheHits == 0 {
		t.Fatalf("--no-reuse replayed nothing: %+v", fresh.SpentThisRun)
	}

	job.Optimize.Lambda = 0.9
	co := t.TempDir()
	if _, err := Run(context.Background(), job, co, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"baseline", "fifo", "prompting", "r1-ut"} {
		if m := readManifest(t, co, name); m.ReusedFrom == "" {
			t.Errorf("changing a CO setting re-ran %s", name)
		}
	}
	if m := readManifest(t, co, "r1-co"); m.ReusedFrom != "" {
		t.Error("changing a CO setting did not re-run CO")
	}
}
