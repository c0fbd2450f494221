package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/templates"
)

// writeEval writes a constructed evaluation of "prod" and "cand" on n
// tasks: cand fails the tasks lost says, prod solves all; cand uses
// peakRatio of prod's peak tokens. cand ran guideline id.
func writeEval(t *testing.T, dir string, n int, lost func(int) bool, peakRatio float64, id string) string {
	t.Helper()
	r := &eval.Result{Dir: dir, Summary: eval.Summary{Split: "test", Samples: 1, Seed: 42, TaskSet: fmt.Sprintf("constructed-%d", n), Reference: "prod"}}
	r.Summary.Candidates = []eval.Arm{{Spec: eval.Spec{Name: "prod"}}, {Spec: eval.Spec{Name: "cand"}, HistoryGuidelineID: id}}
	for i := range n {
		task := fmt.Sprintf("t%03d", i)
		r.Summary.Tasks = append(r.Summary.Tasks, task)
		peak := 1000 + 7*float64(i%13)
		r.Outcomes = append(r.Outcomes, eval.Outcome{Candidate: "prod", Task: task, Success: true,
			Values: map[string]float64{eval.MetricSuccess: 1, eval.MetricPeakTokens: peak}})
		s := 1.0
		if lost(i) {
			s = 0
		}
		r.Outcomes = append(r.Outcomes, eval.Outcome{Candidate: "cand", Task: task, Success: s == 1,
			Values: map[string]float64{eval.MetricSuccess: s, eval.MetricPeakTokens: peak * peakRatio}})
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGateExitCodes(t *testing.T) {
	dir := t.TempDir()
	none := func(int) bool { return false }
	good := writeEval(t, filepath.Join(dir, "good"), 40, none, 0.6, "")
	// Three tasks lost of 40: Δ success −0.075 passes "success >= -0.1"
	// as a point, but its 95% interval reaches below −0.1: the gate fails.
	straddle := writeEval(t, filepath.Join(dir, "straddle"), 40, func(i int) bool { return i < 3 }, 0.6, "")
	other := writeEval(t, filepath.Join(dir, "other"), 12, none, 0.6, "")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"passes", []string{"--eval", good, "--rule", "success >= -0.01", "--rule", "peak_tokens <= 0.8x"}, exitOK, "gate passed"},
		{"ratio fails", []string{"--eval", good, "--rule", "peak_tokens <= 0.5x"}, exitFailure, "FAIL  peak_tokens <= 0.5x"},
		{"straddles the bound", []string{"--eval", straddle, "--rule", "success >= -0.1"}, exitFailure, "is -0.075 [-0.175, 0]: the lower bound -0.175 fails >= -0.1"},
		{"another task set", []string{"--eval", good, "--against-eval", other, "--rule", "success >= 0"}, exitUsage, "different task sets"},
		{"unknown metric", []string{"--eval", good, "--rule", "speed >= 0"}, exitUsage, `unknown metric "speed"`},
		{"not an eval dir", []string{"--eval", dir, "--rule", "success >= 0"}, exitUsage, "not an evaluation directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"gate", "--candidate", "cand", "--against", "prod"}, c.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("exit %d (want %d); output lacks %q:\n%s%s", code, c.code, c.want, stdout, stderr)
			}
		})
	}
}

// putPrompting stores the built-in history prompt in the registry in dir.
func putPrompting(t *testing.T, dir string) guideline.Record {
	t.Helper()
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := templates.Source("history_prompting.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: "test"}, src)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestPromoteWithGate(t *testing.T) {
	dir := t.TempDir()
	rec := putPrompting(t, filepath.Join(dir, "reg"))
	bad := writeEval(t, filepath.Join(dir, "bad"), 40, func(i int) bool { return i%3 == 0 }, 0.6, rec.ID)
	good := writeEval(t, filepath.Join(dir, "good"), 40, func(int) bool { return false }, 0.6, rec.ID)
	promote := func(evalDir string) (int, string) {
		code, stdout, stderr := runCLI(t, "guideline", "promote", rec.ID, "--registry", filepath.Join(dir, "reg"),
			"--gate", evalDir, "--against", "prod", "--rule", "success >= -0.01")
		return code, stdout + stderr
	}
	promoted := filepath.Join(dir, "reg", guideline.PromotedFile(guideline.KindHistory))
	if code, out := promote(bad); code != exitFailure || !strings.Contains(out, "gate failed") {
		t.Fatalf("failing gate: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(promoted); err == nil {
		t.Fatal("promoted despite a failing gate")
	}
	if code, out := promote(good); code != exitOK || !strings.Contains(out, "promoted "+rec.ID) {
		t.Fatalf("passing gate: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(promoted); err != nil {
		t.Fatalf("not promoted: %v", err)
	}
}

// TestPromoteSelected: "selected" with --run promotes the guideline the
// run's summary names, as make demo does.
func TestPromoteSelected(t *testing.T) {
	dir := t.TempDir()
	rec := putPrompting(t, filepath.Join(dir, pipeline.GuidelinesDir))
	sum := fmt.Sprintf(`{"selected_guideline": %q}`, rec.ID)
	if err := os.WriteFile(filepath.Join(dir, pipeline.SummaryFile), []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "guideline", "promote", "selected", "--run", dir)
	if code != exitOK || !strings.Contains(stdout, "promoted "+rec.ID) {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}
