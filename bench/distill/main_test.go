package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
)

// TestExportFileBlocks feeds exportFile lines longer than its read block
// and a last line without its newline: every row arrives, in order, and a
// bad line is named by its number.
func TestExportFileBlocks(t *testing.T) {
	dir := t.TempDir()
	small, large := filepath.Join(dir, "small.jsonl"), filepath.Join(dir, "large.jsonl")
	if err := gen([]string{"-rows", "50", "-bytes", "3000", "-out", small}); err != nil {
		t.Fatal(err)
	}
	if err := gen([]string{"-rows", "3", "-bytes", "2500000", "-seed", "7", "-out", large}); err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, f := range []string{small, large, small} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	in := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(in, bytes.TrimSuffix(data, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	n, stats, err := exportFile(t.Context(), in, filepath.Join(dir, "out"), distill.WriterOptions{ParquetOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(lines) || stats.Rows() != len(lines) {
		t.Fatalf("exported %d rows (writer %d), want %d", n, stats.Rows(), len(lines))
	}

	bad := append([]byte(nil), data...)
	i := bytes.Index(bad, []byte(lines[52])) // the third long line
	bad[i] = '['
	if err := os.WriteFile(in, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := exportFile(t.Context(), in, filepath.Join(dir, "out2"), distill.WriterOptions{ParquetOnly: true}); err == nil || !strings.Contains(err.Error(), "rows.jsonl:53:") {
		t.Fatalf("err = %v, want one naming line 53", err)
	}
}
