package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/synth"
)

// synthJob is the demo job doing one thing at a time, each answer of the
// embedded model held for latency, with the edits applied.
func synthJob(t *testing.T, dir, latency string, edits ...func(string) string) string {
	t.Helper()
	return writeJob(t, dir, func(s string) string {
		s = strings.Replace(s, "rollout:\n  concurrency: 8", "rollout:\n  concurrency: 1", 1)
		for _, edit := range edits {
			s = edit(s)
		}
		return s + "\nembedded:\n  latency: " + latency + "\n"
	})
}

func TestSynthGenerate(t *testing.T) {
	dir := t.TempDir()
	cfg := synthJob(t, dir, "0s")
	out := filepath.Join(dir, "wf")
	code, stdout, stderr := runCLI(t, "synth", "generate", "--config", cfg, "--out", out, "--count", "12")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	sum := readJSON[synth.GenerateSummary](t, filepath.Join(out, synth.SummaryFile))
	if sum.Requested != 12 || sum.Generated == 0 || len(sum.ByDomain) != 3 || !strings.Contains(stdout, "generated") {
		t.Fatalf("summary %+v\n%s", sum, stdout)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no count", []string{"--count", "0"}, "--count"},
		{"bad noise", []string{"--count", "3", "--config", writeJob(t, t.TempDir(), func(s string) string {
			return strings.Replace(s, "noise: {min: 0.3, max: 0.7}", "noise: {min: 0.2, max: 1}", 1)
		})}, "synth.noise.max"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"synth", "generate", "--config", cfg, "--out", filepath.Join(dir, tt.name)}, tt.args...)
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitUsage, tt.want, stderr)
			}
		})
	}
}

// TestSynthGenerateKilled kills the real binary part way and runs it again:
// the outputs equal an uninterrupted run's.
func TestSynthGenerateKilled(t *testing.T) {
	dir := t.TempDir()
	cfg := synthJob(t, dir, "15ms")
	const count = "30"
	whole, parts := filepath.Join(dir, "whole"), filepath.Join(dir, "parts")
	if out, err := exec.Command(binary, "synth", "generate", "--config", cfg, "--out", whole, "--count", count).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	killAfterLines(t, exec.Command(binary, "synth", "generate", "--config", cfg, "--out", parts, "--count", count), filepath.Join(parts, synth.WorkflowsFile), 3)
	if _, err := os.Stat(filepath.Join(parts, synth.SummaryFile)); err == nil {
		t.Fatal("the run finished before the kill; the test needs a longer latency")
	}
	if out, err := exec.Command(binary, "synth", "generate", "--config", cfg, "--out", parts, "--count", count).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{synth.WorkflowsFile, synth.RejectedFile} {
		a, _ := os.ReadFile(filepath.Join(whole, name))
		b, _ := os.ReadFile(filepath.Join(parts, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after a kill and a re-run", name)
		}
	}
}
