package distill

import (
	"strings"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/redact"
	"github.com/ctxopt/ctxopt/rollout"
)

// Reasons a row read is not kept, as counted in manifest.json.
const (
	DropTrajectoryFailed = "trajectory_failed"
	// DropWorkflowRejected: a PAACE-Syn workflow the acceptance filter
	// rejected (or that was not executed) gives no pair.
	DropWorkflowRejected = "workflow_rejected"
	// DropHeldOutSplit: a trajectory of the held-out test split (an
	// evaluation) never becomes training data.
	DropHeldOutSplit    = "held_out_split"
	DropInfraFailure    = "infra_failure"
	DropOtherGuideline  = "other_guideline"
	DropUnknownKind     = "unknown_kind"
	DropUnsupportedRole = "unsupported_role"
	DropEmptyPrompt     = "empty_prompt"
	DropEmptyCompletion = "empty_completion"
	DropTooLong         = "too_long"
	DropExactDuplicate  = "exact_duplicate"
	DropNormalizedDup   = "normalized_duplicate"
)

// HeldOutSplit is the split of tasks that evaluate and never train.
const HeldOutSplit = "test"

// DropReasons lists every reason, in the order the checks run.
func DropReasons() []string {
	return []string{
		DropHeldOutSplit, DropInfraFailure, DropTrajectoryFailed, DropWorkflowRejected, DropUnknownKind, DropOtherGuideline,
		DropEmptyPrompt, DropUnsupportedRole, DropEmptyCompletion,
		DropTooLong, DropExactDuplicate, DropNormalizedDup,
	}
}

// candidate is a row after the stage that may run concurrently: redacted,
// sanitized, counted and hashed. drop is set when the row is already known
// to be dropped.
type candidate struct {
	row        Row
	normID     string
	redactions map[string]int
	drop       string
}

// curator turns compression events into rows. prepare is safe for
// concurrent use; admit is not, and must see candidates in input order so
// that the first of duplicates is the one kept.
type curator struct {
	redactor  *redact.Redactor
	tok       *llm.Tokenizer
	maxLength int
	guideline string // prefix an event's guideline id must have; "" for all

	seenExact map[string]struct{}
	seenNorm  map[string]struct{}
}

func newCurator(opts Options, tok *llm.Tokenizer, guideline string) *curator {
	return &curator{
		redactor:  redact.New(opts.RedactEmails),
		tok:       tok,
		maxLength: opts.MaxLength,
		guideline: guideline,
		seenExact: map[string]struct{}{},
		seenNorm:  map[string]struct{}{},
	}
}

// prepare builds the candidate row of one compression event of rec.
func (c *curator) prepare(rec *trajectoryRecord, ev *rollout.CompressionEvent) candidate {
	switch {
	case rec.Split == HeldOutSplit:
		return candidate{drop: DropHeldOutSplit}
	case rec.Infra:
		return candidate{drop: DropInfraFailure}
	case !rec.Success:
		return candidate{drop: DropTrajectoryFailed}
	case !validKind[ev.Kind]:
		return candidate{drop: DropUnknownKind}
	case !strings.HasPrefix(ev.GuidelineID, c.guideline):
		return candidate{drop: DropOtherGuideline}
	}
	model := ev.Model
	if model == "" {
		model = rec.CompressorModel
	}
	return c.pair(Row{
		Kind:         ev.Kind,
		Source:       SourceACON,
		TaskID:       rec.TaskID,
		Step:         int64(max(ev.Step, 0)),
		GuidelineID:  ev.GuidelineID,
		TeacherModel: model,
	}, ev.Input, ev.Output)
}

// pair completes row with the compressor input x and the teacher's output
// y. x is the input exactly as sent; only empty messages, which chat
// fine-tuning rejects, are left out.
func (c *curator) pair(row Row, input []llm.Message, output string) candidate {
	for _, m := range input {
		if strings.TrimSpace(m.Content) == "" {
			continue
		}
		if !promptRoles[m.Role] {
			return candidate{drop: DropUnsupportedRole}
		}
		row.Prompt = append(row.Prompt, Message{Role: m.Role, Content: m.Content})
	}
	if len(row.Prompt) == 0 {
		return candidate{drop: DropEmptyPrompt}
	}
	if strings.TrimSpace(output) == "" {
		return candidate{drop: DropEmptyCompletion}
	}
	row.Completion = []Message{{Role: "assistant", Content: output}}
	return c.finish(row)
}

// finish redacts and sanitizes every string of the row, then counts and
// hashes it. Redaction comes first, so that ids, de-duplication and lengths
// are those of the text that is written.
func (c *curator) finish(row Row) candidate {
	var counts map[string]int
	clean := func(s string) string {
		s = strings.ToValidUTF8(s, "\uFFFD")
		out, n := c.redactor.Redact(s)
		if len(n) > 0 {
			if counts == nil {
				counts = map[string]int{}
			}
			for k, v := range n {
				counts[k] += v
			}
		}
		return out
	}
	for i := range row.Prompt {
		row.Prompt[i].Content = clean(row.Prompt[i].Content)
	}
	for i := range row.Completion {
		row.Completion[i].Content = clean(row.Completion[i].Content)
	}
	row.TaskID = clean(row.TaskID)
	row.GuidelineID = clean(row.GuidelineID)
	row.TeacherModel = clean(row.TeacherModel)

	prompt := make([]llm.Message, len(row.Prompt))
	for i, m := range row.Prompt {
		prompt[i] = llm.Message{Role: m.Role, Content: m.Content}
	}
	row.InputTokens = int64(c.tok.CountMessages(prompt))
	row.OutputTokens = int64(c.tok.Count(row.Completion[0].Content))
	if row.InputTokens > 0 {
		row.CompressionRatio = round4(float64(row.OutputTokens) / float64(row.InputTokens))
	}
	row.ID = contentID(row.Prompt, row.Completion)
	return candidate{row: row, normID: normalizedID(row.Prompt, row.Completion), redactions: counts}
}

// admit decides whether a prepared candidate is kept, and returns the drop
// reason when it is not.
func (c *curator) admit(cand *candidate) string {
	if cand.drop != "" {
		return cand.drop
	}
	if cand.row.InputTokens+cand.row.OutputTokens > int64(c.maxLength) {
		return DropTooLong
	}
	if _, dup := c.seenExact[cand.row.ID]; dup {
		return DropExactDuplicate
	}
	c.seenExact[cand.row.ID] = struct{}{}
	if _, dup := c.seenNorm[cand.normID]; dup {
		return DropNormalizedDup
	}
	c.seenNorm[cand.normID] = struct{}{}
	return ""
}

func addCounts(dst, src map[string]int) {
	for k, v := range src {
		dst[k] += v
	}
}
