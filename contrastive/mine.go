// Package contrastive mines the contrastive sets of ACON's guideline
// optimization (D_cont, step-inflation regressions, D_succ) from a baseline
// and a compressed rollout, asks the analyzer about each, and keeps the
// answers as feedback records for the update prompts.
package contrastive

import (
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/rollout"
)

// DefaultStepRatio is the step inflation (compressed steps over baseline
// steps) from which a run that still succeeded counts as a regression.
const DefaultStepRatio = 1.5

// Steps of the alternating optimization (ACON Algorithm 1), named by the
// guidelines they produce.
const (
	StepUT = guideline.StepUT // utility: what the compressed context lost
	StepCO = guideline.StepCO // compression: what it carried that was never used
)

// Pair is one task run without and with compression. Baseline is nil for
// CO items, which look at the compressed run alone.
type Pair struct {
	Baseline   *rollout.Trajectory
	Compressed *rollout.Trajectory
}

// Sets are the mined subsets of one compressed rollout.
type Sets struct {
	// Cont: the baseline succeeded, the compressed run failed.
	Cont []Pair
	// Regressions: both succeeded, but the compressed run took at least
	// step ratio × the baseline's steps.
	Regressions []Pair
	// Succ: the compressed run succeeded.
	Succ []*rollout.Trajectory
}

// Mine pairs compressed runs with baseline runs by task id, in the order of
// compressed. Runs stopped by an endpoint failure (Infra) say nothing about
// the guideline and are skipped on either side; Succ needs no baseline.
// stepRatio <= 0 means DefaultStepRatio.
func Mine(baseline, compressed []*rollout.Trajectory, stepRatio float64) Sets {
	if stepRatio <= 0 {
		stepRatio = DefaultStepRatio
	}
	base := make(map[string]*rollout.Trajectory, len(baseline))
	for _, b := range baseline {
		if b != nil && !b.Infra {
			base[b.TaskID] = b
		}
	}
	var s Sets
	for _, c := range compressed {
		if c == nil || c.Infra {
			continue
		}
		if c.Success {
			s.Succ = append(s.Succ, c)
		}
		b, ok := base[c.TaskID]
		if !ok || !b.Success {
			continue
		}
		switch {
		case !c.Success:
			s.Cont = append(s.Cont, Pair{Baseline: b, Compressed: c})
		case isRegression(b, c, stepRatio):
			s.Regressions = append(s.Regressions, Pair{Baseline: b, Compressed: c})
		}
	}
	return s
}

// Items returns what step analyses: for UT the failures, then the
// regressions; for CO every successful compressed run.
func (s Sets) Items(step string) []Pair {
	if step == StepCO {
		out := make([]Pair, len(s.Succ))
		for i, t := range s.Succ {
			out[i] = Pair{Compressed: t}
		}
		return out
	}
	return append(append([]Pair(nil), s.Cont...), s.Regressions...)
}

// isRegression: both runs succeeded and the compressed one took at least
// ratio × the baseline's steps. A baseline of zero steps has no ratio.
func isRegression(b, c *rollout.Trajectory, ratio float64) bool {
	bs, cs := b.Metrics.Steps, c.Metrics.Steps
	return b.Success && c.Success && bs > 0 && float64(cs) >= ratio*float64(bs)
}
