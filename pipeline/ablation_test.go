package pipeline

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/rollout"
)

// longJob is jobs/long.yaml cut to one task of 32 questions, a step limit
// of 160 and a 8k context window, with its own cache.
func longJob(t *testing.T, edit func(*Job)) *Job {
	t.Helper()
	src := mustRead(t, "../jobs/long.yaml")
	src = strings.Replace(src, "path: .cache/llm.db", "path: "+filepath.Join(t.TempDir(), "llm.db"), 1)
	j, err := ParseJob("long.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j.Env.QuestionsPerTask, j.Env.StepLimit, j.Env.TrainLimit = 32, 160, 1
	j.Rollout.ContextWindow = 8192
	j.Compression.History.Threshold = 4096
	if edit != nil {
		edit(j)
	}
	return j
}

// rolloutWith runs strategy name on the job's first train task.
func rolloutWith(t *testing.T, j *Job, name compress.Name) *rollout.Trajectory {
	t.Helper()
	rt, err := Open(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	tasks, err := rt.Tasks("train")
	if err != nil {
		t.Fatal(err)
	}
	hist, obs, err := StrategyGuidelines(j, name, "", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.Strategy(name, hist, obs, rt.Compressor, rt.Embedder)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rt.NewAgent(s).Run(context.Background(), tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func answered(tr *rollout.Trajectory) int {
	n := 0
	for _, q := range tr.Score.PerQuestion {
		if q.EM == 1 {
			n++
		}
	}
	return n
}

func p95(tr *rollout.Trajectory) int {
	return rollout.Summarize("", []rollout.Outcome{rollout.OutcomeOf(tr)}).ContextTokensP95
}

// TestLongHorizonAblations are the ablations on the long-horizon
// qa variant with the embedded model. They check mechanics, not quality.
func TestLongHorizonAblations(t *testing.T) {
	if testing.Short() {
		t.Skip("long-horizon rollouts")
	}
	t.Run("pace stays in the window where none overflows", func(t *testing.T) {
		j := longJob(t, nil)
		none, pace := rolloutWith(t, j, compress.None), rolloutWith(t, j, compress.PACE)
		t.Logf("none: overflow at step %d, p95 context %d, %d answered; pace: overflow %v, p95 %d, %d answered (window %d)",
			none.OverflowStep, p95(none), answered(none), pace.ContextOverflow, p95(pace), answered(pace), j.Rollout.ContextWindow)
		if !none.ContextOverflow {
			t.Fatal("none did not overflow the window")
		}
		if pace.ContextOverflow || p95(pace) > j.Rollout.ContextWindow {
			t.Fatalf("pace: overflow %v, p95 %d > window %d", pace.ContextOverflow, p95(pace), j.Rollout.ContextWindow)
		}
	})
	t.Run("glimpse", func(t *testing.T) {
		off := false
		with := rolloutWith(t, longJob(t, nil), compress.PACE)
		without := rolloutWith(t, longJob(t, func(j *Job) { j.Compression.PACE.Glimpse = &off }), compress.PACE)
		t.Logf("glimpse on: %d glimpses, %d answered in %d agent calls; off: %d answered in %d agent calls",
			with.Metrics.StrategyToolCalls, answered(with), with.Metrics.AgentCalls, answered(without), without.Metrics.AgentCalls)
		if with.Metrics.StrategyToolCalls == 0 || without.Metrics.StrategyToolCalls != 0 {
			t.Fatalf("glimpses: %d with the tool, %d without", with.Metrics.StrategyToolCalls, without.Metrics.StrategyToolCalls)
		}
		if answered(with) < answered(without) {
			t.Fatalf("glimpse answered %d, fewer than %d without it", answered(with), answered(without))
		}
	})
	t.Run("plan-aware k=3 keeps plan facts that k=0 drops", func(t *testing.T) {
		factLine := regexp.MustCompile(`(?m)^- .+ of .+: .+$`)
		kept := func(k int) (int, *rollout.Trajectory) {
			tr := rolloutWith(t, longJob(t, func(j *Job) { j.Compression.PlanAware.K = &k }), compress.PlanAware)
			n := 0
			for _, e := range tr.Events {
				n += len(factLine.FindAllString(e.Output, -1))
			}
			return n, tr
		}
		k3, tr3 := kept(3)
		k0, tr0 := kept(0)
		t.Logf("plan facts kept by the summaries: k=3 %d (%d events, %d env steps), k=0 %d (%d events, %d env steps)",
			k3, len(tr3.Events), tr3.Metrics.Steps, k0, len(tr0.Events), tr0.Metrics.Steps)
		if len(tr3.Events) == 0 || k3 <= k0 {
			t.Fatalf("k=3 kept %d plan facts, k=0 %d", k3, k0)
		}
	})
}
