package pipeline

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/llm/sim"
	"github.com/ctxopt/ctxopt/report"
	"github.com/ctxopt/ctxopt/rollout"
)

// An evaluation's notice names the roles the embedded model played among
// those its candidates call: the embedder only when a strategy embeds, and
// "mixed" when a called role is real. "Real" endpoints here are a second
// embedded model reached by its address, which the job does not name
// embedded.
func TestEvaluateNamesEmbeddedRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluations")
	}
	other, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tests := []struct {
		name       string
		real       []string // roles pointed at the other endpoint
		candidates []string
		all        bool
		roles      []string
		notice     string // in the report's notice; "" none
		// rollouts are the roles each candidate's rollout summary names
		// (none when absent).
		rollouts map[string][]string
	}{
		{name: "pace with only the embedder embedded", real: []string{"agent", "compressor", "optimizer"}, candidates: []string{"none=none", "pace=pace"},
			roles: []string{"embedder"}, notice: "Mixed models: the embedded offline model (llm/sim), not a real LLM, played these roles: embedder;",
			rollouts: map[string][]string{"none": nil, "pace": {"embedder"}}},
		{name: "fifo with the same roles", real: []string{"agent", "compressor", "optimizer"}, candidates: []string{"fifo=fifo"}},
		{name: "pace with every role embedded", candidates: []string{"pace=pace"}, all: true,
			roles: []string{"agent", "compressor", "embedder"}, notice: report.EmbeddedNotice,
			rollouts: map[string][]string{"pace": {"agent", "compressor", "embedder"}}},
		{name: "a candidate's own embedded compressor", real: []string{"agent", "compressor", "embedder"}, candidates: []string{"none=none", "p=prompting,compressor=embedded"},
			roles: []string{"compressor"}, notice: "played these roles: compressor;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := smallJob(t, 2, "")
			for _, name := range tt.real {
				job.Roles.get(name).BaseURL = other.URL()
			}
			specs, err := eval.ParseSpecs(tt.candidates)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			res, err := Evaluate(t.Context(), job, EvalOptions{Specs: specs, Split: "test", Samples: 1}, dir)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if s.EmbeddedModel != tt.all || !slices.Equal(s.EmbeddedRoles, tt.roles) {
				t.Fatalf("embedded model %v, roles %v; want %v, %v", s.EmbeddedModel, s.EmbeddedRoles, tt.all, tt.roles)
			}
			n := report.ModelNotice(s.EmbeddedModel, s.EmbeddedRoles)
			if tt.notice == "" && n != "" || !strings.Contains(n, tt.notice) {
				t.Fatalf("notice %q, want %q", n, tt.notice)
			}
			for name, want := range tt.rollouts {
				var rs rollout.Summary
				if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(dir, "rollouts", name, "sample-0", rollout.SummaryFile))), &rs); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(rs.EmbeddedRoles, want) || rs.EmbeddedModel != (tt.all && len(want) > 0) {
					t.Errorf("candidate %s's rollouts: embedded model %v, roles %v; want roles %v", name, rs.EmbeddedModel, rs.EmbeddedRoles, want)
				}
			}
		})
	}
}

// TestRoleNamesAreTheJobKeys: the names Roles.each gives (llm.Role*) are
// the keys of a job file's roles section, each naming its own field: the
// yaml tags of Roles are the one other spelling of the role names.
func TestRoleNamesAreTheJobKeys(t *testing.T) {
	var r Roles
	var names []string
	_ = r.each(func(name string, c *llm.RoleConfig) error {
		c.Model = "model-of-" + name
		names = append(names, name)
		return nil
	})
	b, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]struct {
		Model string `yaml:"model"`
	}
	if err := yaml.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(names) {
		t.Errorf("the roles section has %d keys, each names %d roles: %v", len(keys), len(names), names)
	}
	for _, name := range names {
		if got := keys[name].Model; got != "model-of-"+name {
			t.Errorf("roles.%s holds the model %q, want that of role %s", name, got, name)
		}
	}
	want := []string{llm.RoleAgent, llm.RoleCompressor, llm.RoleOptimizer, llm.RoleJudge, llm.RoleEmbedder, llm.RoleGenerator, llm.RoleReflector, llm.RoleCurator}
	if !slices.Equal(names, want) {
		t.Errorf("each names %v, want %v", names, want)
	}
}

// Every role of llm.Roles is a field of a job's roles section under its
// own name, and the section has no other.
func TestRolesSectionNamesEveryRole(t *testing.T) {
	var r Roles
	seen := map[*llm.RoleConfig]bool{}
	for _, name := range llm.Roles() {
		c := r.get(name)
		if c == nil || seen[c] {
			t.Fatalf("role %s: field %p (a role without its own field)", name, c)
		}
		seen[c] = true
	}
	if n := reflect.TypeOf(r).NumField(); n != len(llm.Roles()) {
		t.Errorf("the roles section has %d fields, llm.Roles %d roles", n, len(llm.Roles()))
	}
	if r.get("analyzer") != nil {
		t.Error("a name that is no role found a field")
	}
}

// A job that leaves the ACE roles unset sends them to the optimizer's
// endpoint (the analyzer's), and one that sets them keeps its own.
func TestACERolesFallBackToTheOptimizer(t *testing.T) {
	j, err := ParseJob("job.yaml", []byte("roles:\n  agent: {base_url: embedded, model: m}\n  compressor: {base_url: embedded, model: m}\n  optimizer: {base_url: http://opt:1/v1, model: big, no_key: true}\n  curator: {base_url: http://cur:1/v1, model: cur, no_key: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Roles.Reflector; got.BaseURL != "http://opt:1/v1" || got.Model != "big" {
		t.Errorf("reflector %+v, want the optimizer's endpoint", got)
	}
	if got := j.Roles.Curator; got.BaseURL != "http://cur:1/v1" || got.Model != "cur" {
		t.Errorf("curator %+v, want its own endpoint", got)
	}
}

// ACE de-duplicates with the embedder role when the job configures one,
// and by word overlap when it does not.
func TestACEDedupDefault(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"optimizer: ace\n", DedupLexical},
		{"optimizer: ace\nroles:\n  agent: {base_url: embedded, model: m}\n  compressor: {base_url: embedded, model: m}\n  optimizer: {base_url: embedded, model: m}\n  embedder: {base_url: embedded, model: e}\n", DedupEmbedder},
		{"optimizer: ace\nace:\n  dedup: embedder\n", DedupEmbedder},
	} {
		j, err := ParseJob("job.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if j.ACE.Dedup != tt.want {
			t.Errorf("%q: dedup %s, want %s", tt.yaml, j.ACE.Dedup, tt.want)
		}
	}
}
