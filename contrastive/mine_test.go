package contrastive

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/rollout"
)

func run(id string, success bool, steps int) *rollout.Trajectory {
	return &rollout.Trajectory{TaskID: id, Success: success, Metrics: rollout.Metrics{Steps: steps}}
}

func infra(id string) *rollout.Trajectory {
	t := run(id, false, 2)
	t.Infra = true
	return t
}

func ids(ts []*rollout.Trajectory) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.TaskID)
	}
	return out
}

func pairIDs(ps []Pair) []string {
	var out []string
	for _, p := range ps {
		if p.Baseline.TaskID != p.Compressed.TaskID {
			panic("pair of different tasks")
		}
		out = append(out, p.Compressed.TaskID)
	}
	return out
}

func TestMine(t *testing.T) {
	cases := []struct {
		name                string
		base, comp          []*rollout.Trajectory
		ratio               float64
		cont, regress, succ []string
	}{
		{
			name: "contrastive failure",
			base: []*rollout.Trajectory{run("a", true, 4)},
			comp: []*rollout.Trajectory{run("a", false, 6)},
			cont: []string{"a"},
		},
		{
			name: "both failed is no signal",
			base: []*rollout.Trajectory{run("a", false, 4)},
			comp: []*rollout.Trajectory{run("a", false, 6)},
		},
		{
			name: "compressed success without baseline success is only succ",
			base: []*rollout.Trajectory{run("a", false, 4)},
			comp: []*rollout.Trajectory{run("a", true, 9)},
			succ: []string{"a"},
		},
		{
			name:    "regression at exactly the default ratio",
			base:    []*rollout.Trajectory{run("a", true, 4), run("b", true, 4)},
			comp:    []*rollout.Trajectory{run("a", true, 6), run("b", true, 5)},
			regress: []string{"a"},
			succ:    []string{"a", "b"},
		},
		{
			name:    "custom ratio",
			base:    []*rollout.Trajectory{run("a", true, 4)},
			comp:    []*rollout.Trajectory{run("a", true, 5)},
			ratio:   1.2,
			regress: []string{"a"},
			succ:    []string{"a"},
		},
		{
			name: "baseline of zero steps has no ratio",
			base: []*rollout.Trajectory{run("a", true, 0)},
			comp: []*rollout.Trajectory{run("a", true, 3)},
			succ: []string{"a"},
		},
		{
			name: "infra on either side is skipped",
			base: []*rollout.Trajectory{infra("a"), run("b", true, 3), run("c", true, 3)},
			comp: []*rollout.Trajectory{run("a", false, 3), infra("b"), run("c", false, 3)},
			cont: []string{"c"},
		},
		{
			name: "paired by id in compressed order, unmatched skipped",
			base: []*rollout.Trajectory{run("c", true, 2), run("a", true, 2), run("b", true, 2)},
			comp: []*rollout.Trajectory{run("b", false, 2), run("x", false, 2), run("a", false, 2)},
			cont: []string{"b", "a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Mine(tc.base, tc.comp, tc.ratio)
			if got := pairIDs(s.Cont); !reflect.DeepEqual(got, tc.cont) {
				t.Errorf("Cont = %v, want %v", got, tc.cont)
			}
			if got := pairIDs(s.Regressions); !reflect.DeepEqual(got, tc.regress) {
				t.Errorf("Regressions = %v, want %v", got, tc.regress)
			}
			if got := ids(s.Succ); !reflect.DeepEqual(got, tc.succ) {
				t.Errorf("Succ = %v, want %v", got, tc.succ)
			}
		})
	}
}

func TestItems(t *testing.T) {
	s := Mine(
		[]*rollout.Trajectory{run("a", true, 2), run("b", true, 2), run("c", true, 2)},
		[]*rollout.Trajectory{run("a", true, 4), run("b", false, 2), run("c", true, 2)}, 0)
	if got := pairIDs(s.Items(StepUT)); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("UT items = %v, want failures then regressions [b a]", got)
	}
	co := s.Items(StepCO)
	var got []string
	for _, p := range co {
		if p.Baseline != nil {
			t.Errorf("CO item %s carries a baseline", p.Compressed.TaskID)
		}
		got = append(got, p.Compressed.TaskID)
	}
	if !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("CO items = %v, want [a c]", got)
	}
}

func TestCompressedHistorySessions(t *testing.T) {
	c := compressedRun()
	// A second summary after step 3 and one made before a turn that never
	// came (the run stopped right after it).
	c.Events = append(c.Events,
		rollout.CompressionEvent{Kind: compress.KindObservation, Step: 3, Output: "refined"},
		rollout.CompressionEvent{Kind: compress.KindHistory, Step: 3, Output: "SECOND"},
		rollout.CompressionEvent{Kind: compress.KindHistory, Step: 5, Output: "<HISTORY_SUMMARY>\nTHIRD\n</HISTORY_SUMMARY>"})
	h := CompressedHistory(c, 0)
	// Each summary comes right before the kept last pair (its event step).
	order := []string{`<step n="1">`, "session 2", "Searched for Veloria", `<step n="2">`,
		"session 3", "<HISTORY_SUMMARY>\nSECOND\n</HISTORY_SUMMARY>", `<step n="3">`, `<step n="4">`, "session 4", "THIRD"}
	pos := -1
	for _, s := range order {
		i := strings.Index(h, s)
		if i <= pos {
			t.Fatalf("%q is missing or out of order in:\n%s", s, h)
		}
		pos = i
	}
	if strings.Contains(h, "refined") {
		t.Error("an observation event was rendered as a summary")
	}
	if n := strings.Count(h, "<HISTORY_SUMMARY>"); n != 3 {
		t.Errorf("%d summaries rendered, want 3", n)
	}
}

func TestHistoryBudget(t *testing.T) {
	b := baselineRun()
	big := strings.Repeat("The capital of Veloria is Marnth. ", 3000) // ~100 KB
	for i := range b.Turns[:2] {
		b.Turns[i].Observation = big
	}
	b.Turns[1].CompressedObservation = "short refined observation"
	for _, limit := range []int{5_000, 20_000} {
		h := BaselineHistory(b, limit)
		if len(h) > limit {
			t.Errorf("limit %d: rendered %d chars", limit, len(h))
		}
		if len(h) < limit*9/10 {
			t.Errorf("limit %d: rendered only %d chars; the cut is too coarse", limit, len(h))
		}
		if !strings.Contains(h, "more characters cut ...]") || !strings.Contains(h, "short refined observation") {
			t.Errorf("limit %d: want the raw observation cut with a marker and the refined one whole:\n%.300s", limit, h)
		}
	}
	if h := BaselineHistory(baselineRun(), 0); strings.Contains(h, "cut ...]") {
		t.Error("a small history was cut")
	}
}

func TestTruncateRuneBoundary(t *testing.T) {
	s := truncate(strings.Repeat("é", 10), 5) // 2 bytes a rune: cut inside one
	if !strings.HasPrefix(s, "éé\n[... 8 more characters cut") {
		t.Errorf("truncate = %q", s)
	}
}
