package distill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/ctxopt/ctxopt/internal/jsonl"
	"github.com/ctxopt/ctxopt/rollout"
)

// ErrNoData means the inputs hold no row to train on: no trajectory in which
// the agent succeeded with compression, or none of its compression events
// survived curation.
var ErrNoData = errors.New("no successful compressed trajectories")

// LineError reports a trajectory line that could not be read.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// findTrajectories returns every trajectories.jsonl under runDir, sorted, so
// that the row order, and so the output, does not depend on the walk.
func findTrajectories(runDir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(runDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != rollout.TrajectoriesFile {
			return nil
		}
		split, err := rolloutSplit(filepath.Dir(path))
		if err != nil {
			return err
		}
		if split == HeldOutSplit {
			// An evaluation stage: its tasks are held out from training.
			slog.Info("distill: skipping a rollout of a held-out split", "dir", filepath.Dir(path), "split", split)
			return nil
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find trajectories under %s: %w", runDir, err)
	}
	slices.Sort(files)
	return files, nil
}

// rolloutSplit reads the split of the rollout in dir from its
// summary.json; "" when it has none or does not say.
func rolloutSplit(dir string) (string, error) {
	var sum struct {
		Split string `json:"split"`
	}
	err := readOptionalJSON(filepath.Join(dir, "summary.json"), &sum)
	return sum.Split, err
}

// readOptionalJSON decodes the JSON file at path into v; a missing file
// leaves v alone.
func readOptionalJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// trajectoryRecord is the part of a rollout.Trajectory that distillation
// reads; turns are skipped while decoding.
type trajectoryRecord struct {
	TaskID          string
	Split           string
	Success         bool
	Infra           bool
	CompressorModel string
	Events          []rollout.CompressionEvent
}

// decodeTrajectory reads a record of any format through the rollout
// package's reader, which rebuilds each compressor input as it was sent.
func decodeTrajectory(line []byte) (trajectoryRecord, error) {
	t, err := rollout.DecodeEvents(line)
	if err != nil {
		return trajectoryRecord{}, err
	}
	return trajectoryRecord{TaskID: t.TaskID, Split: t.Split, Success: t.Success, Infra: t.Infra, CompressorModel: t.CompressorModel, Events: t.Events}, nil
}

// lineReader yields the non-blank lines of a JSONL file under the
// trajectory limits, and hashes the file as it goes.
type lineReader struct {
	rd   *jsonl.Reader
	hash hash.Hash
	line int
}

func newLineReader(r io.Reader, name string) *lineReader {
	h := sha256.New()
	return &lineReader{rd: jsonl.NewReader(io.TeeReader(r, h), name, rollout.RecordLimits), hash: h}
}

// next returns the next non-blank line (a fresh slice the caller owns) and
// its 1-based number, or io.EOF.
func (lr *lineReader) next() ([]byte, int, error) {
	line, err := lr.rd.NonBlank()
	lr.line = lr.rd.Line()
	if err != nil {
		return nil, lr.line, err
	}
	return bytes.Clone(line), lr.line, nil
}

func (lr *lineReader) sum() string { return hex.EncodeToString(lr.hash.Sum(nil)) }

// readRunName returns the job name from RUN_DIR/job.yaml; a run directory
// without one (a plain rollout output) has no name.
func readRunName(runDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(runDir, "job.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read job name: %w", err)
	}
	return parseJobName(data)
}

// readSelectedGuideline returns the guideline RUN_DIR/summary.json names as
// selected, or "" when there is no summary.
func readSelectedGuideline(runDir string) (string, error) {
	var summary struct {
		Selected string `json:"selected_guideline"`
	}
	err := readOptionalJSON(filepath.Join(runDir, "summary.json"), &summary)
	return summary.Selected, err
}

func parseJobName(data []byte) (string, error) {
	var job struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		return "", fmt.Errorf("job.yaml: %w", err)
	}
	return job.Name, nil
}
