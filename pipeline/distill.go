package pipeline

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ctxopt/ctxopt/distill"
	"github.com/ctxopt/ctxopt/synth"
)

// DatasetSummary reports the distillation export.
type DatasetSummary struct {
	Dir        string         `json:"dir"`
	Rows       map[string]int `json:"rows"`
	Redactions map[string]int `json:"redactions"`
	// Workflows count the PAACE-Syn executions read (distill.synth).
	Workflows *distill.WorkflowCounts `json:"workflows,omitempty"`
	Skipped   string                  `json:"skipped,omitempty"`
}

// distill exports the teacher's compressions of the selected guideline's
// successful train runs (ACON's D⁺_train) and the job's PAACE-Syn runs'
// accepted pairs as training sets.
func (p *runner) distill(sum *RunSummary, final *stagedRollout) (*DatasetSummary, error) {
	out := filepath.Join(p.dir, DatasetsDir)
	inputs := map[string]any{"guideline": sum.SelectedGuideline, "trajectories": final.name(), "distill": p.job.Distill, "seed": p.job.Seed,
		// The dataset card names the job.
		"job": p.job.Name}
	if len(p.job.Distill.Synth) > 0 {
		// A synth run resumed or redone since changes the export.
		hashes, err := fileHashes("distill.synth", p.job.Distill.Synth, synth.ExecutionsFile)
		if err != nil {
			return nil, err
		}
		inputs["synth"] = hashes
	}
	d, err := stage(p.dir, p.meter, stageSpec[*DatasetSummary]{name: "distill", inputs: inputs, store: p.store, owned: []string{DatasetsDir}, run: func(string) (*DatasetSummary, map[string]float64, error) {
		d := &DatasetSummary{}
		m, err := distill.Build(p.ctx, p.dir, out, distill.Options{
			Seed: p.job.Seed, ValidationFraction: &p.job.Distill.ValidationFraction, MaxLength: p.job.Distill.MaxLength,
			RedactEmails: p.job.Distill.RedactEmails, Guideline: sum.SelectedGuideline, JobName: p.job.Name,
			Trajectories: []string{final.Path}, Synth: p.job.Distill.Synth,
		})
		if errors.Is(err, distill.ErrNoData) {
			slog.Warn("no dataset exported", "reason", err)
			// A dataset of an earlier run would not match this summary.
			if err := os.RemoveAll(out); err != nil {
				return nil, nil, err
			}
			d.Skipped = err.Error()
			return d, map[string]float64{"rows": 0}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		d.Rows = map[string]int{}
		for split, st := range m.Splits {
			d.Rows[split] = st.Rows
		}
		d.Redactions = m.Redactions
		counts := map[string]float64{"rows": float64(m.Rows.Kept)}
		if w := m.Workflows; w != nil {
			d.Workflows = w
			counts["synth_workflows"], counts["synth_accepted"] = float64(w.Read), float64(w.Accepted)
		}
		return d, counts, nil
	}})
	if err != nil {
		return nil, err
	}
	// A result taken from the stage store was saved by another run.
	d.Dir = out
	return d, nil
}
