package eval

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Rule is one condition of the promotion gate on the paired comparison of
// a candidate with another: METRIC OP BOUND, where the bound is on the
// difference of means (candidate − other) or, with an x suffix, on their
// ratio (candidate / other). "success >= -0.01" allows at most one point
// less success; "peak_tokens <= 0.8x" asks for 20% fewer peak tokens.
type Rule struct {
	Text   string  `json:"rule"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Bound  float64 `json:"bound"`
	Ratio  bool    `json:"ratio"`
}

var ruleOps = []string{">=", "<=", ">", "<"}

// ParseRule parses one --rule.
func ParseRule(s string) (Rule, error) {
	for _, op := range ruleOps {
		m, b, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		r := Rule{Text: s, Metric: strings.TrimSpace(m), Op: op}
		if !slices.Contains(AllMetrics, r.Metric) {
			return Rule{}, fmt.Errorf("rule %q: unknown metric %q (known: %s)", s, r.Metric, strings.Join(AllMetrics, ", "))
		}
		b = strings.TrimSpace(b)
		if strings.HasSuffix(b, "x") {
			r.Ratio, b = true, strings.TrimSuffix(b, "x")
		}
		v, err := strconv.ParseFloat(b, 64)
		if err != nil {
			return Rule{}, fmt.Errorf("rule %q: bound %q is not a number (a difference such as -0.01, or a ratio such as 0.8x)", s, b)
		}
		r.Bound = v
		return r, nil
	}
	return Rule{}, fmt.Errorf("rule %q: want METRIC OP BOUND with OP one of >=, <=, >, < (e.g. \"success >= -0.01\" or \"peak_tokens <= 0.8x\")", s)
}

// Verdict is a rule judged on a comparison: it holds only when the whole
// 95% interval is on the rule's side of the bound.
type Verdict struct {
	Rule     Rule     `json:"rule"`
	Estimate Interval `json:"estimate"`
	Pass     bool     `json:"pass"`
	Reason   string   `json:"reason"`
}

// Judge checks rule against the comparison c.
func Judge(rule Rule, c Comparison) Verdict {
	v := Verdict{Rule: rule}
	p, ok := c.Metrics[rule.Metric]
	if !ok {
		v.Reason = fmt.Sprintf("%s was not measured for %s against %s (agreement needs optimize eval --replay)", rule.Metric, c.Candidate, c.Reference)
		return v
	}
	what := fmt.Sprintf("%s − %s", c.Candidate, c.Reference)
	est := &p.Diff
	if rule.Ratio {
		what = fmt.Sprintf("%s / %s", c.Candidate, c.Reference)
		if p.Ratio == nil {
			v.Reason = fmt.Sprintf("%s of %s has no ratio (%s's mean is 0); use a difference rule", rule.Metric, what, c.Reference)
			return v
		}
		est = p.Ratio
	}
	v.Estimate = *est
	var edge float64
	var side string
	switch rule.Op {
	case ">=":
		edge, side, v.Pass = est.Low, "lower", est.Low >= rule.Bound
	case ">":
		edge, side, v.Pass = est.Low, "lower", est.Low > rule.Bound
	case "<=":
		edge, side, v.Pass = est.High, "upper", est.High <= rule.Bound
	case "<":
		edge, side, v.Pass = est.High, "upper", est.High < rule.Bound
	}
	verb := "holds"
	if !v.Pass {
		verb = "fails"
	}
	v.Reason = fmt.Sprintf("%s of %s is %.4g [%.4g, %.4g]: the %s bound %.4g %s %s %.4g",
		rule.Metric, what, est.Point, est.Low, est.High, side, edge, verb, rule.Op, rule.Bound)
	return v
}

// Gate judges every rule on the paired comparison of candidate (in res)
// with against (in other, which may be res itself). Both must come from
// the same task set, split and sample count, or pairing means nothing.
func Gate(res *Result, candidate string, other *Result, against string, rules []Rule) ([]Verdict, error) {
	if _, ok := res.Arm(candidate); !ok {
		return nil, fmt.Errorf("%s has no candidate %q (it has %s)", res.Dir, candidate, strings.Join(armNames(res), ", "))
	}
	if _, ok := other.Arm(against); !ok {
		return nil, fmt.Errorf("%s has no candidate %q (it has %s)", other.Dir, against, strings.Join(armNames(other), ", "))
	}
	if res != other {
		a, b := res.Summary, other.Summary
		switch {
		case a.TaskSet != b.TaskSet || !slices.Equal(a.Tasks, b.Tasks):
			return nil, fmt.Errorf("%s and %s were evaluated on different task sets (%s, %d tasks vs %s, %d tasks): a paired comparison needs the same tasks; evaluate both candidates in one optimize eval run", res.Dir, other.Dir, a.TaskSet, len(a.Tasks), b.TaskSet, len(b.Tasks))
		case a.Samples != b.Samples:
			return nil, fmt.Errorf("%s and %s have %d and %d samples per task: evaluate both with the same --samples", res.Dir, other.Dir, a.Samples, b.Samples)
		case (a.Replay == nil) != (b.Replay == nil) || (a.Replay != nil && !slices.Equal(a.Replay.Requests, b.Replay.Requests)):
			return nil, fmt.Errorf("%s and %s did not replay the same requests: evaluate both candidates in one optimize eval run with --replay", res.Dir, other.Dir)
		}
	}
	if res == other && candidate == against {
		return nil, fmt.Errorf("--candidate and --against are both %q", candidate)
	}
	c := merged(res, candidate, other, against).Compare(candidate, refName(res, candidate, other, against))
	c.Reference = against
	out := make([]Verdict, len(rules))
	for i, r := range rules {
		out[i] = Judge(r, c)
	}
	return out, nil
}

func armNames(r *Result) []string {
	var out []string
	for _, a := range r.Summary.Candidates {
		out = append(out, a.Name)
	}
	return out
}

// refName is the name the reference goes by in the merged result: its own,
// unless it came from another directory under the candidate's name.
func refName(res *Result, candidate string, other *Result, against string) string {
	if res != other && against == candidate {
		return against + "@other"
	}
	return against
}

// merged returns a result holding the candidate's outcomes from res and
// the reference's from other.
func merged(res *Result, candidate string, other *Result, against string) *Result {
	if res == other {
		return res
	}
	ref := refName(res, candidate, other, against)
	m := &Result{Dir: res.Dir, Summary: res.Summary}
	ca, _ := res.Arm(candidate)
	ra, _ := other.Arm(against)
	ra.Name = ref
	m.Summary.Candidates = []Arm{ca, ra}
	for _, o := range res.Outcomes {
		if o.Candidate == candidate {
			m.Outcomes = append(m.Outcomes, o)
		}
	}
	for _, o := range other.Outcomes {
		if o.Candidate == against {
			o.Candidate = ref
			m.Outcomes = append(m.Outcomes, o)
		}
	}
	for _, o := range res.Replay {
		if o.Candidate == candidate {
			m.Replay = append(m.Replay, o)
		}
	}
	for _, o := range other.Replay {
		if o.Candidate == against {
			o.Candidate = ref
			m.Replay = append(m.Replay, o)
		}
	}
	return m
}

// DefaultRules is the gate a report's verdict applies when the job sets
// none (docs/eval.md): the candidate may lose at most 5 points of success
// and may not use more peak tokens than the other, each judged on the
// paired 95% interval like any rule.
var DefaultRules = []string{"success >= -0.05", "peak_tokens <= 1x"}

// DefaultGate is DefaultRules parsed.
func DefaultGate() []Rule {
	out := make([]Rule, len(DefaultRules))
	for i, s := range DefaultRules {
		r, err := ParseRule(s)
		if err != nil {
			panic(fmt.Sprintf("eval.DefaultRules: %v", err)) // a constant: caught by its test
		}
		out[i] = r
	}
	return out
}

// Promotes says whether verdicts, the gate's judgement of every rule,
// allow promotion: at least one rule, and every one holds.
func Promotes(vs []Verdict) bool {
	for _, v := range vs {
		if !v.Pass {
			return false
		}
	}
	return len(vs) > 0
}
