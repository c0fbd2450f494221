package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

// TestShowBadInput: what is not a trajectories file, a line over the
// record limit and a damaged record are exit 2 naming the file and line;
// the records before a damaged one are printed whole.
func TestShowBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	record := func(id string) string {
		b, err := rollout.EncodeTrajectory(&rollout.Trajectory{TaskID: id, Success: true})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	index := write("index.jsonl", `{"task_id":"a","score":{"success":true},"success":true,"metrics":{},"events":0,"offset":0,"length":9}`+"\n")
	short := record("a")
	long := write("long.jsonl", short+record(strings.Repeat("b", 200)))
	limit := int64(len(short)) + 10
	const good = 300
	var b strings.Builder
	for i := range good {
		b.WriteString(record(fmt.Sprintf("task-%03d", i)))
	}
	damaged := write("damaged.jsonl", b.String()+`{"task_id":`+"\n"+record("after"))

	tests := []struct {
		name, file string
		lineLimit  int64
		want       []string
		printed    int
	}{
		{"an index file", index, 0, []string{index + ":1:", "is this a trajectories file?"}, 0},
		{"a line over the limit", long, limit, []string{long + ":2:", fmt.Sprintf("limit of %d bytes", limit)}, 1},
		{"damaged after many records", damaged, 0, []string{fmt.Sprintf("%s:%d:", damaged, good+1)}, good},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lineLimit > 0 {
				prev := rollout.RecordLimits
				rollout.RecordLimits.Line = tc.lineLimit
				t.Cleanup(func() { rollout.RecordLimits = prev })
			}
			code, stdout, stderr := runCLI(t, "show", tc.file)
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not name %q", stderr, w)
				}
			}
			if tc.printed == 0 {
				if stdout != "" {
					t.Errorf("printed %q", stdout)
				}
				return
			}
			lines := strings.SplitAfter(stdout, "\n")
			if len(lines) != tc.printed+1 || lines[tc.printed] != "" {
				t.Fatalf("stdout is %d bytes in %d lines ending %q, want %d whole records", len(stdout), len(lines), lines[len(lines)-1], tc.printed)
			}
			for i, l := range lines[:tc.printed] {
				var tr rollout.Trajectory
				if err := json.Unmarshal([]byte(l), &tr); err != nil || tr.TaskID == "" {
					t.Fatalf("line %d is not a whole record: %v", i+1, err)
				}
			}
		})
	}
}
