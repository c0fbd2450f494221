package sim

import (
	"regexp"
	"testing"
	"testing/fstest"
)

func TestSourceVersion(t *testing.T) {
	base := fstest.MapFS{
		"agent.go":      {Data: []byte("package sim\n// agent\n")},
		"judge.go":      {Data: []byte("package sim\n// judge\n")},
		"agent_test.go": {Data: []byte("package sim\n// test\n")},
	}
	v := sourceVersion(base)
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(v) {
		t.Fatalf("version %q is not 12 hex digits", v)
	}
	change := func(name, data string) fstest.MapFS {
		m := fstest.MapFS{}
		for k, f := range base {
			m[k] = f
		}
		if data == "" {
			delete(m, name)
		} else {
			m[name] = &fstest.MapFile{Data: []byte(data)}
		}
		return m
	}
	tests := []struct {
		name string
		fsys fstest.MapFS
		same bool
	}{
		{"a code change", change("judge.go", "package sim\n// judge v2\n"), false},
		{"a new file", change("lingua.go", "package sim\n"), false},
		{"a removed file", change("judge.go", ""), false},
		{"a test change", change("agent_test.go", "package sim\n// other test\n"), true},
		{"a new test", change("judge_test.go", "package sim\n"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceVersion(tt.fsys); (got == v) != tt.same {
				t.Errorf("version %s vs %s: same = %v, want %v", got, v, got == v, tt.same)
			}
		})
	}
	if Version != sourceVersion(sources) || len(Version) != 12 {
		t.Errorf("Version %q is not the hash of the embedded sources", Version)
	}
}
