package compress

import (
	"strings"

	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/templates"
)

// OpensTurn tells whether a message of role opens a turn. A turn is an
// assistant message with the tool results (or the nudge) that answer it,
// which always follow it: cutting only where a turn opens never separates
// a tool call from its results. Strategies and serve cut nowhere else.
func OpensTurn(role string) bool { return role == "assistant" }

// TurnStarts returns the indexes i < n at which role(i) opens a turn.
// Messages before the first (none in a rollout) belong to no turn and are
// always kept.
func TurnStarts(n int, role func(i int) string) []int {
	var s []int
	for i := range n {
		if OpensTurn(role(i)) {
			s = append(s, i)
		}
	}
	return s
}

// turnStarts is TurnStarts of msgs.
func turnStarts(msgs []llm.Message) []int {
	return TurnStarts(len(msgs), func(i int) string { return msgs[i].Role })
}

// lastTurnsStart is the index where the last k turns of msgs begin, scanning
// from the end so the cost does not grow with the history; 0 when msgs holds
// k turns or fewer.
func lastTurnsStart(msgs []llm.Message, k int) int {
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if OpensTurn(msgs[i].Role) {
			if n++; n == k {
				return i
			}
		}
	}
	return 0
}

// turn is one assistant message with the messages answering it, as a span
// [Start, End) of the history, and its step number.
type turn struct {
	Start, End, Step int
}

// turnsOf splits msgs into turns; firstStep numbers the first one.
func turnsOf(msgs []llm.Message, firstStep int) []turn {
	starts := turnStarts(msgs)
	out := make([]turn, len(starts))
	for i, s := range starts {
		end := len(msgs)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		out[i] = turn{Start: s, End: end, Step: firstStep + i}
	}
	return out
}

// taskMessage is the task message, with summary when there is one
// (templates/agent_summary.tmpl).
func taskMessage(task, summary string) (llm.Message, error) {
	if summary == "" {
		return llm.Message{Role: "user", Content: task}, nil
	}
	s, err := templates.Render("agent_summary.tmpl", map[string]any{"task": task, "summary": summary})
	if err != nil {
		return llm.Message{}, err
	}
	return llm.Message{Role: "user", Content: strings.TrimSpace(s)}, nil
}

// Unchanged is the context without any compression beyond the summary
// state already in: the task message (with the summary) and
// History[Covered:].
func Unchanged(in Input) (Output, error) {
	tm, err := taskMessage(in.Task, in.Summary)
	if err != nil {
		return Output{}, err
	}
	msgs := make([]llm.Message, 0, 1+len(in.History)-in.Covered)
	msgs = append(msgs, tm)
	msgs = append(msgs, in.History[in.Covered:]...)
	return Output{Messages: msgs, Summary: in.Summary, Covered: in.Covered}, nil
}

// withTask returns the task message followed by turns.
func withTask(task string, extra []llm.Message, turns []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, 1+len(extra)+len(turns))
	out = append(out, llm.Message{Role: "user", Content: task})
	out = append(out, extra...)
	return append(out, turns...)
}
