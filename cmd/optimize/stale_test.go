package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRolloutOutUnderOtherEnvSettings: optimize rollout into a directory
// holding a finished rollout reuses it only when nothing that changes a
// result changed; an environment option alone (search_budget, top_k)
// makes it refuse, naming the directory, instead of serving the old
// records.
func TestRolloutOutUnderOtherEnvSettings(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r")
	rollout := func(edit func(string) string) (int, string) {
		cfg := writeJob(t, dir, edit)
		code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "none", "--limit", "2", "--out", out)
		return code, stderr
	}
	if code, stderr := rollout(nil); code != 0 {
		t.Fatalf("first rollout: exit %d\n%s", code, stderr)
	}
	records := filepath.Join(out, "trajectories.jsonl")
	fi, err := os.Stat(records)
	if err != nil {
		t.Fatal(err)
	}
	written := fi.ModTime()
	for _, tc := range []struct {
		name   string
		edit   func(string) string
		refuse bool
	}{
		{"nothing", nil, false},
		{"rollout concurrency", func(s string) string { return strings.Replace(s, "concurrency: 8", "concurrency: 3", 1) }, false},
		{"search_budget", func(s string) string {
			return strings.Replace(s, "step_limit: 30", "step_limit: 30\n  search_budget: 2", 1)
		}, true},
		{"top_k", func(s string) string { return strings.Replace(s, "top_k: 3", "top_k: 2", 1) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := rollout(tc.edit)
			if !tc.refuse {
				// Reused: the records are not written again.
				if fi, err := os.Stat(records); code != 0 || err != nil || !fi.ModTime().Equal(written) {
					t.Fatalf("exit %d, records %v (rewritten: %v)\n%s", code, err, err == nil && !fi.ModTime().Equal(written), stderr)
				}
				return
			}
			if code == 0 || !strings.Contains(stderr, out) || !strings.Contains(stderr, "another configuration") {
				t.Fatalf("exit %d, want a refusal naming %s:\n%s", code, out, stderr)
			}
		})
	}
}
