package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheCommand fills a private cache with a short rollout, then reads
// its statistics and prunes it; bad flags are usage errors.
func TestCacheCommand(t *testing.T) {
	dir := t.TempDir()
	job := writeJob(t, dir, nil)
	cache := filepath.Join(dir, "cache", "llm.db")
	if code, _, errs := runCLI(t, "rollout", "--config", job, "--strategy", "none", "--limit", "2", "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, "cache", "stats", "--config", job)
	if code != 0 || !strings.Contains(out, cache) || !strings.Contains(out, "hit rate 0.0%") || strings.Contains(out, "entries:  0 chat") || !strings.Contains(out, "stages:   0 stored stages") {
		t.Fatalf("stats: exit %d\n%s%s", code, out, errs)
	}
	// The same rollout again is answered from the cache.
	if code, _, errs := runCLI(t, "rollout", "--config", job, "--strategy", "none", "--limit", "2", "--out", filepath.Join(dir, "again")); code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, errs)
	}
	if _, out, _ = runCLI(t, "cache", "stats", "--path", cache); !strings.Contains(out, "hit rate 100.0%") {
		t.Fatalf("stats after a cached rollout:\n%s", out)
	}
	code, out, errs = runCLI(t, "cache", "prune", "--path", cache, "--max-size", "1MB")
	if code != 0 || !strings.Contains(out, "removed ") {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errs)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"prune needs a bound", []string{"cache", "prune", "--path", cache}, "give --older-than, --max-size, --stages-max-size or several"},
		{"bad size", []string{"cache", "prune", "--path", cache, "--max-size", "lots"}, "--max-size"},
		{"bad age", []string{"cache", "prune", "--path", cache, "--older-than", "soon"}, "--older-than"},
		{"bad stage store size", []string{"cache", "prune", "--path", cache, "--stages-max-size", "0"}, "--stages-max-size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, exitUsage, tc.want)
			}
		})
	}
	if code, _, errs := runCLI(t, "cache", "stats", "--path", filepath.Join(dir, "missing.db")); code != exitUsage || !strings.Contains(errs, "missing.db") {
		t.Fatalf("stats of a missing cache: exit %d, %s", code, errs)
	}
}
