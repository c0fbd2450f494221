package contrastive

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxopt/ctxopt/compress"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/rollout"
)

// DefaultMaxHistoryChars bounds one rendered history. Two of them plus the
// instructions stay under ~60k tokens even for dense passages, which
// tokenize at about 2.7 characters a token (prose: about 4).
const DefaultMaxHistoryChars = 75_000

// minObsChars is the floor of the per-observation cut: below it an
// observation says nothing, and the summaries alone may exceed the budget.
const minObsChars = 200

// BaselineHistory renders every turn of a run as <step> blocks, each
// observation as the agent saw it. Observations are cut, longest first,
// until the text fits maxChars (<= 0: DefaultMaxHistoryChars).
func BaselineHistory(t *rollout.Trajectory, maxChars int) string {
	return fitted(maxChars, t, func(cut int) string { return turnsText(t.Turns, cut) })
}

// CompressedHistory renders a compressed run as its sessions: the <step>
// blocks in order, and each history summary where the agent's context was
// replaced by it, so the analyzer sees every summary and what came after.
// Sizes are bounded as in BaselineHistory; summaries are never cut, as they
// are what is analysed.
func CompressedHistory(t *rollout.Trajectory, maxChars int) string {
	return fitted(maxChars, t, func(cut int) string { return sessionsText(t, cut) })
}

// fitted renders with no cut, then with the largest cut that fits limit.
func fitted(limit int, t *rollout.Trajectory, render func(cut int) string) string {
	if limit <= 0 {
		limit = DefaultMaxHistoryChars
	}
	out := render(0)
	if len(out) <= limit {
		return out
	}
	longest := 0
	for _, tr := range t.Turns {
		longest = max(longest, len(seen(tr)))
	}
	// The rendered length grows with the cut: binary search the largest
	// cut that fits.
	lo, hi := minObsChars, longest
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(render(mid)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return render(lo)
}

func turnsText(turns []rollout.Turn, cut int) string {
	if len(turns) == 0 {
		return ""
	}
	msgs := make([]llm.Message, 0, 2*len(turns))
	for _, tr := range turns {
		msgs = append(msgs, tr.Output, llm.Message{Role: "tool", Content: truncate(seen(tr), cut)})
	}
	return compress.FormatHistory(msgs, turns[0].Step)
}

// sessionsText interleaves history summaries with the turns. A summary made
// before turn s+1 (event Step s) replaced the turns before s; the agent then
// saw it, turn s (the last pair, kept) and the turns after. So the summary
// goes right before turn s: what follows a summary is what the agent saw
// with it, and no action appears twice.
func sessionsText(t *rollout.Trajectory, cut int) string {
	var summaries []rollout.CompressionEvent
	for _, ev := range t.Events {
		if ev.Kind == compress.KindHistory {
			summaries = append(summaries, ev)
		}
	}
	var b strings.Builder
	session := 1
	next := 0
	emit := func(ev rollout.CompressionEvent) {
		session++
		fmt.Fprintf(&b, "--- session %d: the turns before step %d were replaced by this summary; the agent saw it and the steps from %d on ---\n", session, ev.Step, ev.Step)
		b.WriteString(summaryBlock(ev.Output))
		b.WriteString("\n")
	}
	for i, tr := range t.Turns {
		for next < len(summaries) && summaries[next].Step <= tr.Step {
			emit(summaries[next])
			next++
		}
		b.WriteString(turnsText(t.Turns[i:i+1], cut))
	}
	for ; next < len(summaries); next++ {
		emit(summaries[next])
	}
	return b.String()
}

// summaryBlock is the summary as the agent saw it, inside the
// <HISTORY_SUMMARY> tags the analyzer looks for.
func summaryBlock(out string) string {
	s := strings.TrimSpace(out)
	if strings.Contains(s, "<HISTORY_SUMMARY>") {
		return s
	}
	return "<HISTORY_SUMMARY>\n" + s + "\n</HISTORY_SUMMARY>"
}

// seen is the observation the agent saw at a turn.
func seen(tr rollout.Turn) string {
	if tr.CompressedObservation != "" {
		return tr.CompressedObservation
	}
	return tr.Observation
}

// truncate cuts s to about n bytes on a rune boundary, saying how much was
// cut; n <= 0 keeps s whole.
func truncate(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s\n[... %d more characters cut ...]", s[:i], utf8.RuneCountInString(s[i:]))
}
