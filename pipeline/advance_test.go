package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A run advanced by workers, as the Temporal engine drives it (advance,
// run the tasks it waits for on either of two workers, advance again),
// selects the same guideline and exports the same datasets as the run in
// process, and makes exactly its calls: a step or an ACE round that waits
// for its candidates' rollouts keeps what it asked (no call is made
// twice).
func TestAdvanceMatchesInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, tc := range []struct {
		name string
		job  func(t *testing.T) *Job
	}{
		{"acon", func(t *testing.T) *Job { return smallJob(t, 3, "") }},
		{"ace", func(t *testing.T) *Job { return aceJob(t, 4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := tc.job(t)
			job.Cache.Disabled = true // every call counted
			matchAdvanced(t, job)
		})
	}
}

// Workers use the job's cache: the first the job's file, the next (held
// by another process, here another worker) the first free slot beside it.
func TestWorkerCacheSlots(t *testing.T) {
	ctx := context.Background()
	job := smallJob(t, 2, "")
	runDir := t.TempDir()
	url := storeJob(t, job, runDir)
	var paths []string
	for range 3 {
		w, err := OpenWorkerRun(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		paths = append(paths, w.p.rt.Job.Cache.Path)
	}
	path := CachePath(job.Cache.Path)
	if want := []string{path, path + ".worker2", path + ".worker3"}; !slices.Equal(paths, want) {
		t.Fatalf("worker caches %v, want %v", paths, want)
	}
}

func matchAdvanced(t *testing.T, job *Job) {
	ctx := context.Background()
	local := t.TempDir()
	want, err := Run(ctx, job, local, RunOptions{NoReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	url := storeJob(t, job, runDir)
	var workers [2]*WorkerRun
	for i := range workers {
		if workers[i], err = OpenWorkerRun(ctx, url); err != nil {
			t.Fatal(err)
		}
		defer workers[i].Close()
	}
	advances := advanceAll(t, workers)
	var got RunSummary
	b, err := os.ReadFile(filepath.Join(runDir, SummaryFile))
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.SelectedGuideline == "" || got.SelectedGuideline != want.SelectedGuideline {
		t.Fatalf("selected %q after %d advances, in process %q", got.SelectedGuideline, advances, want.SelectedGuideline)
	}
	spent, err := workers[0].ledger.Sum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if spent.Calls != want.Spent.Calls {
		t.Fatalf("the workers made %d calls in %d advances, the run in process %d", spent.Calls, advances, want.Spent.Calls)
	}
	if job.Distill.Enabled {
		sameFiles(t, filepath.Join(local, DatasetsDir), filepath.Join(runDir, DatasetsDir), "")
	}
	// Every guideline's source (their records say when they were made).
	sameFiles(t, filepath.Join(local, GuidelinesDir), filepath.Join(runDir, GuidelinesDir), ".tmpl")
}

// An advance that reaches the budget says so instead of failing, and
// keeps what it finished in the store; the ledger has every call the
// workers made.
func TestAdvanceStopsAtTheBudget(t *testing.T) {
	ctx := context.Background()
	job := smallJob(t, 4, "")
	job.Cache.Disabled = true
	job.Budget.LLMCalls = 5
	runDir := t.TempDir()
	url := storeJob(t, job, runDir)
	w, err := OpenWorkerRun(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The first advance makes no call: it waits for the three baselines,
	// which the workers run whatever the budget (the workflow would stop
	// them; here they run to the end, past it).
	adv, err := w.Advance(ctx, filepath.Base(runDir), LedgerKey{Workflow: "test", Activity: "advance-1", Attempt: 1})
	if err != nil || len(adv.Needs) != 3 || adv.Budget != "" {
		t.Fatalf("first advance: %+v (%v); want the three baselines", adv, err)
	}
	for _, r := range adv.Needs {
		for _, id := range r.TaskIDs {
			tw := r.Task
			tw.TaskID = id
			if _, err := w.RunTask(ctx, tw, LedgerKey{Workflow: r.Task.Stage, Activity: id, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	adv, err = w.Advance(ctx, filepath.Base(runDir), LedgerKey{Workflow: "test", Activity: "advance-2", Attempt: 1})
	if err != nil || len(adv.Needs) != 0 || !strings.Contains(adv.Budget, "budget.llm_calls 5") {
		t.Fatalf("second advance: %+v (%v); want a stop at the budget", adv, err)
	}
	// The baselines it published are in the store, done.
	var m Manifest
	b, err := os.ReadFile(filepath.Join(runDir, "stages", "baseline", ManifestFile))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil || m.Status != statusDone || m.LLMCalls == 0 {
		t.Fatalf("baseline manifest %+v (%v); want done, with the workers' calls", m, err)
	}
}

// advanceAll advances the run until it is done, running the tasks it
// waits for on the workers in turn, and returns how many advances it took.
// storeJob writes job's resolved form into runDir, as the driver puts it
// in the run store, and returns the store's URL.
func storeJob(t *testing.T, job *Job, runDir string) string {
	t.Helper()
	url, err := RunStoreURL("", runDir)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := job.Resolved()
	if err == nil {
		err = os.WriteFile(filepath.Join(runDir, JobFile), resolved, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return url
}

func advanceAll(t *testing.T, workers [2]*WorkerRun) int {
	t.Helper()
	ctx := context.Background()
	for n := 1; n < 50; n++ {
		adv, err := workers[n%2].Advance(ctx, "run", LedgerKey{Workflow: "test", Activity: "advance-" + strconv.Itoa(n), Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		if adv.Budget != "" {
			t.Fatal(adv.Budget)
		}
		if len(adv.Needs) == 0 {
			return n
		}
		for _, r := range adv.Needs {
			for i, id := range r.TaskIDs {
				w := r.Task
				w.TaskID = id
				if _, err := workers[i%2].RunTask(ctx, w, LedgerKey{Workflow: r.Task.Stage, Activity: id, Attempt: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Fatal("the run did not finish in 50 advances")
	return 0
}

// sameFiles fails unless the files of dir a named with suffix are in b,
// byte for byte, but for a dataset manifest's inputs' hashes (the
// trajectories record each compression's wall-clock latency).
func sameFiles(t *testing.T, a, b, suffix string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, suffix) {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if rel == "manifest.json" {
			x, y = dropHashes(x), dropHashes(y)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between %s and %s", rel, a, b)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("%d files compared (%v)", n, err)
	}
}

func dropHashes(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"sha256"`) {
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}
