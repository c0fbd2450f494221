package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
)

// stepFixture is a runner on a few train tasks with its baseline and
// prompting rollouts, the inputs of a UT step.
type stepFixture struct {
	p         *runner
	seed      compiled
	base, cur *stagedRollout
}

func newStepFixture(t *testing.T, tasks int, edit func(*Job)) *stepFixture {
	t.Helper()
	return buildStepFixture(t, t.TempDir(), tasks, edit, t.Cleanup)
}

// sharedStep is the step fixture on 12 train tasks that the tests of a
// step's parts read: its rollouts are the ones a fixture of their own
// would hold (temperature 0, the same job), and each test registers only
// candidates of its own.
var sharedStep shared[*stepFixture]

func sharedStepFixture(t *testing.T) *stepFixture {
	t.Helper()
	return sharedStep.get(t, func(t *testing.T) (*stepFixture, error) {
		return buildStepFixture(t, sharedDir(t), 12, nil, func(fn func()) {
			sharedCleanup.add(func() error { fn(); return nil })
		}), nil
	})
}

// buildStepFixture builds a step fixture in dir; cleanup takes the
// closing of its runtime.
func buildStepFixture(t *testing.T, dir string, tasks int, edit func(*Job), cleanup func(func())) *stepFixture {
	t.Helper()
	job := smallJob(t, tasks, "")
	job.Cache.Path = filepath.Join(dir, "cache", "llm.db")
	if edit != nil {
		edit(job)
	}
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := newRunner(context.Background(), job, run, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cleanup(func() { p.rt.Close() })
	f := &stepFixture{p: p}
	if f.seed, err = p.registerSeed(); err != nil {
		t.Fatal(err)
	}
	if f.base, err = p.rollout("baseline", compress.None, nil, p.train); err != nil {
		t.Fatal(err)
	}
	if f.cur, err = p.rollout("prompting", compress.Prompting, f.seed.g, p.train); err != nil {
		t.Fatal(err)
	}
	return f
}

// The selection tasks of a step and the tasks its feedback came from never
// overlap; UT selects among the baseline's successes.
func TestSplitDisjoint(t *testing.T) {
	f := sharedStepFixture(t)
	ok := map[string]bool{}
	for _, tr := range f.base.Outcomes {
		ok[tr.TaskID] = tr.Success
	}
	for _, step := range []string{contrastive.StepUT, contrastive.StepCO} {
		t.Run(step, func(t *testing.T) {
			tasks, items, err := f.p.split(step, f.base, f.cur)
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) == 0 || len(items) == 0 {
				t.Fatalf("%d selection tasks, %d feedback items", len(tasks), len(items))
			}
			sel := map[string]bool{}
			for _, tk := range tasks {
				sel[tk.ID] = true
				if step == contrastive.StepUT && !ok[tk.ID] {
					t.Errorf("UT selects on %s, which the baseline failed", tk.ID)
				}
			}
			for _, it := range items {
				if sel[it.Compressed.TaskID] {
					t.Errorf("task %s gives feedback and selects", it.Compressed.TaskID)
				}
			}
		})
	}
}

// analyse asks about every item and keeps every answer; propose writes K
// candidates, registered with the parent as lineage.
func TestAnalyseAndPropose(t *testing.T) {
	f := sharedStepFixture(t)
	p := f.p
	_, items, err := p.split(contrastive.StepUT, f.base, f.cur)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dec := guideline.Decision{Step: contrastive.StepUT, Parent: f.seed.rec.ID}
	ok, err := p.analyse(1, contrastive.StepUT, dir, items, &dec)
	if err != nil {
		t.Fatal(err)
	}
	if len(ok) != len(items) || dec.Feedback != len(items) || dec.Rejected != 0 {
		t.Fatalf("%d items gave %d usable feedback (%+v)", len(items), len(ok), dec)
	}
	fb, err := os.ReadFile(filepath.Join(dir, contrastive.FeedbackFile))
	if err != nil || strings.Count(string(fb), "\n") != len(items) {
		t.Fatalf("feedback.jsonl: %d lines, %v", strings.Count(string(fb), "\n"), err)
	}
	cands, err := p.propose(1, contrastive.StepUT, f.seed, ok, &dec)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != p.job.Optimize.Candidates || len(dec.Candidates) != len(cands) {
		t.Fatalf("%d candidates, %d recorded", len(cands), len(dec.Candidates))
	}
	for _, c := range dec.Candidates {
		if !c.Valid {
			continue
		}
		rec, _, err := p.reg.Get(c.ID)
		if err != nil || rec.Parent != f.seed.rec.ID || len(rec.FeedbackIDs) == 0 || cands[c.K].g == nil {
			t.Errorf("candidate %d: %+v %v", c.K, rec, err)
		}
	}
}

// TestSeedsVary is acceptance check (c): at temperature 0.7 three seeds
// give different feedback samples and candidate texts, and each step
// records the spread of its candidates' scores.
func TestSeedsVary(t *testing.T) {
	if testing.Short() {
		t.Skip("three UT steps")
	}
	samples, texts := map[string]bool{}, map[string]bool{}
	var chosen []float64
	for _, seed := range []int{1, 2, 3} {
		f := newStepFixture(t, 12, func(j *Job) {
			j.Seed = seed
			_ = j.Roles.each(func(_ string, c *llm.RoleConfig) error {
				c.Temperature, c.Seed = 0.7, &seed
				return nil
			})
		})
		dec, err := f.p.runStep(1, contrastive.StepUT, t.TempDir(), f.seed, f.base, f.cur)
		if err != nil {
			t.Fatal(err)
		}
		if dec.Spread == nil {
			t.Fatalf("seed %d: no spread in %+v", seed, dec)
		}
		var ids, fbs []string
		for _, c := range dec.Candidates {
			ids = append(ids, c.ID)
			fbs = append(fbs, strings.Join(c.FeedbackIDs, ","))
		}
		texts[strings.Join(ids, " ")] = true
		samples[strings.Join(fbs, " ")] = true
		s := dec.Parent0.Success
		if i := slices.IndexFunc(dec.Candidates, func(c guideline.Candidate) bool { return c.ID == dec.Chosen }); i >= 0 {
			s = dec.Candidates[i].Score.Success
		}
		chosen = append(chosen, s)
		t.Logf("seed %d: prompting %.3f, candidates success %.3f..%.3f (sd %.3f, n %d), chosen %.3f",
			seed, dec.Parent0.Success, dec.Spread.SuccessMin, dec.Spread.SuccessMax, dec.Spread.SuccessSD, dec.Spread.N, s)
	}
	t.Logf("chosen success over three seeds: sd %.3f", eval.SD(chosen))
	if len(samples) != 3 || len(texts) != 3 {
		t.Errorf("three seeds gave %d distinct feedback samples and %d distinct candidate sets", len(samples), len(texts))
	}
}
