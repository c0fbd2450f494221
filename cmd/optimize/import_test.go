package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

const (
	sampleLog = "../../ingest/testdata/openai-chat.jsonl"
	// plantedSecrets are in the sample: an API key in a tool result (and so
	// in a compressor prompt) and a bearer token.
	plantedKey    = "sk-proj-Zq7RkT2mWv9XpL4sN8cB3dF6gH1jK5yQ"
	plantedBearer = "eXamPleT0kenVALUE1234567890abcd"
)

// grepTree reports the files under dir that contain s, as treeTexts
// reads them.
func grepTree(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	for path, text := range treeTexts(t, dir) {
		if strings.Contains(text, s) {
			hits = append(hits, path)
		}
	}
	slices.Sort(hits)
	return hits
}

// treeTexts returns the files under dir by path. Trajectory records pack
// their texts in zstd frames, so a trajectories file is read as optimize
// show prints it, every text in full, besides its bytes.
func treeTexts(t *testing.T, dir string) map[string]string {
	t.Helper()
	texts := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == rollout.TrajectoriesFile {
			var shown bytes.Buffer
			if _, err := rollout.Show(&shown, path, nil); err != nil {
				return err
			}
			b = append(b, shown.Bytes()...)
		}
		texts[path] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return texts
}

// TestGrepTreeReadsRecords: a secret in a packed record is found.
func TestGrepTreeReadsRecords(t *testing.T) {
	dir := t.TempDir()
	line, err := rollout.EncodeTrajectory(&rollout.Trajectory{TaskID: "a", Turns: []rollout.Turn{{Step: 1, Observation: "key " + plantedKey}}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(line, []byte(plantedKey)) {
		t.Fatal("the record does not pack its observation")
	}
	path := filepath.Join(dir, rollout.TrajectoriesFile)
	if err := os.WriteFile(path, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if hits := grepTree(t, dir, plantedKey); len(hits) != 1 || hits[0] != path {
		t.Errorf("grepTree found the packed secret in %v, want [%s]", hits, path)
	}
}

// TestImportOpenAIChat imports the bundled OpenAI-format sample, builds a
// dataset from it with optimize distill, validates it, and checks the
// planted secrets reach no output.
func TestImportOpenAIChat(t *testing.T) {
	sample, err := os.ReadFile(sampleLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{plantedKey, plantedBearer} {
		if !bytes.Contains(sample, []byte(s)) {
			t.Fatalf("the sample lost its planted secret %s", s)
		}
	}
	dir := t.TempDir()
	imp := filepath.Join(dir, "imported")
	code, stdout, stderr := runCLI(t, "import", "--format", "openai-chat", "--in", sampleLog, "--out", imp)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	t.Log(strings.TrimSpace(stdout))
	if !strings.Contains(stdout, "imported 4 sessions (3 labeled) from 17 calls") || !strings.Contains(stdout, `"openai_key":`) {
		t.Errorf("report: %s", stdout)
	}
	trs, err := rollout.ReadTrajectories(filepath.Join(imp, rollout.TrajectoriesFile))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*rollout.Trajectory{}
	for _, tr := range trs {
		byID[tr.TaskID] = tr
	}
	a := byID["sess-a"]
	if a == nil || !a.Success || len(a.Turns) != 4 || len(a.Events) != 1 || a.Turns[0].Action.Tool != "search" ||
		!strings.Contains(a.Turns[0].Observation, "The capital of Veloria is Drenhold.") || a.Metrics.PeakTokens != 900 {
		t.Fatalf("sess-a imported as %+v", a)
	}
	if b := byID["sess-b"]; b == nil || b.Success {
		t.Errorf("sess-b: want a failed session, got %+v", b)
	}

	ds := filepath.Join(dir, "dataset")
	code, stdout, stderr = runCLI(t, "distill", "--run", imp, "--out", ds, "--validation-fraction", "0")
	if code != 0 {
		t.Fatalf("distill: exit %d\n%s", code, stderr)
	}
	t.Log(strings.TrimSpace(stdout))
	code, _, stderr = runCLI(t, "distill", "validate", filepath.Join(ds, "train.jsonl"), filepath.Join(ds, "train.messages.jsonl"))
	if code != 0 {
		t.Fatalf("distill validate: exit %d\n%s", code, stderr)
	}
	rows := countLines(filepath.Join(ds, "train.jsonl"))
	if rows != 2 {
		t.Errorf("%d training rows, want 2 (the compressions of the 2 sessions labeled successful)", rows)
	}
	for _, s := range []string{plantedKey, plantedBearer} {
		if hits := grepTree(t, dir, s); len(hits) > 0 {
			t.Errorf("secret %s reached %v", s, hits)
		}
	}
}

// TestImportBadInput: a bad line is reported with file and line, nothing
// is written; --skip-bad counts it; labels override the log; a mapping
// file reads another shape.
func TestImportBadInput(t *testing.T) {
	dir := t.TempDir()
	sample, err := os.ReadFile(sampleLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(sample, []byte("\n"))
	lines[2] = []byte("{\"request\": {\"messages\": \"not a list\"}}\n")
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, bytes.Join(lines, nil), 0o644)
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "import", "--in", bad, "--out", out)
	if code != exitUsage || !strings.Contains(stderr, "bad.jsonl:3: no message list") || !strings.Contains(stderr, "--skip-bad") {
		t.Errorf("bad line: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed import left %s", out)
	}
	code, stdout, stderr := runCLI(t, "import", "--in", bad, "--out", out, "--skip-bad")
	if code != 0 || !strings.Contains(stdout, "1 bad lines skipped") {
		t.Errorf("--skip-bad: exit %d\n%s%s", code, stdout, stderr)
	}

	labels := filepath.Join(dir, "labels.jsonl")
	os.WriteFile(labels, []byte(`{"session": "sess-b", "success": true}`+"\n"), 0o644)
	code, _, stderr = runCLI(t, "import", "--in", sampleLog, "--out", out, "--labels", labels)
	if code != 0 {
		t.Fatalf("labels: exit %d\n%s", code, stderr)
	}
	if sum := readSummary(t, out); sum.Successes != 3 {
		t.Errorf("with sess-b labeled a success: %d successes, want 3", sum.Successes)
	}
	os.WriteFile(labels, []byte(`{"session": "sess-b"}`+"\n"), 0o644)
	if code, _, stderr = runCLI(t, "import", "--in", sampleLog, "--out", out, "--labels", labels); code != exitUsage || !strings.Contains(stderr, "labels.jsonl:1:") {
		t.Errorf("bad labels: exit %d\n%s", code, stderr)
	}

	// ctxopt's own records (rollouts, serve's session logs) read back.
	ctx := "../../distill/testdata/run/stages/utco/rollout/trajectories.jsonl"
	code, stdout, stderr = runCLI(t, "import", "--format", "ctxopt", "--in", ctx, "--out", out)
	if code != 0 || countLines(filepath.Join(out, rollout.TrajectoriesFile)) != countLines(ctx) {
		t.Errorf("ctxopt: exit %d\n%s%s", code, stdout, stderr)
	}
	os.WriteFile(bad, []byte(`{"x": 1}`+"\n"), 0o644)
	if code, _, stderr = runCLI(t, "import", "--format", "ctxopt", "--in", bad, "--out", out); code != exitUsage || !strings.Contains(stderr, "bad.jsonl:1:") {
		t.Errorf("bad ctxopt record: exit %d\n%s", code, stderr)
	}

	custom := filepath.Join(dir, "custom.jsonl")
	os.WriteFile(custom, []byte(
		`{"conv":"c1","ok":true,"in":[{"role":"user","content":"Q1: What is the capital of Veloria?"}],"out":{"role":"assistant","content":"","tool_calls":[{"id":"t1","type":"function","function":{"name":"search","arguments":"{\"query\":\"Veloria\"}"}}]},"fn":[{"type":"function"}]}`+"\n"+
			`{"conv":"c1","in":[{"role":"user","content":"Summarize: The capital of Veloria is Drenhold."}],"out":{"role":"assistant","content":"- Q1: The capital of Veloria is Drenhold."}}`+"\n"), 0o644)
	mapping := filepath.Join(dir, "mapping.yaml")
	os.WriteFile(mapping, []byte("messages: in\noutput: out\ntools: fn\nsession: conv\nsuccess: ok\n"), 0o644)
	code, stdout, stderr = runCLI(t, "import", "--format", "mapping", "--mapping", mapping, "--in", custom, "--out", out)
	if code != 0 || !strings.Contains(stdout, "imported 1 sessions (1 labeled) from 2 calls") {
		t.Errorf("mapping: exit %d\n%s%s", code, stdout, stderr)
	}
	os.WriteFile(mapping, []byte("mesages: in\n"), 0o644)
	if code, _, stderr = runCLI(t, "import", "--format", "mapping", "--mapping", mapping, "--in", custom, "--out", out); code != exitUsage || !strings.Contains(stderr, "mesages") {
		t.Errorf("bad mapping: exit %d\n%s", code, stderr)
	}
}

// TestRunWithImportedSource: optimize run mines an imported directory
// alongside its own rollouts: the imported successful compressed sessions
// reach the CO analysis.
func TestRunWithImportedSource(t *testing.T) {
	dir := t.TempDir()
	imp := filepath.Join(dir, "imported")
	if code, _, stderr := runCLI(t, "import", "--in", sampleLog, "--out", imp); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	cfg := writeJob(t, dir, func(s string) string {
		s = strings.Replace(s, "  step_limit: 30\n", "  step_limit: 30\n  train_limit: 6\n  test_limit: 2\n", 1)
		s = strings.Replace(s, "candidates: 5", "candidates: 2", 1)
		return s + "\nsources:\n  - " + imp + "\n"
	})
	run := filepath.Join(dir, "run")
	// The built binary: a whole run under -race takes several times as
	// long, and TestRunOutputIsBrief runs one in-process.
	code, _, stderr := runBinary(t, "run", "--config", cfg, "--out", run)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	var fb []string
	filepath.WalkDir(run, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "feedback.jsonl" {
			fb = append(fb, path)
		}
		return err
	})
	found := false
	for _, f := range fb {
		b, _ := os.ReadFile(f)
		found = found || bytes.Contains(b, []byte(`"task_id":"sess-a"`))
	}
	if !found {
		t.Errorf("no feedback record of the imported session sess-a in %v", fb)
	}
}
