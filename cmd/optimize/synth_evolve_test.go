package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/synth"
)

// evolveJob is synthJob with a small search: 3 prompts, 2 generations, 4
// workflows each.
func evolveJob(t *testing.T, dir, latency string) string {
	t.Helper()
	return synthJob(t, dir, latency, strings.NewReplacer("population: 8\n", "population: 3\n", "generations: 3\n", "generations: 2\n",
		"sample: 16 ", "sample: 4 ", "elite: 2 ", "elite: 1 ").Replace)
}

// TestSynthEvolveKilled kills the real binary with SIGKILL while it scores
// a child and runs it again: the re-run asks the optimizer only for the
// children the killed run had not written, reuses every prompt's finished
// executions, and its outputs equal an uninterrupted run's.
func TestSynthEvolveKilled(t *testing.T) {
	dir := t.TempDir()
	wf := synthGenerated(t, dir, evolveJob(t, dir, "0s"), "6")
	whole, parts := filepath.Join(dir, "whole"), filepath.Join(dir, "parts")
	// The uninterrupted run has a cache of its own, so the killed one
	// answers nothing from it.
	if out, err := exec.Command(binary, "synth", "evolve", "--config", evolveJob(t, t.TempDir(), "0s"), "--workflows", wf, "--out", whole).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	slow := evolveJob(t, t.TempDir(), "3ms")
	// The seed's run covers the 4 sampled workflows; a fifth execution
	// is the first child's: the kill comes while generation 0 scores it.
	executions := func() int {
		n := 0
		runs, _ := filepath.Glob(filepath.Join(parts, synth.PromptsDir, "*", synth.ExecutionsFile))
		for _, f := range runs {
			n += countLines(f)
		}
		return n
	}
	killWhen(t, exec.Command(binary, "synth", "evolve", "--config", slow, "--workflows", wf, "--out", parts), func() bool { return executions() >= 5 })
	if _, err := os.Stat(filepath.Join(parts, synth.EvolutionFile)); err == nil {
		t.Fatal("the search finished before the kill; the test needs a longer latency")
	}
	journaled := countLines(filepath.Join(parts, synth.ChildrenFile))
	executed := executions()
	if journaled == 0 || executed < 5 {
		t.Fatalf("before the kill: %d children journaled, %d executions; want at least 1 and 5", journaled, executed)
	}

	out, err := exec.Command(binary, "synth", "evolve", "--config", slow, "--workflows", wf, "--out", parts).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sum := readJSON[synth.EvolveSummary](t, filepath.Join(whole, synth.EvolutionFile))
	if got, want := roleCalls(t, string(out), "optimizer"), sum.Usage[llm.RoleOptimizer].Calls-journaled; got != want {
		t.Errorf("the re-run asked the optimizer %d times; want %d (%d of the search's %d children were journaled before the kill)\n%s",
			got, want, journaled, sum.Usage[llm.RoleOptimizer].Calls, out)
	}
	resumed := 0
	summaries, _ := filepath.Glob(filepath.Join(parts, synth.PromptsDir, "*", synth.RunSummaryFile))
	for _, f := range summaries {
		resumed += readJSON[synth.RunSummary](t, f).Resumed
	}
	if resumed != executed {
		t.Errorf("the re-run reused %d executions of the prompts' runs; %d were finished before the kill", resumed, executed)
	}

	// Everything but the registry records' creation times and the
	// per-invocation run summaries is byte-equal.
	for _, name := range []string{synth.EvolutionFile, synth.BestFile, synth.SampleFile, synth.ChildrenFile, filepath.Join("run", synth.ExecutionsFile)} {
		sameFile(t, whole, parts, name)
	}
	for _, pattern := range []string{filepath.Join(synth.RegistryDir, "*"), filepath.Join(synth.PromptsDir, "*", synth.ExecutionsFile)} {
		a, _ := filepath.Glob(filepath.Join(whole, pattern))
		b, _ := filepath.Glob(filepath.Join(parts, pattern))
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d files after the kill and re-run, %d uninterrupted", pattern, len(b), len(a))
		}
		for _, f := range a {
			rel, _ := filepath.Rel(whole, f)
			if strings.HasSuffix(f, ".json") {
				sameRecord(t, whole, parts, rel)
				continue
			}
			sameFile(t, whole, parts, rel)
		}
	}
}

// killWhen starts cmd and kills it with SIGKILL once ready holds (or after
// 20 s).
func killWhen(t *testing.T, cmd *exec.Cmd, ready func() bool) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !ready() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// roleCalls reads a role's calls from the role table a command prints.
func roleCalls(t *testing.T, out, role string) int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == role {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("role table: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

func sameFile(t *testing.T, a, b, rel string) {
	t.Helper()
	x, errA := os.ReadFile(filepath.Join(a, rel))
	y, errB := os.ReadFile(filepath.Join(b, rel))
	if errA != nil || errB != nil || !bytes.Equal(x, y) {
		t.Errorf("%s differs after a kill and a re-run (%v, %v)", rel, errA, errB)
	}
}

// sameRecord compares two registry records but for their creation times.
func sameRecord(t *testing.T, a, b, rel string) {
	t.Helper()
	x := readJSON[guideline.Record](t, filepath.Join(a, rel))
	y := readJSON[guideline.Record](t, filepath.Join(b, rel))
	x.Created, y.Created = time.Time{}, time.Time{}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	if !bytes.Equal(xb, yb) {
		t.Errorf("registry record %s differs after a kill and a re-run:\n%s\n%s", rel, xb, yb)
	}
}
