package report

import (
	"fmt"
	"io"
	"strings"
)

// Lead is what a report puts before its details: what its verdict is
// judged under and against, and the guidelines its candidates ran.
type Lead struct {
	Gate       Gate
	Baselines  Baselines
	Guidelines []Guideline
}

// Guideline is a guideline a report shows: its text and its diff against
// its parent.
type Guideline struct {
	ID   string
	Role string // what it is to the report: "the selected history guideline"
	Text string
	// Parent is "" for a guideline without one (a starting guideline);
	// ParentDiff is "" when the two are equal.
	Parent, ParentDiff string
}

func (g Guideline) heading() string { return fmt.Sprintf("Guideline %s (%s)", g.ID, g.Role) }

// diffTitle says what the diff is against.
func (g Guideline) diffTitle() string {
	switch {
	case g.Parent == "":
		return "It has no parent to differ from (a starting guideline)."
	case g.ParentDiff == "":
		return fmt.Sprintf("Identical to its parent %s.", g.Parent)
	}
	return fmt.Sprintf("Its diff against its parent %s:", g.Parent)
}

func (g Guideline) markdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n```text\n%s\n```\n\n%s\n\n", g.heading(), strings.TrimRight(g.Text, "\n"), g.diffTitle())
	if g.ParentDiff != "" {
		fmt.Fprintf(w, "```diff\n%s```\n\n", g.ParentDiff)
	}
}

func (g Guideline) html() htmlGuideline {
	h := htmlGuideline{Heading: g.heading(), Text: g.Text, DiffTitle: g.diffTitle()}
	if g.ParentDiff != "" {
		h.Diff = diffLines(g.ParentDiff)
	}
	return h
}
