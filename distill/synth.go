package distill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/synth"
)

// PAACE-Syn runs (optimize synth run) as a source: each compression of a
// workflow the acceptance filter accepted is a PAACE-FT pair
// (Π_{t:t+k}, C_t) → C̃_t, a row of kind paace and source paace_syn. The
// teacher prompt holds the plan window and C_t; the completion is the
// teacher's C̃_t. Rows are split by workflow, like tasks.

// WorkflowCounts count the executions read from synth runs.
type WorkflowCounts struct {
	Read     int `json:"read"`
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	// NotExecuted are workflow lines that were not valid workflows.
	NotExecuted int `json:"not_executed"`
}

// synthExecutions is the executions file of a synth run given as a
// directory or as the file itself.
func synthExecutions(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("synth run: %w", err)
	}
	if fi.IsDir() {
		path = filepath.Join(path, synth.ExecutionsFile)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("synth run: %w (give optimize synth run's output directory)", err)
		}
	}
	return path, nil
}

// readSynth curates the accepted compressions of one synth run, in file
// order.
func (st *curateState) readSynth(ctx context.Context, runDir, path string, opts Options) error {
	path, err := synthExecutions(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open synth executions: %w", err)
	}
	defer f.Close()
	m := st.m
	if m.Workflows == nil {
		m.Workflows = &WorkflowCounts{}
	}
	in := InputFile{Path: displayPath(runDir, path)}
	lr := newLineReader(f, path)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, lineNo, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		var ex synth.Execution
		if err := json.Unmarshal(line, &ex); err != nil {
			if lr.rd.SkipTorn(err) {
				break
			}
			if !opts.SkipBad {
				return &LineError{File: path, Line: lineNo, Err: fmt.Errorf("not a synth execution: %w (rerun with --skip-bad to skip such lines)", err)}
			}
			in.BadLines++
			m.Trajectories.BadLines++
			if len(m.BadLines) < maxBadLines {
				m.BadLines = append(m.BadLines, LineRef{File: in.Path, Line: lineNo, Error: err.Error()})
			}
			continue
		}
		in.Workflows++
		st.admitExecution(&ex)
		if err := st.failure(); err != nil {
			return err
		}
	}
	in.Lines = lr.line
	in.SHA256 = lr.sum()
	m.Inputs = append(m.Inputs, in)
	return nil
}

// admitExecution counts one execution and spools the rows of its steps.
func (st *curateState) admitExecution(ex *synth.Execution) {
	m := st.m
	w := m.Workflows
	w.Read++
	switch {
	case !ex.Executed:
		w.NotExecuted++
		return
	case !ex.Accepted:
		w.Rejected++
		m.Rows.Read += len(ex.Steps)
		m.Rows.Dropped[DropWorkflowRejected] += len(ex.Steps)
		return
	}
	w.Accepted++
	for i := range ex.Steps {
		s := &ex.Steps[i]
		cand := st.c.pair(Row{
			Kind: KindPlanAware, Source: SourcePAACESyn, TaskID: ex.ID, Step: int64(max(s.Step, 0)),
			GuidelineID: s.GuidelineID, TeacherModel: s.Model,
		}, s.Prompt, s.Output)
		st.admitRow(&cand)
	}
}
