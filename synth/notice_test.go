package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/llm"
)

// A run's summary names the roles the embedded model answered among those
// the run called (over resumed invocations too), and calls the run mixed
// when a called role was real. The endpoints here are all the embedded
// model; Executor.Embedded says which of them the job named "embedded".
func TestRunNamesEmbeddedRoles(t *testing.T) {
	e := startEmbedded(t)
	wfs := e.generated(t, 1)
	// The same workflows without the generation's summary beside them: no
	// generator call is known.
	bare := filepath.Join(t.TempDir(), WorkflowsFile)
	b, err := os.ReadFile(wfs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bare, b, 0o644); err != nil {
		t.Fatal(err)
	}
	every := map[string]bool{llm.RoleAgent: true, llm.RoleCompressor: true, llm.RoleJudge: true, llm.RoleEmbedder: true, llm.RoleGenerator: true, llm.RoleOptimizer: true}
	tests := []struct {
		name     string
		wfs      string
		embedded map[string]bool
		all      bool
		roles    []string
		line     string // in the printed summary; "" none
	}{
		{name: "embedded generator and judge", wfs: wfs, embedded: map[string]bool{llm.RoleGenerator: true, llm.RoleJudge: true},
			roles: []string{llm.RoleGenerator, llm.RoleJudge}, line: "(models: mixed; the embedded offline model, not a real LLM, as generator, judge; real models otherwise)"},
		{name: "every role embedded", wfs: wfs, embedded: every, all: true,
			roles: []string{llm.RoleAgent, llm.RoleCompressor, llm.RoleEmbedder, llm.RoleGenerator, llm.RoleJudge}, line: "(models: the embedded offline model, not a real LLM)"},
		{name: "generator not called", wfs: bare, embedded: map[string]bool{llm.RoleGenerator: true, llm.RoleJudge: true},
			roles: []string{llm.RoleJudge}, line: "as judge; real models otherwise)"},
		{name: "real models only", wfs: wfs, embedded: map[string]bool{}},
	}
	// One run directory per workflows file, made by the parent: a
	// subtest's own TempDir is removed when it ends, and the next case
	// would start afresh in a directory nobody removes.
	dirs := map[string]string{wfs: t.TempDir(), bare: t.TempDir()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := e.executor(t, planAware(t), 2)
			x.Embedded = tt.embedded
			// Later cases resume the first run on the same workflows: the
			// roles come from the calls its journal records.
			sum, err := Run(t.Context(), x, RunOptions{Workflows: tt.wfs, Dir: dirs[tt.wfs], Concurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Executed != 1 {
				t.Fatalf("executed %d workflows, want 1", sum.Executed)
			}
			if sum.EmbeddedModel != tt.all || !slices.Equal(sum.EmbeddedRoles, tt.roles) {
				t.Fatalf("embedded model %v, roles %v; want %v, %v", sum.EmbeddedModel, sum.EmbeddedRoles, tt.all, tt.roles)
			}
			var out bytes.Buffer
			PrintRunSummary(&out, sum)
			if tt.line == "" && strings.Contains(out.String(), "embedded") || tt.line != "" && !strings.Contains(out.String(), tt.line) {
				t.Fatalf("summary lacks %q:\n%s", tt.line, out.String())
			}
		})
	}
}
