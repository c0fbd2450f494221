package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

// TestShow prints records of every format in full: the same trajectory as
// the first format stored it (every input as sent), whichever format the
// file holds; with --task only that task; bad input is exit 2 naming it.
func TestShow(t *testing.T) {
	fixtures := filepath.Join("..", "..", "rollout", "testdata")
	old, err := os.ReadFile(filepath.Join(fixtures, "record-format1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want rollout.Trajectory
	if err := json.Unmarshal(old, &want); err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile(filepath.Join(fixtures, "record-format2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	other := want
	other.TaskID = "other"
	cur, err := rollout.EncodeTrajectory(&other)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, rollout.TrajectoriesFile)
	if err := os.WriteFile(file, []byte(string(old)+string(v2)+string(cur)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), rollout.TrajectoriesFile)
	if err := os.WriteFile(damaged, []byte(string(v2)+"{\"task_id\":\n"+string(cur)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string // task ids printed, or the error's words
	}{
		{"every format", []string{file}, 0, []string{want.TaskID, want.TaskID, "other"}},
		{"one task of a directory", []string{"--task", "other", dir}, 0, []string{"other"}},
		{"unknown task", []string{"--task", "nope", file}, 2, []string{file, `task "nope"`, "no record"}},
		{"missing file", []string{filepath.Join(dir, "missing.jsonl")}, 2, []string{"missing.jsonl", "no such file"}},
		{"damaged line", []string{damaged}, 2, []string{damaged + ":2:"}},
		{"no argument", nil, 2, []string{"got 0 arguments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"show"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, stderr)
			}
			if tc.code != 0 {
				for _, w := range tc.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("stderr %q does not name %q", stderr, w)
					}
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines printed, want %d", len(lines), len(tc.want))
			}
			for i, line := range lines {
				var got rollout.Trajectory
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Fatal(err)
				}
				w := want
				w.TaskID = tc.want[i]
				if !reflect.DeepEqual(got, w) {
					t.Errorf("line %d does not print trajectory %s in full", i+1, tc.want[i])
				}
			}
		})
	}
}
