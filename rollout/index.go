package rollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/env"
	"github.com/ctxopt/ctxopt/internal/atomicfile"
	"github.com/ctxopt/ctxopt/internal/jsonl"
)

// Outcome is what a rollout keeps of a task once its record is on disk:
// what summaries, selection and reports need. A finished rollout directory
// lists the outcomes in index.jsonl, in task order, so listing or reusing
// it reads the index instead of the records.
type Outcome struct {
	TaskID                 string    `json:"task_id"`
	Split                  string    `json:"split,omitempty"`
	HistoryGuidelineID     string    `json:"history_guideline_id,omitempty"`
	ObservationGuidelineID string    `json:"observation_guideline_id,omitempty"`
	Score                  env.Score `json:"score"`
	Success                bool      `json:"success"`
	Infra                  bool      `json:"infra_failure,omitempty"`
	StepLimit              bool      `json:"step_limit,omitempty"`
	ContextOverflow        bool      `json:"context_overflow,omitempty"`
	Metrics                Metrics   `json:"metrics"`
	// Events counts the compression events.
	Events int `json:"events"`
	// OverflowStep is the agent call whose prompt outgrew the context
	// window; ContextSizes the agent's prompt size at each step.
	OverflowStep int   `json:"overflow_step,omitempty"`
	ContextSizes []int `json:"context_sizes,omitempty"`
	// Offset and Length locate the record in trajectories.jsonl.
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// OutcomeOf returns t's outcome (without a location).
func OutcomeOf(t *Trajectory) Outcome {
	return Outcome{
		TaskID: t.TaskID, Split: t.Split,
		HistoryGuidelineID: t.HistoryGuidelineID, ObservationGuidelineID: t.ObservationGuidelineID,
		Score: t.Score, Success: t.Success, Infra: t.Infra, StepLimit: t.StepLimit,
		ContextOverflow: t.ContextOverflow, Metrics: t.Metrics, Events: len(t.Events),
		OverflowStep: t.OverflowStep, ContextSizes: contextSizes(t.Turns),
	}
}

func contextSizes(turns []Turn) []int {
	out := make([]int, len(turns))
	for i, t := range turns {
		out[i] = t.ContextTokens
	}
	return out
}

// recordHead decodes the outcome fields of a record of any format; the
// events are counted, not decoded, and turns are decoded only for their
// context sizes.
type recordHead struct {
	Outcome
	Format int             `json:"format"`
	Turns  json.RawMessage `json:"turns"`
	Packed json.RawMessage `json:"zstd"`
	steps
}

// steps is what an outcome needs of the fields format 3 packs.
type steps struct {
	Events []struct{} `json:"compression_events"`
	Turns  []struct {
		ContextTokens int `json:"context_tokens"`
	} `json:"turns"`
}

func outcomeOfLine(line []byte) (Outcome, error) {
	var h recordHead
	if err := json.Unmarshal(line, &h); err != nil {
		return Outcome{}, fmt.Errorf("not a trajectory record: %w", err)
	}
	head := lineHead{Format: h.Format, TaskID: h.TaskID, Turns: h.Turns, Packed: h.Packed}
	if err := head.check(); err != nil {
		return Outcome{}, err
	}
	var err error
	switch {
	case h.Format == RecordFormat:
		var packed, plain []byte
		if err = json.Unmarshal(h.Packed, &packed); err == nil {
			plain, err = unpack(packed)
		}
		if err == nil {
			err = json.Unmarshal(plain, &h.steps)
		}
	case h.Turns != nil:
		err = json.Unmarshal(h.Turns, &h.steps.Turns)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("trajectory %s: %w", h.TaskID, err)
	}
	o := h.Outcome
	o.Events = len(h.steps.Events)
	o.ContextSizes = make([]int, len(h.steps.Turns))
	for i, t := range h.steps.Turns {
		o.ContextSizes[i] = t.ContextTokens
	}
	return o, nil
}

// readOutcomes calls fn with the outcome and location of every record of
// the trajectories file r, named path, in file order. It reads as every
// reader does: blank lines are skipped, a torn last line (jsonl.Torn) is
// left out with a warning, and any other line that is not a record is a
// DamagedError.
func readOutcomes(r io.Reader, path string, fn func(Outcome)) error {
	rd := jsonl.NewReader(r, path, RecordLimits)
	var off int64
	for line, err := range rd.All() {
		if err != nil {
			return err
		}
		n := int64(len(line))
		if !rd.Unterminated() {
			n++ // the newline
		}
		if len(bytes.TrimSpace(line)) > 0 {
			o, err := outcomeOfLine(line)
			if err != nil {
				if rd.SkipTorn(err) {
					return nil
				}
				return &DamagedError{File: path, Line: rd.Line(), Err: err}
			}
			o.Offset, o.Length = off, n
			fn(o)
		}
		off += n
	}
	return nil
}

func writeIndex(path string, outs []Outcome) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		for i := range outs {
			if err := enc.Encode(&outs[i]); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
}

// ReadIndex returns the outcomes of the finished rollout in dir, in task
// order. A directory finished before the index existed is indexed from its
// records (once: the index is written for the next reader), and so is one
// whose records no longer end where the index says (records appended
// after it was written, as optimize serve appends to its session log):
// a stale index is never trusted.
func ReadIndex(dir string) ([]Outcome, error) {
	path := filepath.Join(dir, IndexFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return indexRecords(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var outs []Outcome
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var o Outcome
		if err := json.Unmarshal(line, &o); err != nil || o.TaskID == "" {
			return nil, fmt.Errorf("%s:%d: not an index line (remove the file to rebuild it from the records)", path, n+1)
		}
		outs = append(outs, o)
	}
	if !indexCovers(dir, outs) {
		return indexRecords(dir)
	}
	return outs, nil
}

// indexCovers reports whether the records outs locate end where dir's
// trajectories file ends.
func indexCovers(dir string, outs []Outcome) bool {
	fi, err := os.Stat(filepath.Join(dir, TrajectoriesFile))
	if err != nil {
		return false
	}
	var end int64
	for _, o := range outs {
		end = max(end, o.Offset+o.Length)
	}
	return fi.Size() == end
}

func indexRecords(dir string) ([]Outcome, error) {
	path := filepath.Join(dir, TrajectoriesFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trajectories: %w", err)
	}
	defer f.Close()
	var outs []Outcome
	if err := readOutcomes(f, path, func(o Outcome) { outs = append(outs, o) }); err != nil {
		return nil, err
	}
	// A read-only directory is still read; it is indexed again next time.
	_ = writeIndex(filepath.Join(dir, IndexFile), outs)
	return outs, nil
}
