package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/eval"
)

// replayGuidelines writes two history guidelines built on the naive one:
// keep copies every answering sentence word for word and logs the
// queries; drop asks for a summary under 25 words, which cuts facts.
func replayGuidelines(t *testing.T) (keep, drop string) {
	t.Helper()
	base, _, err := StartingGuideline(smallJob(t, 1, ""), "history")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keep, drop = filepath.Join(dir, "keep.tmpl"), filepath.Join(dir, "drop.tmpl")
	rules := map[string]string{
		keep: "\nCopy word for word into a FACT CACHE every sentence that answers one of the task's questions.\nRecord every search query in ATTEMPTED QUERIES.\n",
		drop: "\nKeep the summary under 25 words.\n",
	}
	for path, rule := range rules {
		if err := os.WriteFile(path, []byte(base+rule), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return keep, drop
}

// TestReplayAgreement replays logged sessions (uncompressed rollouts of
// the train split, in the session log's record format) with the embedded
// model: none leaves the history as it is and agrees everywhere; a
// guideline that keeps the facts agrees more than one that drops them, on
// the same sampled requests (paired).
func TestReplayAgreement(t *testing.T) {
	if testing.Short() {
		t.Skip("rollouts and replay with the embedded model")
	}
	ctx := context.Background()
	job := smallJob(t, 8, "")
	logs := t.TempDir()
	if _, err := Evaluate(ctx, job, EvalOptions{Specs: mustSpecs(t, "none=none"), Split: "train", Samples: 1}, logs); err != nil {
		t.Fatal(err)
	}
	keep, drop := replayGuidelines(t)
	res, err := Evaluate(ctx, job, EvalOptions{
		Specs: mustSpecs(t, "none=none", "keep=guideline,guideline="+keep, "drop=guideline,guideline="+drop),
		Split: "train", Samples: 1, Reference: "none",
		Replay: filepath.Join(logs, "rollouts", "none", "sample-0"), ReplaySample: 40,
	}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Summary.Replay.Requests); n != 40 {
		t.Fatalf("%d requests replayed, want 40", n)
	}
	agree := map[string]eval.Interval{}
	for _, a := range res.Summary.Candidates {
		agree[a.Name] = a.Metrics[eval.MetricAgreement]
	}
	compressed := map[string]int{}
	for _, o := range res.Replay {
		if o.Compressed {
			compressed[o.Candidate]++
		}
	}
	paired := res.Compare("drop", "keep").Metrics[eval.MetricAgreement].Diff
	// The ablation, for the record (go test -v).
	t.Logf("replay ablation on the same 40 requests: none %.3f, keep %.3f %v (%d compressed), drop %.3f %v (%d compressed); drop − keep %.3f [%.3f, %.3f]",
		agree["none"].Point, agree["keep"].Point, agree["keep"], compressed["keep"], agree["drop"].Point, agree["drop"], compressed["drop"],
		paired.Point, paired.Low, paired.High)
	if agree["none"].Point != 1 || compressed["none"] != 0 {
		t.Errorf("none: agreement %v, %d compressed; want 1 and 0", agree["none"], compressed["none"])
	}
	if compressed["keep"] == 0 || compressed["drop"] == 0 {
		t.Fatalf("no request was compressed (keep %d, drop %d): the sample tests nothing", compressed["keep"], compressed["drop"])
	}
	if !(agree["keep"].Point > agree["drop"].Point) || paired.High >= 0 {
		t.Errorf("dropping facts should agree less: keep %v, drop %v, drop − keep %v", agree["keep"], agree["drop"], paired)
	}
	// The gate reads agreement like success.
	rule, err := eval.ParseRule("agreement >= -0.02")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := eval.Gate(res, "drop", res, "keep", []eval.Rule{rule})
	if err != nil || vs[0].Pass {
		t.Errorf("gate agreement >= -0.02 on drop vs keep: %+v, %v; want a failing verdict", vs, err)
	}
	back, err := eval.Load(res.Dir)
	if err != nil || len(back.Replay) != len(res.Replay) || !strings.Contains(mustRead(t, filepath.Join(res.Dir, "summary.json")), `"agreement"`) {
		t.Errorf("reloaded: %v, %d replay outcomes of %d", err, len(back.Replay), len(res.Replay))
	}
}

func mustSpecs(t *testing.T, ss ...string) []eval.Spec {
	t.Helper()
	specs, err := eval.ParseSpecs(ss)
	if err != nil {
		t.Fatal(err)
	}
	return specs
}
