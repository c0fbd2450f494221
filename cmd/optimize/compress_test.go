package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/rollout"
)

// TestRolloutEveryStrategy runs each strategy on two tasks and checks it
// recorded the compression events it made.
func TestRolloutEveryStrategy(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, nil)
	for _, s := range compress.Names() {
		t.Run(string(s), func(t *testing.T) {
			out := filepath.Join(dir, string(s))
			args := []string{"rollout", "--config", cfg, "--strategy", string(s), "--limit", "2", "--out", out}
			if s == compress.Guideline {
				args = append(args, "--guideline", "../../templates/history_prompting.tmpl")
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stdout, string(s)) {
				t.Errorf("table missing the strategy:\n%s", stdout)
			}
			trs, err := rollout.ReadTrajectories(filepath.Join(out, rollout.TrajectoriesFile))
			if err != nil {
				t.Fatal(err)
			}
			events, calls := 0, 0
			for _, tr := range trs {
				if tr.Strategy != string(s) {
					t.Fatalf("trajectory strategy %q", tr.Strategy)
				}
				for _, e := range tr.Events {
					if e.Strategy != s {
						t.Fatalf("event of strategy %q in a %s rollout", e.Strategy, s)
					}
					events++
					calls += e.Calls
				}
				if tr.Metrics.CompressorCalls > calls {
					t.Fatalf("compressor calls %d but events account for %d", tr.Metrics.CompressorCalls, calls)
				}
				for _, turn := range tr.Turns {
					if turn.ContextTokens <= 0 {
						t.Fatalf("step %d has no context size", turn.Step)
					}
				}
			}
			if (events > 0) != (s != compress.None) {
				t.Errorf("%d compression events", events)
			}
			t.Logf("%s: %d compression events, %d compressor calls over 2 tasks", s, events, calls)
		})
	}
}

func TestRolloutStrategyBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"unknown strategy", "", []string{"--strategy", "lingua"}, `--strategy: unknown strategy "lingua": want one of none, fifo, retrieval`},
		{"threshold order", "\n  pace:\n    alpha: 0.9\n    beta: 0.8\n    gamma: 1.5\n", []string{"--strategy", "pace"}, "field compression.pace: thresholds must satisfy 0 < alpha < beta < gamma"},
		{"negative k", "\n  plan_aware:\n    k: -1\n", []string{"--strategy", "plan-aware"}, "field compression.plan_aware.k: must not be negative"},
		{"guideline file with fifo", "", []string{"--strategy", "fifo", "--guideline", "x.tmpl"}, "--guideline goes with --strategy guideline or plan-aware, not fifo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeJob(t, t.TempDir(), func(s string) string {
				return strings.Replace(s, "  fifo_keep: 5\n", "  fifo_keep: 5"+tc.yaml, 1)
			})
			args := append([]string{"rollout", "--config", cfg, "--limit", "1", "--out", filepath.Join(dir, tc.name)}, tc.args...)
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d with %q; stderr:\n%s", code, exitUsage, tc.want, stderr)
			}
		})
	}
}
