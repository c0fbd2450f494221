// Package distill builds distillation corpora: the compressions of a teacher
// that ran with the optimized guideline become supervised rows for a small
// student (ACON section 3.4, PAACE-FT). It writes prompt–completion and
// messages JSONL, Parquet, a dataset card, training recipes and a manifest
// that accounts for every row read; secrets are redacted before anything is
// written.
package distill

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
)

// KindPlanAware is the kind of PAACE-FT rows: the plan-aware pairs
// (Π_{t:t+k}, C_t) → C̃_t of PAACE-Syn workflows. ACON rows have the kind
// of their compression event (compress.KindHistory or KindObservation).
const KindPlanAware = "paace"

// Row sources: ACON compression events, PAACE-Syn synthetic workflows.
const (
	SourceACON     = "acon"
	SourcePAACESyn = "paace_syn"
)

// Splits, in the order they are written and listed.
const (
	SplitTrain      = "train"
	SplitValidation = "validation"
)

var splitNames = []string{SplitTrain, SplitValidation}

// Message is one chat message of a row.
type Message struct {
	Role    string `json:"role" parquet:"role,dict"`
	Content string `json:"content" parquet:"content,plain"`
}

// Row is one training example: the compressor input as the prompt, the
// teacher's output as the completion, and where it came from. Its JSON form
// is a line of train.jsonl; its Parquet form a row of data/train.parquet.
// Field order is column order in both.
type Row struct {
	ID               string    `json:"id" parquet:"id,plain"`
	Prompt           []Message `json:"prompt" parquet:"prompt,list"`
	Completion       []Message `json:"completion" parquet:"completion,list"`
	Kind             string    `json:"kind" parquet:"kind,dict"`
	Source           string    `json:"source" parquet:"source,dict"`
	TaskID           string    `json:"task_id" parquet:"task_id,dict"`
	Step             int64     `json:"step" parquet:"step"`
	GuidelineID      string    `json:"guideline_id" parquet:"guideline_id,dict"`
	TeacherModel     string    `json:"teacher_model" parquet:"teacher_model,dict"`
	InputTokens      int64     `json:"input_tokens" parquet:"input_tokens"`
	OutputTokens     int64     `json:"output_tokens" parquet:"output_tokens"`
	CompressionRatio float64   `json:"compression_ratio" parquet:"compression_ratio"`
	Split            string    `json:"split" parquet:"split,dict"`
}

// contentID is the row id: a hash of the conversation, so the same example
// has the same id in every export.
func contentID(prompt, completion []Message) string {
	return hashMessages(prompt, completion, func(s string) string { return s })
}

// normalizedID hashes the conversation with case and whitespace folded, so
// rows that differ only in formatting count as duplicates.
func normalizedID(prompt, completion []Message) string {
	return hashMessages(prompt, completion, normalize)
}

func hashMessages(prompt, completion []Message, norm func(string) string) string {
	h := sha256.New()
	for _, part := range [][]Message{prompt, completion} {
		for _, m := range part {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
			h.Write([]byte(norm(m.Content)))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
