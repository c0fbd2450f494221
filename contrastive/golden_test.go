package contrastive

import (
	"testing"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/internal/golden"
)

const fixtureGuideline = `You keep a running summary of an agent's work.

[Instruction]
{{ task }}

[Previous summary]
{{ prev_summary }}

[Turns since the previous summary]
{{ history }}

Return only the summary.`

const fixtureObsGuideline = `Refine the observation for the agent.

# Instruction
{{ task }}

# History of interactions
{{ history }}

# Observation at the current step
{{ observation }}

# Refined Observation`

// fixtureFeedback is parsed the way Analyze parses, so the golden files
// also pin what reaches the update prompts.
func fixtureFeedback(t *testing.T, step, reply, task string, regression bool) Feedback {
	t.Helper()
	r, err := parseReply(step, reply)
	if err != nil {
		t.Fatal(err)
	}
	f := Feedback{Step: step, TaskID: task, Kind: compress.KindHistory, Status: StatusOK, Regression: regression, CompressedChars: 180}
	fill(&f, step, r)
	f.setID()
	return f
}

func TestGolden(t *testing.T) {
	pair := Pair{Baseline: baselineRun(), Compressed: compressedRun()}
	rejected := Feedback{TaskID: "qa-0099", Status: StatusRejected, Reason: "not JSON"}
	ut := []Feedback{
		fixtureFeedback(t, StepUT, goodUT, "qa-0007", false),
		rejected,
		fixtureFeedback(t, StepUT, goodUT, "qa-0011", true),
	}
	co := []Feedback{fixtureFeedback(t, StepCO, goodCO, "qa-0003", false), rejected}
	cases := []struct {
		name   string
		render func() (string, error)
	}{
		{"analysis_ut", func() (string, error) { return AnalysisPrompt(StepUT, pair, Options{}) }},
		{"analysis_co", func() (string, error) { return AnalysisPrompt(StepCO, Pair{Compressed: pair.Compressed}, Options{}) }},
		{"update_ut", func() (string, error) { return UpdatePrompt(StepUT, compress.KindHistory, fixtureGuideline, ut) }},
		{"update_co", func() (string, error) { return UpdatePrompt(StepCO, compress.KindObservation, fixtureObsGuideline, co) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.render()
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name+".golden", got)
		})
	}
}
