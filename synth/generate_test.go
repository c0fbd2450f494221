package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
)

// scripted answers each generation request through reply, given the
// workflow id the prompt asks for and whether it is the repair prompt.
type scripted struct {
	reply func(id string, repair bool) string
	mu    sync.Mutex
	calls int
}

func (s *scripted) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	if req.Purpose != llm.PurposeGenerator {
		return llm.Response{}, errors.New("not a generator request")
	}
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	p := req.Messages[0].Content
	_, rest, _ := strings.Cut(p, "WORKFLOW_ID: ")
	id, _, _ := strings.Cut(rest, "\n")
	return llm.Response{Message: llm.Message{Role: "assistant", Content: s.reply(id, strings.Contains(p, "Problems:"))}}, nil
}

// doc is validDoc with its id and input made unique to id.
func doc(id string) string {
	return strings.Replace(strings.Replace(validDoc, "office-0001", id, 1), "Lunch menu", "Lunch menu "+id, 1)
}

func testConfig(n int) GenerateConfig {
	return GenerateConfig{Count: n, Seed: 7, Settings: Settings{}.WithDefaults(), Concurrency: 3}
}

func readLines[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

func readSummary(t *testing.T, dir string) GenerateSummary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var s GenerateSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGenerateRepairRejectDuplicate(t *testing.T) {
	gen := &scripted{reply: func(id string, repair bool) string {
		switch id {
		case "wf-000001": // fixed by the repair
			if !repair {
				return strings.Replace(doc(id), `["t1", "t2"]`, `["t1", "t2", "t3"]`, 1)
			}
		case "wf-000002": // never valid
			return "Sure! Here is the workflow you asked for."
		case "wf-000003": // the same plan and input as wf-000000, spaced differently
			return strings.ReplaceAll(doc("wf-000000"), ". ", ".   ")
		}
		return "```json\n" + doc(id) + "\n```"
	}}
	dir := t.TempDir()
	sum, err := Generate(t.Context(), gen, testConfig(5), dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Generated != 3 || sum.ThisRun.Repaired != 1 || sum.Rejected[RejectInvalid] != 1 || sum.Rejected[RejectDuplicate] != 1 || gen.calls != 7 {
		t.Fatalf("summary %+v after %d calls", sum, gen.calls)
	}
	var ids []string
	for _, w := range readLines[Workflow](t, filepath.Join(dir, WorkflowsFile)) {
		ids = append(ids, w.ID)
	}
	if strings.Join(ids, ",") != "wf-000000,wf-000001,wf-000004" {
		t.Fatalf("kept %v", ids)
	}
	rej := readLines[Rejected](t, filepath.Join(dir, RejectedFile))
	if len(rej) != 2 || rej[0].ID != "wf-000002" || !strings.Contains(rej[0].Detail, "not JSON") || rej[0].Reply == "" ||
		rej[1].ID != "wf-000003" || rej[1].Reason != RejectDuplicate || !strings.Contains(rej[1].Detail, "wf-000000") {
		t.Fatalf("rejected %+v", rej)
	}
}

// TestGenerateResume checks that a run stopped part way (here: by a short
// count, then a partial line as a kill leaves) and run again writes what
// one uninterrupted run writes.
func TestGenerateResume(t *testing.T) {
	gen := &scripted{reply: func(id string, _ bool) string {
		if id == "wf-000004" {
			return "{}"
		}
		return doc(id)
	}}
	whole := t.TempDir()
	if _, err := Generate(t.Context(), gen, testConfig(9), whole); err != nil {
		t.Fatal(err)
	}
	parts := t.TempDir()
	if _, err := Generate(t.Context(), gen, testConfig(6), parts); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(parts, WorkflowsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id": "wf-000006", "domain": "off`)
	f.Close()
	calls := gen.calls
	sum, err := Generate(t.Context(), gen, testConfig(9), parts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resumed != 6 || gen.calls-calls != 3 {
		t.Fatalf("resumed at %d with %d calls, want 6 and 3", sum.Resumed, gen.calls-calls)
	}
	for _, name := range []string{WorkflowsFile, RejectedFile} {
		a, _ := os.ReadFile(filepath.Join(whole, name))
		b, _ := os.ReadFile(filepath.Join(parts, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after a resume:\n%s\nwant\n%s", name, b, a)
		}
	}
	a, b := readSummary(t, whole), readSummary(t, parts)
	// What differs is when the work was done, not what is there.
	a.Resumed, a.ThisRun, b.ThisRun = 6, RunStats{}, RunStats{}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("summary after a resume %+v, want %+v", b, a)
	}
	other := testConfig(9)
	other.Seed = 8
	if _, err := Generate(t.Context(), gen, other, parts); !errors.Is(err, ErrForeignDir) {
		t.Fatalf("resuming with another seed: %v, want ErrForeignDir", err)
	}
	other = testConfig(9)
	other.Models = "another generator"
	if _, err := Generate(t.Context(), gen, other, parts); !errors.Is(err, ErrForeignDir) {
		t.Fatalf("resuming with another generator: %v, want ErrForeignDir", err)
	}
}

func TestSettingsProblems(t *testing.T) {
	tests := []struct {
		name string
		s    Settings
		want string
	}{
		{"defaults", Settings{}.WithDefaults(), ""},
		{"steps reversed", Settings{Domains: []string{"office"}, Steps: Range[int]{Min: 5, Max: 2}, Noise: DefaultNoise}, "steps.max"},
		{"no steps", Settings{Domains: []string{"office"}, Steps: Range[int]{Min: 0, Max: 2}, Noise: DefaultNoise}, "steps.min"},
		{"noise of one", Settings{Domains: []string{"office"}, Steps: DefaultSteps, Noise: Range[float64]{Min: 0.2, Max: 1}}, "noise.max"},
		{"negative noise", Settings{Domains: []string{"office"}, Steps: DefaultSteps, Noise: Range[float64]{Min: -0.1, Max: 0.5}}, "noise.min"},
		{"unknown domain", Settings{Domains: []string{"office", "poetry"}, Steps: DefaultSteps, Noise: DefaultNoise}, "domains[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range tt.s.Problems() {
				got = append(got, p.Field)
			}
			if strings.Join(got, ",") != tt.want {
				t.Fatalf("problems at %v, want %q", got, tt.want)
			}
		})
	}
}

// TestGenerateEmbedded generates through the embedded model: every
// workflow passes the schema, the three domains appear, the configured
// ranges hold, and the output depends on the seed alone.
func TestGenerateEmbedded(t *testing.T) {
	s, err := sim.Start(t.Context(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := llm.NewClient("generator", llm.RoleConfig{BaseURL: s.URL(), Model: sim.ModelName, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(24)
	cfg.Steps = Range[int]{Min: 2, Max: 4}
	run := func(cfg GenerateConfig) (GenerateSummary, []byte) {
		dir := t.TempDir()
		sum, err := Generate(t.Context(), c, cfg, dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, WorkflowsFile))
		if err != nil {
			t.Fatal(err)
		}
		return sum, b
	}
	sum, out := run(cfg)
	if sum.Generated+sum.Rejected[RejectDuplicate] != 24 || sum.Rejected[RejectInvalid] != 0 || len(sum.ByDomain) != 3 {
		t.Fatalf("summary %+v", sum)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		w, err := Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(w.Plan); n < 2 || n > 4 {
			t.Fatalf("%s has %d plan steps, want 2 to 4", w.ID, n)
		}
		for _, f := range w.Checker.Facts {
			if !strings.Contains(w.Input, f) {
				t.Fatalf("%s: checker fact %q is not in the input", w.ID, f)
			}
		}
	}
	if _, again := run(cfg); !bytes.Equal(out, again) {
		t.Fatal("the same seed generated other workflows")
	}
	cfg.Seed++
	if _, other := run(cfg); bytes.Equal(out, other) {
		t.Fatal("another seed generated the same workflows")
	}
}
