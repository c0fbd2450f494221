package synth

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

func TestEvolve(t *testing.T) {
	e := startEmbedded(t)
	wfs := e.generated(t, 10)
	dir := t.TempDir()
	reg, err := guideline.OpenRegistry(filepath.Join(dir, RegistryDir))
	if err != nil {
		t.Fatal(err)
	}
	st := EvolveSettings{Population: 4, Generations: 2, Sample: 6, Elite: 2}.withDefaults()
	ev := &Evolver{
		Settings: st, Seed: 5, Registry: reg, Optimizer: e.optimizer, Concurrency: 2,
		Executor: func(p *compress.Prompt) (*Executor, error) { return e.executor(t, p, compress.DefaultPlanK), nil },
	}
	seed, err := templates.Source("history_plan_aware.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := ev.Evolve(t.Context(), seed, "builtin:history_plan_aware", wfs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Generations) != 2 {
		t.Fatalf("%d generations", len(sum.Generations))
	}
	g0, g1 := sum.Generations[0], sum.Generations[1]
	if len(g0.Members) < 2 || g0.Members[len(g0.Members)-1].Step == "" {
		t.Fatalf("generation 0: %+v", g0)
	}
	// Elitism: the best Elite of a generation open the next.
	for i := range st.Elite {
		if g1.Members[i].ID != g0.Members[i].ID && !g1.Members[i].Elite {
			t.Fatalf("generation 1 %+v does not keep generation 0's elite %+v", g1.Members, g0.Members[:st.Elite])
		}
	}
	var seedScore float64
	for _, g := range sum.Generations {
		for j, m := range g.Members {
			if j > 0 && m.Scores.Composite > g.Members[j-1].Scores.Composite {
				t.Fatalf("generation %d is not ranked: %+v", g.N, g.Members)
			}
			rec, _, err := reg.Get(m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Scores["composite"] != m.Scores.Composite || rec.Step != m.Step || (m.Step != guideline.StepSeed && rec.Parent != m.Parents[0]) {
				t.Fatalf("registry %+v for member %+v", rec, m)
			}
			if m.Step == guideline.StepCrossover && !slices.Equal(rec.Parents, m.Parents) {
				t.Fatalf("crossover %s: registry parents %v, member %v", m.ID, rec.Parents, m.Parents)
			}
			if m.Step == guideline.StepSeed {
				seedScore = m.Scores.Composite
			}
			if m.Scores.Executed != 6 {
				t.Fatalf("member %s scored on %d workflows, want the sample of 6", m.ID, m.Scores.Executed)
			}
		}
	}
	if sum.Best.ID != g1.Members[0].ID || sum.Best.Scores.Composite < seedScore {
		t.Fatalf("best %+v, seed composite %v", sum.Best, seedScore)
	}
	_, src, err := reg.Get(sum.Best.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, BestFile)); err != nil || string(b) != src {
		t.Fatalf("best.tmpl is not the best prompt: %v", err)
	}
	var onDisk EvolveSummary
	if b, err := os.ReadFile(filepath.Join(dir, EvolutionFile)); err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.Best.ID != sum.Best.ID {
		t.Fatalf("evolution.json: %v", err)
	}
	if sum.Usage[llm.RoleOptimizer].Calls == 0 {
		t.Fatalf("usage %+v", sum.Usage)
	}
	// A re-run scores nothing again, replays the optimizer's children
	// from the journal and comes to the same result.
	calls := e.optimizer.Stats().Calls
	again, err := ev.Evolve(t.Context(), seed, "builtin:history_plan_aware", wfs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Best.ID != sum.Best.ID || !reflect.DeepEqual(again, sum) {
		t.Fatalf("re-run: %+v\nwas %+v", again, sum)
	}
	if n := e.optimizer.Stats().Calls - calls; n != 0 {
		t.Fatalf("the re-run asked the optimizer %d times; the journal holds every child", n)
	}
	// Other weights rank the population otherwise, so the journal's
	// requests are not this search's: the directory is refused.
	other := *ev
	other.Settings.Weights = Weights{Success: 1}
	if _, err := other.Evolve(t.Context(), seed, "builtin:history_plan_aware", wfs, dir); !errors.Is(err, ErrForeignDir) {
		t.Fatalf("re-run with other weights: %v, want %v", err, ErrForeignDir)
	}
	// Another optimizer endpoint did not write the journal's children.
	other = *ev
	other.OptimizerModels = "another optimizer"
	if _, err := other.Evolve(t.Context(), seed, "builtin:history_plan_aware", wfs, dir); !errors.Is(err, ErrForeignDir) {
		t.Fatalf("re-run with another optimizer: %v, want %v", err, ErrForeignDir)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, PromptsDir, "*", RunSummaryFile))
	for _, p := range runs {
		var rs RunSummary
		if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &rs) != nil || rs.Resumed != 6 {
			t.Fatalf("%s: the re-run executed again what was scored (resumed at %d)", p, rs.Resumed)
		}
	}
	if len(runs) < 2 {
		t.Fatalf("%d prompt runs", len(runs))
	}
}
