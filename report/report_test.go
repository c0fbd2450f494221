package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/internal/golden"
)

func TestHuman(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1.78e-16, "0"}, {-0.0004, "0"}, {0.0012, "0.0012"}, {0.123456, "0.123"}, {4.5, "4.5"}, {12.26, "12.3"}, {99.96, "100"}, {452, "452"}, {999.4, "999"},
		{999.6, "1k"}, {4517, "4.52k"}, {45170, "45.2k"}, {451700, "452k"}, {1.2e6, "1.2M"}, {-2.39e3, "-2.39k"}, {3.4e9, "3.4G"},
	}
	for _, tt := range tests {
		if got := Human(tt.in); got != tt.want {
			t.Errorf("Human(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := signed(1234); got != "+1.23k" {
		t.Errorf("signed(1234) = %q", got)
	}
}

// The reports as files: report.md and report.html of a run and of make
// demo's strategy comparison. -update rewrites them; review the diff.
func TestReportGoldens(t *testing.T) {
	runDir := t.TempDir()
	if err := WriteRun(runDir, runFixture(t, runDir)); err != nil {
		t.Fatal(err)
	}
	evalDir := t.TempDir()
	s := strategiesFixture(t)
	if err := Write(evalDir, s, "ctxopt eval: demo", strategiesLead(s)); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"run": runDir, "strategies": evalDir} {
		for _, f := range []string{MarkdownFile, HTMLFile} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("reports", name+"."+f+".golden"), string(b))
		}
	}
}

// A report opens with the notice, then the verdict; the verdict is
// eval.Gate's on the same rules, against the promoted guideline when one
// ran, else against none, and says which rules and why.
func TestVerdict(t *testing.T) {
	s := strategiesFixture(t)
	rules := []eval.Rule{mustRule(t, "peak_tokens <= 0.5x")}
	tests := []struct {
		name      string
		gate      Gate
		promoted  string
		against   string
		mentions  []string
		promoteOK map[string]bool
	}{
		{name: "default rule, none promoted", gate: GateOf(nil), against: "none",
			mentions:  []string{"the default rule (the job sets no `eval.gate`", "`success >= -0.05` and `peak_tokens <= 1x`"},
			promoteOK: map[string]bool{"fifo": false, "guideline": false}},
		{name: "the job's rule", gate: GateOf(rules), against: "none",
			mentions:  []string{"the job's gate rules (`eval.gate`): `peak_tokens <= 0.5x`"},
			promoteOK: map[string]bool{"fifo": true, "guideline": true, "prompting": true}},
		{name: "a promoted guideline that ran", gate: GateOf(rules), promoted: "h-3fa9c1e2b4d0", against: "guideline",
			mentions:  []string{"The promoted guideline h-3fa9c1e2b4d0 ran as guideline", "each judged against guideline (the promoted guideline"},
			promoteOK: map[string]bool{"fifo": false}},
		{name: "a promoted guideline not evaluated", gate: GateOf(nil), promoted: "h-elsewhere", against: "none",
			mentions: []string{"The promoted guideline h-elsewhere was not evaluated here"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := BaselinesOf(s, tt.promoted)
			v, err := evalVerdict(s, b, tt.gate)
			if err != nil {
				t.Fatal(err)
			}
			var md strings.Builder
			v.markdown(&md)
			for _, m := range tt.mentions {
				if !strings.Contains(md.String(), m) {
					t.Errorf("verdict lacks %q:\n%s", m, md.String())
				}
			}
			if v.Table.rows[0][0] != "none" {
				t.Errorf("first row %v, want none first", v.Table.rows[0])
			}
			for name, want := range tt.promoteOK {
				a, err := Judge(s, name, b, tt.gate)
				if err != nil {
					t.Fatal(err)
				}
				gate, err := eval.Gate(s, name, s, tt.against, tt.gate.Rules)
				if err != nil {
					t.Fatal(err)
				}
				if a.Against != tt.against || a.Promote != want || a.Promote != eval.Promotes(gate) {
					t.Errorf("%s: against %s, promote %v; want against %s, promote %v (optimize gate: %v)", name, a.Against, a.Promote, tt.against, want, eval.Promotes(gate))
				}
			}
		})
	}
}

// The spec column shows only what a spec says beyond the name.
func TestSpecShown(t *testing.T) {
	s := strategiesFixture(t)
	c := candidatesTable(s)
	if c.head[1] != "spec" || c.rows[0][1] != "" || c.rows[5][1] != "guideline, guideline=h-3fa9c1e2b4d0" {
		t.Fatalf("spec column: head %v, rows %v / %v", c.head, c.rows[0], c.rows[5])
	}
	for i := range s.Summary.Candidates {
		if s.Summary.Candidates[i].Name == "guideline" {
			s.Summary.Candidates[i].Text = "guideline=guideline"
		}
	}
	if c := candidatesTable(s); c.head[1] == "spec" {
		t.Errorf("a spec column with nothing to show: %v", c.head)
	}
}

func mustRule(t *testing.T, s string) eval.Rule {
	t.Helper()
	r, err := eval.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An ACE run's report names its one optimized row and shows each ACE
// round (tags, operations, dedup, eviction, the batch's gate); an ACON
// run's keeps its UT and UTCO rows and shows no ACE round.
func TestRunOptimizerRows(t *testing.T) {
	round := guideline.ACERound{N: 1, Parent: "h-a", Chosen: "h-b", Feedback: 3, BatchKept: true, Reason: "the batch does not lose",
		Ops: []guideline.Applied{{Op: guideline.Op{Type: "ADD"}, Bullet: "keep-00001"}, {Op: guideline.Op{Type: "REMOVE"}, Rejected: "unknown id"}}, Tokens: 1200}
	for _, ace := range []bool{false, true} {
		dir := t.TempDir()
		r := runFixture(t, dir)
		r.ACE = ace
		if ace {
			r.ACERounds = []guideline.ACERound{round}
		}
		if err := WriteRun(dir, r); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for s, want := range map[string]bool{"| ace playbook |": ace, "## ACE round 1": ace, "| 3 | 0 | 1 | 1 | 0 | 0 | 1.2k | true |": ace, "| acon ut |": !ace, "selected (ace)": ace} {
			if strings.Contains(md, s) != want {
				t.Errorf("ace=%v: report contains %q = %v, want %v", ace, s, !want, want)
			}
		}
	}
}
