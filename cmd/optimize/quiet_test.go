package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/pipeline"
)

// sharedRun is one finished `optimize run`, with what it printed.
type sharedRun struct {
	cfg, out       string
	code           int
	stdout, stderr string
	ok             bool // false: the first test to ask failed making it
}

var (
	briefOnce sync.Once
	brief     sharedRun
)

// briefRun is `optimize run` of the demo job cut to 6 train and 4 test
// tasks and 2 candidates, made once (about a minute under -race) for the
// tests that read it: TestRunOutputIsBrief checks what this first
// invocation printed, TestDistillRunSkipsEvaluation distills its
// directory. It lives in testDir, not in the first caller's TempDir.
func briefRun(t *testing.T) sharedRun {
	t.Helper()
	briefOnce.Do(func() {
		dir, err := os.MkdirTemp(testDir, "brief-run")
		if err != nil {
			t.Fatal(err)
		}
		cfg := writeJob(t, dir, func(s string) string {
			s = strings.Replace(s, "step_limit: 30", "step_limit: 30\n  train_limit: 6\n  test_limit: 4", 1)
			return strings.Replace(s, "candidates: 5", "candidates: 2", 1)
		})
		out := filepath.Join(dir, "run")
		code, stdout, stderr := runCLI(t, "run", "--config", cfg, "--out", out)
		brief = sharedRun{cfg: cfg, out: out, code: code, stdout: stdout, stderr: stderr, ok: true}
	})
	if !brief.ok {
		t.Fatal("the shared run (briefRun) failed in an earlier test")
	}
	if brief.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", brief.code, brief.stdout, brief.stderr)
	}
	return brief
}

// TestRunOutputIsBrief: `optimize run` prints the verdict and where its
// files went, not the report; the embedded model costs nothing; a first
// run says nothing about unchanged stages, and the same command again
// does (every stage is reused).
func TestRunOutputIsBrief(t *testing.T) {
	first := briefRun(t)
	out := first.out
	for _, again := range []bool{false, true} {
		code, stdout, stderr := first.code, first.stdout, first.stderr
		if again {
			code, stdout, stderr = runCLI(t, "run", "--config", first.cfg, "--out", out)
		}
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
