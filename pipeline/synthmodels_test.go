package pipeline

import (
	"testing"
	"time"

	"github.com/ctxopt/ctxopt/llm"
)

// TestSynthDirsNameTheEndpoints: what a synth directory records of the
// endpoints (run.json through SynthExecutor, generate.json and the
// evolution's journal through Runtime.Models) changes with the answer
// settings of the roles that work calls and with nothing else, so a
// resumed directory never mixes in the work of other endpoints.
func TestSynthDirsNameTheEndpoints(t *testing.T) {
	type names struct{ run, generator, optimizer string }
	of := func(t *testing.T, edit func(*Job)) names {
		t.Helper()
		job := smallJob(t, 1, "")
		edit(job)
		rt, err := Open(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		teacher, err := SynthTeacher("")
		if err != nil {
			t.Fatal(err)
		}
		meter, err := NewMeter(job.Budget, "")
		if err != nil {
			t.Fatal(err)
		}
		x, err := rt.SynthExecutor(teacher, meter)
		if err != nil {
			t.Fatal(err)
		}
		return names{x.Config().Models, rt.Models(llm.RoleGenerator), rt.Models(llm.RoleOptimizer)}
	}
	base := of(t, func(*Job) {})
	if base.run == "" || base.generator == "" || base.optimizer == "" {
		t.Fatalf("empty names: %+v", base)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*Job)
		changed names // "x" where the name must change, "" where it must not
	}{
		{"nothing", func(*Job) {}, names{}},
		{"judge timeout", func(j *Job) { j.Roles.Judge.Timeout = time.Minute }, names{}},
		{"judge temperature", func(j *Job) { j.Roles.Judge.Temperature = 0.5 }, names{run: "x"}},
		{"embedder model", func(j *Job) { j.Roles.Embedder.Model = "other-embed" }, names{run: "x"}},
		{"generator temperature", func(j *Job) { j.Roles.Generator.Temperature = 0.5 }, names{generator: "x"}},
		{"optimizer model", func(j *Job) { j.Roles.Optimizer.Model = "other" }, names{optimizer: "x"}},
		{"embedded rate_malformed", func(j *Job) { j.Embedded.RateMalformed = 0.1 }, names{"x", "x", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := of(t, tc.edit)
			for _, f := range []struct {
				what       string
				base, got  string
				wantChange bool
			}{
				{"run.json", base.run, got.run, tc.changed.run != ""},
				{"generator", base.generator, got.generator, tc.changed.generator != ""},
				{"optimizer", base.optimizer, got.optimizer, tc.changed.optimizer != ""},
			} {
				if (f.base != f.got) != f.wantChange {
					t.Errorf("%s: %q, was %q; want a change: %v", f.what, f.got, f.base, f.wantChange)
				}
			}
		})
	}
}
