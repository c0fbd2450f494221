package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
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
