package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteFileSkipsUnchanged: the same bytes and mode leave the file (the
// same inode) alone; any difference replaces it.
func TestWriteFileSkipsUnchanged(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		perm     os.FileMode
		replaced bool
	}{
		{"same content and mode", "hello\n", 0o644, false},
		{"other content of the same size", "HELLO\n", 0o644, true},
		{"longer content", "hello\nworld\n", 0o644, true},
		{"shorter content", "hell", 0o644, true},
		{"empty content", "", 0o644, true},
		{"other mode", "hello\n", 0o600, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.json")
			if err := WriteFile(path, []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(path, []byte(tt.data), tt.perm); err != nil {
				t.Fatal(err)
			}
			after, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if replaced := !os.SameFile(before, after); replaced != tt.replaced {
				t.Errorf("replaced = %v, want %v", replaced, tt.replaced)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.data {
				t.Errorf("content %q, want %q", got, tt.data)
			}
			if after.Mode().Perm() != Perm(tt.perm) {
				t.Errorf("mode %v, want %v", after.Mode().Perm(), Perm(tt.perm))
			}
		})
	}
}

// TestSweepStale removes old temporary files and directories anywhere under
// the root, and leaves recent ones (a live writer's) and ordinary files.
func TestSweepStale(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-2 * StaleAfter)
	files := []struct {
		rel   string
		dir   bool
		old   bool
		swept bool
	}{
		{"summary.json", false, true, false},
		{".summary.json" + TempSuffix + "123", false, true, true},
		{".summary.json" + TempSuffix + "456", false, false, false},
		{"stages/baseline/.manifest.json" + TempSuffix + "9", false, true, true},
		{"stages/baseline/manifest.json", false, true, false},
		{"datasets/.data" + TempSuffix + "ab", true, true, true},
		{"eval/.report.md" + TempSuffix + "cd", true, false, false},
		{"notes" + TempSuffix + "1", false, true, false}, // not hidden: not ours
	}
	for _, f := range files {
		p := filepath.Join(root, f.rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if f.dir {
			if err = os.Mkdir(p, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(p, "part"), []byte("x"), 0o644)
			}
		} else {
			err = os.WriteFile(p, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.old {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := SweepStale(root, StaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, f := range files {
		_, err := os.Stat(filepath.Join(root, f.rel))
		if gone := os.IsNotExist(err); gone != f.swept {
			t.Errorf("%s: removed = %v, want %v", f.rel, gone, f.swept)
		}
		if f.swept {
			want++
		}
	}
	if n != want {
		t.Errorf("SweepStale = %d, want %d", n, want)
	}
}
