package contrastive

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/ctxopt/ctxopt/guideline"
	"github.com/ctxopt/ctxopt/templates"
)

// UpdatePrompt renders the optimizer's prompt (update_ut.tmpl or
// update_co.tmpl) that rewrites the guideline original from the ok records
// of sample; rejected records are left out.
func UpdatePrompt(step, kind, original string, sample []Feedback) (string, error) {
	if err := checkStepKind(step, kind); err != nil {
		return "", err
	}
	var samples []map[string]any
	chars, counted := 0, 0
	for _, f := range sample {
		if f.Status != StatusOK {
			continue
		}
		samples = append(samples, sampleVars(step, f))
		if f.CompressedChars > 0 {
			chars += f.CompressedChars
			counted++
		}
	}
	if len(samples) == 0 {
		return "", errors.New("update prompt: no usable feedback in the sample; there is nothing to ground an update in")
	}
	avg := 0
	if counted > 0 {
		avg = chars / counted
	}
	name := "update_ut.tmpl"
	if step == StepCO {
		name = "update_co.tmpl"
	}
	return templates.Render(name, map[string]any{
		"original_prompt": original,
		"kind":            kind,
		// An update must keep every placeholder the guideline is rendered with.
		"required_vars":  guideline.RequiredVars(guideline.Kind(kind)),
		"avg_orig_chars": avg,
		"samples":        samples,
	})
}

// sampleVars is one sample of the update templates. Only slices and maps of
// fixed keys: pongo2 iterates maps in random order.
func sampleVars(step string, f Feedback) map[string]any {
	label := f.TaskID
	if f.Regression {
		label += " (succeeded with too many steps)"
	}
	rules := f.Rules
	if step == StepUT {
		rules = f.Recommendations
	}
	removals := make([]map[string]any, len(f.Removals))
	for i, r := range f.Removals {
		removals[i] = map[string]any{"category": r.Category, "pattern": r.Pattern, "action": r.Action}
	}
	keeps := make([]map[string]any, len(f.Keeps))
	for i, k := range f.Keeps {
		keeps[i] = map[string]any{"reason": k.Reason, "evidence": k.Evidence}
	}
	return map[string]any{
		"task_label":    label,
		"overview":      f.Overview,
		"missing_facts": f.MissingFacts,
		"removals":      removals,
		"keeps":         keeps,
		"rules":         rules,
	}
}

// Sample draws the k-th candidate's sample of n ok records (all of them
// when n <= 0 or n covers them), so each of ACON's K candidates is written
// from different feedback. The draw depends only on seed, k and the
// records, and keeps their order.
func Sample(fs []Feedback, n int, seed int64, k int) []Feedback {
	type ranked struct {
		idx  int
		rank uint64
	}
	var ok []ranked
	for i, f := range fs {
		if f.Status != StatusOK {
			continue
		}
		h := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%s/%d", seed, k, f.ID, i))
		ok = append(ok, ranked{i, binary.BigEndian.Uint64(h[:8])})
	}
	if n > 0 && n < len(ok) {
		sort.Slice(ok, func(a, b int) bool { return ok[a].rank < ok[b].rank })
		ok = ok[:n]
		sort.Slice(ok, func(a, b int) bool { return ok[a].idx < ok[b].idx })
	}
	out := make([]Feedback, len(ok))
	for i, r := range ok {
		out[i] = fs[r.idx]
	}
	return out
}
