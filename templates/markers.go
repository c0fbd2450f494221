package templates

import "regexp"

// Markers name the parts of a rendered prompt that code must find in it.
// The embedded offline model (llm/sim) reads prompts by these and never by
// their sentences, so a prompt can be reworded freely while its markers
// stay. Each is text a language model also reads naturally, as a heading,
// a key or a delimiter, since the same prompts go to real models. The
// templates write them literally, so a guideline stays plain text its
// authors and optimizers edit; TestMarkers checks that every template
// carries the markers listed for it.
const (
	// The analysis prompts enclose the rendered runs between lines holding
	// these (analysis_ut.tmpl, analysis_co.tmpl).
	BaselineStart   = "BASELINE_HISTORY_START"
	BaselineEnd     = "BASELINE_HISTORY_END"
	OptimizedStart  = "OPTIMIZED_HISTORY_START"
	OptimizedEnd    = "OPTIMIZED_HISTORY_END"
	CompressedStart = "COMPRESSED_HISTORY_START"
	CompressedEnd   = "COMPRESSED_HISTORY_END"
	// TaskLabel opens the line that names the task (analysis_ut.tmpl).
	TaskLabel = "Task:"
	// The outcome of the two runs, written key=value (analysis_ut.tmpl).
	OutcomeBaselineSteps    = "baseline_env_steps"
	OutcomeOptimizedSteps   = "optimized_env_steps"
	OutcomeStepRatio        = "step_ratio"
	OutcomeRegression       = "performance_regression"
	OutcomeOptimizedSuccess = "optimized_success"

	// OriginalPrompt stands on a line of its own before and after the
	// guideline an update revises (update_ut.tmpl, update_co.tmpl,
	// synth_evolve.tmpl).
	OriginalPrompt = "<<<ORIGINAL_PROMPT>>>"
	// RuleItem opens a feedback line holding a rule to add as written.
	RuleItem = "- RULE:"
	// RemoveItem opens a line of unused content: "- REMOVE [category] ...".
	RemoveItem = "- REMOVE ["
	// RemovalsHeading heads a CO sample's unused content (update_co.tmpl).
	RemovalsHeading = "Unused content (category, pattern, action):"
	// LostHeading heads a UT sample's facts and state the compressed run
	// lost, one "- " line each (update_ut.tmpl); EvolveLostHeading the
	// input lines a compressed workflow lost (synth_evolve.tmpl).
	LostHeading       = "Facts or state the compressed context lost:"
	EvolveLostHeading = "Input lines stating facts that a later step needed and the compressed memory lost:"

	// OutputA and OutputB open the two outputs a judge compares, and
	// OutputAEnd and OutputBEnd close them (synth_judge.tmpl,
	// replay_judge.tmpl).
	OutputA    = "OUTPUT_A"
	OutputAEnd = "OUTPUT_A_END"
	OutputB    = "OUTPUT_B"
	OutputBEnd = "OUTPUT_B_END"

	// Keys of the lines of a generation prompt that say what workflow to
	// write, each followed by a blank and its value (synth_generate.tmpl,
	// synth_repair.tmpl).
	WorkflowIDKey = "WORKFLOW_ID:"
	DomainKey     = "DOMAIN:"
	StepsKey      = "STEPS:"
	NoiseKey      = "NOISE:"

	// Section headings of the plan-aware history prompt
	// (history_plan_aware.tmpl): the task, the plan window, the previous
	// summary and the turns since it, in that order.
	HistoryTask        = "[Instruction]"
	HistoryPlan        = "[Plan: next steps]"
	HistoryPrevSummary = "[Previous summary]"
	HistoryTurns       = "[Turns since the previous summary]"
	// Section headings of the plan-aware observation prompt
	// (observation_plan_aware.tmpl): the plan window, the observation to
	// refine, and the answer format that follows it.
	ObservationPlan    = "# Plan: next steps"
	ObservationCurrent = "# Observation at the current step"
	OutputFormat       = "[Output format]"

	// PaceStep heads the step a PACE summary prompt asks to summarize
	// (pace_summary.tmpl); PaceDetailed and PaceBrief open the two lines of
	// the answer.
	PaceStep     = "[Step]"
	PaceDetailed = "DETAILED:"
	PaceBrief    = "BRIEF:"

	// TaskPlan stands on its own line before the numbered steps of a task
	// that spells out its plan (office_task.tmpl).
	TaskPlan = "Plan:"

	// A playbook guideline (ACE) holds its bullets between lines holding
	// PlaybookBegin and PlaybookEnd, one "## section" heading per section
	// and one bullet a line: "[slug-00001] helpful=2 harmful=0 :: content"
	// (guideline.Playbook renders them, the embedded compressor reads
	// each bullet's content as a rule, the reflector and curator prompts
	// show them).
	PlaybookBegin = "PLAYBOOK_BEGIN"
	PlaybookEnd   = "PLAYBOOK_END"
	// BulletSep separates a bullet's id and counters from its content.
	BulletSep = " :: "
	// FeedbackItem opens the line that names one feedback record in the
	// reflector and curator prompts: "FEEDBACK_ITEM id step=ut
	// outcome=failed", followed by its LostItem and RuleItem lines
	// (ace_reflector.tmpl, ace_curator.tmpl).
	FeedbackItem = "FEEDBACK_ITEM"
	LostItem     = "- LOST:"
	// TagsKey and OpsKey are the keys of the reflector's and the
	// curator's JSON answers; BudgetKey opens the curator prompt's line
	// with the token budget.
	TagsKey   = "bullet_tags"
	OpsKey    = "operations"
	BudgetKey = "token_budget="
)

// BulletLine matches one playbook bullet: its id, helpful and harmful
// counts and content.
var BulletLine = regexp.MustCompile(`^\[([a-z][a-z0-9_]*-\d{5})\] helpful=(\d+) harmful=(\d+)` + regexp.QuoteMeta(BulletSep) + `(.*)$`)
