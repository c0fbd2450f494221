package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/eval"
)

// demoSelectedGuideline is the history guideline `make demo` selects, kept
// byte for byte by serve's tests.
const demoSelectedGuideline = "../../serve/testdata/demo-selected.tmpl"

// demoEvalArgs returns the arguments of the `optimize eval` command of the
// Makefile's demo recipe, continuation lines joined, so the test runs the
// comparison the demo runs.
func demoEvalArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(b), "\ndemo:")
	if !ok {
		t.Fatal("Makefile has no demo target")
	}
	recipe = strings.ReplaceAll(recipe, "\\\n", " ")
	for _, line := range strings.Split(recipe, "\n")[1:] { // [0]: the prerequisites
		if line != "" && line[0] != '\t' {
			break // the recipe ends at the first line not indented by a tab
		}
		if f := strings.Fields(line); len(f) > 1 && f[1] == "eval" {
			return f[2:]
		}
	}
	t.Fatal("the demo recipe runs no optimize eval")
	return nil
}

// demoEvalForTest is demoEvalArgs for a test: the job cut to its first
// 30 tasks with a private cache, the selected guideline read from its
// file (there is no run to read it from), the output in out.
func demoEvalForTest(t *testing.T, dir, out string) []string {
	t.Helper()
	args := []string{"eval"}
	from := demoEvalArgs(t)
	for i := 0; i < len(from); i++ {
		switch a := from[i]; a {
		case "--config":
			args = append(args, a, writeJobFile(t, dir, filepath.Join("../..", from[i+1]), func(s string) string {
				return strings.Replace(s, "  step_limit:", "  train_limit: 30\n  test_limit: 30\n  step_limit:", 1)
			}))
			i++
		case "--run", "--out":
			i++
		case "--replace":
		default:
			args = append(args, strings.Replace(a, "guideline=selected", "guideline="+demoSelectedGuideline, 1))
		}
	}
	return append(args, "--out", out)
}

// TestDemoStrategies runs `make demo`'s strategy comparison (its job, split
// and candidates) on 30 tasks and checks what README's "Reading the demo
// table" says of each strategy there, as mechanics of the embedded model,
// not its quality: every strategy solves some tasks; retrieval, which
// keeps as many turns as fifo but chooses them by the next question,
// solves more; fifo, whose kept turns the agent can read, more than
// llmlingua, whose pruned sentences it cannot; the selected guideline,
// which copies facts word for word, at least as many as the naive prompt,
// which drops some; plan-aware, whose summary forgets answered questions,
// fewer; and every strategy shows the agent a smaller peak context than
// none.
func TestDemoStrategies(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "strategies")
	// The built binary: eight candidates on 30 tasks take minutes under
	// -race, and TestEvalWritesResultsAndReports and TestEvalSamples run
	// optimize eval in-process under it.
	code, stdout, stderr := runBinary(t, demoEvalForTest(t, dir, out)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Log(stdout)
	// make demo prints at most 40 lines: the run's brief, this one, the
	// promotion and the log lines of each.
	if n := strings.Count(stdout, "\n"); n > 12 {
		t.Errorf("the comparison prints %d lines, want at most 12:\n%s", n, stdout)
	}
	res, err := eval.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	metric := func(name, m string) float64 {
		a, ok := res.Arm(name)
		if !ok {
			t.Fatalf("the demo compares no candidate %q", name)
		}
		return a.Metrics[m].Point
	}
	success := func(name string) float64 { return metric(name, eval.MetricSuccess) }
	nonePeak := metric("none", eval.MetricPeakTokens)
	for _, a := range res.Summary.Candidates {
		if success(a.Name) == 0 {
			t.Errorf("%s solves no task", a.Name)
		}
		if peak := metric(a.Name, eval.MetricPeakTokens); a.Name != "none" && peak >= nonePeak {
			t.Errorf("%s: peak %.0f tokens, not below none's %.0f", a.Name, peak, nonePeak)
		}
	}
	for _, c := range []struct{ more, less string }{
		{"retrieval", "fifo"},
		{"fifo", "llmlingua"},
		{"prompting", "plan-aware"},
	} {
		if success(c.more) <= success(c.less) {
			t.Errorf("success of %s %.2f, want more than %s's %.2f", c.more, success(c.more), c.less, success(c.less))
		}
	}
	if success("guideline") < success("prompting") {
		t.Errorf("success of the selected guideline %.2f, want at least prompting's %.2f", success("guideline"), success("prompting"))
	}
}
