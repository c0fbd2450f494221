package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
)

// fakeEntry writes a store entry of size bytes last used age ago and
// returns its path.
func fakeEntry(t *testing.T, s *StageStore, name string, size int, age time.Duration) string {
	t.Helper()
	e := s.entry(name, "h")
	if err := os.MkdirAll(filepath.Join(e, "rollout"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e, ManifestFile), []byte(`{"status":"done","inputs_hash":"h"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e, "rollout", "trajectories.jsonl"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	used := time.Now().Add(-age)
	if err := os.Chtimes(e, used, used); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPruneStageStore(t *testing.T) {
	const kb = 1 << 10
	manifest := int64(len(`{"status":"done","inputs_hash":"h"}`))
	tests := []struct {
		name      string
		olderThan time.Duration
		maxBytes  int64
		keepAge   time.Duration // entries used more recently than this are kept (0: none)
		want      []string      // entries left
	}{
		{"age only", 36 * time.Hour, 0, 0, []string{"new", "mid"}},
		{"size only evicts the least recently used", 0, 2*(100*kb+manifest) + 1, 0, []string{"new", "mid"}},
		{"size and age", 36 * time.Hour, 100*kb + manifest, 0, []string{"new"}},
		{"a run keeps what it used", 0, 1, 30 * time.Minute, []string{"new"}},
		{"under the bound", 0, 1 << 30, 0, []string{"new", "mid", "old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &StageStore{dir: t.TempDir()}
			entries := map[string]string{
				"new": fakeEntry(t, s, "new", 100*kb, time.Minute),
				"mid": fakeEntry(t, s, "mid", 100*kb, 24*time.Hour),
				"old": fakeEntry(t, s, "old", 100*kb, 48*time.Hour),
			}
			var keep time.Time
			if tt.keepAge > 0 {
				keep = time.Now().Add(-tt.keepAge)
			}
			res, err := PruneStageStore(s.dir, tt.olderThan, tt.maxBytes, keep)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for name, e := range entries {
				if _, err := os.Stat(e); err == nil {
					left = append(left, name)
				}
			}
			slices.Sort(left)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(left, want) {
				t.Errorf("left %v, want %v", left, want)
			}
			if res.Removed != 3-len(want) || res.Entries != len(want) || res.BytesAfter != int64(len(want))*(100*kb+manifest) {
				t.Errorf("result %+v for %d entries left", res, len(want))
			}
			if n, b, err := StageStoreStats(s.dir); err != nil || n != len(want) || b != res.BytesAfter {
				t.Errorf("StageStoreStats = %d, %d, %v; want %d, %d", n, b, err, len(want), res.BytesAfter)
			}
		})
	}
}

// TestStageStoreUseAndTemps: a lookup marks its entry used, so it is
// evicted last; a save killed long ago leaves a temporary directory that
// pruning removes, a recent one (a live save) stays.
func TestStageStoreUseAndTemps(t *testing.T) {
	s := &StageStore{dir: t.TempDir()}
	a := fakeEntry(t, s, "a", 10, 48*time.Hour)
	b := fakeEntry(t, s, "b", 10, 24*time.Hour)
	if s.lookup("a", "h") != a {
		t.Fatal("lookup missed entry a")
	}
	stale := filepath.Join(filepath.Dir(b), ".tmp-1")
	live := filepath.Join(filepath.Dir(b), ".tmp-2")
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "rollout"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * atomicfile.StaleAfter)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// Room for one entry: b, used less recently than a, goes.
	res, err := PruneStageStore(s.dir, 0, 50, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	_, errA := os.Stat(a)
	_, errB := os.Stat(b)
	if res.Temps != 1 || res.Removed != 1 || errA != nil || !os.IsNotExist(errB) {
		t.Fatalf("result %+v; a: %v, b: %v (want a kept, b evicted)", res, errA, errB)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary directory kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live temporary directory removed: %v", err)
	}
}
