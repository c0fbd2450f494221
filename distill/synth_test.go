package distill

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/redact"
)

// testdata/synth/executions.jsonl is optimize synth run's output on the
// embedded model: two accepted workflows (3 and 4 compressions, an API key
// planted in one teacher prompt), a rejected one (5) and a line that was
// not a workflow.
func TestBuildSynthRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     string
		sources []string
	}{
		{"synth alone", "", []string{SourcePAACESyn}},
		{"beside ACON rows", "testdata/run", []string{SourceACON, SourcePAACESyn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			m, err := Build(t.Context(), tc.run, dir, Options{Synth: []string{"testdata/synth"}, ValidationFraction: new(0.0)})
			if err != nil {
				t.Fatal(err)
			}
			if w := m.Workflows; w == nil || *w != (WorkflowCounts{Read: 4, Accepted: 2, Rejected: 1, NotExecuted: 1}) {
				t.Fatalf("workflows %+v", m.Workflows)
			}
			if strings.Join(m.Sources, ",") != strings.Join(tc.sources, ",") || m.Rows.Dropped[DropWorkflowRejected] != 5 || m.Redactions[redact.OpenAIKey] != 1 {
				t.Fatalf("sources %v, dropped %v, redactions %v", m.Sources, m.Rows.Dropped, m.Redactions)
			}
			paace := 0
			for _, line := range readLines(t, filepath.Join(dir, jsonlFormat{}.Path(SplitTrain))) {
				var r Row
				if err := json.Unmarshal(line, &r); err != nil {
					t.Fatal(err)
				}
				if r.Source != SourcePAACESyn {
					continue
				}
				paace++
				if r.Kind != KindPlanAware || !strings.HasPrefix(r.TaskID, "wf-") || !strings.Contains(r.Prompt[0].Content, "[Plan: next steps]") || r.Completion[0].Role != "assistant" {
					t.Fatalf("row %+v", r)
				}
			}
			if paace != 7 || m.Splits[SplitTrain].ByKind[KindPlanAware] != 7 {
				t.Fatalf("%d paace rows, by kind %v; want the 7 compressions of the accepted workflows", paace, m.Splits[SplitTrain].ByKind)
			}
			for _, f := range []string{jsonlFormat{}.Path(SplitTrain), messagesFormat{}.Path(SplitTrain), parquetFormat{}.Path(SplitTrain)} {
				path := filepath.Join(dir, f)
				vs, err := ValidateFile(t.Context(), path)
				if err != nil || len(vs) > 0 {
					t.Fatalf("%s: %v %v", f, err, vs)
				}
				b, _ := os.ReadFile(path)
				if bytes.Contains(b, []byte("sk-proj-AbCd")) {
					t.Fatalf("%s holds the planted key", f)
				}
			}
			card, _ := os.ReadFile(filepath.Join(dir, "README.md"))
			if !bytes.Contains(card, []byte("acceptance filter")) {
				t.Fatalf("the card does not say where the paace rows come from:\n%s", card)
			}
		})
	}
}

// TestDuckDBReadsSynthRows reads the paace rows' Parquet with DuckDB.
func TestDuckDBReadsSynthRows(t *testing.T) {
	duckdbCheck(t) // skips before the build when DuckDB is missing
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := Build(t.Context(), "", dir, Options{Synth: []string{"testdata/synth/executions.jsonl"}, ValidationFraction: new(0.0)}); err != nil {
		t.Fatal(err)
	}
	out := runDuckDBCheck(t, filepath.Join(dir, parquetFormat{}.Path(SplitTrain)))
	var report struct {
		Files []struct {
			Rows int `json:"rows"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &report); err != nil || len(report.Files) != 1 || report.Files[0].Rows != 7 {
		t.Fatalf("DuckDB read %s (%v); want 7 rows", out, err)
	}
}

// TestBuildSynthTornTail: an executions file whose last line was cut short
// (a killed synth run) is read without that line.
func TestBuildSynthTornTail(t *testing.T) {
	data, err := os.ReadFile("testdata/synth/executions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	synthDir := t.TempDir()
	torn := append(data, `{"workflow": {"id": "wf-cut`...)
	if err := os.WriteFile(filepath.Join(synthDir, "executions.jsonl"), torn, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Build(t.Context(), "", filepath.Join(t.TempDir(), "ds"), Options{Synth: []string{synthDir}, ValidationFraction: new(0.0)})
	if err != nil {
		t.Fatal(err)
	}
	if w := m.Workflows; w == nil || w.Read != 4 || m.Trajectories.BadLines != 0 {
		t.Fatalf("workflows %+v, bad lines %d; want the 4 whole lines and no bad one", m.Workflows, m.Trajectories.BadLines)
	}
}
