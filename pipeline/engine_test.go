package pipeline

import (
	"context"
	"os"
	"path/filepath"
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
	if err := s.Put(ctx, remoteRecord(w.dirKey(), "a"), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if p, err := w.Pending(ctx); err != nil || len(p) != 1 || p[0] != 1 {
		t.Fatalf("pending %v (%v), want [1]", p, err)
	}
	if n, err := PublishRemote(ctx, w); err != nil || n != 1 {
		t.Fatalf("published %d (%v), want 1", n, err)
	}
	if _, err := os.Stat(w.Dir + remoteSuffix); !os.IsNotExist(err) {
		t.Fatalf("%s still there (%v)", w.Dir+remoteSuffix, err)
	}
	b, err := os.ReadFile(filepath.Join(w.Dir+".partial", "trajectories.jsonl"))
	if err != nil || string(b) != "{}\n" {
		t.Fatalf("staging holds %q (%v)", b, err)
	}
}
