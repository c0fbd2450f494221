package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/guideline"
)

// smallJob is the demo job cut to a few tasks, with its own cache.
func smallJob(t *testing.T, tasks int, extra string) *Job {
	t.Helper()
	src := mustRead(t, "../jobs/demo.yaml")
	src = strings.Replace(src, "path: .cache/llm.db", "path: "+filepath.Join(t.TempDir(), "llm.db"), 1)
	src += fmt.Sprintf("\n%s", extra)
	j, err := ParseJob("small.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j.Env.TrainLimit, j.Env.TestLimit = tasks, tasks
	j.Optimize.Candidates = 3
	j.Rollout.Concurrency = 4
	return j
}

func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	job := smallJob(t, 12, "")
	dir := t.TempDir()
	sum, err := Run(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.EmbeddedModel || sum.Baseline.Tasks != 12 || sum.SelectedGuideline == "" || len(sum.Rounds) != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	// summary.json has an object per stage with a guideline id.
	var raw map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"baseline", "prompting", "ut", "utco"} {
		var st map[string]any
		if err := json.Unmarshal(raw[k], &st); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		for _, f := range []string{"success_rate", "peak_tokens_mean", "compressor_output_tokens", "guideline_id", "cache_hits"} {
			if _, ok := st[f]; !ok {
				t.Errorf("summary.%s has no %s", k, f)
			}
		}
	}
	ev := sum.Eval
	if ev == nil || len(ev.Tasks) != 12 || ev.Split != "test" || len(ev.Candidates) != 3 || len(ev.Comparisons) != 2 {
		t.Fatalf("eval: %+v", sum.Eval)
	}
	if sel := ev.Candidates[2]; sel.Name != evalSelected || sel.HistoryGuidelineID != sum.SelectedGuideline || ev.Comparisons[1].Tasks != 12 {
		t.Errorf("eval: selected %+v, comparisons %+v", sel, ev.Comparisons)
	}
	if sum.Prompting.GuidelineID != sum.StartingGuideline || sum.UTCO.GuidelineID != sum.SelectedGuideline {
		t.Errorf("guideline ids: prompting %s start %s utco %s selected %s", sum.Prompting.GuidelineID, sum.StartingGuideline, sum.UTCO.GuidelineID, sum.SelectedGuideline)
	}
	// The registry holds the seed and every candidate with lineage.
	reg, err := guideline.OpenRegistry(filepath.Join(dir, GuidelinesDir))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := reg.List()
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]int{}
	for _, r := range recs {
		steps[r.Step]++
		if r.Step != guideline.StepSeed && r.Parent == "" {
			t.Errorf("candidate %s has no parent", r.ID)
		}
	}
	if steps["seed"] != 1 || steps["ut"] == 0 {
		t.Fatalf("registry steps %v", steps)
	}
	lineage, err := reg.Lineage(sum.SelectedGuideline)
	if err != nil || lineage[0].ID != sum.StartingGuideline {
		t.Fatalf("lineage of the selected guideline: %v %v", lineage, err)
	}
	for _, d := range []guideline.Decision{sum.Rounds[0].UT, sum.Rounds[0].CO} {
		// Selection tasks and feedback tasks are disjoint, on the records.
		if len(d.Tasks) == 0 || len(d.FeedbackTasks) == 0 || d.Rule != guideline.SelectKeepParent {
			t.Errorf("%s: %d selection tasks, %d feedback tasks, rule %q", d.Step, len(d.Tasks), len(d.FeedbackTasks), d.Rule)
		}
		for _, id := range d.FeedbackTasks {
			if slices.Contains(d.Tasks, id) {
				t.Errorf("%s: task %s gave feedback and selected", d.Step, id)
			}
		}
		for _, c := range d.Candidates {
			if c.Valid && (c.Paired == nil || c.Paired.N != len(d.Tasks)) {
				t.Errorf("%s candidate %d: no paired comparison on the selection tasks", d.Step, c.K)
			}
			if !c.Valid && c.Rejected == "" {
				t.Errorf("%s candidate %d rejected without a reason", d.Step, c.K)
			}
		}
	}
	// The dataset stage wrote files that pass their own validation.
	if sum.Dataset == nil || sum.Dataset.Rows["train"] == 0 {
		t.Fatalf("dataset: %+v", sum.Dataset)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "datasets", "*.jsonl"))
	parquet, _ := filepath.Glob(filepath.Join(dir, "datasets", "data", "*.parquet"))
	if len(files) != 4 || len(parquet) != 2 {
		t.Fatalf("dataset files: %v %v", files, parquet)
	}
	for _, f := range append(files, parquet...) {
		vs, err := distill.ValidateFile(context.Background(), f)
		if err != nil || len(vs) > 0 {
			t.Errorf("%s: %v %v", f, err, vs)
		}
	}
	var out bytes.Buffer
	if err := Report(&out, dir, sum, nil); err != nil {
		t.Fatal(err)
	}
	// The report is in report.md; the writer gets a brief naming it.
	md := mustRead(t, filepath.Join(dir, "report.md"))
	if !strings.Contains(md, "acon utco") || !strings.Contains(md, "embedded offline model") {
		t.Fatalf("report:\n%s", md)
	}
	if !strings.Contains(out.String(), filepath.Join(dir, "report.md")) || !strings.Contains(out.String(), "embedded offline model") {
		t.Fatalf("brief:\n%s", out.String())
	}

	// A re-run skips every stage and makes no call.
	again, err := Run(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.SpentThisRun.Calls != 0 || again.Spent.Calls != sum.Spent.Calls || again.SelectedGuideline != sum.SelectedGuideline {
		t.Fatalf("re-run spent %+v (in all %+v), selected %s", again.SpentThisRun, again.Spent, again.SelectedGuideline)
	}
	promotedArm(t, job, dir, sum, recs)
}

// With another guideline promoted in the run's registry, the held-out
// evaluation runs it as a fourth arm and the report judges the selected
// guideline against it.
func promotedArm(t *testing.T, job *Job, dir string, sum *RunSummary, recs []guideline.Record) {
	t.Helper()
	var other string
	for _, r := range recs {
		if r.Validation.OK && r.ID != sum.StartingGuideline && r.ID != sum.SelectedGuideline {
			other = r.ID
		}
	}
	if other == "" {
		t.Fatal("the registry has no valid guideline besides the starting and the selected one")
	}
	reg, err := guideline.OpenRegistry(filepath.Join(dir, GuidelinesDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Promote(other); err != nil {
		t.Fatal(err)
	}
	again, err := Run(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := again.Eval
	if len(ev.Candidates) != 4 || ev.Candidates[3].Name != evalPromoted || ev.Candidates[3].HistoryGuidelineID != other || ev.Reference != evalNone {
		t.Fatalf("eval with %s promoted: reference %s, candidates %+v", other, ev.Reference, ev.Candidates)
	}
	var out bytes.Buffer
	if err := Report(&out, dir, again, nil); err != nil {
		t.Fatal(err)
	}
	md := mustRead(t, filepath.Join(dir, "report.md"))
	for _, want := range []string{"The promoted guideline " + other + " ran as promoted", "judged against promoted", "## Verdict: "} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if !strings.Contains(out.String(), "verdict: ") || !strings.Contains(out.String(), " against promoted under the default rule") {
		t.Errorf("brief:\n%s", out.String())
	}
}

func TestRunStopsAtBudgetAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	// Four tasks make several times the budget's calls, as eight did.
	job := smallJob(t, 4, "")
	job.Budget.LLMCalls = 60
	dir := t.TempDir()
	_, err := Run(context.Background(), job, dir, RunOptions{})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("want budget error, got %v", err)
	}
	if p := Project(job, 4); p.LLMCalls <= job.Budget.LLMCalls {
		t.Fatalf("projection %d calls should exceed the budget %d", p.LLMCalls, job.Budget.LLMCalls)
	}
	// The first invocation's spend counts: a budget it already used up
	// stops the re-run at once.
	if _, err := Run(context.Background(), job, dir, RunOptions{}); !errors.Is(err, ErrBudget) {
		t.Fatalf("re-run under the spent budget: want budget error, got %v", err)
	}
	job.Budget.LLMCalls = 0
	sum, err := Run(context.Background(), job, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("budget 60 calls: stopped; raised: finished with %d cache hits, %d new calls (%d in all)", sum.SpentThisRun.CacheHits, sum.SpentThisRun.Calls, sum.Spent.Calls)
	// The calls made before the stop are answered from the cache (a few
	// in flight at the stop may not have been).
	if sum.Spent.CacheHits < 50 {
		t.Fatalf("the resumed run answered only %d calls from the cache; 60 were made before the stop", sum.Spent.CacheHits)
	}
	if sum.SelectedGuideline == "" {
		t.Fatal("resumed run did not finish")
	}
}

// optimize.skip_fifo leaves the FIFO baseline out: no fifo stage, no fifo
// row, a smaller projection, and the same selected guideline, because no
// step reads the baseline.
func TestSkipFIFO(t *testing.T) {
	if testing.Short() {
		t.Skip("two runs")
	}
	run := func(skip bool) (*RunSummary, string) {
		job := smallJob(t, 6, "")
		job.Optimize.SkipFIFO = skip
		job.Eval.Disabled = true
		dir := t.TempDir()
		sum, err := Run(context.Background(), job, dir, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sum, dir
	}
	with, _ := run(false)
	without, dir := run(true)
	if with.FIFO.Tasks != 6 || without.FIFO.Strategy != "" || without.FIFO.Tasks != 0 {
		t.Fatalf("fifo summaries: with %+v, skipped %+v", with.FIFO.Summary, without.FIFO.Summary)
	}
	if without.SelectedGuideline != with.SelectedGuideline || without.Baseline.Successes != with.Baseline.Successes {
		t.Errorf("skipping fifo changed the run: selected %s vs %s", without.SelectedGuideline, with.SelectedGuideline)
	}
	if without.Projected.LLMCalls >= with.Projected.LLMCalls {
		t.Errorf("projected calls %d with fifo skipped, %d with it", without.Projected.LLMCalls, with.Projected.LLMCalls)
	}
	if _, err := os.Stat(filepath.Join(dir, "stages", "fifo")); !os.IsNotExist(err) {
		t.Errorf("stages/fifo with fifo skipped: %v", err)
	}
	if err := Report(io.Discard, dir, without, nil); err != nil {
		t.Fatal(err)
	}
	md := mustRead(t, filepath.Join(dir, "report.md"))
	if strings.Contains(md, "| fifo ") || !strings.Contains(md, "| prompting ") {
		t.Errorf("report rows with fifo skipped:\n%s", md)
	}
}
