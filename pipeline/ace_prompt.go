package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxopt/ctxopt/contrastive"
	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// maxProposals bounds the tags or operations taken from one reply: a
// reflector or curator that answers with more has gone astray, and the
// rest are rejected with the reason.
const maxProposals = 64

// aceFeedbackBlock renders the feedback as the reflector and curator read
// it: one FEEDBACK_ITEM per record, its lost facts and its rules (UT's
// recommendations, CO's rules, as the update prompts take them).
func aceFeedbackBlock(fb []contrastive.Feedback) (string, error) {
	items := make([]map[string]any, len(fb))
	for i, f := range fb {
		outcome, rules := "succeeded", f.Rules
		if f.Step == contrastive.StepUT {
			outcome, rules = "failed", f.Recommendations
			if f.Regression {
				outcome = "too_many_steps"
			}
		}
		items[i] = map[string]any{"id": f.ID, "step": f.Step, "outcome": outcome, "lost": f.MissingFacts, "rules": rules}
	}
	return templates.Render("ace_feedback.tmpl", map[string]any{"feedback": items})
}

// acePrompt renders the reflector's or the curator's prompt.
func (p *runner) acePrompt(name string, pb *guideline.Playbook, fb []contrastive.Feedback) (string, error) {
	block, err := aceFeedbackBlock(fb)
	if err != nil {
		return "", err
	}
	lines := make([]string, len(pb.Bullets))
	for i, b := range pb.Bullets {
		lines[i] = guideline.BulletText(b)
	}
	return templates.Render(name, map[string]any{"kind": string(p.kind), "bullets": lines, "feedback": block, "budget": p.job.ACE.MaxTokens})
}

// askJSON asks role for a JSON object and decodes it into v. A reply that
// does not decode is recorded as malformed and reported in the error's
// place by ok false.
func (p *runner) askJSON(client *llm.Client, purpose llm.Purpose, kind llm.MalformedKind, r int, prompt string, v any) (ok bool, err error) {
	m := p.meter.Wrap(client)
	resp, err := m.Complete(p.ctx, llm.Request{Purpose: purpose, Messages: []llm.Message{{Role: "user", Content: prompt}}})
	if err != nil {
		return false, fmt.Errorf("%s call: %w", purpose, err)
	}
	raw := resp.Message.Content
	body := raw
	if i, j := strings.IndexByte(raw, '{'), strings.LastIndexByte(raw, '}'); i >= 0 && j > i {
		body = raw[i : j+1]
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		m.ReportMalformed(llm.MalformedReply{Purpose: purpose, Kind: kind, Detail: fmt.Sprintf("ace round %d: %v", r, err), Raw: raw})
		return false, nil
	}
	return true, nil
}

// reflect asks the reflector to tag pb's bullets from fb.
func (p *runner) reflect(r int, pb *guideline.Playbook, fb []contrastive.Feedback) ([]guideline.Tag, error) {
	if len(pb.Bullets) == 0 {
		return nil, nil // nothing to tag
	}
	prompt, err := p.acePrompt("ace_reflector.tmpl", pb, fb)
	if err != nil {
		return nil, err
	}
	var reply struct {
		Tags []guideline.Tag `json:"bullet_tags"`
	}
	if _, err := p.askJSON(p.rt.Reflector, llm.PurposeReflector, llm.MalformedAnalysis, r, prompt, &reply); err != nil {
		return nil, err
	}
	return reply.Tags[:min(len(reply.Tags), maxProposals)], nil
}

// curate asks the curator for a delta batch on tagged and applies it to a
// copy: operations, de-duplication, then the budget.
func (p *runner) curate(r int, tagged *guideline.Playbook, fb []contrastive.Feedback, dec *guideline.ACERound) (*guideline.Playbook, error) {
	prompt, err := p.acePrompt("ace_curator.tmpl", tagged, fb)
	if err != nil {
		return nil, err
	}
	var reply struct {
		Ops []guideline.Op `json:"operations"`
	}
	if _, err := p.askJSON(p.rt.Curator, llm.PurposeCurator, llm.MalformedCandidate, r, prompt, &reply); err != nil {
		return nil, err
	}
	return applyBatch(r, tagged, reply.Ops, p.job.ACE, p.vectors(), p.rt.Tokenizer.Count, dec)
}

// applyBatch applies a curator's operations to a copy of tagged (at most
// maxProposals; the rest are rejected with the reason), then
// de-duplicates it and enforces the token budget, recording each step in
// dec. Whatever the operations, the copy ends within the budget.
func applyBatch(r int, tagged *guideline.Playbook, ops []guideline.Op, spec ACESpec, vec guideline.Vectorizer, count func(string) int, dec *guideline.ACERound) (*guideline.Playbook, error) {
	cand := tagged.Clone()
	var over []guideline.Applied
	if len(ops) > maxProposals {
		for _, op := range ops[maxProposals:] {
			over = append(over, guideline.Applied{Op: op, Rejected: fmt.Sprintf("the batch has %d operations; only the first %d are taken", len(ops), maxProposals)})
		}
		ops = ops[:maxProposals]
	}
	dec.Ops = append(cand.Apply(r, ops), over...)
	var err error
	if dec.Deduped, err = cand.Dedup(r, vec, spec.DedupThreshold); err != nil {
		return nil, err
	}
	evicted, err := cand.Budget(spec.MaxTokens, count)
	if err != nil {
		return nil, invalid(fmt.Errorf("ace.max_tokens: %w", err))
	}
	dec.Evicted = append(dec.Evicted, evicted...)
	return cand, nil
}

// vectors embeds bullets with the embedder role, or lexically.
func (p *runner) vectors() guideline.Vectorizer {
	if p.job.ACE.Dedup == DedupLexical {
		return guideline.LexicalVectors
	}
	return func(texts []string) ([][]float64, error) {
		vs, _, err := p.embedder.Embed(p.ctx, texts)
		if err != nil {
			return nil, err
		}
		out := make([][]float64, len(vs))
		for i, v := range vs {
			out[i] = make([]float64, len(v))
			for j, x := range v {
				out[i][j] = float64(x)
			}
		}
		return out, nil
	}
}
