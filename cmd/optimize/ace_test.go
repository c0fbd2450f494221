package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/killpoint"
	"github.com/ctxopt/ctxopt/pipeline"
)

// aceJobFile writes the demo job with optimizer ace on 8 train tasks,
// without evaluation or export, in its own directory (and cache): enough
// for ACE rounds with feedback and a playbook with bullets, which is what
// a kill mid round and the resume are checked on.
func aceJobFile(t *testing.T) string {
	t.Helper()
	return writeJob(t, t.TempDir(), func(s string) string {
		s = strings.Replace(s, "step_limit: 30", "step_limit: 30\n  train_limit: 8\n  test_limit: 2", 1)
		s = strings.Replace(s, "optimize:\n", "optimizer: ace\nace:\n  epochs: 2\n  max_tokens: 512\noptimize:\n", 1)
		s = strings.Replace(s, "eval:\n  disabled: false", "eval:\n  disabled: true", 1)
		return strings.Replace(s, "distill:\n  enabled: true", "distill:\n  enabled: false", 1)
	})
}

// aceRun runs the job into out and returns the selected playbook's
// guideline source and bullets, byte for byte.
func aceRun(t *testing.T, job, out string, env ...string) (code int, id, tmpl, bullets string, log string) {
	t.Helper()
	code, log = runWithEnv(t, env, "run", "--config", job, "--out", out, "--no-reuse")
	if code != 0 {
		return code, "", "", "", log
	}
	var sum pipeline.RunSummary
	b, err := os.ReadFile(filepath.Join(out, pipeline.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(out, pipeline.GuidelinesDir)
	return code, sum.SelectedGuideline, mustReadFile(t, filepath.Join(reg, sum.SelectedGuideline+".tmpl")),
		mustReadFile(t, filepath.Join(reg, guideline.PlaybooksDir, sum.SelectedGuideline+".json")), log
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runWithEnv runs the binary with extra environment and returns its exit
// code (-1: killed by a signal) and output.
func runWithEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatal(err)
	return 0, ""
}

// TestACERunKilledResumes runs optimize run with optimizer ace to the end,
// then again in a fresh directory (and cache) killed by SIGKILL mid ACE
// round, then resumed: the resumed run selects the same playbook, byte for
// byte. The selected playbook is then promoted and served: it passes
// serve's guideline loader like any guideline.
func TestACERunKilledResumes(t *testing.T) {
	code, id, tmpl, bullets, log := aceRun(t, aceJobFile(t), filepath.Join(t.TempDir(), "run"))
	if code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, log)
	}
	job, out := aceJobFile(t), filepath.Join(t.TempDir(), "run")
	if code, log := runWithEnv(t, []string{killpoint.Env + "=ace-round"}, "run", "--config", job, "--out", out, "--no-reuse"); code != -1 {
		t.Fatalf("run with %s=ace-round: exit %d, want killed\n%s", killpoint.Env, code, log)
	}
	code, id2, tmpl2, bullets2, log := aceRun(t, job, out)
	if code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, log)
	}
	t.Logf("uninterrupted: %s; killed mid ACE round and resumed: %s (%d bytes of template, %d of bullets)", id, id2, len(tmpl2), len(bullets2))
	if id2 != id || tmpl2 != tmpl || bullets2 != bullets {
		t.Fatalf("the resumed run selected %s, the uninterrupted one %s; templates equal %v, bullets equal %v", id2, id, tmpl2 == tmpl, bullets2 == bullets)
	}
	if !strings.Contains(tmpl, "PLAYBOOK_BEGIN") || strings.Count(bullets, `"id":`) == 0 {
		t.Fatalf("the selected guideline is no playbook with bullets:\n%s", tmpl)
	}
	servePlaybook(t, filepath.Join(out, pipeline.GuidelinesDir), id)
}

// servePlaybook promotes id in the registry dir and checks optimize serve
// loads it.
func servePlaybook(t *testing.T, dir, id string) {
	t.Helper()
	if code, stdout, stderr := runCLI(t, "guideline", "promote", id, "--registry", dir); code != 0 {
		t.Fatalf("promote: exit %d\n%s%s", code, stdout, stderr)
	}
	_, simURL, _ := startLogged(t, nil, "url", "sim", "--listen", "127.0.0.1:0")
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:1\nupstream:\n  openai:\n    base_url: %s\ncompression:\n  registry: %s\n  reload: 1h\ncompressor:\n  teacher:\n    base_url: %s\n    model: ctxopt-sim\nauth:\n  anonymous: true\n", simURL, dir, simURL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, addr, logs := startLogged(t, nil, "addr", "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), id) {
		t.Fatalf("serve readyz: %d %q, want the playbook %s served\n%s", resp.StatusCode, b, id, logs.String())
	}
}

// TestGuidelinePlaybookCommands checks show, diff and merge on playbooks
// grown in parallel from one seed.
func TestGuidelinePlaybookCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "guidelines")
	reg, err := guideline.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := guideline.NewPlaybook(guideline.KindHistory, mustReadFile(t, "../../guideline/testdata/history_seed.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	seed.Apply(1, []guideline.Op{{Type: guideline.OpAdd, Section: "keep", Content: "Copy every fact sentence word for word."}})
	put := func(pb *guideline.Playbook, parent string) string {
		rec, _, err := reg.PutPlaybook(guideline.Record{Parent: parent, Step: map[bool]string{true: guideline.StepSeed, false: guideline.StepACE}[parent == ""], Source: "test"}, pb)
		if err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	seedID := put(seed, "")
	a, b := seed.Clone(), seed.Clone()
	a.ApplyTags(2, []guideline.Tag{{ID: "keep-00001", Tag: guideline.TagHelpful}})
	a.Apply(2, []guideline.Op{{Type: guideline.OpAdd, Section: "trim", Content: "Write REASONING as one sentence."}})
	b.ApplyTags(2, []guideline.Tag{{ID: "keep-00001", Tag: guideline.TagHelpful}, {ID: "keep-00001", Tag: guideline.TagHelpful}})
	b.Apply(2, []guideline.Op{{Type: guideline.OpAdd, Section: "trim", Content: "Drop the search queries of questions already answered."}}) // trim-00002 too: renumbered
	aID, bID := put(a, seedID), put(b, seedID)

	code, show, stderr := runCLI(t, "guideline", "show", aID, "--registry", dir)
	if code != 0 || !strings.Contains(show, "--- playbook: 2 bullets") || !strings.Contains(show, "trim-00002") {
		t.Fatalf("show: exit %d\n%s%s", code, show, stderr)
	}
	code, diff, _ := runCLI(t, "guideline", "diff", seedID, aID, "--registry", dir)
	if code != 0 || !strings.Contains(diff, "~ [keep-00001] helpful 0 -> 1") || !strings.Contains(diff, "+ [trim-00002]") {
		t.Fatalf("diff: exit %d\n%s", code, diff)
	}
	code, merged, stderr := runCLI(t, "guideline", "merge", aID, bID, "--registry", dir)
	t.Logf("merge: %s", merged)
	if code != 0 || !strings.Contains(merged, "renumbered: 1") {
		t.Fatalf("merge: exit %d\n%s%s", code, merged, stderr)
	}
	mID := strings.Fields(strings.SplitN(merged, " into ", 2)[1])[0]
	mID = strings.TrimSuffix(mID, ":")
	rec, pb, err := reg.Playbook(mID)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := pb.Get("keep-00001")
	if rec.Step != guideline.StepMerge || len(rec.Parents) != 2 || k.Helpful != 3 || len(pb.Bullets) != 3 {
		t.Errorf("merged %+v: keep-00001 helpful %d (want 1+2), %d bullets (want 3)", rec, k.Helpful, len(pb.Bullets))
	}
	if code, _, stderr := runCLI(t, "guideline", "merge", aID, "nope-1234", "--registry", dir); code != 2 {
		t.Errorf("merge with an unknown id: exit %d, want 2\n%s", code, stderr)
	}
}
