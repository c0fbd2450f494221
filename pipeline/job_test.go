package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseJob(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings of the error; none means valid
	}{
		{name: "empty job takes the defaults", yaml: "name: x\n"},
		{name: "demo job", yaml: mustRead(t, "../jobs/demo.yaml")},
		{name: "demo job with the ace optimizer", yaml: mustRead(t, "../jobs/demo-ace.yaml")},
		{name: "ace without an embedder de-duplicates lexically", yaml: "optimizer: ace\n"},
		{name: "unknown optimizer", yaml: "optimizer: gepa\n", wantErr: []string{"line 1: field optimizer: unknown optimizer \"gepa\""}},
		{name: "ace section without ace", yaml: "ace:\n  epochs: 2\n", wantErr: []string{"line 1: field ace: goes with optimizer: ace"}},
		{name: "bad ace settings", yaml: "optimizer: ace\nace:\n  mode: batch\n  dedup_threshold: 1.5\n  max_tokens: 4\n  gate: [\"success >> 0\"]\n", wantErr: []string{"line 3: field ace.mode: unknown mode \"batch\"", "line 4: field ace.dedup_threshold", "line 5: field ace.max_tokens: 4 is out of range", "field ace.gate[0]"}},
		{name: "endpoint that needs no key", yaml: "roles:\n  agent:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    no_key: true\n  compressor:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n"},
		{name: "unused role need not be listed", yaml: "roles:\n  agent:\n    base_url: embedded\n  compressor:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n"},
		{name: "unknown key names file and line", yaml: "name: x\nenv:\n  name: qa\n  topk: 3\n", wantErr: []string{"job.yaml", "line 4", "topk"}},
		{name: "wrong type names line", yaml: "rollout:\n  concurrency: many\n", wantErr: []string{"line 2", "many"}},
		{name: "bad value names field", yaml: "optimize:\n  lambda: -1\n", wantErr: []string{"line 2", "field optimize.lambda", "negative"}},
		{name: "explicit zero rounds", yaml: "optimize:\n  rounds: 0\n", wantErr: []string{"line 2: field optimize.rounds: 0 is out of range; want 1 to 20"}},
		{name: "explicit zero candidates", yaml: "optimize:\n  candidates: 0\n", wantErr: []string{"line 2: field optimize.candidates", "want 1 to 50"}},
		{name: "explicit zero concurrency", yaml: "rollout:\n  concurrency: 0\n", wantErr: []string{"line 2: field rollout.concurrency", "want 1 to 1024"}},
		{name: "over the maximum", yaml: "env:\n  step_limit: 5000\n", wantErr: []string{"field env.step_limit: 5000", "want 1 to 1000"}},
		{name: "fraction out of range", yaml: "optimize:\n  co_holdout: 1\n", wantErr: []string{"field optimize.co_holdout", "between 0 and 1"}},
		{name: "one line per problem", yaml: "optimize:\n  rounds: 0\n  candidates: 0\n", wantErr: []string{"job.yaml: line 2: field optimize.rounds", "\njob.yaml: line 3: field optimize.candidates"}},
		{name: "missing role", yaml: "roles:\n  agent:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n", wantErr: []string{"line 1: field roles.compressor: missing"}},
		{name: "role without base_url", yaml: "roles:\n  agent:\n    model: x\n  compressor:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n", wantErr: []string{"line 2: field roles.agent.base_url: missing"}},
		{name: "endpoint without key", yaml: "roles:\n  agent:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n  compressor:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n", wantErr: []string{"field roles.agent.key_env: missing", "no_key: true"}},
		{name: "key variable unset", yaml: "roles:\n  agent:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    key_env: CTXOPT_TEST_UNSET_KEY\n", wantErr: []string{"line 5: field roles.agent.key_env: variable CTXOPT_TEST_UNSET_KEY is not set"}},
		{name: "no_key with key_env", yaml: "roles:\n  agent:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    key_env: K\n    no_key: true\n", wantErr: []string{"field roles.agent.no_key"}},
		{name: "unknown tool_choice", yaml: "roles:\n  agent:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    no_key: true\n    tool_choice: always\n  compressor:\n    base_url: embedded\n  optimizer:\n    base_url: embedded\n", wantErr: []string{"job.yaml: line 6: field roles.agent.tool_choice: \"always\" is unknown; use auto, required or none"}},
		{name: "empty file", yaml: "", wantErr: []string{"job.yaml: the job file is empty"}},
		{name: "comments only", yaml: "# nothing\n", wantErr: []string{"holds only comments"}},
		{name: "stage store bound too small", yaml: "cache:\n  stages_max_size: 100KB\n", wantErr: []string{"line 2: field cache.stages_max_size: 100KB is under 1MB"}},
		{name: "stage store bound not a size", yaml: "cache:\n  stages_max_size: lots\n", wantErr: []string{"line 2: field cache.stages_max_size"}},
		{name: "cache path is a directory", yaml: "cache:\n  path: .\n", wantErr: []string{"line 2: field cache.path", "is a directory"}},
		{name: "unknown environment", yaml: "env:\n  name: appworld\n", wantErr: []string{"field env.name", "appworld"}},
		{name: "role field checked", yaml: "roles:\n  agent:\n    base_url: ftp://x\n", wantErr: []string{"roles.agent.base_url"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJob("job.yaml", []byte(tc.yaml))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if j.Roles.Agent.BaseURL != Embedded && !strings.HasPrefix(j.Roles.Agent.BaseURL, "http") {
					t.Fatalf("agent base_url %q", j.Roles.Agent.BaseURL)
				}
				if j.Optimize.Candidates != 5 || j.Env.StepLimit != 30 || *j.Roles.Agent.Seed != 42 {
					t.Fatalf("defaults not applied: %+v", j.Optimize)
				}
				return
			}
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseJobValidationFraction: the job takes distill's one rule, so a
// job can ask for no validation split, as the command line can.
func TestParseJobValidationFraction(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		want    float64
		wantErr bool
	}{
		{yaml: "name: x\n", want: 0.1},
		{yaml: "distill:\n  validation_fraction: 0\n", want: 0},
		{yaml: "distill:\n  validation_fraction: 0.3\n", want: 0.3},
		{yaml: "distill:\n  validation_fraction: 1\n", wantErr: true},
		{yaml: "distill:\n  validation_fraction: -0.1\n", wantErr: true},
	} {
		j, err := ParseJob("job.yaml", []byte(tc.yaml))
		switch {
		case tc.wantErr:
			if err == nil || !strings.Contains(err.Error(), "field distill.validation_fraction") {
				t.Errorf("%q: err %v, want one naming distill.validation_fraction", tc.yaml, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case j.Distill.ValidationFraction != tc.want:
			t.Errorf("%q: validation fraction %g, want %g", tc.yaml, j.Distill.ValidationFraction, tc.want)
		}
	}
}

// The resolved job a run records (and workers and resumes read back)
// parses as the same job, for every job file shipped, ACON and ACE alike.
func TestResolvedJobRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../jobs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no job files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			job, err := LoadJob(f)
			if err != nil {
				t.Skipf("not a job file: %v", err)
			}
			b, err := job.Resolved()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseJob(f+" (resolved)", b)
			if err != nil {
				t.Fatalf("the resolved job does not parse back: %v", err)
			}
			again, err := back.Resolved()
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(b) {
				t.Errorf("resolved twice differs:\n%s\nvs\n%s", b, again)
			}
		})
	}
}
