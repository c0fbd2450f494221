package guideline

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/rollout"
)

func TestDecide(t *testing.T) {
	sc := func(obj, tok float64) *Score { return &Score{Success: obj, Objective: obj, TotalTokens: tok} }
	tests := []struct {
		name   string
		rule   string
		parent Score
		cands  []Candidate
		chosen string
		kept   bool
	}{
		{"best beats the parent", SelectKeepParent, *sc(0.5, 10), []Candidate{{K: 0, ID: "a", Score: sc(0.4, 1)}, {K: 1, ID: "b", Score: sc(0.75, 9)}}, "b", false},
		{"none beats the parent: kept", SelectKeepParent, *sc(0.8, 10), []Candidate{{K: 0, ID: "a", Score: sc(0.4, 1)}, {K: 1, ID: "b", Score: sc(0.75, 9)}}, "p", true},
		{"argmax takes the best anyway", SelectArgmax, *sc(0.8, 10), []Candidate{{K: 0, ID: "a", Score: sc(0.4, 1)}, {K: 1, ID: "b", Score: sc(0.75, 9)}}, "b", false},
		{"ties go to fewer tokens", SelectKeepParent, *sc(0.5, 10), []Candidate{{K: 0, ID: "a", Score: sc(0.75, 8)}, {K: 1, ID: "b", Score: sc(0.75, 5)}}, "b", false},
		{"a tie with the parent keeps it", SelectKeepParent, *sc(0.75, 5), []Candidate{{K: 0, ID: "a", Score: sc(0.75, 5)}}, "p", true},
		{"no valid candidate", SelectArgmax, *sc(0.5, 10), []Candidate{{K: 0, Rejected: "broken"}}, "p", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := Decision{Step: StepUT, Parent: "p", Rule: tt.rule, Parent0: tt.parent, Candidates: tt.cands}
			Decide(&dec)
			if dec.Chosen != tt.chosen || dec.KeptParent != tt.kept || dec.Reason == "" {
				t.Fatalf("chosen %s kept %v (%s), want %s kept %v", dec.Chosen, dec.KeptParent, dec.Reason, tt.chosen, tt.kept)
			}
			if n := slices.IndexFunc(tt.cands, func(c Candidate) bool { return c.Score != nil }); n >= 0 && (dec.Spread == nil || dec.Spread.N == 0) {
				t.Errorf("no spread recorded: %+v", dec.Spread)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name   string
		scores []Score
		want   *Spread
	}{
		{"none", nil, nil},
		{"one has no deviation", []Score{{Success: 0.5, Objective: 0.4}}, &Spread{N: 1, SuccessMin: 0.5, SuccessMax: 0.5, ObjectiveMin: 0.4, ObjectiveMax: 0.4}},
		{"three", []Score{{Success: 0.25, Objective: 0.5}, {Success: 0.75, Objective: 0.25}, {Success: 0.5, Objective: 1}},
			&Spread{N: 3, SuccessMin: 0.25, SuccessMax: 0.75, SuccessSD: 0.25, ObjectiveMin: 0.25, ObjectiveMax: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spreadOf(tt.scores)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("spread %+v, want %+v", got, tt.want)
			}
		})
	}
}

// outcome is a task's result with agent input ctx and compressor output
// comp tokens.
func outcome(id string, ok bool, ctx, comp int) rollout.Outcome {
	o := rollout.Outcome{TaskID: id, Success: ok}
	o.Metrics.AgentInputTokens, o.Metrics.CompressorOutputTokens = ctx, comp
	return o
}

func TestObjective(t *testing.T) {
	parent := []rollout.Outcome{outcome("a", true, 100, 0), outcome("b", false, 300, 0)}
	half := []rollout.Outcome{outcome("a", true, 50, 10), outcome("b", false, 150, 10)}
	tests := []struct {
		name   string
		step   string
		lambda float64
		trs    []rollout.Outcome
		want   Score
	}{
		{"UT rates success only", StepUT, 1, half, Score{Success: 0.5, ContextTokens: 100, NormCost: 0.5, TotalTokens: 110, Objective: 0.5}},
		{"CO subtracts the weighted normalized cost", StepCO, 0.5, half, Score{Success: 0.5, ContextTokens: 100, NormCost: 0.5, TotalTokens: 110, Objective: 0.25}},
		{"the parent against itself costs 1", StepCO, 0.5, parent, Score{Success: 0.5, ContextTokens: 200, NormCost: 1, TotalTokens: 200, Objective: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Objective(tt.step, tt.lambda, tt.trs, parent); got != tt.want {
				t.Fatalf("%+v, want %+v", got, tt.want)
			}
		})
	}
	if got := Objective(StepCO, 1, half, nil); got.NormCost != 0 || got.Objective != 0.5 {
		t.Errorf("no parent cost to normalize by: %+v", got)
	}
}

func TestCompare(t *testing.T) {
	parent := []rollout.Outcome{outcome("a", true, 100, 0), outcome("b", false, 100, 0), outcome("c", false, 100, 0)}
	tests := []struct {
		name       string
		cand       []rollout.Outcome
		diff, toks float64
	}{
		{"same", parent, 0, 0},
		{"solves all at half the tokens", []rollout.Outcome{outcome("a", true, 50, 0), outcome("b", true, 50, 0), outcome("c", true, 50, 0)}, 2.0 / 3, -0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Compare(tt.cand, parent, 42)
			if p.N != 3 || math.Abs(p.SuccessDiff-tt.diff) > 1e-12 || math.Abs(p.TokenChange-tt.toks) > 1e-12 {
				t.Fatalf("%+v, want diff %v token change %v", p, tt.diff, tt.toks)
			}
			if p.CILow > p.SuccessDiff || p.CIHigh < p.SuccessDiff {
				t.Errorf("interval [%v, %v] misses %v", p.CILow, p.CIHigh, p.SuccessDiff)
			}
		})
	}
}

func tasks(n int) []env.Task {
	ts := make([]env.Task, n)
	for i := range ts {
		ts[i].ID = fmt.Sprintf("t%d", i)
	}
	return ts
}

func ids(ts []env.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestPickAndSolved(t *testing.T) {
	trs := []rollout.Outcome{outcome("t2", true, 1, 0), outcome("t0", false, 1, 0), {TaskID: "t1", Success: true, Infra: true}}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"pick keeps task order and skips tasks without an outcome", func() []string {
			var out []string
			for _, o := range Pick(trs, tasks(4)) {
				out = append(out, o.TaskID)
			}
			return out
		}(), []string{"t0", "t1", "t2"}},
		{"solved leaves failures and infrastructure failures out", ids(Solved(tasks(4), trs)), []string{"t2"}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestHoldout(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		share float64
		want  int
	}{
		{"none", 0, 0.5, 0},
		{"at least one", 10, 0.01, 1},
		{"rounded share", 10, 0.25, 3},
		{"never all of two or more", 4, 1, 3},
		{"one task is held out", 1, 0.5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Holdout(tasks(tt.n), tt.share, 7)
			if len(got) != tt.want {
				t.Fatalf("%d tasks held out, want %d", len(got), tt.want)
			}
			if !slices.IsSortedFunc(got, func(a, b env.Task) int { return cmpIndex(a.ID, b.ID) }) {
				t.Errorf("not in task order: %v", ids(got))
			}
			if again := Holdout(tasks(tt.n), tt.share, 7); !slices.Equal(ids(again), ids(got)) {
				t.Errorf("same seed, other tasks: %v, %v", ids(again), ids(got))
			}
		})
	}
	a, b := ids(Holdout(tasks(20), 0.5, 1)), ids(Holdout(tasks(20), 0.5, 2))
	if slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 hold out the same tasks: %v", a)
	}
}

// cmpIndex orders the ids tasks() makes by their number.
func cmpIndex(a, b string) int {
	var i, j int
	fmt.Sscanf(a, "t%d", &i)
	fmt.Sscanf(b, "t%d", &j)
	return i - j
}
