package compress

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestParamsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		strategy Name
		p        ModuleParams
		want     string
	}{
		{"threshold order", PACE, func() ModuleParams { p := paceDefaults(); p.Alpha, p.Beta = 0.8, 0.4; return &p }(), "field compression.pace: thresholds must satisfy 0 < alpha < beta < gamma, got alpha=0.8 beta=0.4 gamma=1.5"},
		{"equal thresholds", PACE, func() ModuleParams { p := paceDefaults(); p.Alpha, p.Beta = 0.4, 0.4; return &p }(), "0 < alpha < beta < gamma"},
		{"negative k", PlanAware, &PlanAwareParams{K: -1}, "field compression.plan_aware.k: must not be negative"},
		{"bad rate", LLMLingua, &LLMLinguaParams{URL: EmbeddedURL, Rate: 1.5, Timeout: 1}, "field compression.llmlingua.rate"},
		{"bad url", LLMLingua, &LLMLinguaParams{URL: "localhost:8000", Rate: 0.3, Timeout: 1}, `field compression.llmlingua.url: "localhost:8000" is not an http(s) URL`},
		{"negative fifo", FIFO, &FIFOParams{Keep: -2}, "field compression.fifo_keep: must be positive"},
		{"zero retrieval keep", Retrieval, &RetrievalParams{}, "field compression.retrieval.keep: must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, Section+".") {
				t.Fatalf("%v names no field", err)
			}
			if _, err := New(tc.strategy, tc.p, Deps{Tokenizer: testTokenizer(t)}); err == nil {
				t.Fatal("New accepted invalid params")
			}
		})
	}
	if err := (Params{Strategy: "lingua"}).Validate(); err == nil || !strings.Contains(err.Error(), `field compression.strategy: unknown strategy "lingua": want one of none, fifo, retrieval, llmlingua, prompting, guideline, pace, plan-aware`) {
		t.Fatalf("unknown strategy: got %v", err)
	}
	if err := (Params{}).Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	if _, err := New(PACE, &FIFOParams{Keep: 1}, Deps{Tokenizer: testTokenizer(t)}); err == nil {
		t.Fatal("New took FIFO's parameters for PACE")
	}
}

func TestLookup(t *testing.T) {
	for _, n := range Names() {
		if m, err := Lookup(string(n)); err != nil || m.Name != n {
			t.Fatalf("Lookup(%q) = %q, %v", n, m.Name, err)
		}
	}
	if _, err := Lookup("FIFO"); err == nil || !strings.Contains(err.Error(), `unknown strategy "FIFO"`) {
		t.Fatalf("got %v", err)
	}
}

// section is a job's compression section: its owner's keys besides the
// strategies'.
type section struct {
	own struct {
		History struct {
			Threshold int `yaml:"threshold"`
		} `yaml:"history"`
	}
	Params
}

func (s *section) UnmarshalYAML(unmarshal func(any) error) error { return s.Decode(unmarshal, &s.own) }

func (s section) MarshalYAML() (any, error) { return s.Encode(s.own), nil }

// TestParamsYAML decodes the job file's keys strictly onto the defaults and
// writes them back under the same keys.
func TestParamsYAML(t *testing.T) {
	src := "history:\n  threshold: 100\nstrategy: fifo\nfifo_keep: 2\npace:\n  tau: 0.5\n  glimpse: false\nplan_aware:\n  k: 0\n"
	var s section
	if err := yaml.Unmarshal([]byte(src), &s); err != nil {
		t.Fatal(err)
	}
	pace := s.Of(PACE).(*PACEParams)
	want := paceDefaults()
	want.Tau, want.Glimpse = 0.5, false
	switch {
	case s.own.History.Threshold != 100, s.Strategy != "fifo":
		t.Fatalf("owner's keys: %+v, strategy %q", s.own, s.Strategy)
	case s.Of(FIFO).(*FIFOParams).Keep != 2, *pace != want, s.Of(PlanAware).(*PlanAwareParams).K != 0:
		t.Fatalf("fifo %+v, pace %+v, plan-aware %+v", s.Of(FIFO), pace, s.Of(PlanAware))
	case s.Of(Retrieval).(*RetrievalParams).Keep != DefaultRetrievalKeep:
		t.Fatalf("retrieval lost its default: %+v", s.Of(Retrieval))
	}
	out, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"history:\n    threshold: 100\n", "strategy: fifo\n", "fifo_keep: 2\n", "retrieval:\n", "llmlingua:\n", "pace:\n", "plan_aware:\n    k: 0\n"} {
		if !strings.Contains(string(out), k) {
			t.Errorf("marshalled section lacks %q:\n%s", k, out)
		}
	}
	for _, bad := range []string{"fifo_kep: 2\n", "pace:\n  tua: 1\n", "history:\n  treshold: 1\n"} {
		dec := yaml.NewDecoder(strings.NewReader(bad))
		dec.KnownFields(true)
		if err := dec.Decode(&section{}); err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: got %v, want an unknown field with its line", bad, err)
		}
	}
}
