package guideline

import (
	"strings"

	"github.com/ctxopt/ctxopt/templates"
)

// FromReply returns the candidate template in an optimizer's reply: the
// body of its first Markdown code fence when it has one (models put prose
// before and after it: "Here is the updated guideline: ```...``` It keeps
// ..."), else the whole reply; an unclosed fence (a cut reply) runs to the
// end. echoed reports a reply that repeated the update prompt's marker
// lines (templates.OriginalPrompt) around the template, as
// Qwen2.5-Coder-1.5B did at temperature 0: the template, the marker and
// the prompt's closing instruction, once or twice over. The parts between
// marker lines are the template and echoed instructions; the longest is
// the template. A marker left in would reach every compressor prompt.
func FromReply(reply string) (src string, echoed bool) {
	return unechoed(fenced(reply))
}

func fenced(s string) string {
	i := strings.Index(s, "```")
	if i < 0 {
		return s
	}
	t := s[i+3:]
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{}") {
		t = t[nl+1:] // the language tag
	}
	if j := strings.Index(t, "```"); j >= 0 {
		t = t[:j]
	}
	return strings.TrimSpace(t) + "\n"
}

func unechoed(s string) (string, bool) {
	var parts, cur []string
	echoed := false
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == templates.OriginalPrompt {
			echoed = true
			parts, cur = append(parts, strings.Join(cur, "\n")), nil
			continue
		}
		cur = append(cur, line)
	}
	if !echoed {
		return s, false
	}
	best := ""
	for _, part := range append(parts, strings.Join(cur, "\n")) {
		if part = strings.TrimSpace(part); len(part) > len(best) {
			best = part
		}
	}
	return best + "\n", true
}
