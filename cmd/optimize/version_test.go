package main

import (
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/internal/version"
	"github.com/ctxopt/ctxopt/llm/embedded"
)

func TestVersion(t *testing.T) {
	want := version.Get()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if stdout != want.String() {
			t.Errorf("%v: stdout %q, want %q", args, stdout, want.String())
		}
		for _, field := range []string{"optimize " + want.Version, "revision: ", "embedded model: " + embedded.Version} {
			if !strings.Contains(stdout, field) {
				t.Errorf("%v: stdout %q lacks %q", args, stdout, field)
			}
		}
	}
}

// TestVersionLogged: a long command's log starts with the build, once; its
// --help does not log it.
func TestVersionLogged(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, nil)
	code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "none", "--limit", "1", "--out", dir+"/out")
	if code != exitOK {
		t.Fatalf("rollout: exit %d: %s", code, stderr)
	}
	line := "msg=ctxopt version=" + version.Get().Version
	if n := strings.Count(stderr, line); n != 1 {
		t.Errorf("rollout's log has %q %d times, want once:\n%s", line, n, stderr)
	}
	if !strings.Contains(stderr, "embedded_model="+embedded.Version) {
		t.Errorf("rollout's log lacks the embedded model's version:\n%s", stderr)
	}
	_, _, stderr = runCLI(t, "rollout", "--help")
	if strings.Contains(stderr, "msg=ctxopt") {
		t.Errorf("rollout --help logs the version:\n%s", stderr)
	}
}
