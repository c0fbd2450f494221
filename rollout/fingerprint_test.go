package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/env"
)

// configuredEnv is fakeEnv with settings (env.Configured).
type configuredEnv struct {
	fakeEnv
	settings string
}

func (e configuredEnv) Settings() string { return e.settings }

// TestRunDirFingerprint: a rollout directory, finished or cut off, is
// reused or resumed only by a rollout of the same environment settings
// and models; under other settings it is refused, never served, or with
// Replace run again from scratch.
func TestRunDirFingerprint(t *testing.T) {
	tasks := []env.Task{testTask(), testTask()}
	for i := range tasks {
		tasks[i].ID = fmt.Sprintf("t%d", i)
	}
	agent := func(settings, models string, m *fakeAgent) *Runner {
		return &Runner{Agent: &Agent{Env: configuredEnv{fakeEnv{obsWords: 3}, settings}, Model: m, Tokenizer: testTokenizer(t), Models: models}, Concurrency: 2}
	}
	for _, tc := range []struct {
		name             string
		settings, models string
		reuse            bool
	}{
		{"nothing changed", "search_budget=0", "m1", true},
		{"env settings", "search_budget=4", "m1", false},
		{"models", "search_budget=0", "m2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, run := range []struct{ cut, replace bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				cut := run.cut
				dir := filepath.Join(t.TempDir(), "out")
				first := &fakeAgent{need: 1}
				r := agent("search_budget=0", "m1", first)
				if cut {
					// A run stopped before any task finished leaves only
					// the staging directory and its fingerprint.
					if err := checkFingerprint(mkdir(t, dir+partialSuffix), r.Agent.Fingerprint()); err != nil {
						t.Fatal(err)
					}
				} else if _, err := r.RunDir(context.Background(), tasks, dir); err != nil {
					t.Fatal(err)
				}
				second := &fakeAgent{need: 1}
				again := agent(tc.settings, tc.models, second)
				again.Replace = run.replace
				res, err := again.RunDir(context.Background(), tasks, dir)
				switch {
				case !tc.reuse && run.replace:
					if err != nil || res.Reused || res.Summary.ResumedTasks != 0 || second.calls.Load() == 0 {
						t.Fatalf("cut off %v, replace: err %v, result %+v, %d calls; want a new rollout", cut, err, res, second.calls.Load())
					}
					if got := readFingerprint(t, dir); got != again.Agent.Fingerprint() {
						t.Fatalf("replaced rollout records %+v", got)
					}
				case !tc.reuse:
					if err == nil || !strings.Contains(err.Error(), "another configuration") {
						t.Fatalf("cut off %v: want a refusal, got %v (reused %v)", cut, err, res != nil && res.Reused)
					}
				case err != nil:
					t.Fatalf("cut off %v: %v", cut, err)
				case !cut && (!res.Reused || second.calls.Load() != 0):
					t.Fatalf("finished rollout not reused: reused %v, %d calls", res.Reused, second.calls.Load())
				case cut && res.Summary.Tasks != len(tasks):
					t.Fatalf("cut-off rollout not resumed: %+v", res.Summary)
				}
			}
		})
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFingerprint(t *testing.T, dir string) Fingerprint {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FingerprintFile))
	if err != nil {
		t.Fatal(err)
	}
	var fp Fingerprint
	if err := json.Unmarshal(b, &fp); err != nil {
		t.Fatal(err)
	}
	return fp
}
