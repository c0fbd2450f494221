package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/logtest"
)

// TestOpenResumed resumes from the files a killed run can leave, and
// damaged ones, by the rule every JSONL reader follows (jsonl.Torn).
func TestOpenResumed(t *testing.T) {
	tests := []struct {
		name, file string
		// read are the ids read; after, the file once "{}\n" is appended
		// (the file itself on an error); torn, the line cut off with a
		// warning; wantErr, the error.
		read    []string
		after   string
		torn    int
		wantErr string
	}{
		{name: "empty file", file: "", after: "{}\n"},
		{name: "complete", file: `{"id":"a"}` + "\n", read: []string{"a"}, after: `{"id":"a"}` + "\n{}\n"},
		{name: "torn last line", file: `{"id":"a"}` + "\n" + `{"id":"b`, read: []string{"a"}, after: `{"id":"a"}` + "\n{}\n", torn: 2},
		{name: "last line without its newline", file: `{"id":"a"}` + "\n" + `{"id":"b"}`, read: []string{"a", "b"}, after: `{"id":"a"}` + "\n" + `{"id":"b"}` + "\n{}\n"},
		{name: "damaged line in the middle", file: `{"id":"a"}` + "\n" + `{"id":` + "\n" + `{"id":"c"}` + "\n", after: `{"id":"a"}` + "\n" + `{"id":` + "\n" + `{"id":"c"}` + "\n", wantErr: "f.jsonl:2: "},
		{name: "last line whole but not a record", file: `{"id":"a"}` + "\n" + `{"x":1}`, after: `{"id":"a"}` + "\n" + `{"x":1}`, wantErr: "f.jsonl:2: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := logtest.Capture(t, slog.LevelInfo)
			path := filepath.Join(t.TempDir(), "f.jsonl")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var read []string
			f, err := openResumed(path, func(line []byte) error {
				var r struct{ ID string }
				if err := json.Unmarshal(line, &r); err != nil {
					return err
				}
				if r.ID == "" {
					return errors.New("no id")
				}
				read = append(read, r.ID)
				return nil
			})
			if tc.wantErr != "" {
				if !errors.Is(err, ErrForeignDir) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrForeignDir naming %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteString("{}\n")
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(read, tc.read) && tc.wantErr == "" {
				t.Errorf("read %v, want %v", read, tc.read)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != tc.after {
				t.Errorf("file %q (%v), want %q", got, err, tc.after)
			}
			warning := "file=" + path + " line=" + strconv.Itoa(tc.torn)
			if warned := strings.Contains(logs.String(), warning); warned != (tc.torn > 0) {
				t.Errorf("warning naming %s logged: %v, want %v: %q", warning, warned, tc.torn > 0, logs.String())
			}
		})
	}
}

// workflowLines returns the lines of a workflows file, without newlines.
func workflowLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestRunResumesOnlyUnchanged resumes a run after its workflows file was
// rewritten: a workflow edited under its id is executed again, and the
// output equals an uninterrupted run's on the new file; the same
// workflows written with their keys in another order are not.
func TestRunResumesOnlyUnchanged(t *testing.T) {
	e := startEmbedded(t)
	x := e.executor(t, planAware(t), compress.DefaultPlanK)
	lines := workflowLines(t, e.generated(t, 3))
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &doc); err != nil {
		t.Fatal(err)
	}
	reordered, err := json.Marshal(doc) // keys sorted
	if err != nil || string(reordered) == lines[1] {
		t.Fatalf("fixture: %s (%v)", reordered, err)
	}
	edited := strings.Replace(lines[1], `"input":"`, `"input":"The archive moved to the third floor.\n`, 1)
	if edited == lines[1] {
		t.Fatalf("fixture: %s", lines[1])
	}
	tests := []struct {
		name, line string
		resumed    int
	}{
		{"keys in another order", string(reordered), 3},
		{"edited under the same id", edited, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wfs := filepath.Join(t.TempDir(), WorkflowsFile)
			write := func(ls ...string) {
				if err := os.WriteFile(wfs, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(lines...)
			dir := t.TempDir()
			_, before := runInto(t, x, wfs, dir)
			write(lines[0], tc.line, lines[2])
			logs := logtest.Capture(t, slog.LevelInfo)
			sum, got := runInto(t, x, wfs, dir)
			if sum.Resumed != tc.resumed || sum.Read != 3 || sum.Executed != 3 {
				t.Fatalf("resumed %d, read %d, executed %d; want resumed %d of 3", sum.Resumed, sum.Read, sum.Executed, tc.resumed)
			}
			_, want := runInto(t, x, wfs, t.TempDir())
			if !bytes.Equal(got, want) {
				t.Errorf("%s after the resume differs from a fresh run's on the same file", ExecutionsFile)
			}
			changed := tc.resumed < 3
			if !bytes.Equal(got, before) != changed {
				t.Errorf("%s changed: %v, want %v", ExecutionsFile, !bytes.Equal(got, before), changed)
			}
			warned := strings.Contains(logs.String(), "workflow="+readLines[Execution](t, filepath.Join(dir, ExecutionsFile))[1].ID)
			if warned != changed {
				t.Errorf("warning naming the changed workflow: %v, want %v: %q", warned, changed, logs.String())
			}
		})
	}
}

// runInto runs the workflows of wfs into dir and returns the summary and
// executions.jsonl.
func runInto(t *testing.T, x *Executor, wfs, dir string) (RunSummary, []byte) {
	t.Helper()
	sum, err := Run(t.Context(), x, RunOptions{Workflows: wfs, Dir: dir, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ExecutionsFile))
	if err != nil {
		t.Fatal(err)
	}
	return sum, b
}

// TestRunReadsWorkflowsByTheTornRule feeds a workflows file whose last
// line was cut short, and one damaged elsewhere (jsonl.Torn).
func TestRunReadsWorkflowsByTheTornRule(t *testing.T) {
	e := startEmbedded(t)
	x := e.executor(t, planAware(t), compress.DefaultPlanK)
	lines := workflowLines(t, e.generated(t, 3))
	wfs := filepath.Join(t.TempDir(), WorkflowsFile)
	write := func(content string) {
		if err := os.WriteFile(wfs, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("torn last line", func(t *testing.T) {
		write(lines[0] + "\n" + lines[1] + "\n" + lines[2][:len(lines[2])/2])
		logs := logtest.Capture(t, slog.LevelInfo)
		dir := t.TempDir()
		sum, err := Run(t.Context(), x, RunOptions{Workflows: wfs, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Read != 2 || sum.Executed != 2 || sum.Rejections[RejectInvalid] != 0 {
			t.Fatalf("read %d, executed %d, rejections %v; want the 2 whole lines executed and the torn one left out", sum.Read, sum.Executed, sum.Rejections)
		}
		if warning := "file=" + wfs + " line=3"; !strings.Contains(logs.String(), warning) {
			t.Errorf("no warning naming %s: %q", warning, logs.String())
		}
		// Once the write is complete, the line is executed.
		write(strings.Join(lines, "\n") + "\n")
		if sum, err = Run(t.Context(), x, RunOptions{Workflows: wfs, Dir: dir}); err != nil || sum.Resumed != 2 || sum.Executed != 3 {
			t.Fatalf("after the line was completed: resumed %d, executed %d (%v)", sum.Resumed, sum.Executed, err)
		}
	})
	t.Run("damaged line in the middle", func(t *testing.T) {
		write(lines[0] + "\n" + lines[1][:len(lines[1])/2] + "\n" + lines[2] + "\n")
		dir := filepath.Join(t.TempDir(), "run")
		_, err := Run(t.Context(), x, RunOptions{Workflows: wfs, Dir: dir})
		var inv *InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), wfs+":2: not JSON") {
			t.Fatalf("error %v, want an InvalidError naming %s:2", err, wfs)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the run wrote %s before it found the damage (%v)", dir, err)
		}
	})
}

// TestWriteSampleReadsByTheTornRule: evolve's sample reads the workflows
// file by run's rule, so damage stops it before it spends anything.
func TestWriteSampleReadsByTheTornRule(t *testing.T) {
	e := startEmbedded(t)
	lines := workflowLines(t, e.generated(t, 3))
	wfs := filepath.Join(t.TempDir(), WorkflowsFile)
	tests := []struct {
		name, file string
		want       int    // workflows sampled
		torn       int    // the line left out with a warning
		wantErr    string // the error's place
	}{
		{name: "torn last line", file: lines[0] + "\n" + lines[1] + "\n" + lines[2][:len(lines[2])/2], want: 2, torn: 3},
		{name: "damaged line in the middle", file: lines[0] + "\n" + lines[1][:len(lines[1])/2] + "\n" + lines[2] + "\n", wantErr: wfs + ":2: not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(wfs, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			logs := logtest.Capture(t, slog.LevelInfo)
			got, err := writeSample(wfs, filepath.Join(t.TempDir(), SampleFile), 5, 1, Limits{})
			var inv *InvalidError
			switch {
			case tc.wantErr != "":
				if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want an InvalidError naming %s", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case len(got) != tc.want:
				t.Fatalf("%d workflows sampled, want %d", len(got), tc.want)
			}
			if warning := "file=" + wfs + " line=" + strconv.Itoa(tc.torn); (tc.torn > 0) != strings.Contains(logs.String(), warning) {
				t.Errorf("warning naming %s: %q", warning, logs.String())
			}
		})
	}
}
