package sim

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxopt/ctxopt/templates"
)

// The ACE roles (docs/embedded-model.md, Reflector and curator). Both read
// the playbook's bullets between the playbook markers and the feedback
// records by their FEEDBACK_ITEM lines; neither reads the prompt's prose.

// bullet is a playbook line as the prompts show it.
type bullet struct {
	id, section, content string
	helpful, harmful     int
}

// item is one feedback record of a reflector or curator prompt.
type item struct {
	id, step, outcome string
	lost              int
	rules             []string
}

var errNoPlaybook = errors.New("prompt lacks the " + templates.PlaybookBegin + " and " + templates.PlaybookEnd + " lines around the playbook (see docs/embedded-model.md, Reflector and curator)")

// readACE reads a reflector or curator prompt.
func readACE(prompt string) ([]bullet, []item, error) {
	begin := strings.Index(prompt, templates.PlaybookBegin+"\n")
	end := strings.Index(prompt, templates.PlaybookEnd)
	if begin < 0 || end < begin {
		return nil, nil, errNoPlaybook
	}
	var bs []bullet
	for line := range strings.Lines(prompt[begin:end]) {
		if m := templates.BulletLine.FindStringSubmatch(strings.TrimRight(line, "\r\n")); m != nil {
			h, _ := strconv.Atoi(m[2])
			x, _ := strconv.Atoi(m[3])
			sec, _, _ := strings.Cut(m[1], "-")
			bs = append(bs, bullet{id: m[1], section: sec, content: m[4], helpful: h, harmful: x})
		}
	}
	var items []item
	for line := range strings.Lines(prompt[end:]) {
		line = strings.TrimRight(line, "\r\n")
		switch f := strings.Fields(line); {
		case len(f) >= 4 && f[0] == templates.FeedbackItem:
			items = append(items, item{id: f[1], step: strings.TrimPrefix(f[2], "step="), outcome: strings.TrimPrefix(f[3], "outcome=")})
		case len(items) > 0 && strings.HasPrefix(line, templates.LostItem):
			items[len(items)-1].lost++
		case len(items) > 0 && strings.HasPrefix(line, templates.RuleItem):
			items[len(items)-1].rules = append(items[len(items)-1].rules, strings.TrimSpace(strings.TrimPrefix(line, templates.RuleItem)))
		}
	}
	return bs, items, nil
}

// reflect tags each bullet once: harmful when the compressor reads it as
// asking for facts in other words and a failed run lost facts, else
// helpful when the compressor acts on it and a run succeeded. Other
// bullets get no tag.
func reflect(prompt string) (string, error) {
	bs, items, err := readACE(prompt)
	if err != nil {
		return "", err
	}
	type tag struct {
		ID       string   `json:"id"`
		Tag      string   `json:"tag"`
		Evidence []string `json:"evidence"`
	}
	tags := []tag{}
	failed := idsOf(items, func(it item) bool { return it.outcome == outcomeFailed && it.lost > 0 })
	succeeded := idsOf(items, func(it item) bool { return it.outcome == outcomeSucceeded })
	for _, b := range bs {
		switch {
		case readDirectives(b.content).Paraphrase && len(failed) > 0:
			tags = append(tags, tag{b.id, "harmful", failed})
		case len(Understood(b.content)) > 0 && len(succeeded) > 0:
			tags = append(tags, tag{b.id, "helpful", succeeded})
		}
	}
	out, err := json.Marshal(map[string]any{templates.TagsKey: tags})
	return string(out), err
}

// The outcomes a feedback line names.
const (
	outcomeFailed    = "failed"
	outcomeSucceeded = "succeeded"
)

func idsOf(items []item, keep func(item) bool) []string {
	var out []string
	for _, it := range items {
		if keep(it) {
			out = append(out, it.id)
		}
	}
	return out
}

// curate proposes nothing without feedback; with some, it proposes: REMOVE for each bullet tagged harmful more often than
// helpful; MERGE for bullets of a section the compressor reads alike; ADD
// for each RULE line no bullet already says, in section keep (from a
// failed run) or trim (from a successful one). It ignores the budget,
// which code enforces.
func curate(prompt string) (string, error) {
	bs, items, err := readACE(prompt)
	if err != nil {
		return "", err
	}
	type op struct {
		Type     string   `json:"type"`
		Section  string   `json:"section,omitempty"`
		ID       string   `json:"id,omitempty"`
		IDs      []string `json:"ids,omitempty"`
		Content  string   `json:"content,omitempty"`
		Evidence []string `json:"evidence,omitempty"`
	}
	ops := []op{}
	if len(items) == 0 {
		// Every operation needs evidence: with no feedback, none.
		out, err := json.Marshal(map[string]any{templates.OpsKey: ops})
		return string(out), err
	}
	all := idsOf(items, func(item) bool { return true })
	for _, b := range bs {
		if b.harmful > b.helpful {
			ops = append(ops, op{Type: "REMOVE", ID: b.id, Evidence: all})
		}
	}
	for i, b := range bs {
		var same []string
		for _, c := range bs[i+1:] {
			if c.section == b.section && c.harmful <= c.helpful && b.harmful <= b.helpful && alike(b.content, c.content) {
				same = append(same, c.id)
			}
		}
		if len(same) > 0 && !slices.ContainsFunc(ops, func(o op) bool { return slices.Contains(o.IDs, b.id) }) {
			ops = append(ops, op{Type: "MERGE", IDs: append([]string{b.id}, same...), Evidence: all})
		}
	}
	seen := map[string]bool{}
	for _, b := range bs {
		seen[asciiLower(b.content)] = true
	}
	for _, it := range items {
		section := "keep"
		if it.outcome == outcomeSucceeded {
			section = "trim"
		}
		for _, r := range it.rules {
			if k := asciiLower(r); !seen[k] {
				seen[k] = true
				ops = append(ops, op{Type: "ADD", Section: section, Content: r, Evidence: []string{it.id}})
			}
		}
	}
	out, err := json.Marshal(map[string]any{templates.OpsKey: ops})
	return string(out), err
}

// alike reports whether the compressor reads two bullets as the same
// directives (and reads some).
func alike(a, b string) bool {
	ua, ub := Understood(a), Understood(b)
	return len(ua) > 0 && slices.Equal(ua, ub)
}

// bulletRules replaces each playbook bullet line of a guideline by its
// content, so the compressor reads a bullet as the rule it states.
func bulletRules(guideline string) string {
	if !strings.Contains(guideline, templates.BulletSep) {
		return guideline
	}
	var b strings.Builder
	for line := range strings.Lines(guideline) {
		if m := templates.BulletLine.FindStringSubmatch(strings.TrimRight(line, "\r\n")); m != nil {
			b.WriteString(m[4] + "\n")
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
