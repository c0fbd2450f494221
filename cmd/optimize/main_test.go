package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/rollout"
)

// binary is the optimize command built for tests that need a real process
// (SIGKILL, a standalone embedded model).
var binary string

// testDir is the test binary's own temporary directory, removed when the
// tests end: the binary, and the fixtures tests share (briefRun).
var testDir string

func TestMain(m *testing.M) {
	if os.Getenv(rssSpawnEnv) != "" {
		os.Exit(spawnForRSS(os.Getenv(rssSpawnEnv), os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "optimize-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	binary = filepath.Join(dir, "optimize")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build optimize: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeJob writes the demo job with a private cache and the given extra
// YAML appended (later keys win).
func writeJob(t *testing.T, dir string, edit func(string) string) string {
	t.Helper()
	return writeJobFile(t, dir, "../../jobs/demo.yaml", edit)
}

// writeJobFile writes the job file at src with a private cache, edited by
// edit when it is not nil.
func writeJobFile(t *testing.T, dir, src string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	job := strings.Replace(string(b), "path: .cache/llm.db", "path: "+filepath.Join(dir, "cache", "llm.db"), 1)
	if edit != nil {
		job = edit(job)
	}
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyDataset copies the bundled qa dataset and lets edit change a file.
func copyDataset(t *testing.T, dir string, edit func(name string, data []byte) []byte) string {
	t.Helper()
	ds := filepath.Join(dir, "qa")
	if err := os.MkdirAll(ds, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"corpus.jsonl", "train.jsonl", "test.jsonl", "VERSION"} {
		b, err := os.ReadFile(filepath.Join("../../datasets/qa", name))
		if err != nil {
			t.Fatal(err)
		}
		if b = edit(name, b); b != nil {
			if err := os.WriteFile(filepath.Join(ds, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ds
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"optimize"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// runBinary runs the built command (not race-instrumented) as runCLI runs
// it in-process: for a test whose subject is what a long command computes,
// where the race detector would make it several times slower and other
// tests run the same code in-process under -race.
func runBinary(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func TestRolloutStrategies(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, nil)
	for _, s := range []string{"none", "fifo", "prompting"} {
		out := filepath.Join(dir, s)
		code, stdout, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", s, "--limit", "4", "--out", out)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", s, code, stderr)
		}
		if !strings.Contains(stdout, "success") || !strings.Contains(stdout, "embedded offline model") {
			t.Errorf("%s: table missing:\n%s", s, stdout)
		}
		sum := readSummary(t, out)
		if sum.Tasks != 4 || sum.Strategy != s || sum.LLMCalls == 0 {
			t.Errorf("%s: summary %+v", s, sum)
		}
	}
	code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "guideline", "--out", filepath.Join(dir, "g"))
	if code != exitUsage || !strings.Contains(stderr, "--guideline") {
		t.Errorf("guideline without file: exit %d: %s", code, stderr)
	}
}

func readSummary(t *testing.T, dir string) rollout.Summary {
	t.Helper()
	return readJSON[rollout.Summary](t, filepath.Join(dir, rollout.SummaryFile))
}

// readJSON decodes the JSON file at path into a T, failing the test when it
// cannot be read or decoded.
func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestRolloutSurvivesSIGKILL kills a rollout mid-run and runs the same
// command again: it completes, reuses the finished tasks, answers the
// interrupted ones from the cache, and writes one record per task.
func TestRolloutSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, func(s string) string {
		// Slow calls so the kill lands mid-run.
		return strings.Replace(s, "rollout:\n  concurrency: 8", "rollout:\n  concurrency: 4\nembedded:\n  latency: 20ms", 1)
	})
	out := filepath.Join(dir, "out")
	args := []string{"rollout", "--config", cfg, "--strategy", "prompting", "--limit", "24", "--out", out}
	cmd := exec.Command(binary, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(out+".partial", rollout.TrajectoriesFile)
	deadline := time.Now().Add(2 * time.Minute)
	for countLines(partial) < 4 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("rollout made no progress")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a killed rollout left a finished-looking output directory")
	}
	killedAt := countLines(partial)
	if killedAt >= 24 {
		t.Skip("the run finished before the kill landed")
	}

	again := exec.Command(binary, args...)
	var stderr bytes.Buffer
	again.Stderr = &stderr
	if err := again.Run(); err != nil {
		t.Fatalf("re-run: %v\n%s", err, stderr.String())
	}
	sum := readSummary(t, out)
	if sum.ResumedTasks < 4 || sum.CacheHits == 0 || sum.Tasks != 24 {
		t.Fatalf("resumed %d tasks (killed after %d), %d cache hits, %d tasks", sum.ResumedTasks, killedAt, sum.CacheHits, sum.Tasks)
	}
	t.Logf("killed after %d of 24 tasks; re-run resumed %d, %d cache hits", killedAt, sum.ResumedTasks, sum.CacheHits)
	trs, err := rollout.ReadTrajectories(filepath.Join(out, rollout.TrajectoriesFile))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tr := range trs {
		if seen[tr.TaskID] {
			t.Fatalf("task %s recorded twice", tr.TaskID)
		}
		seen[tr.TaskID] = true
	}
	if len(seen) != 24 {
		t.Fatalf("%d records, want 24", len(seen))
	}
}

// countLines counts the records of a JSONL file.
func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	// Only lines ended by their newline: a record a killed process was
	// writing is torn, and readers drop it.
	n := 0
	buf := make([]byte, 1<<16)
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err != nil {
			return n
		}
	}
}

// TestRolloutAgainstFaultyServer runs `optimize sim` standalone with 20%
// 429/5xx and 5% malformed tool calls: the rollout completes and counts
// what it retried.
func TestRolloutAgainstFaultyServer(t *testing.T) {
	sim := startSim(t, "--rate-429", "0.1", "--rate-5xx", "0.1", "--rate-malformed", "0.05", "--retry-after", "1s")
	url := sim.url

	dir := t.TempDir()
	cfg := writeJob(t, dir, func(s string) string {
		return strings.ReplaceAll(s, "base_url: embedded", "base_url: "+url+"\n    no_key: true")
	})
	out := filepath.Join(dir, "out")
	// Six tasks meet every kind of fault, as twelve did (logged).
	code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "prompting", "--limit", "6", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	sum := readSummary(t, out)
	if sum.Retries == 0 || sum.MalformedToolCalls == 0 {
		t.Fatalf("retries %d, malformed %d: the faults were not seen", sum.Retries, sum.MalformedToolCalls)
	}
	t.Logf("%d tasks: %d llm calls, %d retries, %d malformed tool calls asked again, %d infra failures", sum.Tasks, sum.LLMCalls, sum.Retries, sum.MalformedToolCalls, sum.InfraFailures)
	if sum.Tasks != 6 || sum.Scored+sum.InfraFailures != 6 {
		t.Fatalf("summary %+v", sum)
	}
}
