package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/synth"
)

// synthGenerated generates n workflows with the CLI into dir/wf.
func synthGenerated(t *testing.T, dir, cfg string, n string) string {
	t.Helper()
	wf := filepath.Join(dir, "wf")
	if out, err := exec.Command(binary, "synth", "generate", "--config", cfg, "--out", wf, "--count", n).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return wf
}

func TestSynthRun(t *testing.T) {
	dir := t.TempDir()
	cfg := synthJob(t, dir, "0s")
	wf := synthGenerated(t, dir, cfg, "9")
	out := filepath.Join(dir, "run")
	code, stdout, stderr := runCLI(t, "synth", "run", "--config", cfg, "--workflows", wf, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	sum := readJSON[synth.RunSummary](t, filepath.Join(out, synth.RunSummaryFile))
	if sum.Executed != sum.Generated || sum.Executed == 0 || sum.Accepted == 0 || sum.Compressions == 0 || sum.Usage["judge"].Calls != 2*sum.Executed || sum.Usage["generator"].Calls != sum.Generated || !strings.Contains(stdout, "accepted") {
		t.Fatalf("summary %+v\n%s", sum, stdout)
	}
	// The accepted workflows' compressions are paace rows of a dataset
	// that optimize distill validate accepts.
	ds := filepath.Join(dir, "ds")
	if code, stdout, stderr := runCLI(t, "distill", "--synth", out, "--out", ds, "--validation-fraction", "0"); code != 0 {
		t.Fatalf("distill: exit %d\n%s\n%s", code, stdout, stderr)
	}
	rows, err := os.ReadFile(filepath.Join(ds, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rows), `"kind":"paace"`); n != sum.TrainingPairs || n == 0 {
		t.Fatalf("%d paace rows; the run counted %d training pairs", n, sum.TrainingPairs)
	}
	if code, stdout, stderr := runCLI(t, "distill", "validate", filepath.Join(ds, "train.jsonl"), filepath.Join(ds, "train.messages.jsonl"), filepath.Join(ds, "data", "train.parquet")); code != 0 {
		t.Fatalf("distill validate: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no workflows", []string{"--workflows", filepath.Join(dir, "missing")}, "--workflows"},
		{"bad teacher", []string{"--workflows", wf, "--teacher", writeFile(t, dir, "t.tmpl", "{{ task }} only")}, "guideline"},
		{"bad threshold", []string{"--workflows", wf, "--config", writeJob(t, t.TempDir(), func(s string) string {
			return strings.Replace(s, "threshold: 0.9 ", "threshold: -1 ", 1)
		})}, "synth.accept.threshold"},
		{"elite not below population", []string{"--workflows", wf, "--config", writeJob(t, t.TempDir(), func(s string) string {
			return strings.Replace(s, "elite: 2 ", "elite: 8 ", 1)
		})}, "synth.evolve.elite"},
		{"damaged workflows line", []string{"--workflows", writeFile(t, dir, "damaged.jsonl", `{"id": "wf-000000", "inp`+"\n{}\n")}, "damaged.jsonl:1: not JSON"},
		{"another run's directory", []string{"--workflows", wf, "--out", out, "--config", writeJob(t, t.TempDir(), func(s string) string {
			return strings.Replace(s, "threshold: 0.9 ", "threshold: 0.5 ", 1)
		})}, "other settings"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"synth", "run", "--config", cfg, "--out", filepath.Join(dir, tt.name)}, tt.args...)
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitUsage, tt.want, stderr)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSynthRunKilled kills the real binary with SIGKILL part way and runs
// it again: it completes, keeps the workflows it finished, and its outputs
// equal an uninterrupted run's.
func TestSynthRunKilled(t *testing.T) {
	dir := t.TempDir()
	cfg := synthJob(t, dir, "0s")
	wf := synthGenerated(t, dir, cfg, "16")
	// Each run has a cache of its own, so the killed one answers nothing
	// from the whole one's, and a latency that makes it slow enough to be
	// killed part way.
	slow := synthJob(t, t.TempDir(), "4ms")
	whole, parts := filepath.Join(dir, "whole"), filepath.Join(dir, "parts")
	if out, err := exec.Command(binary, "synth", "run", "--config", synthJob(t, t.TempDir(), "0s"), "--workflows", wf, "--out", whole).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	killAfterLines(t, exec.Command(binary, "synth", "run", "--config", slow, "--workflows", wf, "--out", parts), filepath.Join(parts, synth.ExecutionsFile), 3)
	if _, err := os.Stat(filepath.Join(parts, synth.RunSummaryFile)); err == nil {
		t.Fatal("the run finished before the kill; the test needs a longer latency")
	}
	b, _ := os.ReadFile(filepath.Join(parts, synth.ExecutionsFile))
	done := bytes.Count(b, []byte("\n"))
	out, err := exec.Command(binary, "synth", "run", "--config", slow, "--workflows", wf, "--out", parts).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var sum synth.RunSummary
	if b, err := os.ReadFile(filepath.Join(parts, synth.RunSummaryFile)); err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("no summary after the re-run: %v", err)
	}
	if sum.Resumed != done || done == 0 {
		t.Fatalf("the re-run started at workflow %d; %d were finished before the kill", sum.Resumed, done)
	}
	a, _ := os.ReadFile(filepath.Join(whole, synth.ExecutionsFile))
	b, _ = os.ReadFile(filepath.Join(parts, synth.ExecutionsFile))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("%s differs after a kill and a re-run", synth.ExecutionsFile)
	}
}

// killAfterLines starts cmd and kills it with SIGKILL once file holds n
// lines (or after 20 s).
func killAfterLines(t *testing.T, cmd *exec.Cmd, file string, n int) {
	t.Helper()
	killWhen(t, cmd, func() bool { return countLines(file) >= n })
}

func TestSynthEvolve(t *testing.T) {
	dir := t.TempDir()
	cfg := evolveJob(t, dir, "0s")
	wf := synthGenerated(t, dir, cfg, "6")
	out := filepath.Join(dir, "evo")
	code, stdout, stderr := runCLI(t, "synth", "evolve", "--config", cfg, "--workflows", wf, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var sum synth.EvolveSummary
	if b, err := os.ReadFile(filepath.Join(out, synth.EvolutionFile)); err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("evolution.json: %v", err)
	}
	if len(sum.Generations) != 2 || sum.Settings.Population != 3 || !strings.Contains(stdout, "generation 1:") || !strings.Contains(stdout, "best: "+sum.Best.ID) {
		t.Fatalf("summary %+v\n%s", sum, stdout)
	}
	// The best prompt is the export's teacher.
	var run synth.RunConfig
	if b, err := os.ReadFile(filepath.Join(out, "run", synth.RunSettingsFile)); err != nil || json.Unmarshal(b, &run) != nil || run.TeacherGuideline != sum.Best.ID {
		t.Fatalf("export teacher %q, best %s (%v)", run.TeacherGuideline, sum.Best.ID, err)
	}
	code, stdout, stderr = runCLI(t, "guideline", "list", "--registry", filepath.Join(out, synth.RegistryDir))
	if code != 0 || !strings.Contains(stdout, sum.Best.ID) {
		t.Fatalf("guideline list: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
