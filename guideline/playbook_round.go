package guideline

import (
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/rollout"
)

// ACERound records one round of the ACE optimizer: the feedback it read,
// the reflector's tags, the curator's operations and what became of each,
// the de-duplications and evictions, and the gate that kept or rejected
// the delta batch.
type ACERound struct {
	N          int    `json:"round"`
	Parent     string `json:"parent"`
	Chosen     string `json:"chosen"`
	KeptParent bool   `json:"kept_parent"`
	// Window are the train tasks whose trajectories this update read
	// (online mode; offline reads every train task each epoch).
	Window []string `json:"window,omitempty"`
	// Tasks select (gate) the batch; FeedbackTasks gave the feedback.
	// They never overlap.
	Tasks         []string   `json:"selection_tasks"`
	FeedbackTasks []string   `json:"feedback_tasks"`
	Feedback      int        `json:"feedback_ok"`
	Rejected      int        `json:"feedback_rejected"`
	Tags          []Tag      `json:"tags,omitempty"`
	TagsRejected  []string   `json:"tags_rejected,omitempty"`
	Ops           []Applied  `json:"operations,omitempty"`
	Deduped       []Merged   `json:"deduped,omitempty"`
	Evicted       []Eviction `json:"evicted,omitempty"`
	// Candidate is the playbook with the batch, Tokens its bullets'
	// tokens (never above the budget).
	Candidate string `json:"candidate,omitempty"`
	Tokens    int    `json:"playbook_tokens"`
	// Gate holds the verdicts on the batch; BatchKept says whether the
	// batch was kept.
	Gate      []eval.Verdict `json:"gate,omitempty"`
	BatchKept bool           `json:"batch_kept"`
	Reason    string         `json:"reason"`
}

// GateBatch judges a delta batch: the rollouts of the playbook with the
// batch (cand) against those without it (parent), aligned by task, on
// success and peak tokens with eval's paired bootstrap and eval's rules.
// The batch passes when every rule holds.
func GateBatch(cand, parent []rollout.Outcome, seed uint64, rules []eval.Rule) ([]eval.Verdict, bool) {
	cs, _, _ := outcomes(cand)
	ps, _, _ := outcomes(parent)
	bs := eval.Bootstrap{Resamples: eval.Resamples, Seed: seed}
	c := eval.Comparison{Candidate: "with batch", Reference: "without batch", Tasks: len(cs), Metrics: map[string]eval.Paired{
		eval.MetricSuccess:    bs.Paired(cs, ps),
		eval.MetricPeakTokens: bs.Paired(peaks(cand), peaks(parent)),
	}}
	out := make([]eval.Verdict, len(rules))
	pass := true
	for i, r := range rules {
		out[i] = eval.Judge(r, c)
		pass = pass && out[i].Pass
	}
	return out, pass
}

func peaks(trs []rollout.Outcome) []float64 {
	out := make([]float64, len(trs))
	for i, t := range trs {
		out[i] = float64(t.Metrics.PeakTokens)
	}
	return out
}
