package eval

import (
	"strings"
	"testing"
)

// constructed builds an evaluation of two candidates on n tasks: cand
// solves the tasks where candOK says so, with peak tokens candPeak(i);
// ref solves refOK with refPeak(i).
func constructed(t *testing.T, n int, candOK, refOK func(int) bool, candPeak, refPeak func(int) float64) *Result {
	t.Helper()
	r := &Result{Dir: t.TempDir(), Summary: Summary{Split: "test", Samples: 1, Seed: 42, TaskSet: "constructed", Reference: "ref"}}
	r.Summary.Candidates = []Arm{{Spec: Spec{Name: "ref"}}, {Spec: Spec{Name: "cand"}}}
	add := func(name string, ok func(int) bool, peak func(int) float64) {
		for i := range n {
			s := 0.0
			if ok(i) {
				s = 1
			}
			r.Outcomes = append(r.Outcomes, Outcome{Candidate: name, Task: taskName(i), Success: ok(i), Values: map[string]float64{
				MetricSuccess: s, MetricPeakTokens: peak(i), MetricCostUSD: peak(i) / 1e6,
			}})
		}
	}
	for i := range n {
		r.Summary.Tasks = append(r.Summary.Tasks, taskName(i))
	}
	add("ref", refOK, refPeak)
	add("cand", candOK, candPeak)
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	return r
}

func taskName(i int) string { return "t" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rule
		err  string
	}{
		{in: "success >= -0.01", want: Rule{Text: "success >= -0.01", Metric: "success", Op: ">=", Bound: -0.01}},
		{in: "peak_tokens <= 0.8x", want: Rule{Text: "peak_tokens <= 0.8x", Metric: "peak_tokens", Op: "<=", Bound: 0.8, Ratio: true}},
		{in: "cost_usd<1.0x", want: Rule{Text: "cost_usd<1.0x", Metric: "cost_usd", Op: "<", Bound: 1, Ratio: true}},
		{in: "succes >= 0", err: `unknown metric "succes"`},
		{in: "success = 0", err: "want METRIC OP BOUND"},
		{in: "success >= lots", err: "is not a number"},
	} {
		got, err := ParseRule(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRule(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func mustRules(t *testing.T, ss ...string) []Rule {
	t.Helper()
	var out []Rule
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestGate(t *testing.T) {
	all := func(int) bool { return true }
	// 40 tasks; the candidate halves peak tokens everywhere.
	peak := func(i int) float64 { return 1000 + 10*float64(i) }
	half := func(i int) float64 { return peak(i) / 2 }
	t.Run("both rules hold", func(t *testing.T) {
		r := constructed(t, 40, all, all, half, peak)
		vs, err := Gate(r, "cand", r, "ref", mustRules(t, "success >= -0.01", "peak_tokens <= 0.8x"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if !v.Pass {
				t.Errorf("%s: %s", v.Rule.Text, v.Reason)
			}
		}
	})
	t.Run("point estimate passes but the interval straddles the bound", func(t *testing.T) {
		// The candidate fails 2 of 40 tasks the reference solves and
		// solves 3 it fails: Δ success +0.025 ≥ -0.01 as a point, but the
		// 95% interval reaches well below -0.01.
		candOK := func(i int) bool { return i >= 2 }
		refOK := func(i int) bool { return i < 37 }
		r := constructed(t, 40, candOK, refOK, half, peak)
		vs, err := Gate(r, "cand", r, "ref", mustRules(t, "success >= -0.01"))
		if err != nil {
			t.Fatal(err)
		}
		v := vs[0]
		if v.Estimate.Point < -0.01 || v.Estimate.Low >= -0.01 || v.Pass {
			t.Errorf("verdict %+v: want a point above -0.01, a lower bound below, and a failure", v)
		}
		if !strings.Contains(v.Reason, "fails") {
			t.Errorf("reason %q does not say it fails", v.Reason)
		}
	})
	t.Run("a clear regression fails", func(t *testing.T) {
		r := constructed(t, 40, func(i int) bool { return i%2 == 0 }, all, peak, peak)
		vs, _ := Gate(r, "cand", r, "ref", mustRules(t, "success >= -0.01", "peak_tokens <= 0.8x"))
		if vs[0].Pass || vs[1].Pass {
			t.Errorf("verdicts %+v: want both to fail", vs)
		}
	})
	t.Run("another task set is an error", func(t *testing.T) {
		a := constructed(t, 10, all, all, peak, peak)
		b := constructed(t, 12, all, all, peak, peak)
		if _, err := Gate(a, "cand", b, "ref", mustRules(t, "success >= 0")); err == nil || !strings.Contains(err.Error(), "different task sets") {
			t.Errorf("err = %v, want different task sets", err)
		}
	})
	t.Run("the same task set in two directories pairs", func(t *testing.T) {
		a := constructed(t, 40, all, all, half, peak)
		b := constructed(t, 40, all, all, peak, peak)
		vs, err := Gate(a, "cand", b, "cand", mustRules(t, "peak_tokens <= 0.8x"))
		if err != nil || !vs[0].Pass {
			t.Errorf("%+v, %v: want a pass", vs, err)
		}
	})
	t.Run("unknown candidate", func(t *testing.T) {
		a := constructed(t, 4, all, all, peak, peak)
		if _, err := Gate(a, "nope", a, "ref", nil); err == nil || !strings.Contains(err.Error(), `no candidate "nope"`) {
			t.Errorf("err = %v", err)
		}
	})
}

// The default gate parses; it promotes a candidate that keeps success and
// halves peak tokens, not one that loses half the tasks or one that saves
// nothing, and no verdict at all never promotes.
func TestDefaultGate(t *testing.T) {
	all := func(int) bool { return true }
	peak := func(i int) float64 { return 1000 + 10*float64(i) }
	half := func(i int) float64 { return peak(i) / 2 }
	more := func(i int) float64 { return 2 * peak(i) }
	tests := []struct {
		name    string
		candOK  func(int) bool
		cand    func(int) float64
		promote bool
	}{
		{"keeps success, halves peak tokens", all, half, true},
		{"loses half the tasks", func(i int) bool { return i%2 == 0 }, half, false},
		{"uses more peak tokens", all, more, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := constructed(t, 40, tt.candOK, all, tt.cand, peak)
			vs, err := Gate(r, "cand", r, "ref", DefaultGate())
			if err != nil || len(vs) != len(DefaultRules) {
				t.Fatalf("%v, %d verdicts", err, len(vs))
			}
			if got := Promotes(vs); got != tt.promote {
				t.Errorf("promotes %v, want %v: %+v", got, tt.promote, vs)
			}
		})
	}
	if Promotes(nil) {
		t.Error("no rule promotes")
	}
}
