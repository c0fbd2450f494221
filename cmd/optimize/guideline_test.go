package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/guideline"
)

// guideline list --lineage lists a guideline's ancestors from the seed
// down to it, and nothing of other lineages.
func TestGuidelineListLineage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "guidelines")
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "guideline", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	put := func(rec guideline.Record, src string) string {
		rec, _, err := reg.Put(rec, src)
		if err != nil || !rec.Validation.OK {
			t.Fatalf("put: %+v %v", rec, err)
		}
		return rec.ID
	}
	seedSrc := read("history_seed.tmpl")
	seed := put(guideline.Record{Kind: guideline.KindHistory, Source: "test"}, seedSrc)
	ut := put(guideline.Record{Kind: guideline.KindHistory, Parent: seed, Step: guideline.StepUT, Round: 1}, seedSrc+"Keep every number word for word.\n")
	sibling := put(guideline.Record{Kind: guideline.KindHistory, Parent: seed, Step: guideline.StepUT, Round: 1}, seedSrc+"Drop greetings.\n")
	other := put(guideline.Record{Kind: guideline.KindObservation, Source: "test"}, read("observation_seed.tmpl"))

	tests := []struct {
		name    string
		args    []string
		code    int
		want    []string // ids listed, in order
		notWant []string
	}{
		{"every guideline", nil, 0, []string{seed, ut, sibling, other}, nil},
		{"the lineage of a UT candidate", []string{"--lineage", ut}, 0, []string{seed, ut}, []string{sibling, other}},
		{"a seed is its own lineage", []string{"--lineage", other}, 0, []string{other}, []string{seed, ut, sibling}},
		{"an unknown id is bad input", []string{"--lineage", "h-0000000000"}, exitUsage, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"guideline", "list", "--registry", dir}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tt.code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if tt.code != 0 {
				return
			}
			if len(lines) != len(tt.want)+1 {
				t.Fatalf("%d rows, want %d:\n%s", len(lines)-1, len(tt.want), stdout)
			}
			for i, id := range tt.want {
				if !strings.HasPrefix(lines[i+1], id+" ") {
					t.Errorf("row %d: %q, want %s", i+1, lines[i+1], id)
				}
			}
			for _, id := range tt.notWant {
				if strings.Contains(stdout, id+" ") {
					t.Errorf("%s listed:\n%s", id, stdout)
				}
			}
		})
	}
}
