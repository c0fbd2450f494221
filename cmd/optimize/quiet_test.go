package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/pipeline"
)

// TestRunOutputIsBrief: `optimize run` prints the verdict and where its
// files went, not the report; the embedded model costs nothing; a first
// run says nothing about unchanged stages, and the same command again
// does (every stage is reused).
func TestRunOutputIsBrief(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, func(s string) string {
		s = strings.Replace(s, "step_limit: 30", "step_limit: 30\n  train_limit: 6\n  test_limit: 4", 1)
		return strings.Replace(s, "candidates: 5", "candidates: 2", 1)
	})
	out := filepath.Join(dir, "run")
	for _, again := range []bool{false, true} {
		code, stdout, stderr := runCLI(t, "run", "--config", cfg, "--out", out)
		if code != 0 {
			t.Fatalf("again=%v: exit %d\n%s\n%s", again, code, stdout, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) > 15 {
			t.Errorf("again=%v: stdout has %d lines, want at most 15:\n%s", again, len(lines), stdout)
		}
		for _, want := range []string{filepath.Join(out, "report.md"), filepath.Join(out, "report.html"), filepath.Join(out, pipeline.SummaryFile), "money spent: " + pipeline.NoMoney, "success on the test split", "verdict: "} {
			if !strings.Contains(stdout, want) {
				t.Errorf("again=%v: stdout does not say %q:\n%s", again, want, stdout)
			}
		}
		if !strings.Contains(stderr, `usd="`+pipeline.NoMoney+`"`) {
			t.Errorf("again=%v: the projected cost of the embedded model is not none:\n%s", again, stderr)
		}
		if sum := readJSON[pipeline.RunSummary](t, filepath.Join(out, pipeline.SummaryFile)); sum.Spent.Calls == 0 || sum.Spent.CostUSD != 0 || sum.Projected.USD != 0 {
			t.Errorf("again=%v: summary spent %+v, projected %+v: the embedded model's calls cost $0", again, sum.Spent, sum.Projected)
		}
		if got := strings.Contains(stdout+stderr, "unchanged"); got != again {
			t.Errorf("again=%v: says \"unchanged\": %v\n%s\n%s", again, got, stdout, stderr)
		}
	}
}
