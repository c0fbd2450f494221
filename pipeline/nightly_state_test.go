package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPending: the range past the cursor ends at the last complete line,
// across the backwards read's block boundary, and a replaced log is read
// from its start; copyRange streams exactly that range.
func TestPending(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log.jsonl")
	long := strings.Repeat("x", 70<<10) // longer than one block of lineEnd
	for _, tc := range []struct {
		name, content string
		cursor        Cursor
		want          string
	}{
		{"empty", "", Cursor{}, ""},
		{"complete lines", "a\nb\n", Cursor{}, "a\nb\n"},
		{"partial last line left", "a\nb", Cursor{}, "a\n"},
		{"past the cursor", "a\nb\nc", Cursor{Offset: 2}, "b\n"},
		{"nothing complete past the cursor", "a\nbc", Cursor{Offset: 2}, ""},
		{"newline a block back", "a\n" + long, Cursor{}, "a\n"},
		{"shorter than the cursor: replaced", "a\n", Cursor{Offset: 10}, "a\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(log, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			ino, from, to, err := pending(log, tc.cursor)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.content[from:to]; got != tc.want {
				t.Fatalf("range [%d,%d) = %q, want %q", from, to, got, tc.want)
			}
			if to == from {
				return
			}
			dst := filepath.Join(dir, "copy")
			if err := copyRange(log, ino, from, to, dst); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(dst); string(b) != tc.want {
				t.Errorf("copied %q, want %q", b, tc.want)
			}
		})
	}
}

// TestPromotionsLogTorn: a promotion line cut short by a kill is no
// promotion, the next append mends it, and a complete line counts.
func TestPromotionsLogTorn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, PromotionsFile)
	if err := os.WriteFile(path, []byte(`{"night":"n1","guideline":"h-1"}`+"\n"+`{"night":"n2","guid`), 0o644); err != nil {
		t.Fatal(err)
	}
	for night, want := range map[string]bool{"n1": true, "n2": false} {
		if got, err := promotedIn(dir, night); err != nil || got != want {
			t.Errorf("promotedIn(%s) = %v, %v; want %v", night, got, err, want)
		}
	}
	if err := logPromotion(dir, Promotion{Night: "n2", Guideline: "h-2"}); err != nil {
		t.Fatal(err)
	}
	if got, err := promotedIn(dir, "n2"); err != nil || !got {
		t.Errorf("after the append: %v, %v", got, err)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") != 2 || strings.Contains(string(b), `"guid`+"{") {
		t.Errorf("log not mended:\n%s", b)
	}
	if err := os.WriteFile(path, []byte("{\"night\":\"n1\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := promotedIn(dir, "n3"); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("a damaged complete line: %v, want an error naming line 2", err)
	}
}
