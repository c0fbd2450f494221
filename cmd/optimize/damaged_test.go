package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

// TestRolloutResumeRefusesDamage resumes a rollout whose staged records
// hold a damaged line before a good one: a bad-input error naming the
// file and line and what to do, with the directory left as it was; doing
// what it says resumes.
func TestRolloutResumeRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	cfg := writeJob(t, dir, nil)
	out := filepath.Join(dir, "out")
	args := []string{"rollout", "--config", cfg, "--strategy", "none", "--limit", "2", "--out", out}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// A finished rollout moved back to staging is what a resume reads.
	if err := os.Rename(out, out+".partial"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out+".partial", rollout.TrajectoriesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	damaged := append(append(first[:len(first)/2:len(first)/2], '\n'), rest...)
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	code, _, stderr := runCLI(t, args...)
	if code != exitUsage || !strings.Contains(stderr, path+":1: ") || !strings.Contains(stderr, "delete the line") {
		t.Fatalf("exit %d, want %d and an error naming %s:1 and what to do:\n%s", code, exitUsage, path, stderr)
	}
	if after := tree(t, dir); !slicesEqual(before, after) {
		t.Errorf("left output behind: before %v, after %v", before, after)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, damaged) {
		t.Fatalf("the damaged file changed (%v)", err)
	}
	// Deleting the line, as the error says, keeps the record after it.
	if err := os.WriteFile(path, rest, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("after deleting the line: exit %d\n%s", code, stderr)
	}
	if sum := readSummary(t, out); sum.ResumedTasks != 1 || sum.Tasks != 2 {
		t.Errorf("summary %+v, want 1 of 2 tasks resumed", sum)
	}
}
