package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCachePruneStageStore: cache prune bounds the stage store beside the
// cache by age and by size, least recently used first.
func TestCachePruneStageStore(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "llm.db")
	entry := func(name string, age time.Duration) string {
		e := filepath.Join(dir, "stages", name[:2], name)
		if err := os.MkdirAll(e, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e, "manifest.json"), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		used := time.Now().Add(-age)
		if err := os.Chtimes(e, used, used); err != nil {
			t.Fatal(err)
		}
		return e
	}
	old, mid, recent := entry("aa01", 60*24*time.Hour), entry("bb02", 2*24*time.Hour), entry("cc03", time.Hour)
	code, out, errs := runCLI(t, "cache", "prune", "--path", cache, "--stages-max-size", "10KB")
	if code != 0 || !strings.Contains(out, "stage store: removed 1 stored stages") {
		t.Fatalf("prune by size: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the least recently used stage was kept: %v", err)
	}
	code, out, errs = runCLI(t, "cache", "prune", "--path", cache, "--stages-max-size", "1GB")
	if code != 0 || !strings.Contains(out, "removed 0 stored stages") {
		t.Fatalf("prune under the bound: exit %d\n%s%s", code, out, errs)
	}
	for _, e := range []string{mid, recent} {
		if _, err := os.Stat(e); err != nil {
			t.Errorf("%s removed under the bound: %v", e, err)
		}
	}
}
