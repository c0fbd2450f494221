package rollout

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// ErrNoRecord is returned by Show for a task the file has no record of.
var ErrNoRecord = errors.New("no record")

// Show writes the records of a trajectories file (or of the rollout
// directory holding one) to w as JSON lines of Trajectory, every agent and
// compressor input in full, whatever the record's format: records are
// packed (docs/trajectory-format.md), and this is how people and jq read
// them. With tasks, only those tasks' records are written, and one that
// has no record is an ErrNoRecord. It returns how many it wrote.
func Show(w io.Writer, path string, tasks []string) (int, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, TrajectoriesFile)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	seen := map[string]bool{}
	n := 0
	for t, err := range Records(path) {
		if err != nil {
			// The records before the bad line are whole; write them.
			if ferr := bw.Flush(); ferr != nil {
				return n, fmt.Errorf("write trajectories: %w", ferr)
			}
			return n, err
		}
		if len(tasks) > 0 && !slices.Contains(tasks, t.TaskID) {
			continue
		}
		seen[t.TaskID] = true
		if err := enc.Encode(t); err != nil {
			return n, fmt.Errorf("write trajectory %s: %w", t.TaskID, err)
		}
		n++
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write trajectories: %w", err)
	}
	for _, id := range tasks {
		if !seen[id] {
			return n, fmt.Errorf("%s: task %q: %w (its task ids are in index.jsonl beside it)", path, id, ErrNoRecord)
		}
	}
	return n, nil
}
