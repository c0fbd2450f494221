package guideline

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/eval"
	"github.com/ctxopt/ctxopt/rollout"
)

// Candidate selection of ACON's Algorithm 1: each UT or CO step scores its
// K candidates and its parent on held-out selection tasks and picks one.

// Selection rules of a step: keep-parent keeps the parent unless a
// candidate beats it, argmax takes the best candidate whatever the parent
// scored (ACON's Algorithm 1).
const (
	SelectKeepParent = "keep-parent"
	SelectArgmax     = "argmax"
)

// Round is one UT→CO round of Algorithm 1.
type Round struct {
	N  int      `json:"round"`
	UT Decision `json:"ut"`
	CO Decision `json:"co"`
}

// Decision records a candidate selection: every candidate, its validation
// and scores, the paired comparison with the parent, and the choice.
type Decision struct {
	Step       string `json:"step"`
	Parent     string `json:"parent"`
	Chosen     string `json:"chosen"`
	KeptParent bool   `json:"kept_parent"`
	// Rule is the selection rule (SelectKeepParent or SelectArgmax).
	Rule  string   `json:"selection_rule"`
	Tasks []string `json:"selection_tasks"`
	// FeedbackTasks are the tasks the analysed items came from; they never
	// overlap Tasks.
	FeedbackTasks []string    `json:"feedback_tasks"`
	Feedback      int         `json:"feedback_ok"`
	Rejected      int         `json:"feedback_rejected"`
	Parent0       Score       `json:"parent_score"`
	Candidates    []Candidate `json:"candidates"`
	Spread        *Spread     `json:"candidate_spread,omitempty"`
	Reason        string      `json:"reason"`
}

// Candidate is one optimizer proposal.
type Candidate struct {
	K           int      `json:"k"`
	ID          string   `json:"id,omitempty"`
	Valid       bool     `json:"valid"`
	Rejected    string   `json:"rejected,omitempty"`
	Repairs     []string `json:"repairs,omitempty"`
	FeedbackIDs []string `json:"feedback_ids,omitempty"`
	Score       *Score   `json:"score,omitempty"`
	Paired      *Paired  `json:"paired,omitempty"`
}

// Score is how a guideline did on the selection tasks.
type Score struct {
	Success float64 `json:"success"`
	// ContextTokens is the mean agent input per task: the context cost
	// C(H') of ACON eq. 5; NormCost divides it by the parent's.
	ContextTokens float64 `json:"context_tokens_mean"`
	NormCost      float64 `json:"norm_cost"`
	// TotalTokens (agent and compressor) breaks ties.
	TotalTokens float64 `json:"total_tokens_mean"`
	Objective   float64 `json:"objective"`
}

// Spread is how the valid candidates of a step scored on the selection
// tasks: the variation K samples (and, at temperature > 0, seeds) produce.
type Spread struct {
	N            int     `json:"n"`
	SuccessMin   float64 `json:"success_min"`
	SuccessMax   float64 `json:"success_max"`
	SuccessSD    float64 `json:"success_sd"`
	ObjectiveMin float64 `json:"objective_min"`
	ObjectiveMax float64 `json:"objective_max"`
}

// Paired compares a candidate with its parent on the same tasks.
type Paired struct {
	N int `json:"n"`
	// SuccessDiff is candidate − parent success rate; CILow/CIHigh bound it
	// with a 95% paired bootstrap interval.
	SuccessDiff float64 `json:"success_diff"`
	CILow       float64 `json:"ci_low"`
	CIHigh      float64 `json:"ci_high"`
	// TokenChange is the relative change of total tokens (agent and
	// compressor) per task: (candidate − parent) / parent.
	TokenChange float64 `json:"token_change"`
}

// Decide picks from the scored candidates by the decision's rule and
// records the spread of their scores.
func Decide(dec *Decision) {
	best := -1
	var scores []Score
	for i, c := range dec.Candidates {
		if c.Score == nil {
			continue
		}
		scores = append(scores, *c.Score)
		if best < 0 || better(*c.Score, *dec.Candidates[best].Score) {
			best = i
		}
	}
	dec.Spread = spreadOf(scores)
	switch {
	case best < 0:
		dec.Chosen, dec.KeptParent = dec.Parent, true
		dec.Reason = "no valid candidate: the parent is kept"
	case dec.Rule != SelectArgmax && !better(*dec.Candidates[best].Score, dec.Parent0):
		dec.Chosen, dec.KeptParent = dec.Parent, true
		dec.Reason = "no candidate did better than the parent on the selection tasks: the parent is kept"
	default:
		c := dec.Candidates[best]
		dec.Chosen = c.ID
		dec.Reason = fmt.Sprintf("candidate %d has the best %s objective %.3f (parent %.3f)", c.K, dec.Step, c.Score.Objective, dec.Parent0.Objective)
		if dec.Rule == SelectArgmax && !better(*c.Score, dec.Parent0) {
			dec.Reason += "; taken by the argmax rule although it does not beat the parent"
		}
	}
}

func spreadOf(scores []Score) *Spread {
	if len(scores) == 0 {
		return nil
	}
	s := &Spread{N: len(scores), SuccessMin: scores[0].Success, SuccessMax: scores[0].Success,
		ObjectiveMin: scores[0].Objective, ObjectiveMax: scores[0].Objective}
	var succ []float64
	for _, x := range scores {
		s.SuccessMin, s.SuccessMax = min(s.SuccessMin, x.Success), max(s.SuccessMax, x.Success)
		s.ObjectiveMin, s.ObjectiveMax = min(s.ObjectiveMin, x.Objective), max(s.ObjectiveMax, x.Objective)
		succ = append(succ, x.Success)
	}
	s.SuccessSD = eval.SD(succ)
	return s
}

// better orders scores: higher objective, then fewer tokens.
func better(a, b Score) bool {
	if a.Objective != b.Objective {
		return a.Objective > b.Objective
	}
	return a.TotalTokens < b.TotalTokens
}

// Objective rates trajectories: UT by success, CO by success − λ·normalized
// context cost, normalized by the parent's on the same tasks.
func Objective(step string, lambda float64, trs, parent []rollout.Outcome) Score {
	succ, ctx, tok := outcomes(trs)
	_, pctx, _ := outcomes(parent)
	s := Score{Success: eval.Mean(succ), ContextTokens: eval.Mean(ctx), TotalTokens: eval.Mean(tok)}
	if pc := eval.Mean(pctx); pc > 0 {
		s.NormCost = s.ContextTokens / pc
	}
	s.Objective = s.Success
	if step == StepCO {
		s.Objective = s.Success - lambda*s.NormCost
	}
	return s
}

// Compare compares per-task success and total tokens of a candidate's and
// its parent's rollouts, aligned by task, with eval's seeded paired
// bootstrap.
func Compare(cand, parent []rollout.Outcome, seed uint64) Paired {
	cs, _, ct := outcomes(cand)
	ps, _, pt := outcomes(parent)
	d := eval.Bootstrap{Resamples: eval.Resamples, Seed: seed}.Paired(cs, ps)
	p := Paired{N: len(cs), SuccessDiff: d.Diff.Point, CILow: d.Diff.Low, CIHigh: d.Diff.High}
	if pt := eval.Sum(pt); pt > 0 {
		p.TokenChange = (eval.Sum(ct) - pt) / pt
	}
	return p
}

// outcomes returns per-task success (1/0), context tokens (agent input)
// and total tokens (agent and compressor). Rollouts that hit an
// unavailable endpoint never get here: their stage fails and is retried.
func outcomes(trs []rollout.Outcome) (succ, ctx, tok []float64) {
	for _, t := range trs {
		var s float64
		if t.Success {
			s = 1
		}
		m := t.Metrics
		succ = append(succ, s)
		ctx = append(ctx, float64(m.AgentInputTokens))
		tok = append(tok, float64(m.AgentInputTokens+m.AgentOutputTokens+m.CompressorInputTokens+m.CompressorOutputTokens))
	}
	return succ, ctx, tok
}

// Pick returns the outcomes of tasks, in task order.
func Pick(trs []rollout.Outcome, tasks []env.Task) []rollout.Outcome {
	by := make(map[string]rollout.Outcome, len(trs))
	for _, t := range trs {
		by[t.TaskID] = t
	}
	out := make([]rollout.Outcome, 0, len(tasks))
	for _, t := range tasks {
		if tr, ok := by[t.ID]; ok {
			out = append(out, tr)
		}
	}
	return out
}

// Solved returns the tasks of train that base solved (ACON's I⁺), in
// train's order.
func Solved(train []env.Task, base []rollout.Outcome) []env.Task {
	ok := map[string]bool{}
	for _, t := range base {
		ok[t.TaskID] = t.Success && !t.Infra
	}
	var out []env.Task
	for _, t := range train {
		if ok[t.ID] {
			out = append(out, t)
		}
	}
	return out
}

// Holdout returns a seeded share of tasks, in task order: at least one,
// and when there are two or more, never all, so the rest can give
// feedback.
func Holdout(tasks []env.Task, share float64, seed int) []env.Task {
	if len(tasks) == 0 {
		return nil
	}
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = i
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc0))
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	n := max(int(float64(len(tasks))*share+0.5), 1)
	if len(tasks) > 1 {
		n = min(n, len(tasks)-1)
	}
	idx = idx[:n]
	sort.Ints(idx)
	out := make([]env.Task, len(idx))
	for i, j := range idx {
		out[i] = tasks[j]
	}
	return out
}
