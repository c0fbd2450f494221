package pipeline

import (
	"fmt"
	"log/slog"

	"github.com/ctxopt/ctxopt/llm"
)

// Projection estimates what a job will spend before its first call, from
// the job's sizes and thresholds. It is a planning figure, not a bound: the
// budget is what stops a run.
type Projection struct {
	LLMCalls int     `json:"llm_calls"`
	Tokens   int     `json:"tokens"`
	USD      float64 `json:"usd"`
	// Embedded is true when the embedded model plays every role priced, so
	// the work costs no money.
	Embedded bool `json:"embedded,omitempty"`
}

// Project estimates the spend of `optimize run` on ntrain train tasks.
func Project(job *Job, ntrain int) Projection {
	hist := float64(job.Compression.History.Threshold)
	steps := float64(job.Env.StepLimit) / 2
	var agent, comp, opt use
	n := float64(ntrain)
	compressed := []bool{false} // baseline, then FIFO, then prompting
	if !job.Optimize.SkipFIFO {
		compressed = append(compressed, false)
	}
	compressed = append(compressed, true)
	for _, c := range compressed {
		a, k := rolloutUse(job, n, c)
		agent.add(a)
		comp.add(k)
	}
	if job.Optimizer == OptimizerACE {
		a, k, u := projectACE(job, n)
		agent.add(a)
		comp.add(k)
		opt.add(u)
		return projection(job, agent, comp, opt)
	}
	o := job.Optimize
	for range o.Rounds {
		// Selection rollouts of K candidates (UT on the held-out part of
		// about the baseline's successes, CO on the holdout), then the chosen on all train tasks.
		sel := float64(o.Candidates) * (o.UTHoldout*0.7*n + o.COHoldout*n)
		a, k := rolloutUse(job, sel+2*n, true)
		agent.add(a)
		comp.add(k)
		// Analysis of about half the tasks per step, K update calls.
		opt.add(use{n + 2*float64(o.Candidates), n * 2 * hist * steps / 3, n*800 + 2*float64(o.Candidates)*1500})
	}
	return projection(job, agent, comp, opt)
}

// ProjectEval estimates the spend of evaluating candidates on ntasks tasks,
// samples times each; compressed tells which candidates call a compressor.
func ProjectEval(job *Job, ntasks, samples int, compressed []bool) Projection {
	var agent, comp use
	for _, c := range compressed {
		a, k := rolloutUse(job, float64(ntasks*samples), c)
		agent.add(a)
		comp.add(k)
	}
	return projection(job, agent, comp, use{})
}

// use is the estimated calls and tokens of one role.
type use struct{ calls, in, out float64 }

func (u *use) add(o use) { u.calls += o.calls; u.in += o.in; u.out += o.out }

// rolloutUse estimates one rollout of n tasks: agent calls with a context
// near the history threshold, and a compression every few steps.
func rolloutUse(job *Job, n float64, compressed bool) (agent, comp use) {
	steps := float64(job.Env.StepLimit) / 2
	hist := float64(job.Compression.History.Threshold)
	agent = use{n * steps, n * steps * hist, n * steps * 60}
	if compressed {
		c := n * steps / 3
		comp = use{c, c * hist, c * 400}
	}
	return agent, comp
}

func projection(job *Job, agent, comp, opt use) Projection {
	// The embedded model costs nothing, whatever the job's prices say
	// (Runtime.resolveEmbedded bills it so).
	free := true
	price := func(u use, c llm.RoleConfig) float64 {
		if c.BaseURL == Embedded || u.calls == 0 {
			return 0
		}
		free = false
		return (u.in*c.PriceIn + u.out*c.PriceOut) / 1e6
	}
	r := job.Roles
	usd := price(agent, r.Agent) + price(comp, r.Compressor) + price(opt, r.Optimizer)
	return Projection{
		LLMCalls: int(agent.calls + comp.calls + opt.calls),
		Tokens:   int(agent.in + agent.out + comp.in + comp.out + opt.in + opt.out),
		USD:      usd,
		Embedded: free,
	}
}

// Log prints the projection.
func (p Projection) Log() {
	slog.Info("projected cost (estimate, before the first call)", "llm_calls", p.LLMCalls, "tokens", p.Tokens, "usd", p.Money())
}

// Money is the projected spend in dollars, or none when every priced role
// is the embedded model.
func (p Projection) Money() string {
	if p.Embedded {
		return NoMoney
	}
	return fmt.Sprintf("%.2f", p.USD)
}

// NoMoney stands for the spend of work the embedded model did alone.
const NoMoney = "none (embedded model)"

// Check reports whether the budget is below the projection.
func (p Projection) Check(b Budget) error {
	switch {
	case b.LLMCalls > 0 && p.LLMCalls > b.LLMCalls:
		return fmt.Errorf("projected %d LLM calls > budget.llm_calls %d", p.LLMCalls, b.LLMCalls)
	case b.Tokens > 0 && p.Tokens > b.Tokens:
		return fmt.Errorf("projected %d tokens > budget.tokens %d", p.Tokens, b.Tokens)
	case b.USD > 0 && p.USD > b.USD:
		return fmt.Errorf("projected $%.2f > budget.usd $%.2f", p.USD, b.USD)
	}
	return nil
}
