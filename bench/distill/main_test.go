package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
)

// TestGenExport builds the generated run as optimize distill does (every
// generated row kept) and exports its train rows again, Parquet only: the
// benchmark's two sides read the same rows, and a bad line is named.
func TestGenExport(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if err := gen([]string{"-rows", "45", "-bytes", "3000", "-out", run}); err != nil {
		t.Fatal(err)
	}
	m, err := distill.Build(t.Context(), run, filepath.Join(dir, "ds"), distill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows.Kept != 45 {
		t.Fatalf("optimize distill keeps %d rows of the 45 generated", m.Rows.Kept)
	}
	train := filepath.Join(dir, "ds", "train.jsonl")
	n, err := exportFile(train, filepath.Join(dir, "out"), distill.WriterOptions{Formats: []string{"parquet"}})
	if err != nil || n != m.Splits[distill.SplitTrain].Rows {
		t.Fatalf("exported %d rows (%v), want the %d train rows", n, err, m.Splits[distill.SplitTrain].Rows)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "out")); len(entries) != 1 {
		t.Errorf("the Parquet-only export wrote %d entries, want data/ alone", len(entries))
	}
	data, err := os.ReadFile(train)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	lines := strings.SplitAfter(string(data), "\n")
	if err := os.WriteFile(bad, []byte(lines[0]+lines[1]+"{\"id\": tru\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exportFile(bad, filepath.Join(dir, "out2"), distill.WriterOptions{}); err == nil || !strings.Contains(err.Error(), "row 3") {
		t.Errorf("err = %v, want one naming row 3", err)
	}
}
