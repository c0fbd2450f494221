package distill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/redact/redacttest"
	"github.com/ctxopt/ctxopt/rollout"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestBuildGolden builds the fixture run (testdata/run: a summary selecting
// g-ut1, a baseline stage without compression, and a compressed stage with
// duplicates, a failed and an infra-failed trajectory, an unknown kind, an
// empty output and another guideline's event) and compares what it writes
// with testdata/golden.
func TestBuildGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dataset")
	m, err := Build(t.Context(), "testdata/run", out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows.Kept != 9 || m.Splits[SplitValidation].Rows == 0 {
		t.Errorf("kept %d rows, validation %d: the fixture should give 9 rows and a validation split", m.Rows.Kept, m.Splits[SplitValidation].Rows)
	}
	for _, name := range []string{
		"README.md", "manifest.json", "train.jsonl", "validation.jsonl",
		"train.messages.jsonl", "validation.messages.jsonl",
		"recipe/train_lora.py", "recipe/axolotl.yaml", "recipe/openai.md",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run go test -update after checking the change):\n%s", name, golden, firstDiff(got, want))
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, g, w)
		}
	}
	return ""
}

func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if _, err := Build(t.Context(), "testdata/run", a, Options{Concurrency: 1, RowGroupRows: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(t.Context(), "testdata/run", b, Options{Concurrency: 4, RowGroupRows: 3}); err != nil {
		t.Fatal(err)
	}
	// Building again over a previous build replaces it.
	if _, err := Build(t.Context(), "testdata/run", b, Options{Concurrency: 2, RowGroupRows: 3}); err != nil {
		t.Fatal(err)
	}
	filesA, filesB := treeContents(t, a), treeContents(t, b)
	if len(filesA) != len(filesB) {
		t.Fatalf("%d files vs %d", len(filesA), len(filesB))
	}
	for name, data := range filesA {
		if !bytes.Equal(data, filesB[name]) {
			t.Errorf("%s differs between runs", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left %d entries next to the outputs, want only a and b", len(entries))
	}
}

func treeContents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// writeRun writes trajectories into dir/stages/test/rollout/trajectories.jsonl.
func writeRun(t *testing.T, dir string, trajs ...rollout.Trajectory) {
	t.Helper()
	var buf bytes.Buffer
	for _, tr := range trajs {
		line, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	path := filepath.Join(dir, "stages", "test", "rollout", rollout.TrajectoriesFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func event(kind, user, output string) rollout.CompressionEvent {
	return rollout.CompressionEvent{
		Kind:        kind,
		Step:        2,
		GuidelineID: "g-1",
		Input:       []llm.Message{{Role: "system", Content: "Compress."}, {Role: "user", Content: user}},
		Output:      output,
		Model:       "teacher-1",
	}
}

func success(task string, events ...rollout.CompressionEvent) rollout.Trajectory {
	return rollout.Trajectory{TaskID: task, Success: true, Events: events}
}

func TestBuildSplitsByTask(t *testing.T) {
	run := t.TempDir()
	var trajs []rollout.Trajectory
	for i := range 40 {
		var events []rollout.CompressionEvent
		for j := range 3 {
			events = append(events, event(compress.KindHistory, fmt.Sprintf("task %d history %d", i, j), fmt.Sprintf("summary %d.%d", i, j)))
		}
		trajs = append(trajs, success(fmt.Sprintf("t%02d", i), events...))
	}
	writeRun(t, run, trajs...)
	for _, tt := range []struct {
		fraction *float64 // nil: the default
		wantVal  int      // tasks
	}{{nil, valTasks(40, DefaultValidationFraction)}, {new(0.25), valTasks(40, 0.25)}, {new(0.0), 0}} {
		t.Run(fmt.Sprint(tt.wantVal), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ds")
			m, err := Build(t.Context(), run, out, Options{ValidationFraction: tt.fraction})
			if err != nil {
				t.Fatal(err)
			}
			tasks := map[string]string{}
			for split, rows := range rowsBySplit(t, out) {
				for _, r := range rows {
					if r.Split != split {
						t.Errorf("row of %s in %s says split %q", r.TaskID, split, r.Split)
					}
					if prev, seen := tasks[r.TaskID]; seen && prev != split {
						t.Errorf("task %s is in %s and %s", r.TaskID, prev, split)
					}
					tasks[r.TaskID] = split
				}
			}
			if got := m.Splits[SplitValidation].Tasks; got != tt.wantVal {
				t.Errorf("%d validation tasks, want %d", got, tt.wantVal)
			}
			if m.Splits[SplitTrain].Rows+m.Splits[SplitValidation].Rows != 120 {
				t.Errorf("splits %+v do not add up to 120 rows", m.Splits)
			}
		})
	}
}

// rowsBySplit reads the JSONL rows of a built dataset.
func rowsBySplit(t *testing.T, out string) map[string][]Row {
	t.Helper()
	rows := map[string][]Row{}
	for _, split := range splitNames {
		for _, line := range readLines(t, filepath.Join(out, jsonlFormat{}.Path(split))) {
			var r Row
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			rows[split] = append(rows[split], r)
		}
	}
	return rows
}

// valTasks counts the tasks t00… of n that the hash sends to validation.
func valTasks(n int, fraction float64) int {
	v := 0
	for i := range n {
		if splitDraw(DefaultSeed, fmt.Sprintf("t%02d", i)) < fraction {
			v++
		}
	}
	return v
}

func TestAssignSplitsDependsOnSeedOnly(t *testing.T) {
	var tasks []string
	for i := range 200 {
		tasks = append(tasks, fmt.Sprintf("qa-train-%04d", i))
	}
	reversed := slices.Clone(tasks)
	slices.Reverse(reversed)
	s1, s2 := assignSplits(tasks, 42, 0.3), assignSplits(reversed, 42, 0.3)
	val := 0
	for _, task := range tasks {
		if s1[task] != s2[task] {
			t.Errorf("task %s: %s vs %s depending on input order", task, s1[task], s2[task])
		}
		if s1[task] == SplitValidation {
			val++
		}
	}
	// A binomial(200, 0.3) outside 35..85 has odds below one in a million.
	if val < 35 || val > 85 {
		t.Errorf("%d of 200 validation tasks at fraction 0.3", val)
	}
	differs := false
	s3 := assignSplits(tasks, 7, 0.3)
	for _, task := range tasks {
		differs = differs || s3[task] != s1[task]
	}
	if !differs {
		t.Error("seed 7 gives the same split as seed 42")
	}
	// Adding or removing tasks moves none of the others.
	sub := assignSplits(tasks[50:120], 42, 0.3)
	for task, split := range sub {
		if s1[task] != split {
			t.Errorf("task %s is in %s with 70 tasks and in %s with 200", task, split, s1[task])
		}
	}
}

// Adding a source to a build moves no task between train and validation.
func TestBuildSplitsStableWhenSourcesChange(t *testing.T) {
	run := t.TempDir()
	source := func(name string, from, to int) string {
		var buf bytes.Buffer
		for i := from; i < to; i++ {
			line, err := json.Marshal(success(fmt.Sprintf("task-%03d", i), event(compress.KindHistory, fmt.Sprintf("history of %d", i), fmt.Sprintf("summary %d", i))))
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(line)
			buf.WriteByte('\n')
		}
		path := filepath.Join(run, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := source("a.jsonl", 0, 60), source("b.jsonl", 60, 150)
	splitOf := func(files ...string) map[string]string {
		out := filepath.Join(t.TempDir(), "ds")
		if _, err := Build(t.Context(), "", out, Options{Trajectories: files, ValidationFraction: new(0.2)}); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for split, rows := range rowsBySplit(t, out) {
			for _, r := range rows {
				got[r.TaskID] = split
			}
		}
		return got
	}
	one, both := splitOf(a), splitOf(a, b)
	moved, val := 0, 0
	for task, split := range one {
		if both[task] != split {
			moved++
		}
		if split == SplitValidation {
			val++
		}
	}
	if len(one) != 60 || len(both) != 150 || val == 0 || moved != 0 {
		t.Errorf("%d and %d tasks; %d in validation; %d moved when a source was added", len(one), len(both), val, moved)
	}
}

func TestBuildCuration(t *testing.T) {
	run := t.TempDir()
	long := strings.Repeat("word ", 300)
	writeRun(t, run,
		success("a",
			event(compress.KindHistory, "alpha history", "alpha summary"),
			event(compress.KindHistory, "alpha history", "alpha summary"),      // exact duplicate
			event(compress.KindHistory, "ALPHA   history", "Alpha  Summary"),   // duplicate up to case and spaces
			event(compress.KindObservation, "long observation "+long, "short"), // over max length
			event(KindPlanAware, "plan history", "plan summary"),
			rollout.CompressionEvent{Kind: compress.KindHistory, GuidelineID: "g-1", Input: []llm.Message{{Role: "tool", Content: "x"}}, Output: "y"},
			rollout.CompressionEvent{Kind: compress.KindHistory, GuidelineID: "g-1", Input: []llm.Message{{Role: "system", Content: " "}}, Output: "y"},
		),
	)
	m, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{MaxLength: 200, ValidationFraction: new(0.0)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{DropExactDuplicate: 1, DropNormalizedDup: 1, DropTooLong: 1, DropUnsupportedRole: 1, DropEmptyPrompt: 1}
	for reason, n := range m.Rows.Dropped {
		if n != want[reason] {
			t.Errorf("dropped %d for %s, want %d", n, reason, want[reason])
		}
	}
	dropped := 0
	for _, n := range m.Rows.Dropped {
		dropped += n
	}
	if m.Rows.Read != 7 || m.Rows.Kept != 2 || m.Rows.Kept+dropped != m.Rows.Read {
		t.Errorf("rows %+v: want 7 read, 2 kept, and read = kept + dropped", m.Rows)
	}
	if m.Splits[SplitTrain].ByKind[KindPlanAware] != 1 {
		t.Errorf("by kind %v, want the paace row kept", m.Splits[SplitTrain].ByKind)
	}
}

// TestBuildRedactsEverySecret seeds one secret of each kind into prompts,
// completions and metadata, and checks that none reaches any output file
// (Parquet read back, since its pages are compressed) and that the manifest
// counts each kind.
func TestBuildRedactsEverySecret(t *testing.T) {
	run := t.TempDir()
	samples := redacttest.Samples()
	var trajs []rollout.Trajectory
	for i, s := range samples {
		ev := event(compress.KindHistory, fmt.Sprintf("step %d observation: %s", i, s.Text), "kept: "+s.Text)
		trajs = append(trajs, success(fmt.Sprintf("task-%02d", i), ev))
	}
	// Metadata is redacted too.
	meta := event(compress.KindObservation, "metadata carrier", "ok")
	meta.Model = "teacher " + samples[0].Text
	trajs = append(trajs, success("task-meta "+samples[10].Text, meta))
	writeRun(t, run, trajs...)

	out := filepath.Join(t.TempDir(), "ds")
	m, err := Build(t.Context(), run, out, Options{RedactEmails: true})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for path, data := range treeContents(t, out) {
		if strings.HasSuffix(path, ".parquet") {
			texts = append(texts, parquetStrings(t, filepath.Join(out, path))...)
			continue
		}
		texts = append(texts, string(data))
	}
	for _, s := range samples {
		for _, text := range texts {
			if strings.Contains(text, s.Leak) {
				t.Errorf("%s secret %q reached the output", s.Kind, s.Leak)
				break
			}
		}
	}
	want := map[string]int{}
	for _, s := range samples {
		want[s.Kind] += 2 // in the prompt and in the completion
	}
	want[samples[0].Kind]++  // the teacher model
	want[samples[10].Kind]++ // the task id
	for _, kind := range redact.Kinds() {
		if m.Redactions[kind] != want[kind] {
			t.Errorf("manifest counts %d %s redactions, want %d", m.Redactions[kind], kind, want[kind])
		}
	}
}

func parquetStrings(t *testing.T, path string) []string {
	t.Helper()
	r := parquet.NewGenericReader[Row](openParquet(t, path))
	defer r.Close()
	rows := make([]Row, r.NumRows())
	n, _ := r.Read(rows)
	var out []string
	for _, row := range rows[:n] {
		out = append(out, row.ID, row.TaskID, row.GuidelineID, row.TeacherModel)
		for _, msg := range append(row.Prompt, row.Completion...) {
			out = append(out, msg.Content)
		}
	}
	return out
}

func TestBuildBadInput(t *testing.T) {
	t.Run("no successful trajectories", func(t *testing.T) {
		run := t.TempDir()
		failed := success("a", event(compress.KindHistory, "h", "s"))
		failed.Success = false
		writeRun(t, run, failed)
		out := filepath.Join(t.TempDir(), "ds")
		_, err := Build(t.Context(), run, out, Options{})
		if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "trajectory_failed 1") {
			t.Errorf("err = %v, want ErrNoData with the drop counts", err)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("output exists after a failed build: %v", err)
		}
	})
	t.Run("no trajectory files", func(t *testing.T) {
		_, err := Build(t.Context(), t.TempDir(), filepath.Join(t.TempDir(), "ds"), Options{})
		if !errors.Is(err, ErrNoData) {
			t.Errorf("err = %v, want ErrNoData", err)
		}
	})
	t.Run("a file given as the run", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "rows.jsonl")
		if err := os.WriteFile(file, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(t.Context(), file, filepath.Join(t.TempDir(), "ds"), Options{})
		if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "is a file") {
			t.Errorf("err = %v, want ErrNoData saying the run is a file", err)
		}
	})
	t.Run("guideline matches nothing", func(t *testing.T) {
		run := t.TempDir()
		writeRun(t, run, success("a", event(compress.KindHistory, "h", "s")))
		_, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{Guideline: "g-9"})
		if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), `guideline "g-9"`) {
			t.Errorf("err = %v, want ErrNoData naming the guideline", err)
		}
	})

	corrupt := func(t *testing.T) string {
		run := t.TempDir()
		writeRun(t, run, success("a", event(compress.KindHistory, "h", "s")), success("b", event(compress.KindHistory, "h2", "s2")))
		path := filepath.Join(run, "stages", "test", "rollout", rollout.TrajectoriesFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		broken := lines[0] + `{"task_id": "x", "success": tru` + "\n" + lines[1]
		if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		return run
	}
	t.Run("corrupt line", func(t *testing.T) {
		run := corrupt(t)
		_, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 2 || !strings.HasSuffix(le.File, "stages/test/rollout/trajectories.jsonl") {
			t.Fatalf("err = %v, want a LineError for line 2", err)
		}
		if !strings.Contains(err.Error(), "trajectories.jsonl:2:") || !strings.Contains(err.Error(), "--skip-bad") {
			t.Errorf("message %q should name file:line and the way out", err)
		}
	})
	t.Run("corrupt line skipped", func(t *testing.T) {
		run := corrupt(t)
		m, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{SkipBad: true})
		if err != nil {
			t.Fatal(err)
		}
		if m.Trajectories.BadLines != 1 || len(m.BadLines) != 1 || m.BadLines[0].Line != 2 || m.Rows.Kept != 2 {
			t.Errorf("manifest %+v %+v, want one bad line (2) and two rows", m.Trajectories, m.BadLines)
		}
	})
	// A record cut short at the end of the file (a killed rollout) is left
	// out as every reader does; the same bytes ended by a newline are a
	// damaged line.
	for _, tc := range []struct {
		name, tail string
		wantErr    bool
	}{
		{"torn last line left out", `{"task_id": "x", "success": tru`, false},
		{"damaged last line", `{"task_id": "x", "success": tru` + "\n", true},
		// Whole JSON is never a write cut short: a last line that parses
		// but is no record is damage, as jsonl.Torn rules for every reader.
		{"whole JSON last line that is no record", `{"task_id": 7}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			writeRun(t, run, success("a", event(compress.KindHistory, "h", "s")), success("b", event(compress.KindHistory, "h2", "s2")))
			path := filepath.Join(run, "stages", "test", "rollout", rollout.TrajectoriesFile)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tc.tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
			m, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{})
			var le *LineError
			if tc.wantErr {
				if !errors.As(err, &le) || le.Line != 3 {
					t.Fatalf("err = %v, want a LineError for line 3", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Trajectories.Read != 2 || m.Trajectories.BadLines != 0 || m.Rows.Kept != 2 {
				t.Errorf("manifest %+v, want the two whole records and no bad line", m.Trajectories)
			}
		})
	}
}

func TestBuildKeepsForeignDirectory(t *testing.T) {
	run := t.TempDir()
	writeRun(t, run, success("a", event(compress.KindHistory, "h", "s")))
	out := t.TempDir()
	keep := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(t.Context(), run, out, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("err = %v, want a refusal to replace a directory that is not a dataset", err)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "mine" {
		t.Errorf("the directory's file was touched: %q, %v", data, err)
	}
}

func TestBuildGuidelineSelection(t *testing.T) {
	run := t.TempDir()
	a, b := event(compress.KindHistory, "h1", "s1"), event(compress.KindHistory, "h2", "s2")
	a.GuidelineID, b.GuidelineID = "g-ut1-co1", "g-base"
	writeRun(t, run, success("t1", a), success("t2", b))
	for _, tt := range []struct {
		name    string
		summary string
		flag    string
		want    []string
	}{
		{"all", "", "", []string{"g-base", "g-ut1-co1"}},
		{"summary", `{"selected_guideline": "g-base"}`, "", []string{"g-base"}},
		{"flag prefix overrides summary", `{"selected_guideline": "g-base"}`, "g-ut1", []string{"g-ut1-co1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			summary := filepath.Join(run, "summary.json")
			os.Remove(summary)
			if tt.summary != "" {
				if err := os.WriteFile(summary, []byte(tt.summary), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := Build(t.Context(), run, filepath.Join(t.TempDir(), "ds"), Options{Guideline: tt.flag})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(m.GuidelineIDs, ",") != strings.Join(tt.want, ",") {
				t.Errorf("guidelines %v, want %v", m.GuidelineIDs, tt.want)
			}
		})
	}
}

func TestBuildCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parent := t.TempDir()
	_, err := Build(ctx, "testdata/run", filepath.Join(parent, "ds"), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a cancelled build left %d entries behind", len(entries))
	}
}

// A run directory's evaluation stage (test split) gives no row: the stage
// is skipped by its summary's split, and a test-split record found
// elsewhere is dropped by its own split.
func TestBuildSkipsHeldOutSplits(t *testing.T) {
	run := t.TempDir()
	write := func(stage, split string, trajs ...rollout.Trajectory) {
		dir := filepath.Join(run, "stages", stage, "rollout")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for _, tr := range trajs {
			line, _ := json.Marshal(tr)
			buf.Write(line)
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, rollout.TrajectoriesFile), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if split != "" {
			if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"split":"`+split+`"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	of := func(split, task string) rollout.Trajectory {
		tr := success(task, event(compress.KindHistory, "history of "+task, "summary of "+task))
		tr.Split = split
		return tr
	}
	write("r1-utco-train", "train", of("train", "qa-train-0001"), of("train", "qa-train-0002"))
	write("eval-selected", "test", of("test", "qa-test-0001"), of("test", "qa-test-0002"))
	write("unlabelled", "", of("test", "qa-test-0003"), of("train", "qa-train-0003"))
	out := filepath.Join(t.TempDir(), "ds")
	m, err := Build(t.Context(), run, out, Options{ValidationFraction: new(0.0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rowsBySplit(t, out)[SplitTrain] {
		if strings.Contains(r.TaskID, "test") {
			t.Errorf("row from test-split task %s", r.TaskID)
		}
	}
	if m.Rows.Kept != 3 || m.Rows.Dropped[DropHeldOutSplit] != 1 || len(m.Inputs) != 2 {
		t.Errorf("kept %d, dropped %v, inputs %d; want 3 kept, 1 held-out drop, 2 inputs", m.Rows.Kept, m.Rows.Dropped, len(m.Inputs))
	}
}

// The card says what the prompts hold and links the license when given.
func TestCardLicenseLinkAndRoles(t *testing.T) {
	run := t.TempDir()
	tr := success("t1", rollout.CompressionEvent{Kind: compress.KindHistory, Step: 1, GuidelineID: "g", Model: "m",
		Input: []llm.Message{{Role: "user", Content: "compress this"}}, Output: "short"})
	writeRun(t, run, tr)
	out := filepath.Join(t.TempDir(), "ds")
	if _, err := Build(t.Context(), run, out, Options{License: "cc-by-4.0", LicenseLink: "https://creativecommons.org/licenses/by/4.0/"}); err != nil {
		t.Fatal(err)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`license: "cc-by-4.0"`, `license_link: "https://creativecommons.org/licenses/by/4.0/"`, "Every prompt is user messages only"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("card lacks %q", want)
		}
	}
	if strings.Contains(string(card), "system and user messages") {
		t.Error("card claims system messages the prompts do not have")
	}
}
