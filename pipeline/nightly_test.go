package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/rollout"
)

// nightlyFixture writes a job (the demo's, a few tasks, its own cache), a
// session log (uncompressed rollouts of the train split, in the session
// log's record format) and a nightly config; it returns the config.
func nightlyFixture(t *testing.T, tasks int, gate ...string) *NightlyConfig {
	t.Helper()
	dir := t.TempDir()
	job := smallJob(t, tasks, "")
	logs := filepath.Join(dir, "logs")
	if _, err := Evaluate(context.Background(), job, EvalOptions{Specs: mustSpecs(t, "none=none"), Split: "train", Samples: 1}, logs); err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(dir, "sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	b := mustRead(t, filepath.Join(logs, "rollouts", "none", "sample-0", rollout.TrajectoriesFile))
	if err := os.WriteFile(filepath.Join(sessions, rollout.TrajectoriesFile), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	src := mustRead(t, "../jobs/demo.yaml")
	src = replaceOnce(t, src, "path: .cache/llm.db", "path: "+filepath.Join(dir, "llm.db"))
	src = replaceOnce(t, src, "candidates: 5", "candidates: 3")
	src = replaceOnce(t, src, "step_limit: 30", fmt.Sprintf("step_limit: 30\n  train_limit: %d\n  test_limit: %d", tasks, tasks))
	jobFile := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(jobFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &NightlyConfig{Job: jobFile, Sessions: sessions, Registry: filepath.Join(dir, "registry"), State: filepath.Join(dir, "state"), Gate: gate, ReplaySample: 30}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q is not in the text once", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestNightlyPromotesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("optimization with the embedded model")
	}
	ctx := context.Background()
	cfg := nightlyFixture(t, 16, "agreement >= -0.02", "success >= -0.35")
	res, err := Nightly(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(mustRead(t, res.Report))
	if res.Status != NightPromoted || res.Decision.Sessions != 16 || !strings.Contains(mustRead(t, res.Report), "**Promoted "+res.Decision.Candidate) {
		t.Fatalf("night %s: %s, %+v", res.Night, res.Status, res.Decision)
	}
	if lines := strings.Count(mustRead(t, filepath.Join(cfg.State, PromotionsFile)), "\n"); lines != 1 {
		t.Errorf("%d promotions logged, want 1", lines)
	}
	again, err := Nightly(ctx, cfg)
	if err != nil || again.Status != NightNothingNew {
		t.Fatalf("second run: %+v, %v; want nothing new", again, err)
	}
}

func TestNightlyConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) string {
		path := filepath.Join(dir, "n.yaml")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := LoadNightlyConfig("../jobs/nightly.example.yaml")
	if err != nil || c.ReplaySample != 50 || c.Split != "test" || len(c.rules) != 2 {
		t.Fatalf("example: %+v, %v", c, err)
	}
	for _, tc := range []struct{ src, want string }{
		{"job: j\nsessions: s\nregistry: r\nstate: x\ngate: [\"agreement >= 0\"]\nreplay: 3\n", "field replay not found"},
		{"job: j\nsessions: s\nregistry: r\nstate: x\ngate: [\"agreemnt >= 0\"]\n", `gate[0]: rule "agreemnt >= 0": unknown metric`},
		{"job: j\nregistry: r\nstate: x\ngate: [\"success >= 0\"]\nsplit: dev\n", `sessions: missing; split: "dev", want train or test`},
		{"job: j\nsessions: s\nregistry: r\nstate: x\n", "gate: no rule"},
		{"# nothing\n", "empty"},
	} {
		if _, err := LoadNightlyConfig(write(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}
