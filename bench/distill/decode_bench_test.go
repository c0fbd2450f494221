package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkDecodeRows decodes gen's rows (the export's input) and prints
// MB/s of JSONL: the part of the export benchmark that is our reader, not
// the Writer.
func BenchmarkDecodeRows(b *testing.B) {
	path := filepath.Join(b.TempDir(), "rows.jsonl")
	if err := gen([]string{"-rows", "2000", "-out", path}); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	b.SetBytes(int64(len(data)))
	text := make([]byte, len(data))
	for b.Loop() {
		dec := newDecoder()
		for _, l := range lines {
			if _, err := dec.row(l, text); err != nil {
				b.Fatal(err)
			}
		}
	}
}
