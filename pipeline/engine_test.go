package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/env"
)

func TestEngineSection(t *testing.T) {
	const base = "name: e\nenv: {name: qa}\n"
	for _, tc := range []struct {
		name, yaml, want string // want: "" valid, else part of the error
		kind, queue      string
	}{
		{name: "left out is in process", yaml: "", kind: ""},
		{name: "temporal gets defaults", yaml: "engine: {kind: temporal}\n", kind: EngineTemporal, queue: DefaultTaskQueue},
		{name: "unknown kind", yaml: "engine: {kind: celery}\n", want: `field engine.kind: unknown engine "celery"`},
		{name: "bad address", yaml: "engine: {kind: temporal, address: nowhere}\n", want: "field engine.address"},
		{name: "address without temporal", yaml: "engine: {address: 127.0.0.1:7233}\n", want: "engine.address: is set but engine.kind is inprocess"},
		{name: "unknown key", yaml: "engine: {kind: temporal, queue: x}\n", want: "field queue not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJob("job.yaml", []byte(base+tc.yaml))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Engine.Kind != tc.kind || j.Engine.TaskQueue != tc.queue {
				t.Fatalf("engine = %+v, want kind %q queue %q", j.Engine, tc.kind, tc.queue)
			}
		})
	}
}

func TestOverrideEngine(t *testing.T) {
	j := &Job{}
	if err := j.OverrideEngine("", "10.0.0.1:7233"); err != nil {
		t.Fatal(err)
	}
	if j.Engine.Kind != EngineTemporal || j.Engine.Address != "10.0.0.1:7233" || j.Engine.Namespace != DefaultTemporalNamespace {
		t.Fatalf("engine = %+v", j.Engine)
	}
	if err := (&Job{}).OverrideEngine("inprocess", "10.0.0.1:7233"); err == nil {
		t.Fatal("an address with the in-process engine was accepted")
	}
	if err := (&Job{}).OverrideEngine("temporal", "no-port"); err == nil || !strings.Contains(err.Error(), "engine.address") {
		t.Fatalf("err = %v", err)
	}
}

func TestLedgerSumCountsEachCallOnce(t *testing.T) {
	ctx := context.Background()
	s, err := OpenRunStore(ctx, "file://"+filepath.ToSlash(t.TempDir())+"?metadata=skip")
	if err != nil {
		t.Fatal(err)
	}
	l := OpenLedger(s)
	a := l.Writer(LedgerKey{Workflow: "w", Activity: "1", Attempt: 1})
	b := l.Writer(LedgerKey{Workflow: "w", Activity: "1", Attempt: 2}) // a retry: billed again
	for _, w := range []*LedgerWriter{a, b} {
		if err := w.Record(Spend{Calls: 1, Requests: 2, Tokens: 10, CostUSD: 0.5}); err != nil {
			t.Fatal(err)
		}
	}
	// The same entry written twice (a writer restarted on the same key)
	// counts once.
	again := l.Writer(LedgerKey{Workflow: "w", Activity: "1", Attempt: 1})
	if err := again.Record(Spend{Calls: 1, Requests: 2, Tokens: 10, CostUSD: 0.5}); err != nil {
		t.Fatal(err)
	}
	got, err := OpenLedger(s).Sum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Spend{Calls: 2, Requests: 4, Tokens: 20, CostUSD: 1}); got != want {
		t.Fatalf("sum = %+v, want %+v", got, want)
	}
}

func TestRunStoreDeletePrefixLeavesNoDirectory(t *testing.T) {
	ctx := context.Background()
	run := filepath.Join(t.TempDir(), "run")
	u, err := RunStoreURL("", run)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRunStore(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := RolloutWork{RunDir: run, Dir: filepath.Join(run, "stages", "x", "rollout"), Store: s, Tasks: []env.Task{{ID: "a"}, {ID: "b"}}}
	if err := s.Put(ctx, w.Task(0).spend(), []byte(`{"calls":3,"requests":4}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, w.Task(0).record(), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	// A record of the same task under another guideline is another
	// stage's.
	other := w.Task(1)
	other.Guideline = "{{ old }}"
	if err := s.Put(ctx, other.record(), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if p, err := w.Pending(ctx); err != nil || len(p) != 1 || p[0] != 1 {
		t.Fatalf("pending %v (%v), want [1]", p, err)
	}
	if n, spent, err := PublishRemote(ctx, w); err != nil || n != 1 || spent != (Spend{Calls: 3, Requests: 4}) {
		t.Fatalf("published %d spending %+v (%v), want 1 spending 3 calls, 4 requests", n, spent, err)
	}
	// The records stay until the rollout is in the store too.
	if _, err := os.Stat(w.Dir + remoteSuffix); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePrefix(ctx, remotePrefix(w.dirKey())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Dir + remoteSuffix); !os.IsNotExist(err) {
		t.Fatalf("%s still there (%v)", w.Dir+remoteSuffix, err)
	}
	b, err := os.ReadFile(filepath.Join(w.Dir+".partial", "trajectories.jsonl"))
	if err != nil || string(b) != "{}\n" {
		t.Fatalf("staging holds %q (%v)", b, err)
	}
}

// A mirror of a run store brings the run directory's files (not the
// ledger, not the workers' records), and putting it back writes what
// changed and deletes what is gone, leaving no empty directory behind.
func TestMirrorRoundTrip(t *testing.T) {
	ctx := context.Background()
	run := t.TempDir()
	u, err := RunStoreURL("", run)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenRunStore(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range map[string]string{
		"job.yaml": "name: x\n", "stages/a/manifest.json": "{}", "stages/a/rollout.partial/t.jsonl": "{}\n",
		"ledger/ab/00000000.json": "{}", "stages/b/rollout.remote/c.jsonl": "{}\n",
	} {
		if err := s.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := s.Download(ctx, filepath.Join(t.TempDir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"job.yaml": true, "stages/a/manifest.json": true, "ledger/ab/00000000.json": false, "stages/b/rollout.remote/c.jsonl": false} {
		if _, err := os.Stat(filepath.Join(m.Dir, k)); (err == nil) != want {
			t.Fatalf("%s in the mirror: %v, want %v", k, err == nil, want)
		}
	}
	// A staging directory renamed, a manifest rewritten, a file added.
	if err := os.Rename(filepath.Join(m.Dir, "stages/a/rollout.partial"), filepath.Join(m.Dir, "stages/a/rollout")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "stages/a/manifest.json"), []byte(`{"status":"done"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Upload(ctx, m); err != nil {
		t.Fatal(err)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"job.yaml", "ledger/ab/00000000.json", "stages/a/manifest.json", "stages/a/rollout/t.jsonl", "stages/b/rollout.remote/c.jsonl"}
	if !slices.Equal(keys, want) {
		t.Fatalf("store holds %v, want %v", keys, want)
	}
	if b, _ := s.Get(ctx, "stages/a/manifest.json"); string(b) != `{"status":"done"}` {
		t.Fatalf("manifest %q", b)
	}
	if _, err := os.Stat(filepath.Join(run, "stages/a/rollout.partial")); !os.IsNotExist(err) {
		t.Fatalf("the staging directory is still in the store (%v)", err)
	}
}

// The rollouts steps wait for are asked for once each, and an error other
// than waiting wins.
func TestJoinNeeds(t *testing.T) {
	need := func(dirs ...string) error {
		n := &needRollouts{}
		for _, d := range dirs {
			n.reqs = append(n.reqs, RolloutRequest{Task: TaskWork{Dir: d, Stage: d}})
		}
		return n
	}
	err := joinNeeds([]error{nil, need("a", "b"), need("b"), nil, need("c")})
	var n *needRollouts
	if !errors.As(err, &n) || len(n.reqs) != 3 || n.reqs[2].Task.Dir != "c" {
		t.Fatalf("joined %v", err)
	}
	boom := errors.New("boom")
	if err := joinNeeds([]error{need("a"), boom}); err != boom {
		t.Fatalf("joined %v, want boom", err)
	}
	if err := joinNeeds([]error{nil, nil}); err != nil {
		t.Fatalf("joined %v, want nil", err)
	}
}
