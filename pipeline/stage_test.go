package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
)

type stageOut struct {
	N    int    `json:"n"`
	Note string `json:"note"`
}

// counting returns a stage spec that records how often it ran and spends
// one LLM call, of $0.50, per run.
func counting(t *testing.T, name string, inputs any, meter *Meter, runs *int, fail error) stageSpec[stageOut] {
	c := priced(t, 50000, 0)
	return stageSpec[stageOut]{name: name, inputs: inputs, run: func(dir string) (stageOut, map[string]float64, error) {
		*runs++
		u := llm.Usage{PromptTokens: 10, CompletionTokens: 5}
		meter.add(c, llm.Response{Usage: u}, u)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("work%d.txt", *runs)), nil, 0o644); err != nil {
			return stageOut{}, nil, err
		}
		if fail != nil {
			return stageOut{}, nil, fail
		}
		return stageOut{N: *runs, Note: "run"}, map[string]float64{"items": 3}, nil
	}}
}

func readManifest(t *testing.T, dir, name string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "stages", name, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStage(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		// second is the spec of the second call after a first successful
		// (or failing, when firstFails) call with inputs "a".
		firstFails bool
		inputs2    string
		breakSaved bool // corrupt result.json between the calls
		wantRuns   int
		wantN      int
		wantWork   bool // the first run's files survive the second call
	}{
		{name: "unchanged inputs return the saved result", inputs2: "a", wantRuns: 1, wantN: 1, wantWork: true},
		{name: "changed inputs start over in a clean dir", inputs2: "b", wantRuns: 2, wantN: 2},
		{name: "a cut-off stage resumes in its dir", firstFails: true, inputs2: "a", wantRuns: 2, wantN: 2, wantWork: true},
		{name: "an unreadable result runs the stage again", inputs2: "a", breakSaved: true, wantRuns: 2, wantN: 2, wantWork: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			meter, err := NewMeter(Budget{}, "")
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			var fail error
			if tc.firstFails {
				fail = boom
			}
			first, err := stage(dir, meter, counting(t, "s", "a", meter, &runs, fail))
			if tc.firstFails {
				if !errors.Is(err, boom) {
					t.Fatalf("first call: err %v, want boom", err)
				}
				if m := readManifest(t, dir, "s"); m.Status != statusRunning || m.LLMCalls != 1 {
					t.Fatalf("failed stage manifest: %+v", m)
				}
			} else {
				if err != nil || first != (stageOut{N: 1, Note: "run"}) {
					t.Fatalf("first call: %+v, %v", first, err)
				}
				m := readManifest(t, dir, "s")
				if m.Status != statusDone || m.Counts["items"] != 3 || m.LLMCalls != 1 || m.CostUSD != 0.5 {
					t.Fatalf("manifest: %+v", m)
				}
			}
			if tc.breakSaved {
				if err := os.WriteFile(filepath.Join(dir, "stages", "s", ResultFile), []byte("{"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := stage(dir, meter, counting(t, "s", tc.inputs2, meter, &runs, nil))
			if err != nil {
				t.Fatal(err)
			}
			if runs != tc.wantRuns || got.N != tc.wantN || got.Note != "run" {
				t.Fatalf("second call: runs %d, result %+v; want runs %d, n %d", runs, got, tc.wantRuns, tc.wantN)
			}
			_, werr := os.Stat(filepath.Join(dir, "stages", "s", "work1.txt"))
			if tc.wantWork != (werr == nil) {
				t.Fatalf("work file kept %v, want %v", werr == nil, tc.wantWork)
			}
		})
	}
}

// A stage with its own loader saves nothing itself and reads its result
// back through the loader when skipped.
func TestStageLoader(t *testing.T) {
	dir := t.TempDir()
	meter, err := NewMeter(Budget{}, "")
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	spec := stageSpec[string]{name: "own", inputs: 1,
		run: func(dir string) (string, map[string]float64, error) {
			return "fresh", nil, os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from disk"), 0o644)
		},
		load: func(dir string) (string, error) {
			loads++
			b, err := os.ReadFile(filepath.Join(dir, "data.txt"))
			return string(b), err
		},
	}
	if v, err := stage(dir, meter, spec); err != nil || v != "fresh" || loads != 0 {
		t.Fatalf("first: %q %v loads %d", v, err, loads)
	}
	if _, err := os.Stat(filepath.Join(dir, "stages", "own", ResultFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stage with a loader wrote %s: %v", ResultFile, err)
	}
	if v, err := stage(dir, meter, spec); err != nil || v != "from disk" || loads != 1 {
		t.Fatalf("skipped: %q %v loads %d", v, err, loads)
	}
}

// The inputs hash changes with the inputs, so changed and unchanged
// inputs are told apart, and unencodable inputs are an error, not a skip.
func TestStageInputs(t *testing.T) {
	dir := t.TempDir()
	meter, _ := NewMeter(Budget{}, "")
	runs := 0
	if _, err := stage(dir, meter, counting(t, "s", map[string]any{"k": 1}, meter, &runs, nil)); err != nil {
		t.Fatal(err)
	}
	h1 := readManifest(t, dir, "s").InputsHash
	if _, err := stage(dir, meter, counting(t, "s", map[string]any{"k": 2}, meter, &runs, nil)); err != nil {
		t.Fatal(err)
	}
	if h2 := readManifest(t, dir, "s").InputsHash; h1 == h2 || runs != 2 {
		t.Fatalf("hash %s -> %s after %d runs", h1, h2, runs)
	}
	if _, err := stage(dir, meter, counting(t, "s", func() {}, meter, &runs, nil)); err == nil || runs != 2 {
		t.Fatalf("unencodable inputs: err %v, runs %d", err, runs)
	}
}

// TestStageInputsChangedClearsOwned: a stage whose inputs changed starts
// over without what it wrote outside its directory under the old inputs
// (the evaluation's rollouts), so it neither reuses nor trips over them;
// a stage cut off with the same inputs resumes with them.
func TestStageInputsChangedClearsOwned(t *testing.T) {
	dir := t.TempDir()
	meter, _ := NewMeter(Budget{}, "")
	old := filepath.Join(dir, "eval", "old.txt")
	for _, tc := range []struct {
		name, inputs string
		fail         bool // the stage is cut off
		wantOld      bool // old.txt is there when the stage runs
	}{
		{"first run, cut off", "a", true, false},
		{"same inputs resume", "a", false, true},
		{"changed inputs", "b", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stage(dir, meter, stageSpec[stageOut]{name: "eval", inputs: tc.inputs, owned: []string{"eval"}, run: func(string) (stageOut, map[string]float64, error) {
				if _, err := os.Stat(old); (err == nil) != tc.wantOld {
					t.Errorf("%s present: %v, want %v", old, err == nil, tc.wantOld)
				}
				if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
					return stageOut{}, nil, err
				}
				if err := os.WriteFile(old, nil, 0o644); err != nil {
					return stageOut{}, nil, err
				}
				if tc.fail {
					return stageOut{}, nil, errors.New("cut off")
				}
				return stageOut{N: 1}, nil, nil
			}})
			if (err != nil) != tc.fail {
				t.Fatalf("err %v", err)
			}
		})
	}
}
