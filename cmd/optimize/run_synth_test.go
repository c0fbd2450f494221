package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/pipeline"
	"github.com/ctxopt/ctxopt/synth"
)

// TestRunExportsSynth runs a job whose distill.synth names a synth run:
// optimize run's export holds that run's accepted pairs beside its own
// rows, accounted for in the manifest and the run summary, and dropping
// the key exports the run's rows only.
func TestRunExportsSynth(t *testing.T) {
	dir := t.TempDir()
	wf := synthGenerated(t, dir, synthJob(t, dir, "0s"), "6")
	sr := filepath.Join(dir, "synth-run")
	if code, stdout, stderr := runCLI(t, "synth", "run", "--config", synthJob(t, dir, "0s"), "--workflows", wf, "--out", sr); code != 0 {
		t.Fatalf("synth run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	srSum := readJSON[synth.RunSummary](t, filepath.Join(sr, synth.RunSummaryFile))
	if srSum.Accepted == 0 || srSum.TrainingPairs == 0 {
		t.Fatalf("synth run %+v: the test needs accepted workflows", srSum)
	}
	job := func(synthKey string) string {
		return writeJob(t, dir, func(s string) string {
			s = strings.Replace(s, "  step_limit: 30\n", "  step_limit: 30\n  train_limit: 6\n  test_limit: 2\n", 1)
			return strings.Replace(s, "distill:\n  enabled: true\n", "distill:\n  enabled: true\n"+synthKey, 1)
		})
	}
	out := filepath.Join(dir, "run")
	// The runs use the built binary: a whole run under -race takes
	// several times as long, and TestRunOutputIsBrief runs one in-process.
	if code, stdout, stderr := runBinary(t, "run", "--config", job("  synth: ["+sr+"]\n"), "--out", out); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	m := readJSON[distill.Manifest](t, filepath.Join(out, "datasets", "manifest.json"))
	if w := m.Workflows; w == nil || w.Read != srSum.Executed || w.Accepted != srSum.Accepted {
		t.Fatalf("manifest workflows %+v; the synth run executed %d and accepted %d", w, srSum.Executed, srSum.Accepted)
	}
	var synthInput bool
	for _, in := range m.Inputs {
		synthInput = synthInput || (strings.HasSuffix(in.Path, synth.ExecutionsFile) && in.Workflows == srSum.Executed)
	}
	if !synthInput {
		t.Fatalf("manifest inputs %+v lack the synth run's %s", m.Inputs, synth.ExecutionsFile)
	}
	paace, own := countKinds(t, filepath.Join(out, "datasets"))
	if paace != srSum.TrainingPairs || own == 0 {
		t.Fatalf("%d paace rows (the synth run counted %d training pairs), %d rows of the run's own", paace, srSum.TrainingPairs, own)
	}
	sum := readJSON[pipeline.RunSummary](t, filepath.Join(out, "summary.json"))
	if sum.Dataset == nil || sum.Dataset.Workflows == nil || sum.Dataset.Workflows.Accepted != srSum.Accepted {
		t.Fatalf("summary dataset %+v", sum.Dataset)
	}
	st := readJSON[pipeline.Manifest](t, filepath.Join(out, "stages", "distill", pipeline.ManifestFile))
	if st.Counts["synth_accepted"] != float64(srSum.Accepted) || !strings.Contains(string(st.Inputs), sr) {
		t.Fatalf("distill stage manifest: counts %v, inputs %s", st.Counts, st.Inputs)
	}

	// Without the key only the export is redone, with the run's rows only.
	if code, stdout, stderr := runBinary(t, "run", "--config", job(""), "--out", out); code != 0 {
		t.Fatalf("re-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if p, o := countKinds(t, filepath.Join(out, "datasets")); p != 0 || o != own {
		t.Fatalf("without distill.synth: %d paace rows, %d own; want 0 and %d", p, o, own)
	}
	if m := readJSON[distill.Manifest](t, filepath.Join(out, "datasets", "manifest.json")); m.Workflows != nil {
		t.Fatalf("without distill.synth the manifest counts workflows %+v", m.Workflows)
	}

	for _, tt := range []struct{ name, key, want string }{
		{"missing run", "  synth: [" + filepath.Join(dir, "nope") + "]\n", "distill.synth[0]"},
		{"not a synth run", "  synth: [" + wf + "]\n", "distill.synth[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "run", "--config", job(tt.key), "--out", filepath.Join(dir, tt.name))
			if code != exitUsage || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "line ") {
				t.Fatalf("exit %d, want %d naming %s and its line:\n%s", code, exitUsage, tt.want, stderr)
			}
		})
	}
	t.Run("export disabled", func(t *testing.T) {
		cfg := writeJob(t, t.TempDir(), func(s string) string {
			return strings.Replace(s, "distill:\n  enabled: true\n", "distill:\n  enabled: false\n  synth: ["+sr+"]\n", 1)
		})
		code, _, stderr := runCLI(t, "run", "--config", cfg, "--out", filepath.Join(dir, "disabled"))
		if code != exitUsage || !strings.Contains(stderr, "distill.enabled") {
			t.Fatalf("exit %d, want %d naming distill.enabled:\n%s", code, exitUsage, stderr)
		}
	})
}

// countKinds counts the rows of kind paace and of other kinds in a
// dataset's train and validation JSONL.
func countKinds(t *testing.T, ds string) (paace, other int) {
	t.Helper()
	for _, split := range []string{distill.SplitTrain, distill.SplitValidation} {
		b, err := os.ReadFile(filepath.Join(ds, split+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			switch {
			case line == "":
			case strings.Contains(line, `"kind":"`+distill.KindPlanAware+`"`):
				paace++
			default:
				other++
			}
		}
	}
	return paace, other
}
