package templates

import (
	"regexp"
	"strings"
	"testing"
)

// TestMarkers checks that each template carries the markers code finds in
// its renderings, each opening a line (outcome keys sit inside theirs).
func TestMarkers(t *testing.T) {
	analysisUT := []string{TaskLabel, BaselineStart, BaselineEnd, OptimizedStart, OptimizedEnd}
	update := []string{OriginalPrompt, RuleItem}
	generate := []string{WorkflowIDKey, DomainKey, StepsKey, NoiseKey}
	tests := []struct {
		name              string
		lines, inLine     []string
		twiceOnOwnLine    string
		wantOutcomeKeysIn bool
	}{
		{name: "analysis_ut.tmpl", lines: analysisUT, wantOutcomeKeysIn: true},
		{name: "analysis_co.tmpl", lines: []string{CompressedStart, CompressedEnd}},
		{name: "update_ut.tmpl", lines: append(update, LostHeading), twiceOnOwnLine: OriginalPrompt},
		{name: "update_co.tmpl", lines: append(update, RemovalsHeading, RemoveItem), twiceOnOwnLine: OriginalPrompt},
		{name: "synth_evolve.tmpl", lines: append(update, EvolveLostHeading), twiceOnOwnLine: OriginalPrompt},
		{name: "synth_judge.tmpl", lines: []string{OutputA, OutputAEnd, OutputB, OutputBEnd}},
		{name: "replay_judge.tmpl", lines: []string{OutputA, OutputAEnd, OutputB, OutputBEnd}},
		{name: "synth_generate.tmpl", lines: generate},
		{name: "synth_repair.tmpl", lines: generate},
		{name: "history_plan_aware.tmpl", lines: []string{HistoryTask, HistoryPlan, HistoryPrevSummary, HistoryTurns}},
		{name: "history_prompting.tmpl", lines: []string{HistoryTask, HistoryPrevSummary, HistoryTurns}},
		{name: "observation_plan_aware.tmpl", lines: []string{ObservationPlan, ObservationCurrent, OutputFormat}},
		{name: "pace_summary.tmpl", lines: []string{PaceStep, PaceDetailed, PaceBrief}},
		{name: "office_task.tmpl", lines: []string{TaskPlan}},
		{name: "ace_feedback.tmpl", lines: []string{FeedbackItem, LostItem, RuleItem}},
		{name: "ace_reflector.tmpl", lines: []string{PlaybookBegin, PlaybookEnd}},
		{name: "ace_curator.tmpl", lines: []string{PlaybookBegin, PlaybookEnd, BudgetKey}},
	}
	outcome := []string{OutcomeBaselineSteps, OutcomeOptimizedSteps, OutcomeStepRatio, OutcomeRegression, OutcomeOptimizedSuccess}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Source(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tt.lines {
				if !opensLine(src, m) {
					t.Errorf("no line opens with the marker %q", m)
				}
			}
			if m := tt.twiceOnOwnLine; m != "" && strings.Count("\n"+src+"\n", "\n"+m+"\n") != 2 {
				t.Errorf("the marker %q does not stand on two lines of its own", m)
			}
			if tt.wantOutcomeKeysIn {
				for _, k := range outcome {
					if !strings.Contains(src, k+"=") {
						t.Errorf("no outcome %s=", k)
					}
				}
			}
		})
	}
}

var tagRe = regexp.MustCompile(`{%.*?%}`)

// opensLine reports whether a line of src, blanks and template tags aside,
// starts with m.
func opensLine(src, m string) bool {
	for line := range strings.Lines(src) {
		if strings.HasPrefix(strings.TrimSpace(tagRe.ReplaceAllString(line, "")), m) {
			return true
		}
	}
	return false
}
