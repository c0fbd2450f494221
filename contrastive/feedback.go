package contrastive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/llm"
)

// FeedbackFile is where a step keeps its feedback records, in its stage's
// directory.
const FeedbackFile = "feedback.jsonl"

// Statuses of a feedback record.
const (
	StatusOK       = "ok"
	StatusRejected = "rejected"
)

// Feedback is the analysis of one run, one JSONL line of feedback/*.jsonl.
// Guideline records cite it by ID, so fields are only ever added.
type Feedback struct {
	// ID is a hash of the content, stable across runs of the same analysis.
	ID          string `json:"id"`
	Step        string `json:"step"` // StepUT or StepCO
	Round       int    `json:"round"`
	TaskID      string `json:"task_id"`
	Kind        string `json:"kind"` // KindHistory or KindObservation
	GuidelineID string `json:"guideline_id,omitempty"`
	// Regression marks a UT item that succeeded but took too many steps.
	Regression bool   `json:"regression,omitempty"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"` // why it was rejected
	// Infra marks a rejection because the analyzer endpoint stayed down: a
	// retry may succeed, unlike an unusable reply.
	Infra bool `json:"infra,omitempty"`
	// Analysis is the analyzer's JSON object, compacted.
	Analysis json.RawMessage `json:"analysis,omitempty"`

	// What the update prompts show, extracted from Analysis.
	Overview        []string  `json:"overview,omitempty"`
	RootCauses      []string  `json:"root_causes,omitempty"`
	MissingFacts    []string  `json:"missing_facts,omitempty"`
	Recommendations []string  `json:"recommendations,omitempty"`
	Removals        []Removal `json:"removals,omitempty"`
	Keeps           []Keep    `json:"keeps,omitempty"`
	Rules           []string  `json:"rules,omitempty"`
	Reliability     float64   `json:"reliability"`
	// CompressedChars is the mean length in characters of the analysed
	// run's compressor outputs of Kind (the update prompt's avg_orig_chars).
	CompressedChars int `json:"compressed_chars"`

	// Calls counts the analyzer calls (2 after a repair request); Usage sums them.
	Calls int       `json:"calls"`
	Usage llm.Usage `json:"usage"`
	// Raw is the last reply, cut to rawLimit characters.
	Raw string `json:"raw,omitempty"`
}

// Removal is content of a compressed context the run never used.
type Removal struct {
	Category string `json:"category"`
	Pattern  string `json:"pattern"`
	Action   string `json:"action"`
}

// Keep is content the run needed, with the spans that show it.
type Keep struct {
	Reason   string   `json:"reason"`
	Evidence []string `json:"evidence"`
}

// rawLimit bounds Raw: enough to see what went wrong, not a second copy of
// every analysis.
const rawLimit = 4000

// setID hashes what the record says, not how much it cost.
func (f *Feedback) setID() {
	h := sha256.New()
	for _, s := range []string{f.Step, fmt.Sprint(f.Round), f.TaskID, f.Kind, f.GuidelineID, f.Status, f.Reason, string(f.Analysis)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	f.ID = hex.EncodeToString(h.Sum(nil))[:16]
}

// WriteFeedback replaces path with fs, one JSON object a line, atomically.
func WriteFeedback(path string, fs []Feedback) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range fs {
		if err := enc.Encode(&fs[i]); err != nil {
			return fmt.Errorf("encode feedback %s: %w", fs[i].ID, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("feedback dir: %w", err)
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o644)
}
