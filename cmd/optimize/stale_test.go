package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRolloutOutUnderOtherEnvSettings: optimize rollout into a directory
// holding a finished rollout reuses it only when nothing that changes a
// result changed; an environment option alone (search_budget, top_k)
// makes it refuse, naming the directory, instead of serving the old
// records.
func TestRolloutOutUnderOtherEnvSettings(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r")
	rollout := func(edit func(string) string) (int, string) {
		cfg := writeJob(t, dir, edit)
		code, _, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", "none", "--limit", "2", "--out", out)
		return code, stderr
	}
	if code, stderr := rollout(nil); code != 0 {
		t.Fatalf("first rollout: exit %d\n%s", code, stderr)
	}
	records := filepath.Join(out, "trajectories.jsonl")
	fi, err := os.Stat(records)
	if err != nil {
		t.Fatal(err)
	}
	written := fi.ModTime()
	for _, tc := range []struct {
		name   string
		edit   func(string) string
		refuse bool
	}{
		{"nothing", nil, false},
		{"rollout concurrency", func(s string) string { return strings.Replace(s, "concurrency: 8", "concurrency: 3", 1) }, false},
		{"search_budget", func(s string) string {
			return strings.Replace(s, "step_limit: 30", "step_limit: 30\n  search_budget: 2", 1)
		}, true},
		{"top_k", func(s string) string { return strings.Replace(s, "top_k: 3", "top_k: 2", 1) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := rollout(tc.edit)
			if !tc.refuse {
				// Reused: the records are not written again.
				if fi, err := os.Stat(records); code != 0 || err != nil || !fi.ModTime().Equal(written) {
					t.Fatalf("exit %d, records %v (rewritten: %v)\n%s", code, err, err == nil && !fi.ModTime().Equal(written), stderr)
				}
				return
			}
			if code == 0 || !strings.Contains(stderr, out) || !strings.Contains(stderr, "another configuration") {
				t.Fatalf("exit %d, want a refusal naming %s:\n%s", code, out, stderr)
			}
		})
	}
}

// smallJob writes the demo job cut to two tasks per split, with edit
// applied after.
func smallJob(t *testing.T, dir string, edit func(string) string) string {
	return writeJob(t, dir, func(s string) string {
		s = strings.Replace(s, "step_limit: 30", "step_limit: 30\n  train_limit: 2\n  test_limit: 2", 1)
		if edit != nil {
			s = edit(s)
		}
		return s
	})
}

// TestRunIntoAnotherJobsDir: optimize run refuses a directory holding a
// run of another job (exit 2, naming the directory and what to do) and
// leaves it as it was; with --replace it starts the directory over; a run
// of the same job resumes.
func TestRunIntoAnotherJobsDir(t *testing.T) {
	dir := t.TempDir()
	cfg := smallJob(t, dir, nil)
	out := filepath.Join(dir, "run")
	mark := filepath.Join(out, "theirs.txt")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{filepath.Join(out, "job.yaml"): "name: nightly\nseed: 1\n", mark: "their work\n"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := runCLI(t, "run", "--config", cfg, "--out", out)
	if code != exitUsage || !strings.Contains(stderr, out) || !strings.Contains(stderr, `"nightly"`) || !strings.Contains(stderr, "--replace") {
		t.Fatalf("exit %d, want %d naming %s, the other job and --replace:\n%s", code, exitUsage, out, stderr)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the refused directory was changed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "stages")); !os.IsNotExist(err) {
		t.Fatalf("the refused directory got stages: %v", err)
	}
	// The runs that go through use the built binary: a whole run under
	// -race takes several times as long, and TestRunOutputIsBrief runs one
	// in-process.
	if code, _, stderr := runBinary(t, "run", "--config", cfg, "--out", out, "--replace"); code != 0 {
		t.Fatalf("--replace: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("--replace kept the other job's files: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "job.yaml")); err != nil || !strings.Contains(string(b), "name: demo") {
		t.Fatalf("job.yaml after --replace: %v\n%s", err, b)
	}
	if code, _, stderr := runBinary(t, "run", "--config", cfg, "--out", out); code != 0 {
		t.Fatalf("the same job again: exit %d\n%s", code, stderr)
	}
}

// TestEvalReplace: optimize eval into a directory whose candidate was
// evaluated under another configuration refuses (exit 2, naming the
// rollout and --replace); with --replace it redoes that candidate and
// reuses the unchanged one.
func TestEvalReplace(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "eval")
	eval := func(edit func(string) string, extra ...string) (int, string) {
		cfg := smallJob(t, dir, edit)
		code, _, stderr := runCLI(t, append([]string{"eval", "--config", cfg, "--split", "train", "--candidate", "none=none", "--candidate", "fifo=fifo", "--out", out}, extra...)...)
		return code, stderr
	}
	if code, stderr := eval(nil); code != 0 {
		t.Fatalf("first eval: exit %d\n%s", code, stderr)
	}
	none := filepath.Join(out, "rollouts", "none", "sample-0", "trajectories.jsonl")
	fi, err := os.Stat(none)
	if err != nil {
		t.Fatal(err)
	}
	keep2 := func(s string) string { return strings.Replace(s, "fifo_keep: 5", "fifo_keep: 2", 1) }
	fifo := filepath.Join(out, "rollouts", "fifo", "sample-0")
	code, stderr := eval(keep2)
	if code != exitUsage || !strings.Contains(stderr, fifo) || !strings.Contains(stderr, "--replace") {
		t.Fatalf("exit %d, want %d naming %s and --replace:\n%s", code, exitUsage, fifo, stderr)
	}
	if code, stderr := eval(keep2, "--replace"); code != 0 {
		t.Fatalf("--replace: exit %d\n%s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(fifo, "rollout.json")); err != nil || !strings.Contains(string(b), `fifo_keep\":2`) {
		t.Fatalf("fifo was not redone with fifo_keep 2: %v\n%s", err, b)
	}
	if fi2, err := os.Stat(none); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the unchanged candidate was not reused: %v", err)
	}
}

// TestEvalCandidateCompressorEndpoint: a candidate's compressor endpoint is
// part of its rollouts' fingerprint: pointing the same model name at
// another server refuses the rollouts made with the first, before any
// call, instead of reporting them as the new endpoint's.
func TestEvalCandidateCompressorEndpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := smallJob(t, dir, nil)
	out := filepath.Join(dir, "eval")
	eval := func(compressor string) (int, string) {
		code, _, stderr := runCLI(t, "eval", "--config", cfg, "--split", "train", "--candidate", "none=none",
			"--candidate", "p=prompting,compressor="+compressor+",compressor_model=ctxopt-sim", "--out", out)
		return code, stderr
	}
	if code, stderr := eval("embedded"); code != 0 {
		t.Fatalf("first eval: exit %d\n%s", code, stderr)
	}
	// Nothing listens there: only a refusal or a stale reuse can exit fast.
	code, stderr := eval("http://127.0.0.1:1/v1")
	if p := filepath.Join(out, "rollouts", "p", "sample-0"); code != exitUsage || !strings.Contains(stderr, p) {
		t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitUsage, p, stderr)
	}
}
