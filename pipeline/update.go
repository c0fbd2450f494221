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
	out := fencedTemplate(resp.Message.Content)
	if t, echoed := unechoed(out); echoed {
		p.optimizer.ReportMalformed(llm.MalformedReply{Purpose: llm.PurposeOptimizer, Kind: llm.MalformedCandidate,
			Detail: fmt.Sprintf("%s candidate %d: recovered: the reply echoed the prompt's %s lines; the longest part between them is the candidate", step, k, templates.OriginalPrompt),
			Raw:    resp.Message.Content})
		out = t
	}
	if strings.TrimSpace(out) == "" {
		return resp.Message.Content, errors.New("optimizer returned an empty candidate")
	}
	return out, nil
}

// fencedTemplate returns the candidate in a reply: the body of its first
// Markdown code fence when it has one (models put prose before and after
// it: "Here is the updated guideline: ```...``` It keeps ..."), else the
// whole reply. An unclosed fence (a cut reply) runs to the end.
func fencedTemplate(s string) string {
	i := strings.Index(s, "```")
	if i < 0 {
		return s
	}
	t := s[i+3:]
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{}") {
		t = t[nl+1:] // the language tag
	}
	if j := strings.Index(t, "```"); j >= 0 {
		t = t[:j]
	}
	return strings.TrimSpace(t) + "\n"
}

// unechoed returns the candidate in a reply that echoed the update
// prompt's marker lines (templates.OriginalPrompt) around it, as
// Qwen2.5-Coder-1.5B did at temperature 0: "<<<ORIGINAL_PROMPT>>>",
// the template, the marker again and the prompt's closing instruction,
// once or twice over. The parts between marker lines are the template and
// echoed instructions; the longest is the template. A marker rendered into
// a guideline would reach every compressor prompt, so none survives.
func unechoed(s string) (string, bool) {
	var parts []string
	var cur []string
	echoed := false
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == templates.OriginalPrompt {
			echoed = true
			parts, cur = append(parts, strings.Join(cur, "\n")), nil
			continue
		}
		cur = append(cur, line)
	}
	if !echoed {
		return s, false
	}
	best := ""
	for _, part := range append(parts, strings.Join(cur, "\n")) {
		if part = strings.TrimSpace(part); len(part) > len(best) {
			best = part
		}
	}
	return best + "\n", true
}
