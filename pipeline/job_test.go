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
		{name: "unknown key names file and line", yaml: "name: x\nenv:\n  name: qa\n  topk: 3\n", wantErr: []string{"job.yaml", "line 4", "topk"}},
		{name: "wrong type names line", yaml: "rollout:\n  concurrency: many\n", wantErr: []string{"line 2", "many"}},
		{name: "bad value names field", yaml: "optimize:\n  lambda: -1\n", wantErr: []string{"field optimize.lambda", "must not be negative"}},
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

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
