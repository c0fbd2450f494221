package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/rollout"
)

// keepLastTwo is a strategy defined only here: registering it is all it
// takes for the job file, optimize rollout, optimize eval and the help to
// know it (the registry's promise: adding a strategy is one file).
const keepLastTwo compress.Name = "keep-last-two"

// keepLastParams are its parameters, under compression.keep_last_two.
type keepLastParams struct {
	Turns int `yaml:"turns"`
}

func (p *keepLastParams) Validate() error {
	if p.Turns <= 0 {
		return &compress.FieldError{Field: "compression.keep_last_two.turns", Msg: "must be positive"}
	}
	return nil
}

// keepLast keeps the task and the last turns turns.
type keepLast struct{ turns int }

func (k keepLast) CompressHistory(_ context.Context, in compress.Input) (compress.Output, error) {
	cut, n := 0, 0
	for i := len(in.History) - 1; i >= 0 && n < k.turns; i-- {
		if in.History[i].Role == "assistant" {
			cut, n = i, n+1
		}
	}
	if n < k.turns || cut <= in.Covered {
		return compress.Unchanged(in)
	}
	out, err := compress.Unchanged(compress.Input{Task: in.Task, History: in.History, Covered: cut})
	out.Event = &compress.Event{Kind: compress.KindHistory, Step: in.Step, Strategy: keepLastTwo}
	return out, err
}

func init() {
	compress.Register(compress.Module{
		Name: keepLastTwo, Doc: "the task and the last two turns (a test's strategy)",
		Key:    "keep_last_two",
		Params: func() compress.ModuleParams { return &keepLastParams{Turns: 2} },
		New: func(p compress.ModuleParams, _ compress.Deps) (*compress.Strategy, error) {
			return &compress.Strategy{History: keepLast{turns: p.(*keepLastParams).Turns}}, nil
		},
	})
}

// TestRegisteredStrategy runs the test's strategy through the job file,
// optimize rollout and optimize eval.
func TestRegisteredStrategy(t *testing.T) {
	dir := t.TempDir()
	withParams := func(turns string) func(string) string {
		return func(s string) string {
			s = strings.Replace(s, "  step_limit: 30\n", "  step_limit: 30\n  test_limit: 2\n", 1)
			return strings.Replace(s, "  fifo_keep: 5\n", "  fifo_keep: 5\n  keep_last_two:\n    turns: "+turns+"\n", 1)
		}
	}
	cfg := writeJob(t, dir, withParams("2"))

	code, stdout, _ := runCLI(t, "rollout", "--help")
	if code != 0 || !strings.Contains(stdout, string(keepLastTwo)) {
		t.Errorf("rollout --help does not list %s:\n%s", keepLastTwo, stdout)
	}

	out := filepath.Join(dir, "rollout")
	code, stdout, stderr := runCLI(t, "rollout", "--config", cfg, "--strategy", string(keepLastTwo), "--limit", "2", "--out", out)
	if code != 0 {
		t.Fatalf("rollout: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, string(keepLastTwo)) {
		t.Errorf("table missing the strategy:\n%s", stdout)
	}
	trs, err := rollout.ReadTrajectories(filepath.Join(out, rollout.TrajectoriesFile))
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, tr := range trs {
		if tr.Strategy != string(keepLastTwo) {
			t.Fatalf("trajectory strategy %q", tr.Strategy)
		}
		events += len(tr.Events)
	}
	if events == 0 {
		t.Fatal("the strategy compressed nothing in two tasks")
	}

	evOut := filepath.Join(dir, "eval")
	code, stdout, stderr = runCLI(t, "eval", "--config", cfg, "--out", evOut,
		"--candidate", "none=none", "--candidate", "last2="+string(keepLastTwo))
	if code != 0 {
		t.Fatalf("eval: exit %d\n%s\n%s", code, stdout, stderr)
	}
	res, err := eval.Load(evOut)
	if err != nil {
		t.Fatal(err)
	}
	if arm, ok := res.Arm("last2"); !ok || arm.Spec.Strategy != keepLastTwo {
		t.Fatalf("eval has no last2 arm of strategy %s: %+v", keepLastTwo, arm)
	}

	// The job file validates its parameters, by field and line.
	bad := writeJob(t, t.TempDir(), withParams("0"))
	code, _, stderr = runCLI(t, "rollout", "--config", bad, "--strategy", string(keepLastTwo), "--limit", "1", "--out", filepath.Join(dir, "bad"))
	if code != exitUsage || !strings.Contains(stderr, "line 58: field compression.keep_last_two.turns: must be positive") {
		t.Fatalf("turns 0: exit %d, stderr:\n%s", code, stderr)
	}
}
