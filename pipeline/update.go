package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// propose asks the optimizer for K candidates, each from its own seeded
// sample of the feedback, and registers them. cands[k] is candidate k,
// zero when it was rejected (dec.Candidates says why).
func (p *runner) propose(round int, step string, parent compiled, ok []contrastive.Feedback, dec *guideline.Decision) ([]compiled, error) {
	opt := p.job.Optimize
	cands := make([]compiled, opt.Candidates)
	for k := range opt.Candidates {
		sample := contrastive.Sample(ok, opt.FeedbackSample, int64(p.job.Seed), k)
		c := guideline.Candidate{K: k}
		for _, f := range sample {
			c.FeedbackIDs = append(c.FeedbackIDs, f.ID)
		}
		src, err := p.ask(step, parent, sample, k)
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, ErrBudget) || errors.Is(err, llm.ErrUnavailable) {
				return nil, err
			}
			c.Rejected = err.Error()
			dec.Candidates = append(dec.Candidates, c)
			p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
				Detail: fmt.Sprintf("round %d %s candidate %d: %s", round, step, k, err), Raw: src})
			continue
		}
		reg, err := p.register(src, guideline.Record{
			Kind: p.kind, Parent: parent.rec.ID, Round: round, Step: step,
			FeedbackIDs: c.FeedbackIDs, Source: llm.RoleOptimizer,
		})
		if err != nil {
			return nil, err
		}
		c.ID = reg.rec.ID
		for _, r := range reg.rec.Validation.Repairs {
			c.Repairs = append(c.Repairs, fmt.Sprintf("line %d: %s -> %s", r.Line, r.From, r.To))
		}
		if reg.g == nil {
			c.Rejected = "invalid template: " + strings.Join(reg.rec.Validation.Problems, "; ")
			p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
				Detail: fmt.Sprintf("round %d %s candidate %d (%s): %s", round, step, k, c.ID, c.Rejected), Raw: src})
		} else {
			c.Valid = true
			cands[k] = reg
		}
		dec.Candidates = append(dec.Candidates, c)
	}
	return cands, nil
}

// ask asks the optimizer for the k-th candidate.
func (p *runner) ask(step string, parent compiled, sample []contrastive.Feedback, k int) (string, error) {
	prompt, err := contrastive.UpdatePrompt(step, string(p.kind), parent.src, sample)
	if err != nil {
		return "", err
	}
	resp, err := p.optimizer.Complete(p.ctx, llm.Request{
		Purpose:  llm.PurposeOptimizer,
		Messages: []llm.Message{{Role: "user", Content: prompt}},
		Sample:   k,
	})
	if err != nil {
		return "", fmt.Errorf("optimizer call: %w", err)
	}
	out, echoed := guideline.FromReply(resp.Message.Content)
	if echoed {
		p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
			Detail: fmt.Sprintf("%s candidate %d: recovered: the reply echoed the prompt's %s lines; the longest part between them is the candidate", step, k, templates.OriginalPrompt),
			Raw:    resp.Message.Content})
	}
	if strings.TrimSpace(out) == "" {
		return resp.Message.Content, errors.New("optimizer returned an empty candidate")
	}
	return out, nil
}
