package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/pipeline"
)

// validate warns, for a job whose compressor is the embedded model, about a
// guideline that carries no directive that model understands, and names
// what it reads otherwise.
func TestGuidelineValidateEmbeddedDirectives(t *testing.T) {
	dir := t.TempDir()
	job := writeJob(t, dir, nil)
	vars := "{{ task }}\n{{ prev_summary }}\n{{ history }}\n"
	tone := filepath.Join(dir, "tone.tmpl")
	facts := filepath.Join(dir, "facts.tmpl")
	if err := os.WriteFile(tone, []byte("Summarize the history in a warm, friendly tone.\n"+vars), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(facts, []byte("Copy every fact that answers a question word for word.\n"+vars), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "guideline", "validate", "--config", job, tone, facts)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if !strings.Contains(errs, "tone.tmpl: warning: the job's compressor is the embedded model") || strings.Contains(errs, "facts.tmpl: warning") {
		t.Errorf("stderr:\n%s", errs)
	}
	if !strings.Contains(out, "facts.tmpl: the embedded model reads: keep facts word for word") {
		t.Errorf("stdout:\n%s", out)
	}
	// Without a job there is nothing to warn about.
	if _, _, errs := runCLI(t, "guideline", "validate", tone); strings.Contains(errs, "warning") {
		t.Errorf("warned without a job: %s", errs)
	}
}

// optimize distill --run on a run directory that holds the evaluation
// stages (test split) writes no row of a test task.
func TestDistillRunSkipsEvaluation(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole run")
	}
	run := briefRun(t).out
	// The evaluation's rollouts are those whose summary says the test split.
	evals := 0
	_ = filepath.WalkDir(run, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "trajectories.jsonl" {
			return err
		}
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "summary.json")); err == nil && strings.Contains(string(b), `"split": "test"`) {
			evals++
		}
		return nil
	})
	if evals == 0 {
		t.Fatal("the run has no evaluation rollout")
	}
	out := filepath.Join(t.TempDir(), "ds")
	if code, o, errs := runCLI(t, "distill", "--run", run, "--out", out, "--guideline", ""); code != 0 {
		t.Fatalf("distill: exit %d\n%s\n%s", code, o, errs)
	}
	rows := 0
	for _, name := range []string{"train.jsonl", "validation.jsonl"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				TaskID string `json:"task_id"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			rows++
			if strings.Contains(r.TaskID, "-test-") {
				t.Errorf("row of test task %s", r.TaskID)
			}
		}
	}
	if rows == 0 {
		t.Fatal("no rows at all")
	}
}

// optimize eval --run takes a run's registry and resolves
// guideline=selected to the guideline the run selected; the two ways of
// naming a registry conflict, and selected without a run is an error
// that says what to give.
func TestEvalRunSelected(t *testing.T) {
	dir := t.TempDir()
	cfg := evalJob(t, dir)
	run := filepath.Join(dir, "run")
	reg, err := guideline.OpenRegistry(filepath.Join(run, "guidelines"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../templates/history_prompting.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := reg.Put(guideline.Record{Kind: guideline.KindHistory, Source: "test"}, string(src)+"Keep every fact word for word.\n")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(pipeline.RunSummary{Job: "demo", SelectedGuideline: rec.ID})
	if err := os.WriteFile(filepath.Join(run, pipeline.SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ev")
	code, stdout, stderr := runCLI(t, "eval", "--config", cfg, "--run", run, "--out", out,
		"--candidate", "prompting=prompting", "--candidate", "selected=guideline,guideline=selected")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	res, err := eval.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if sel, ok := res.Arm("selected"); !ok || sel.HistoryGuidelineID != rec.ID {
		t.Fatalf("selected arm %+v, want guideline %s", sel, rec.ID)
	}

	bad := []struct {
		name string
		args []string
		want string
	}{
		{"run and registry", []string{"--run", run, "--registry", reg.Dir()}, "give one"},
		{"not a run", []string{"--run", dir}, "give the directory of an optimize run"},
		{"selected without a run", nil, "give --run DIR"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"eval", "--config", cfg, "--out", filepath.Join(dir, "bad"), "--candidate", "s=guideline,guideline=selected"}, tt.args...)
			code, _, stderr := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q, want 2 and %q", code, stderr, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
				t.Error("bad input left an output directory")
			}
		})
	}
}
